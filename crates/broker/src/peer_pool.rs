//! Requests to other brokers' inter-broker listener on reused
//! connections: the transaction coordinator's WriteTxnMarkers and the
//! partition leaders' transaction verification (AddPartitionsToTxn v4)
//! share one [`PeerPool`].
//!
//! A caller takes an idle connection to the broker (or connects), makes
//! one exchange, and gives the connection back once the answer is read;
//! callers at the same time use connections of their own. A pooled
//! connection that fails is dropped and the exchange tried once more on a
//! new one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use strom_controller::image::MetadataImage;
use strom_protocol::messages::{Request, Response};
use strom_security::error::PeerError;
use strom_security::peer::{call, BoxedStream, PeerConnector};

/// Idle connections kept per broker address.
const IDLE_PER_BROKER: usize = 2;

/// Connections to other brokers' inter-broker listener.
pub struct PeerPool {
    connector: Arc<PeerConnector>,
    idle: Mutex<HashMap<String, Vec<BoxedStream>>>,
    correlation: AtomicI32,
    max_frame_bytes: usize,
}

impl PeerPool {
    /// A pool connecting with `connector`, reading answers of at most
    /// `max_frame_bytes`.
    pub fn new(connector: Arc<PeerConnector>, max_frame_bytes: usize) -> PeerPool {
        PeerPool {
            connector,
            idle: Mutex::new(HashMap::new()),
            correlation: AtomicI32::new(1),
            max_frame_bytes,
        }
    }

    /// `host:port` of `broker`'s endpoint on the inter-broker listener in
    /// `image`, if it is registered there.
    pub fn address(&self, image: &MetadataImage, broker: i32) -> Option<String> {
        image.broker(broker).and_then(|registered| {
            registered
                .endpoints
                .iter()
                .find(|endpoint| endpoint.name == self.connector.listener())
                .map(|endpoint| format!("{}:{}", endpoint.host, endpoint.port))
        })
    }

    /// One exchange of `request` at `api_version` with `address`.
    pub async fn call(
        &self,
        address: &str,
        request: &Request,
        api_version: i16,
    ) -> Result<Response, PeerError> {
        if let Some(mut stream) = self.take(address) {
            if let Ok(response) = self
                .exchange(&mut stream, address, request, api_version)
                .await
            {
                self.give_back(address, stream);
                return Ok(response);
            }
        }
        let mut stream = self.connector.connect(address).await?;
        let response = self
            .exchange(&mut stream, address, request, api_version)
            .await?;
        self.give_back(address, stream);
        Ok(response)
    }

    async fn exchange(
        &self,
        stream: &mut BoxedStream,
        address: &str,
        request: &Request,
        api_version: i16,
    ) -> Result<Response, PeerError> {
        let correlation_id = self.correlation.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        call(
            stream,
            address,
            request,
            api_version,
            correlation_id,
            self.max_frame_bytes,
        )
        .await
    }

    fn take(&self, address: &str) -> Option<BoxedStream> {
        self.idle.lock().ok()?.get_mut(address).and_then(Vec::pop)
    }

    fn give_back(&self, address: &str, stream: BoxedStream) {
        if let Ok(mut idle) = self.idle.lock() {
            let streams = idle.entry(address.to_owned()).or_default();
            if streams.len() < IDLE_PER_BROKER {
                streams.push(stream);
            }
        }
    }
}
