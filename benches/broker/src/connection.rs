//! A plain request/response connection to a broker, for setup and fetches.

use bytes::BytesMut;
use strom_protocol::kafka::messages::RequestHeader;
use strom_protocol::messages::{
    decode_response, encode_request_frame, request_header, Request, Response,
};
use strom_protocol::FrameDecoder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::LoadError;

/// The client id every request of the tool carries.
pub const CLIENT_ID: &str = "strom-load";

/// Bytes read from the socket per call.
const READ_CHUNK_BYTES: usize = 256 * 1024;

/// One connection that sends a request and waits for its answer.
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    receive: BytesMut,
    send: BytesMut,
    decoder: FrameDecoder,
    next_correlation_id: i32,
}

impl Connection {
    /// Connects to `address` (host:port) with Nagle's algorithm off.
    pub async fn connect(address: &str) -> Result<Connection, LoadError> {
        let stream = TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            receive: BytesMut::with_capacity(READ_CHUNK_BYTES),
            send: BytesMut::new(),
            decoder: FrameDecoder::default(),
            next_correlation_id: 1,
        })
    }

    /// Sends `body` at `api_version` and returns the decoded response.
    pub async fn round_trip(
        &mut self,
        body: Request,
        api_version: i16,
    ) -> Result<Response, LoadError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header: RequestHeader =
            request_header(&body, api_version, correlation_id, Some(CLIENT_ID));
        self.send.clear();
        encode_request_frame(&header, &body, &mut self.send)?;
        self.stream.write_all(&self.send).await?;
        let frame = read_frame(&mut self.stream, &mut self.receive, &self.decoder, 1).await?;
        let (response_header, response) =
            decode_response(frame, body.api_key() as i16, api_version)?;
        if response_header.correlation_id != correlation_id {
            return Err(LoadError::Correlation {
                expected: correlation_id,
                received: response_header.correlation_id,
            });
        }
        Ok(response)
    }

    /// Wraps a socket already set up by [`Connection::connect`] (and taken
    /// back with [`Connection::into_stream`]); correlation ids restart at 1.
    pub fn from_stream(stream: TcpStream) -> Connection {
        Connection {
            stream,
            receive: BytesMut::with_capacity(READ_CHUNK_BYTES),
            send: BytesMut::new(),
            decoder: FrameDecoder::default(),
            next_correlation_id: 1,
        }
    }

    /// Gives the socket up, for the pipelined producer.
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }
}

/// Reads until one whole frame is buffered and returns its body;
/// `outstanding` is only used for the error if the peer closes.
pub async fn read_frame<R: AsyncReadExt + Unpin>(
    reader: &mut R,
    buffer: &mut BytesMut,
    decoder: &FrameDecoder,
    outstanding: usize,
) -> Result<bytes::Bytes, LoadError> {
    loop {
        if let Some(frame) = decoder.decode(buffer)? {
            return Ok(frame);
        }
        buffer.reserve(READ_CHUNK_BYTES);
        if reader.read_buf(buffer).await? == 0 {
            return Err(LoadError::Closed { outstanding });
        }
    }
}
