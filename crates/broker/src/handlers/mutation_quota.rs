//! The controller mutation quota (KIP-599) of CreateTopics,
//! CreatePartitions and DeleteTopics: each partition created or deleted
//! takes a token of the client's `controller_mutation_rate` bucket. At the
//! versions that know THROTTLING_QUOTA_EXCEEDED (CreateTopics v6+,
//! CreatePartitions v3+, DeleteTopics v5+) a topic that arrives while the
//! bucket is empty is refused with it, and the one that empties the
//! bucket still goes ahead; older versions are served whole and only
//! throttled. Validate-only requests take no token.

use std::time::Duration;

use strom_network::{ConnectionMute, RequestContext};
use strom_quotas::QuotaKey;

use super::BrokerContext;
use crate::quotas::{throttle_ms_field, QuotaClient, QuotaService};

/// One request's use of the mutation quota.
pub struct MutationQuota<'a> {
    broker: &'a BrokerContext,
    client: QuotaClient,
    mute: ConnectionMute,
    /// Whether a topic may be refused (the version knows the error).
    strict: bool,
    throttle: Duration,
}

impl<'a> MutationQuota<'a> {
    /// The quota of a request at a version that refuses from
    /// `strict_from_version` on; `None` when no `controller_mutation_rate`
    /// is configured or the request only validates.
    pub fn new(
        broker: &'a BrokerContext,
        context: &RequestContext,
        strict_from_version: i16,
        validate_only: bool,
    ) -> Option<Self> {
        let enabled =
            QuotaService::enabled(&broker.controller.image(), QuotaKey::ControllerMutationRate);
        (enabled && !validate_only).then(|| Self {
            broker,
            client: QuotaClient::of(context),
            mute: context.mute.clone(),
            strict: context.api_version >= strict_from_version,
            throttle: Duration::ZERO,
        })
    }

    /// Whether a mutation of `partitions` may go ahead now; if so, its
    /// tokens are taken. False only at a strict version with an empty
    /// bucket.
    pub fn admit(&mut self, partitions: u32) -> bool {
        let image = self.broker.controller.image();
        if let Err(throttle) = self.broker.quotas.check_mutations(&image, &self.client) {
            self.throttle = self.throttle.max(throttle);
            if self.strict {
                return false;
            }
        }
        let throttle = self
            .broker
            .quotas
            .record_mutations(&image, &self.client, partitions);
        self.throttle = self.throttle.max(throttle);
        true
    }

    /// The throttle time for the response; the connection is muted for it.
    pub fn finish(self) -> i32 {
        self.mute.mute_for(self.throttle);
        throttle_ms_field(self.throttle)
    }
}

/// Applies `quota` to each item: the items admitted, and the refused ones.
pub fn split<T>(
    quota: &mut Option<MutationQuota<'_>>,
    items: Vec<T>,
    partitions: impl Fn(&T) -> u32,
) -> (Vec<T>, Vec<T>) {
    let Some(quota) = quota else {
        return (items, Vec::new());
    };
    items
        .into_iter()
        .partition(|item| quota.admit(partitions(item)))
}
