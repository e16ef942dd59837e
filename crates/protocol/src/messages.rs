//! Typed requests and responses over the APIs Strom serves.
//!
//! [`Request`] and [`Response`] wrap the generated `kafka-protocol` message
//! types, one variant per entry of [`SUPPORTED_APIS`](crate::api::SUPPORTED_APIS)
//! (a test keeps the two in step). Every decode and encode checks the version
//! against that table first, so the generated codecs are only ever called at
//! versions they implement, and a decode must consume every byte of the body.
//!
//! The frame-level helpers serve both sides of a connection:
//!
//! * a broker calls [`decode_request`] on each frame body and answers with
//!   [`encode_response_frame`];
//! * a client calls [`encode_request_frame`] and decodes the answer with
//!   [`decode_response`], passing the API key and version it sent (responses
//!   do not carry them).

use bytes::{Buf, Bytes, BytesMut};

use crate::api::supported_api;
use crate::error::{CodecError, MessageError};
use crate::frame::{finish_frame, start_frame};
use crate::header::{
    decode_request_header, decode_response_header, encode_request_header, encode_response_header,
    peek_request_prefix, request_header_version, response_header_version,
};
use crate::kafka::messages::*;
use crate::kafka::protocol::buf::ByteBufMut;
use crate::kafka::protocol::{Decodable, Encodable, Message, StrBytes, VersionRange};

/// Declares [`Request`] and [`Response`] with one variant per served API and
/// the dispatch between API keys and the generated types.
macro_rules! served_messages {
    ($( $variant:ident ($request:ident, $response:ident) ),* $(,)?) => {
        /// A request of one of the APIs Strom serves.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Request {
            $(
                #[doc = concat!("A `", stringify!($request), "`.")]
                $variant($request),
            )*
        }

        /// A response of one of the APIs Strom serves.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Response {
            $(
                #[doc = concat!("A `", stringify!($response), "`.")]
                $variant($response),
            )*
        }

        $(
            impl From<$request> for Request {
                fn from(request: $request) -> Self {
                    Request::$variant(request)
                }
            }

            impl From<$response> for Response {
                fn from(response: $response) -> Self {
                    Response::$variant(response)
                }
            }
        )*

        impl Request {
            /// The API key of this request.
            pub fn api_key(&self) -> ApiKey {
                match self {
                    $(Request::$variant(_) => ApiKey::$variant,)*
                }
            }

            /// The versions the generated codecs of `api_key` implement: the
            /// intersection of the request's and the response's `VERSIONS`
            /// (`None` for an API without a variant). The supported table
            /// must lie within it.
            pub fn codec_versions(api_key: ApiKey) -> Option<VersionRange> {
                match api_key {
                    $(ApiKey::$variant => Some($request::VERSIONS.intersect(&$response::VERSIONS)),)*
                    _ => None,
                }
            }

            /// A request of `api_key` with every field at its default value.
            pub fn default_for(api_key: ApiKey) -> Option<Request> {
                match api_key {
                    $(ApiKey::$variant => Some(Request::$variant($request::default())),)*
                    _ => None,
                }
            }

            fn decode_unchecked(api_key: ApiKey, version: i16, buf: &mut Bytes) -> Result<Self, CodecError> {
                match api_key {
                    $(ApiKey::$variant => Ok(Request::$variant($request::decode(buf, version)?)),)*
                    _ => Err(unserved(api_key)),
                }
            }

            fn encode_unchecked<B: ByteBufMut>(&self, version: i16, dst: &mut B) -> Result<(), CodecError> {
                match self {
                    $(Request::$variant(body) => Ok(body.encode(dst, version)?),)*
                }
            }

            fn size_unchecked(&self, version: i16) -> Result<usize, CodecError> {
                match self {
                    $(Request::$variant(body) => Ok(body.compute_size(version)?),)*
                }
            }
        }

        impl Response {
            /// The API key of this response.
            pub fn api_key(&self) -> ApiKey {
                match self {
                    $(Response::$variant(_) => ApiKey::$variant,)*
                }
            }

            /// A response of `api_key` with every field at its default value.
            pub fn default_for(api_key: ApiKey) -> Option<Response> {
                match api_key {
                    $(ApiKey::$variant => Some(Response::$variant($response::default())),)*
                    _ => None,
                }
            }

            fn decode_unchecked(api_key: ApiKey, version: i16, buf: &mut Bytes) -> Result<Self, CodecError> {
                match api_key {
                    $(ApiKey::$variant => Ok(Response::$variant($response::decode(buf, version)?)),)*
                    _ => Err(unserved(api_key)),
                }
            }

            fn encode_unchecked<B: ByteBufMut>(&self, version: i16, dst: &mut B) -> Result<(), CodecError> {
                match self {
                    $(Response::$variant(body) => Ok(body.encode(dst, version)?),)*
                }
            }

            fn size_unchecked(&self, version: i16) -> Result<usize, CodecError> {
                match self {
                    $(Response::$variant(body) => Ok(body.compute_size(version)?),)*
                }
            }
        }
    };
}

