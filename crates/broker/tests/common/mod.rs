//! What the broker's socket tests share: a broker configuration on port 0 in
//! a given directory, and a client that sends one request at a time.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use strom_broker::{BrokerConfig, RunningBroker};
use strom_protocol::messages::{
    decode_response, encode_request_frame, request_header, Request, Response,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long any one step of a test may take.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// A connection that sends a request and waits for its answer.
pub struct Client {
    stream: TcpStream,
    correlation_id: i32,
    client_id: &'static str,
}

#[allow(dead_code)] // Not every test binary sends requests.
impl Client {
    /// Connects to the broker's first listener; requests carry `client_id`.
    pub async fn connect(broker: &RunningBroker, client_id: &'static str) -> Client {
        let address = broker.local_addresses()[0];
        let stream = tokio::time::timeout(TIMEOUT, TcpStream::connect(address))
            .await
            .expect("connect in time")
            .expect("connect");
        Client {
            stream,
            correlation_id: 0,
            client_id,
        }
    }

    /// Sends `request` at `api_version` and returns the decoded answer,
    /// checking its correlation id.
    pub async fn send(&mut self, request: Request, api_version: i16) -> Response {
        self.correlation_id += 1;
        let api_key = request.api_key() as i16;
        let header = request_header(
            &request,
            api_version,
            self.correlation_id,
            Some(self.client_id),
        );
        let mut wire = BytesMut::new();
        encode_request_frame(&header, &request, &mut wire).expect("encode");
        let exchange = async {
            self.stream.write_all(&wire).await.expect("write");
            let size = self.stream.read_i32().await.expect("read size");
            let mut body = vec![0; usize::try_from(size).expect("positive size")];
            self.stream.read_exact(&mut body).await.expect("read body");
            body
        };
        let body = tokio::time::timeout(TIMEOUT, exchange)
            .await
            .expect("answer in time");
        let (header, response) =
            decode_response(Bytes::from(body), api_key, api_version).expect("decode");
        assert_eq!(header.correlation_id, self.correlation_id);
        response
    }
}

impl Client {
    /// Sends every request in one write (pipelined, as Kafka clients do)
    /// and returns the decoded answers in request order.
    #[allow(dead_code)] // Not every test binary pipelines.
    pub async fn pipeline(&mut self, requests: Vec<(Request, i16)>) -> Vec<Response> {
        let mut wire = BytesMut::new();
        let mut expected = Vec::new();
        for (request, api_version) in &requests {
            self.correlation_id += 1;
            let header = request_header(
                request,
                *api_version,
                self.correlation_id,
                Some(self.client_id),
            );
            encode_request_frame(&header, request, &mut wire).expect("encode");
            expected.push((self.correlation_id, request.api_key() as i16, *api_version));
        }
        let exchange = async {
            self.stream.write_all(&wire).await.expect("write");
            let mut bodies = Vec::new();
            for _ in &expected {
                let size = self.stream.read_i32().await.expect("read size");
                let mut body = vec![0; usize::try_from(size).expect("positive size")];
                self.stream.read_exact(&mut body).await.expect("read body");
                bodies.push(body);
            }
            bodies
        };
        let bodies = tokio::time::timeout(TIMEOUT, exchange)
            .await
            .expect("answers in time");
        bodies
            .into_iter()
            .zip(expected)
            .map(|(body, (correlation_id, api_key, api_version))| {
                let (header, response) =
                    decode_response(Bytes::from(body), api_key, api_version).expect("decode");
                assert_eq!(header.correlation_id, correlation_id);
                response
            })
            .collect()
    }
}

/// A broker configuration listening on a free loopback port with its data in
/// `dir`, plus `extra` settings.
pub fn config(dir: &std::path::Path, extra: &[(&str, &str)]) -> BrokerConfig {
    let mut map = BTreeMap::new();
    map.insert("listeners".to_owned(), "PLAINTEXT://127.0.0.1:0".to_owned());
    map.insert("log.dirs".to_owned(), dir.display().to_string());
    for (key, value) in extra {
        map.insert((*key).to_owned(), (*value).to_owned());
    }
    BrokerConfig::from_map(&map).expect("valid config").0
}

impl Client {
    /// Connects to `address` (a broker's listener other than the first);
    /// requests carry `client_id`.
    #[allow(dead_code)] // Not every test binary uses several listeners.
    pub async fn connect_to(address: std::net::SocketAddr, client_id: &'static str) -> Client {
        let stream = tokio::time::timeout(TIMEOUT, TcpStream::connect(address))
            .await
            .expect("connect in time")
            .expect("connect");
        Client {
            stream,
            correlation_id: 0,
            client_id,
        }
    }
}

/// A port nothing listens on at the moment (for settings that need the
/// port before the listener exists, such as the controller voters).
#[allow(dead_code)] // Not every test binary uses it.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

/// Polls `check` until it holds, failing the test after 30 s.
#[allow(dead_code)] // Not every test binary uses it.
pub async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The value of the sample `series` (`name{labels}` exactly as exposed) in
/// a Prometheus exposition.
#[allow(dead_code)] // Not every test binary uses it.
pub fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.split(' ').next()?.parse().ok()
    })
}

/// Asks for `topic` with `partitions` partitions, replication factor 1 and
/// `configs`; returns the CreateTopics answer (v5).
#[allow(dead_code)] // Not every test binary creates topics.
pub async fn create_topic_answer(
    client: &mut Client,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> strom_protocol::kafka::messages::CreateTopicsResponse {
    use strom_protocol::kafka::messages::create_topics_request::{
        CreatableTopic, CreatableTopicConfig,
    };
    use strom_protocol::kafka::messages::{CreateTopicsRequest, TopicName};
    use strom_protocol::kafka::protocol::StrBytes;
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
        .with_num_partitions(partitions)
        .with_replication_factor(1)
        .with_configs(
            configs
                .iter()
                .map(|(key, value)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string((*key).to_owned()))
                        .with_value(Some(StrBytes::from_string((*value).to_owned())))
                })
                .collect(),
        )]);
    let Response::CreateTopics(response) = client.send(Request::CreateTopics(request), 5).await
    else {
        panic!("not a CreateTopics response");
    };
    response
}
