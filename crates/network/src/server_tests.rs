//! Binding does not listen: a connection is refused until the server
//! listens, then answered.

use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use strom_protocol::kafka::messages::{ApiVersionsRequest, ApiVersionsResponse};
use strom_protocol::messages::{
    decode_response, encode_request_frame, request_header, Request, Response,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;
use crate::connection_quotas::{ConnectionLimitSettings, ConnectionQuotas};
use crate::request::{Reply, RequestContext};

/// Answers every request with an empty ApiVersions response.
struct AnswersApiVersions;

#[async_trait::async_trait]
impl RequestHandler for AnswersApiVersions {
    async fn handle(&self, _context: RequestContext, _request: Request) -> Reply {
        Reply::Response(Response::ApiVersions(ApiVersionsResponse::default()))
    }

    fn unsupported_api_versions(&self) -> Response {
        Response::ApiVersions(ApiVersionsResponse::default().with_error_code(35))
    }
}

fn config() -> NetworkConfig {
    NetworkConfig {
        max_request_bytes: 1 << 20,
        idle_timeout: Duration::from_secs(60),
        max_connections: 10,
    }
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Sends ApiVersions v0 and returns the correlation id of the answer.
async fn api_versions(address: SocketAddr) -> i32 {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    let request = Request::ApiVersions(ApiVersionsRequest::default());
    let header = request_header(&request, 0, 41, Some("server-test"));
    let mut wire = BytesMut::new();
    encode_request_frame(&header, &request, &mut wire).expect("encode");
    let exchange = async {
        stream.write_all(&wire).await.expect("write");
        let size = stream.read_i32().await.expect("read size");
        let mut body = vec![0; usize::try_from(size).expect("positive size")];
        stream.read_exact(&mut body).await.expect("read body");
        body
    };
    let body = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .expect("answered in time");
    let (header, _) = decode_response(Bytes::from(body), 18, 0).expect("decode");
    header.correlation_id
}

#[tokio::test]
async fn a_bound_server_refuses_connections_until_it_starts() {
    let server = Server::bind(&[loopback()], Vec::new(), config())
        .await
        .expect("bind");
    let address = server.local_addresses()[0];
    assert_ne!(address.port(), 0, "the port is known before listening");
    for _ in 0..3 {
        let refused = TcpStream::connect(address)
            .await
            .expect_err("nothing listens before start");
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    }
    let listening = server.listen().expect("listen");
    assert_eq!(listening.local_addresses(), [address]);
    let handle = listening.start(Arc::new(AnswersApiVersions));
    assert_eq!(handle.local_addresses(), [address]);
    assert_eq!(api_versions(address).await, 41);
    handle.shutdown().await;
}

#[tokio::test]
async fn a_port_taken_by_a_listener_meanwhile_fails_the_start() {
    let server = Server::bind(&[loopback()], Vec::new(), config())
        .await
        .expect("bind");
    let address = server.local_addresses()[0];
    // Another socket with SO_REUSEADDR may share a port nobody listens on
    // (Linux); once it listens, this server cannot.
    let (intruder, _) = bind_socket(address).expect("second bind on a port not listened on");
    let _intruder = intruder.listen(8).expect("the intruder listens");
    let Err(error) = server.listen() else {
        panic!("listening on a taken port must fail");
    };
    assert_eq!(error.address, address);
    assert_eq!(error.source.kind(), std::io::ErrorKind::AddrInUse);
}

#[tokio::test]
async fn a_second_server_cannot_bind_a_listening_port() {
    let server = Server::bind(&[loopback()], Vec::new(), config())
        .await
        .expect("bind");
    let address = server.local_addresses()[0];
    let handle = server
        .listen()
        .expect("listen")
        .start(Arc::new(AnswersApiVersions));
    let error = match Server::bind(&[address], Vec::new(), config()).await {
        Ok(_) => panic!("a listening port cannot be bound again"),
        Err(error) => error,
    };
    assert_eq!(error.address, address);
    assert_eq!(error.source.kind(), std::io::ErrorKind::AddrInUse);
    handle.shutdown().await;
}

/// Whether the server keeps a new connection open (a refused one is closed
/// at once: the read sees the end of the stream).
async fn kept_open(address: SocketAddr) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(address).await.expect("connect");
    let mut byte = [0u8; 1];
    match tokio::time::timeout(Duration::from_millis(200), stream.read(&mut byte)).await {
        Err(_) => Some(stream),
        Ok(_) => None,
    }
}

#[tokio::test]
async fn the_accept_loop_follows_changed_connection_limits() {
    let quotas = ConnectionQuotas::new(ConnectionLimitSettings::default());
    let server = Server::bind(&[loopback()], Vec::new(), config())
        .await
        .expect("bind")
        .with_connection_quotas(Arc::clone(&quotas));
    let address = server.local_addresses()[0];
    let handle = server
        .listen()
        .expect("listen")
        .start(Arc::new(AnswersApiVersions));
    let first = kept_open(address).await.expect("no limit yet");
    quotas.update(ConnectionLimitSettings {
        max_connections_per_ip: 2,
        ..ConnectionLimitSettings::default()
    });
    let second = kept_open(address).await.expect("the second of two");
    assert!(
        kept_open(address).await.is_none(),
        "over max.connections.per.ip"
    );
    drop(first);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(api_versions(address).await, 41, "a freed place is served");
    drop(second);
    handle.shutdown().await;
}

#[tokio::test]
async fn a_creation_rate_delays_accepts_without_refusing() {
    let quotas = ConnectionQuotas::new(ConnectionLimitSettings {
        max_connection_creation_rate: 4,
        ..ConnectionLimitSettings::default()
    });
    let server = Server::bind(&[loopback()], Vec::new(), config())
        .await
        .expect("bind")
        .with_connection_quotas(quotas);
    let address = server.local_addresses()[0];
    let handle = server
        .listen()
        .expect("listen")
        .start(Arc::new(AnswersApiVersions));
    let started = std::time::Instant::now();
    for _ in 0..8 {
        assert_eq!(api_versions(address).await, 41, "delayed, never refused");
    }
    // Four at once, then one per quarter second: the waits come after the
    // fifth, sixth and seventh accepts (the eighth's after it is served).
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "{:?}",
        started.elapsed()
    );
    handle.shutdown().await;
}