served_messages! {
    Produce(ProduceRequest, ProduceResponse),
    Fetch(FetchRequest, FetchResponse),
    ListOffsets(ListOffsetsRequest, ListOffsetsResponse),
    Metadata(MetadataRequest, MetadataResponse),
    OffsetCommit(OffsetCommitRequest, OffsetCommitResponse),
    OffsetFetch(OffsetFetchRequest, OffsetFetchResponse),
    FindCoordinator(FindCoordinatorRequest, FindCoordinatorResponse),
    JoinGroup(JoinGroupRequest, JoinGroupResponse),
    Heartbeat(HeartbeatRequest, HeartbeatResponse),
    LeaveGroup(LeaveGroupRequest, LeaveGroupResponse),
    SyncGroup(SyncGroupRequest, SyncGroupResponse),
    DescribeGroups(DescribeGroupsRequest, DescribeGroupsResponse),
    ListGroups(ListGroupsRequest, ListGroupsResponse),
    SaslHandshake(SaslHandshakeRequest, SaslHandshakeResponse),
    ApiVersions(ApiVersionsRequest, ApiVersionsResponse),
    CreateTopics(CreateTopicsRequest, CreateTopicsResponse),
    DeleteTopics(DeleteTopicsRequest, DeleteTopicsResponse),
    DeleteRecords(DeleteRecordsRequest, DeleteRecordsResponse),
    InitProducerId(InitProducerIdRequest, InitProducerIdResponse),
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    DescribeConfigs(DescribeConfigsRequest, DescribeConfigsResponse),
    AlterConfigs(AlterConfigsRequest, AlterConfigsResponse),
    SaslAuthenticate(SaslAuthenticateRequest, SaslAuthenticateResponse),
    CreatePartitions(CreatePartitionsRequest, CreatePartitionsResponse),
    DeleteGroups(DeleteGroupsRequest, DeleteGroupsResponse),
    IncrementalAlterConfigs(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    OffsetDelete(OffsetDeleteRequest, OffsetDeleteResponse),
    DescribeCluster(DescribeClusterRequest, DescribeClusterResponse),
    DescribeQuorum(DescribeQuorumRequest, DescribeQuorumResponse),
    DescribeAcls(DescribeAclsRequest, DescribeAclsResponse),
    CreateAcls(CreateAclsRequest, CreateAclsResponse),
    DeleteAcls(DeleteAclsRequest, DeleteAclsResponse),
    DescribeUserScramCredentials(DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse),
    AlterUserScramCredentials(AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse),
    DescribeClientQuotas(DescribeClientQuotasRequest, DescribeClientQuotasResponse),
    AlterClientQuotas(AlterClientQuotasRequest, AlterClientQuotasResponse),
    ElectLeaders(ElectLeadersRequest, ElectLeadersResponse),
    AlterPartitionReassignments(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse),
    ListPartitionReassignments(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse),
    AddPartitionsToTxn(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    AddOffsetsToTxn(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    EndTxn(EndTxnRequest, EndTxnResponse),
    WriteTxnMarkers(WriteTxnMarkersRequest, WriteTxnMarkersResponse),
    TxnOffsetCommit(TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    DescribeProducers(DescribeProducersRequest, DescribeProducersResponse),
    DescribeTransactions(DescribeTransactionsRequest, DescribeTransactionsResponse),
    ListTransactions(ListTransactionsRequest, ListTransactionsResponse),
    ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse),
    ConsumerGroupDescribe(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse),
}

/// The codec error for an API key that has no variant (unreachable after
/// [`check_version`], which only admits served keys).
fn unserved(api_key: ApiKey) -> CodecError {
    format!("API key {} has no message variant", api_key as i16).into()
}

/// Checks that nothing is left in `buf` after a body.
fn check_consumed(buf: &Bytes, api_key: i16, api_version: i16) -> Result<(), MessageError> {
    match buf.remaining() {
        0 => Ok(()),
        remaining_bytes => Err(MessageError::TrailingBytes {
            api_key,
            api_version,
            remaining_bytes,
        }),
    }
}

impl Request {
    /// Decodes a request body of `api_key` at `api_version`, which must be
    /// served; the whole of `buf` must be the body.
    pub fn decode(api_key: i16, api_version: i16, buf: &mut Bytes) -> Result<Self, MessageError> {
        let key = check_version(api_key, api_version)?;
        let body = Self::decode_unchecked(key, api_version, buf).map_err(|source| {
            MessageError::Decode {
                api_key,
                api_version,
                source,
            }
        })?;
        check_consumed(buf, api_key, api_version)?;
        Ok(body)
    }

    /// Appends the body encoded at `api_version` to `dst`.
    pub fn encode<B: ByteBufMut>(&self, api_version: i16, dst: &mut B) -> Result<(), MessageError> {
        let api_key = self.api_key() as i16;
        check_version(api_key, api_version)?;
        self.encode_unchecked(api_version, dst)
            .map_err(|source| MessageError::Encode {
                api_key,
                api_version,
                source,
            })
    }

    /// The size of the body encoded at `api_version`.
    pub fn compute_size(&self, api_version: i16) -> Result<usize, MessageError> {
        let api_key = self.api_key() as i16;
        check_version(api_key, api_version)?;
        self.size_unchecked(api_version)
            .map_err(|source| MessageError::Encode {
                api_key,
                api_version,
                source,
            })
    }
}

impl Response {
    /// Decodes a response body of `api_key` at `api_version`, which must be
    /// served; the whole of `buf` must be the body.
    pub fn decode(api_key: i16, api_version: i16, buf: &mut Bytes) -> Result<Self, MessageError> {
        let key = check_version(api_key, api_version)?;
        let body = Self::decode_unchecked(key, api_version, buf).map_err(|source| {
            MessageError::Decode {
                api_key,
                api_version,
                source,
            }
        })?;
        check_consumed(buf, api_key, api_version)?;
        Ok(body)
    }

    /// Appends the body encoded at `api_version` to `dst`.
    pub fn encode<B: ByteBufMut>(&self, api_version: i16, dst: &mut B) -> Result<(), MessageError> {
        let api_key = self.api_key() as i16;
        check_version(api_key, api_version)?;
        self.encode_unchecked(api_version, dst)
            .map_err(|source| MessageError::Encode {
                api_key,
                api_version,
                source,
            })
    }

    /// The size of the body encoded at `api_version`.
    pub fn compute_size(&self, api_version: i16) -> Result<usize, MessageError> {
        let api_key = self.api_key() as i16;
        check_version(api_key, api_version)?;
        self.size_unchecked(api_version)
            .map_err(|source| MessageError::Encode {
                api_key,
                api_version,
                source,
            })
    }
}

/// A decoded request: its header and its typed body.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedRequest {
    /// The request header as sent (client id `None` for header v0).
    pub header: RequestHeader,
    /// The typed body.
    pub body: Request,
}

impl DecodedRequest {
    /// The API key.
    pub fn api_key(&self) -> ApiKey {
        self.body.api_key()
    }

    /// The API version the client used; the response must use it too.
    pub fn api_version(&self) -> i16 {
        self.header.request_api_version
    }

    /// The correlation id the response must echo.
    pub fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }
}

/// Decodes a request frame body (header, then body).
///
/// Reads the API key and version first, checks them against the supported
/// table, picks the header version Kafka uses for them, then decodes the
/// header and the body. To answer a request this rejects (for example with
/// `UNSUPPORTED_VERSION`), read its correlation id with
/// [`peek_request_prefix`].
///
/// Bytes after the body are ignored, as Apache Kafka's broker ignores them:
/// real clients send some (librdkafka 2.16 appends three bytes to its
/// Metadata v13 request), and Kafka serves them. [`Request::decode`] stays
/// strict for callers that want to check an encoding exactly.
pub fn decode_request(mut frame: Bytes) -> Result<DecodedRequest, MessageError> {
    let prefix = peek_request_prefix(&frame)?;
    let api_key = check_version(prefix.api_key, prefix.api_version)?;
    let header_version = request_header_version(api_key, prefix.api_version);
    let header = decode_request_header(&mut frame, header_version)?;
    let body =
        Request::decode_unchecked(api_key, prefix.api_version, &mut frame).map_err(|source| {
            MessageError::Decode {
                api_key: prefix.api_key,
                api_version: prefix.api_version,
                source,
            }
        })?;
    Ok(DecodedRequest { header, body })
}

/// The request header a client sends: `api_key` and `api_version` of the
/// body, its `correlation_id` and optional `client_id`.
pub fn request_header(
    body: &Request,
    api_version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
) -> RequestHeader {
    RequestHeader::default()
        .with_request_api_key(body.api_key() as i16)
        .with_request_api_version(api_version)
        .with_correlation_id(correlation_id)
        .with_client_id(client_id.map(|id| StrBytes::from_string(id.to_owned())))
}

/// Appends a request (header, then body, no size prefix) to `dst`; the
/// header's API key must be the body's, and its version is the one encoded.
pub fn encode_request(
    header: &RequestHeader,
    body: &Request,
    dst: &mut BytesMut,
) -> Result<(), MessageError> {
    let body_api_key = body.api_key();
    if header.request_api_key != body_api_key as i16 {
        return Err(MessageError::ApiKeyMismatch {
            header_api_key: header.request_api_key,
            body_api_key: body_api_key as i16,
        });
    }
    let api_version = header.request_api_version;
    check_version(header.request_api_key, api_version)?;
    encode_request_header(
        header,
        request_header_version(body_api_key, api_version),
        dst,
    )?;
    body.encode(api_version, dst)
}

/// Appends a whole request frame (size prefix, header, body) to `dst`.
/// On error `dst` is left as it was.
pub fn encode_request_frame(
    header: &RequestHeader,
    body: &Request,
    dst: &mut BytesMut,
) -> Result<(), MessageError> {
    let start = start_frame(dst);
    let written = encode_request(header, body, dst).and_then(|()| Ok(finish_frame(dst, start)?));
    if written.is_err() {
        dst.truncate(start);
    }
    written
}

/// Appends a response (header, then body, no size prefix) to `dst`, at the
/// version of the request it answers.
pub fn encode_response<B: ByteBufMut>(
    correlation_id: i32,
    api_version: i16,
    body: &Response,
    dst: &mut B,
) -> Result<(), MessageError> {
    let api_key = body.api_key();
    check_version(api_key as i16, api_version)?;
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    encode_response_header(&header, response_header_version(api_key, api_version), dst)?;
    body.encode(api_version, dst)
}

/// Appends a whole response frame (size prefix, header, body) to `dst`.
/// On error `dst` is left as it was.
pub fn encode_response_frame(
    correlation_id: i32,
    api_version: i16,
    body: &Response,
    dst: &mut BytesMut,
) -> Result<(), MessageError> {
    let start = start_frame(dst);
    let written = encode_response(correlation_id, api_version, body, dst)
        .and_then(|()| Ok(finish_frame(dst, start)?));
    if written.is_err() {
        dst.truncate(start);
    }
    written
}

/// Decodes a response frame body (header, then body) to a request of
/// `api_key` sent at `api_version`.
pub fn decode_response(
    mut frame: Bytes,
    api_key: i16,
    api_version: i16,
) -> Result<(ResponseHeader, Response), MessageError> {
    let key = check_version(api_key, api_version)?;
    let header = decode_response_header(&mut frame, response_header_version(key, api_version))?;
    let body = Response::decode(api_key, api_version, &mut frame)?;
    Ok((header, body))
}

/// Like [`decode_response`], but tolerates bytes after the body and returns
/// how many there were instead of failing. Clients use it: some brokers
/// (librdkafka's mock cluster, for one) append stray bytes to some
/// responses, and a client loses nothing by ignoring them.
pub fn decode_response_lenient(
    mut frame: Bytes,
    api_key: i16,
    api_version: i16,
) -> Result<(ResponseHeader, Response, usize), MessageError> {
    let key = check_version(api_key, api_version)?;
    let header = decode_response_header(&mut frame, response_header_version(key, api_version))?;
    let body = Response::decode_unchecked(key, api_version, &mut frame).map_err(|source| {
        MessageError::Decode {
            api_key,
            api_version,
            source,
        }
    })?;
    Ok((header, body, frame.remaining()))
}

/// Checks that Strom serves `api_key` at `api_version` and returns the typed
/// key; the error says which bound was missed.
pub fn check_version(api_key: i16, api_version: i16) -> Result<ApiKey, MessageError> {
    let api = supported_api(api_key).ok_or(MessageError::UnknownApiKey { api_key })?;
    if (api.min_version..=api.max_version).contains(&api_version) {
        Ok(api.api_key)
    } else {
        Err(MessageError::UnsupportedVersion {
            api_key,
            version: api_version,
            min: api.min_version,
            max: api.max_version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SUPPORTED_APIS;
    use crate::frame::FrameDecoder;

    #[test]
    fn check_version_reports_the_bounds() {
        assert_eq!(check_version(0, 3).unwrap(), ApiKey::Produce);
        assert!(matches!(
            check_version(0, 2),
            Err(MessageError::UnsupportedVersion {
                api_key: 0,
                version: 2,
                min: 3,
                max: 13
            })
        ));
        assert!(matches!(
            check_version(0, 14),
            Err(MessageError::UnsupportedVersion { .. })
        ));
        assert!(matches!(
            check_version(-1, 0),
            Err(MessageError::UnknownApiKey { api_key: -1 })
        ));
        // Known to Kafka but not served (CreateDelegationToken).
        assert!(matches!(
            check_version(38, 0),
            Err(MessageError::UnknownApiKey { api_key: 38 })
        ));
    }

    #[test]
    fn every_supported_api_has_variants() {
        for api in SUPPORTED_APIS {
            let request = Request::default_for(api.api_key).expect(api.name);
            let response = Response::default_for(api.api_key).expect(api.name);
            assert_eq!(request.api_key(), api.api_key);
            assert_eq!(response.api_key(), api.api_key);
            let codec = Request::codec_versions(api.api_key).expect(api.name);
            assert!(
                codec.min <= api.min_version && api.max_version <= codec.max,
                "{} {}..={} outside the generated codecs' {codec}",
                api.name,
                api.min_version,
                api.max_version
            );
        }
    }

    #[test]
    fn request_frame_round_trip() {
        let body = Request::from(MetadataRequest::default().with_allow_auto_topic_creation(true));
        let header = request_header(&body, 12, 42, Some("strom-test"));
        let mut wire = BytesMut::new();
        encode_request_frame(&header, &body, &mut wire).unwrap();
        let frame = FrameDecoder::default().decode(&mut wire).unwrap().unwrap();
        let decoded = decode_request(frame).unwrap();
        assert_eq!(decoded.header, header);
        assert_eq!(decoded.body, body);
        assert_eq!(
            (
                decoded.api_key(),
                decoded.api_version(),
                decoded.correlation_id()
            ),
            (ApiKey::Metadata, 12, 42)
        );
    }

    #[test]
    fn api_versions_response_uses_header_v0_at_every_version() {
        let body = Response::from(
            ApiVersionsResponse::default().with_api_keys(crate::api::api_versions_response_keys()),
        );
        for version in 0..=4 {
            let mut wire = BytesMut::new();
            encode_response(7, version, &body, &mut wire).unwrap();
            // Header v0: the correlation id and then the body's error code.
            assert_eq!(&wire[..6], &[0, 0, 0, 7, 0, 0][..]);
            let (header, decoded) = decode_response(wire.freeze(), 18, version).unwrap();
            assert_eq!(header.correlation_id, 7);
            assert_eq!(decoded, body);
        }
    }

    #[test]
    fn unserved_and_unsupported_requests_are_rejected() {
        let frame = Bytes::from_static(&[0, 38, 0, 0, 0, 0, 0, 1, 0, 0]);
        assert!(matches!(
            decode_request(frame),
            Err(MessageError::UnknownApiKey { api_key: 38 })
        ));
        let frame = Bytes::from_static(&[0, 0, 0, 2, 0, 0, 0, 1, 0, 0]);
        assert!(matches!(
            decode_request(frame),
            Err(MessageError::UnsupportedVersion {
                api_key: 0,
                version: 2,
                min: 3,
                max: 13
            })
        ));
    }

    #[test]
    fn a_too_new_api_versions_request_gets_a_v0_answer() {
        // ApiVersions v9, correlation id 77, header v2, a body Strom cannot read.
        let frame = Bytes::from_static(&[0, 18, 0, 9, 0, 0, 0, 77, 0, 1, b'c', 0, 0xde, 0xad]);
        assert!(matches!(
            decode_request(frame.clone()),
            Err(MessageError::UnsupportedVersion {
                api_key: 18,
                version: 9,
                min: 0,
                max: 4
            })
        ));
        let prefix = peek_request_prefix(&frame).unwrap();
        let answer = Response::from(crate::api::api_versions_response(
            crate::error_code::ErrorCode::UnsupportedVersion,
        ));
        let mut wire = BytesMut::new();
        encode_response(prefix.correlation_id, 0, &answer, &mut wire).unwrap();
        assert_eq!(&wire[..6], &[0, 0, 0, 77, 0, 35][..]);
        let (_, decoded) = decode_response(wire.freeze(), 18, 0).unwrap();
        assert_eq!(decoded, answer);
    }

    #[test]
    fn trailing_bytes_are_rejected_by_body_decode_and_ignored_in_frames() {
        let body = Request::from(HeartbeatRequest::default());
        let header = request_header(&body, 4, 1, None);
        let mut wire = BytesMut::new();
        encode_request(&header, &body, &mut wire).unwrap();
        wire.extend_from_slice(&[0xee]);
        let frame = wire.freeze();
        // A whole frame decodes as Kafka's broker would: the extra byte is
        // ignored and the body is intact.
        let decoded = decode_request(frame.clone()).expect("trailing bytes are ignored");
        assert_eq!(decoded.body, body);
        assert_eq!(decoded.correlation_id(), 1);
        // The strict body decoder still reports them.
        let mut rest = frame;
        decode_request_header(&mut rest, 2).expect("header");
        assert!(matches!(
            Request::decode(12, 4, &mut rest),
            Err(MessageError::TrailingBytes {
                api_key: 12,
                api_version: 4,
                remaining_bytes: 1
            })
        ));
    }

    #[test]
    fn librdkafka_metadata_v13_with_three_extra_bytes_decodes() {
        // Captured from confluent-kafka 2.16.1 (librdkafka) against Strom.
        let frame = Bytes::from_static(&[
            0x00, 0x03, 0x00, 0x0d, 0x00, 0x00, 0x00, 0x04, 0x00, 0x07, b'r', b'd', b'k', b'a',
            b'f', b'k', b'a', 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
        ]);
        let decoded = decode_request(frame).expect("decodes like Kafka does");
        assert_eq!(decoded.api_version(), 13);
        assert_eq!(decoded.correlation_id(), 4);
        match decoded.body {
            Request::Metadata(metadata) => {
                assert_eq!(metadata.topics, None, "all topics");
                assert!(!metadata.allow_auto_topic_creation);
            }
            other => panic!("decoded as {:?}", other.api_key()),
        }
    }

    #[test]
    fn mismatched_header_is_rejected_and_leaves_dst_untouched() {
        let body = Request::from(HeartbeatRequest::default());
        let header = request_header(&Request::from(FetchRequest::default()), 4, 1, None);
        let mut dst = BytesMut::from(&b"keep"[..]);
        assert!(matches!(
            encode_request_frame(&header, &body, &mut dst),
            Err(MessageError::ApiKeyMismatch {
                header_api_key: 1,
                body_api_key: 12
            })
        ));
        assert_eq!(&dst[..], &b"keep"[..]);
    }
    #[test]
    fn lenient_response_decoding_reports_trailing_bytes() {
        let body = Response::from(HeartbeatResponse::default());
        let mut wire = BytesMut::new();
        encode_response(3, 4, &body, &mut wire).unwrap();
        wire.extend_from_slice(&[0]);
        assert!(matches!(
            decode_response(wire.clone().freeze(), 12, 4),
            Err(MessageError::TrailingBytes {
                remaining_bytes: 1,
                ..
            })
        ));
        let (header, decoded, trailing) = decode_response_lenient(wire.freeze(), 12, 4).unwrap();
        assert_eq!((header.correlation_id, trailing), (3, 1));
        assert_eq!(decoded, body);
    }
}
