//! A reply that mutes its connection: the answer leaves at once, the next
//! request is read only when the mute ends (KIP-219).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use strom_protocol::kafka::messages::{ApiVersionsRequest, ApiVersionsResponse};
use strom_protocol::messages::{encode_request_frame, request_header, Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::request::{Reply, RequestContext, RequestHandler};
use crate::server::{NetworkConfig, Server};

const MUTE: Duration = Duration::from_millis(400);

/// Answers at once and mutes the connection for [`MUTE`].
struct MutesAfterEachAnswer;

#[async_trait::async_trait]
impl RequestHandler for MutesAfterEachAnswer {
    async fn handle(&self, context: RequestContext, _request: Request) -> Reply {
        context.mute.mute_for(MUTE);
        Reply::Response(Response::ApiVersions(ApiVersionsResponse::default()))
    }

    fn unsupported_api_versions(&self) -> Response {
        Response::ApiVersions(ApiVersionsResponse::default())
    }
}

async fn read_frame(stream: &mut TcpStream) {
    let size = stream.read_i32().await.expect("read size");
    let mut body = vec![0; usize::try_from(size).expect("positive size")];
    stream.read_exact(&mut body).await.expect("read body");
}

#[tokio::test]
async fn a_muted_connection_answers_at_once_and_reads_on_after_the_mute() {
    let config = NetworkConfig {
        max_request_bytes: 1 << 20,
        idle_timeout: Duration::from_secs(60),
        max_connections: 10,
    };
    let server = Server::bind(&[SocketAddr::from(([127, 0, 0, 1], 0))], Vec::new(), config)
        .await
        .expect("bind");
    let address = server.local_addresses()[0];
    let handle = server
        .listen()
        .expect("listen")
        .start(Arc::new(MutesAfterEachAnswer));
    let mut stream = TcpStream::connect(address).await.expect("connect");
    let mut wire = BytesMut::new();
    for correlation_id in [1, 2] {
        let request = Request::ApiVersions(ApiVersionsRequest::default());
        let header = request_header(&request, 0, correlation_id, Some("mute-test"));
        encode_request_frame(&header, &request, &mut wire).expect("encode");
    }
    let started = Instant::now();
    // Both requests are sent together; the second waits for the mute.
    stream.write_all(&wire).await.expect("write");
    read_frame(&mut stream).await;
    let first = started.elapsed();
    read_frame(&mut stream).await;
    let second = started.elapsed();
    assert!(
        first < MUTE,
        "the throttled answer left at once ({first:?})"
    );
    assert!(
        second >= MUTE,
        "the next request was read only after the mute ({second:?})"
    );
    handle.shutdown().await;
}
