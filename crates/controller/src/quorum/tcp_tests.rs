use std::collections::BTreeMap;

use tokio::io::{duplex, AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::quorum::memory::MemoryNetwork;
use crate::quorum::node::QuorumConfig;
use crate::quorum::QuorumStatus;
use strom_clock::{SeededRandom, SystemClock};

async fn single_voter() -> (tempfile::TempDir, Arc<QuorumController>) {
    let directory = tempfile::tempdir().expect("tempdir");
    let voters = BTreeMap::from([(1, "127.0.0.1:1".to_string())]);
    let node = QuorumController::start(
        QuorumConfig::new(1, voters, directory.path()),
        MemoryNetwork::new(1).transport(1),
        Arc::new(SystemClock),
        Arc::new(SeededRandom::new(1)),
    )
    .await
    .expect("start");
    (directory, node)
}

async fn send_raw(
    node: Arc<QuorumController>,
    bytes: Vec<u8>,
) -> (Result<(), FrameError>, Vec<u8>) {
    let (mut client, server) = duplex(1 << 16);
    let served = tokio::spawn(serve_connection(server, node));
    client.write_all(&bytes).await.expect("write");
    client.shutdown().await.expect("shutdown");
    let mut answer = Vec::new();
    client.read_to_end(&mut answer).await.expect("read");
    (served.await.expect("join"), answer)
}

fn frame(parts: &[&[u8]]) -> Vec<u8> {
    let length: usize = parts.iter().map(|part| part.len()).sum();
    let mut bytes = (length as i32).to_be_bytes().to_vec();
    for part in parts {
        bytes.extend_from_slice(part);
    }
    bytes
}

#[tokio::test]
async fn another_api_key_closes_the_connection_unanswered() {
    let (_directory, node) = single_voter().await;
    let mut header = request_header(RAFT_API_KEY, 7);
    header[..2].copy_from_slice(&3i16.to_be_bytes());
    let (result, answer) = send_raw(node, frame(&[&header, b"anything"])).await;
    assert!(matches!(
        result,
        Err(FrameError::NotRaft { api_key: Some(3) })
    ));
    assert!(answer.is_empty());
}

#[tokio::test]
async fn an_oversized_or_negative_frame_closes_the_connection() {
    let (_directory, node) = single_voter().await;
    for size in [i32::MAX, -5] {
        let (result, answer) = send_raw(Arc::clone(&node), size.to_be_bytes().to_vec()).await;
        assert!(
            matches!(result, Err(FrameError::Size { .. })),
            "size {size}: {result:?}"
        );
        assert!(answer.is_empty());
    }
}

/// The voter's status once it has elected itself and committed what its
/// election writes (two readings 100 ms apart agree): what a garbage frame
/// must not change.
async fn settled_status(node: &QuorumController) -> QuorumStatus {
    let mut last = node.status();
    for _ in 0..100 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let now = node.status();
        if now.is_active && now.epoch == last.epoch && now.high_watermark == last.high_watermark {
            return now;
        }
        last = now;
    }
    panic!("the single voter did not settle: {last:?}");
}

#[tokio::test]
async fn a_garbage_body_closes_the_connection_and_changes_nothing() {
    let (_directory, node) = single_voter().await;
    // Its own election would change the epoch under the check.
    let before = settled_status(&node).await;
    let (result, answer) = send_raw(
        Arc::clone(&node),
        frame(&[&request_header(RAFT_API_KEY, 1), &[0xFF; 40]]),
    )
    .await;
    assert!(result.is_err());
    assert!(answer.is_empty());
    let after = node.status();
    assert_eq!(before.epoch, after.epoch);
    assert_eq!(before.high_watermark, after.high_watermark);
}

#[tokio::test]
async fn a_valid_request_is_answered_with_its_correlation_id() {
    let (_directory, node) = single_voter().await;
    let vote = crate::quorum::codec::RaftRequest::Vote(openraft::raft::VoteRequest {
        vote: openraft::Vote::new(0, 9),
        last_log_id: None,
    });
    let (result, answer) = send_raw(
        node,
        frame(&[&request_header(RAFT_API_KEY, 42), &vote.encode()]),
    )
    .await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(&answer[4..8], &42i32.to_be_bytes());
    let reply = crate::quorum::codec::RaftReply::decode(&answer[8..]).expect("reply decodes");
    assert!(matches!(reply, crate::quorum::codec::RaftReply::Vote(_)));
}

#[tokio::test]
async fn a_node_that_shuts_down_closes_its_connections() {
    let (_directory, node) = single_voter().await;
    let (_client, server) = duplex(1 << 16);
    let served = tokio::spawn(serve_connection(server, Arc::clone(&node)));
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(!served.is_finished(), "an idle connection stays open");
    node.shutdown().await;
    let result = tokio::time::timeout(std::time::Duration::from_secs(2), served)
        .await
        .expect("the connection closes once the node is shut down")
        .expect("join");
    assert!(result.is_ok(), "{result:?}");
}

/// A stand-in for TLS: the connector writes a preamble, the acceptor
/// refuses connections without it.
#[derive(Debug)]
struct Preamble;

const PREAMBLE: &[u8; 4] = b"SEC1";

#[async_trait]
impl QuorumConnector for Preamble {
    async fn connect(&self, mut stream: TcpStream, _address: &str) -> std::io::Result<BoxedStream> {
        stream.write_all(PREAMBLE).await?;
        Ok(Box::new(stream))
    }
}

#[async_trait]
impl QuorumAcceptor for Preamble {
    async fn accept(&self, mut stream: TcpStream) -> std::io::Result<BoxedStream> {
        let mut preamble = [0; 4];
        stream.read_exact(&mut preamble).await?;
        if &preamble != PREAMBLE {
            return Err(std::io::Error::other("no preamble"));
        }
        Ok(Box::new(stream))
    }
}

#[tokio::test]
async fn both_sides_go_through_the_connector_and_the_acceptor() {
    let (_directory, node) = single_voter().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let server = tokio::spawn(serve_with(listener, node, Arc::new(Preamble)));
    let vote = crate::quorum::codec::RaftRequest::Vote(openraft::raft::VoteRequest {
        vote: openraft::Vote::new(0, 9),
        last_log_id: None,
    })
    .encode();
    let timeout = std::time::Duration::from_secs(2);
    let secured = TcpTransport::new().with_connector(Arc::new(Preamble));
    let reply = secured
        .call(1, &address, vote.clone(), timeout)
        .await
        .expect("answered through the connector and the acceptor");
    assert!(matches!(
        crate::quorum::codec::RaftReply::decode(&reply),
        Ok(crate::quorum::codec::RaftReply::Vote(_))
    ));
    let plain = TcpTransport::new();
    assert!(
        plain.call(1, &address, vote, timeout).await.is_err(),
        "the acceptor refuses a connection the connector did not open"
    );
    server.abort();
}
