//! What a console API request may see and how it is answered: the
//! viewer's ACL checks over the broker view, the answer kinds, and the
//! decoding of paths and query strings.

use bytes::Bytes;
use serde_json::Value;
use strom_protocol::acl::{operation, resource, CLUSTER_NAME};

use crate::lag::{group_lags, PartitionLag};
use crate::view::{BrokerView, TopicState, Viewer};

/// What an API request may see: the broker, through the ACLs of the
/// viewer (`None`: the listener does not authenticate, everything is
/// shown).
pub(crate) struct Access<'a> {
    /// The broker.
    pub(crate) broker: &'a dyn BrokerView,
    /// Who asks.
    pub(crate) viewer: Option<&'a Viewer>,
    /// Bytes of records the request read (the message browser's pacing).
    pub(crate) scanned: std::cell::Cell<u64>,
}

impl<'a> Access<'a> {
    /// What `viewer` (`None`: everything) may see of `broker`.
    pub(crate) fn new(broker: &'a dyn BrokerView, viewer: Option<&'a Viewer>) -> Access<'a> {
        Access {
            broker,
            viewer,
            scanned: std::cell::Cell::new(0),
        }
    }

    /// Counts `bytes` of records read for this request.
    pub(crate) fn count_scanned(&self, bytes: u64) {
        self.scanned.set(self.scanned.get().saturating_add(bytes));
    }
}

impl Access<'_> {
    /// Whether the viewer may perform `operation` on the resource.
    pub(crate) fn may(&self, operation: i8, resource_type: i8, name: &str) -> bool {
        self.viewer.is_none_or(|viewer| {
            self.broker
                .authorize(viewer, operation, resource_type, name)
        })
    }

    pub(crate) fn may_describe_topic(&self, topic: &str) -> bool {
        self.may(operation::DESCRIBE, resource::TOPIC, topic)
    }

    pub(crate) fn may_describe_group(&self, group: &str) -> bool {
        self.may(operation::DESCRIBE, resource::GROUP, group)
    }

    pub(crate) fn may_describe_cluster(&self) -> bool {
        self.may(operation::DESCRIBE, resource::CLUSTER, CLUSTER_NAME)
    }

    /// The topics the viewer may describe.
    pub(crate) fn topics(&self) -> Vec<TopicState> {
        let mut topics = self.broker.topics();
        topics.retain(|topic| self.may_describe_topic(&topic.name));
        topics
    }

    /// The lags of `group`'s partitions of topics the viewer may describe.
    pub(crate) fn group_lags(&self, group: &str) -> Vec<PartitionLag> {
        let mut lags = group_lags(self.broker, group);
        lags.retain(|lag| self.may_describe_topic(&lag.topic));
        lags
    }
}

/// The answer to an API request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// 200 with this body.
    Json(Value),
    /// 404: no such path or resource.
    NotFound,
    /// 403: the viewer's ACLs do not allow it.
    Forbidden,
    /// 400: a malformed request, with what is wrong.
    BadRequest(String),
    /// 200 with bytes of a record: shown as text when `text`, else
    /// downloaded as `filename`.
    Raw {
        /// The bytes.
        body: Bytes,
        /// Served as `text/plain` (the bytes are UTF-8 and the viewer
        /// asked to see them).
        text: bool,
        /// The name a download is saved under.
        filename: String,
    },
}

impl From<Option<Value>> for Answer {
    fn from(value: Option<Value>) -> Answer {
        value.map_or(Answer::NotFound, Answer::Json)
    }
}

/// Decodes `%XX` escapes of a path segment; `None` if malformed or not UTF-8.
pub(crate) fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        if byte == b'%' {
            let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
            decoded.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            decoded.push(byte);
            index += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

/// The raw value of `key` in a query string.
pub(crate) fn query_value<'a>(query: Option<&'a str>, key: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, value)| value)
}
