//! The error codes a response carries, as Kafka counts them for
//! `ErrorsPerSec`: every code in the response, per partition where the
//! response is per partition, NONE included.

use strom_protocol::messages::Response;

/// Calls `count` with every error code in `response`.
pub fn response_error_codes(response: &Response, count: &mut impl FnMut(i16)) {
    match response {
        Response::Produce(r) => r
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .for_each(|p| count(p.error_code)),
        Response::Fetch(r) => {
            count(r.error_code);
            r.responses
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| count(p.error_code));
        }
        Response::ListOffsets(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| count(p.error_code)),
        Response::Metadata(r) => r.topics.iter().for_each(|t| count(t.error_code)),
        Response::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| count(p.error_code)),
        Response::OffsetFetch(r) => offset_fetch_codes(r, count),
        Response::FindCoordinator(r) => {
            if r.coordinators.is_empty() {
                count(r.error_code);
            }
            r.coordinators.iter().for_each(|c| count(c.error_code));
        }
        other => administration_error_codes(other, count),
    }
}

/// The error codes of the responses to topic, group, config and quorum
/// administration, and of those that carry exactly one.
fn administration_error_codes(response: &Response, count: &mut impl FnMut(i16)) {
    match response {
        Response::CreateTopics(r) => r.topics.iter().for_each(|t| count(t.error_code)),
        Response::DeleteTopics(r) => r.responses.iter().for_each(|t| count(t.error_code)),
        Response::CreatePartitions(r) => r.results.iter().for_each(|t| count(t.error_code)),
        Response::DescribeGroups(r) => r.groups.iter().for_each(|g| count(g.error_code)),
        Response::DeleteGroups(r) => r.results.iter().for_each(|g| count(g.error_code)),
        Response::DescribeConfigs(r) => r.results.iter().for_each(|c| count(c.error_code)),
        Response::AlterConfigs(r) => r.responses.iter().for_each(|c| count(c.error_code)),
        Response::IncrementalAlterConfigs(r) => {
            r.responses.iter().for_each(|c| count(c.error_code))
        }
        Response::DeleteRecords(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| count(p.error_code)),
        Response::OffsetForLeaderEpoch(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| count(p.error_code)),
        Response::DescribeQuorum(r) => {
            count(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| count(p.error_code));
        }
        Response::OffsetDelete(r) => {
            count(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| count(p.error_code));
        }
        other => {
            if let Some(code) = single_error_code(other) {
                count(code);
            }
        }
    }
}

/// The error code of a response that carries exactly one.
fn single_error_code(response: &Response) -> Option<i16> {
    Some(match response {
        Response::ApiVersions(r) => r.error_code,
        Response::JoinGroup(r) => r.error_code,
        Response::SyncGroup(r) => r.error_code,
        Response::Heartbeat(r) => r.error_code,
        Response::LeaveGroup(r) => r.error_code,
        Response::InitProducerId(r) => r.error_code,
        Response::SaslHandshake(r) => r.error_code,
        Response::SaslAuthenticate(r) => r.error_code,
        Response::DescribeCluster(r) => r.error_code,
        Response::ListGroups(r) => r.error_code,
        _ => return None,
    })
}

fn offset_fetch_codes(
    response: &strom_protocol::kafka::messages::OffsetFetchResponse,
    count: &mut impl FnMut(i16),
) {
    if response.groups.is_empty() {
        count(response.error_code);
        response
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| count(p.error_code));
        return;
    }
    for group in &response.groups {
        count(group.error_code);
        group
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| count(p.error_code));
    }
}

#[cfg(test)]
mod tests {
    use strom_protocol::kafka::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use strom_protocol::kafka::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };
    use strom_protocol::kafka::messages::{FetchResponse, HeartbeatResponse, ProduceResponse};

    use super::*;

    fn codes(response: &Response) -> Vec<i16> {
        let mut seen = Vec::new();
        response_error_codes(response, &mut |code| seen.push(code));
        seen
    }

    #[test]
    fn per_partition_responses_count_each_partition() {
        let produce =
            ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
                .with_partition_responses(vec![
                    PartitionProduceResponse::default().with_error_code(0),
                    PartitionProduceResponse::default().with_error_code(6),
                ])]);
        assert_eq!(codes(&Response::Produce(produce)), vec![0, 6]);
        let fetch = FetchResponse::default()
            .with_responses(vec![FetchableTopicResponse::default()
                .with_partitions(vec![PartitionData::default().with_error_code(1)])]);
        assert_eq!(codes(&Response::Fetch(fetch)), vec![0, 1]);
    }

    #[test]
    fn single_code_responses_count_their_code() {
        let heartbeat = HeartbeatResponse::default().with_error_code(27);
        assert_eq!(codes(&Response::Heartbeat(heartbeat)), vec![27]);
    }
}
