use super::*;

fn join(member_id: &str) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        member_id: member_id.into(),
        member_epoch: 0,
        member_id_required: true,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["t".into()]),
        owned_partitions: Some(Assignment::new()),
        ..ConsumerHeartbeat::default()
    }
}

fn refused(request: &ConsumerHeartbeat) -> Option<&'static str> {
    match validate_heartbeat("g", request, &ConsumerGroupConfig::default()) {
        Err(GroupError::InvalidRequest { reason }) => Some(reason),
        _ => None,
    }
}

#[test]
fn a_well_formed_join_passes() {
    assert_eq!(
        validate_heartbeat("g", &join("m"), &ConsumerGroupConfig::default()),
        Ok(())
    );
}

#[test]
fn malformed_first_heartbeats_are_invalid_requests() {
    let mut request = join("m");
    request.rebalance_timeout_ms = -1;
    assert!(refused(&request).is_some());
    let mut request = join("m");
    request.owned_partitions = None;
    assert!(refused(&request).is_some());
    let mut request = join("m");
    request.subscribed_topic_names = Some(Vec::new());
    assert!(refused(&request).is_some());
    let mut request = join("");
    assert!(refused(&request).is_some());
    request.member_id_required = false;
    assert_eq!(refused(&request), None);
    let mut request = join("m");
    request.member_epoch = -3;
    assert!(refused(&request).is_some());
    let mut request = join("m");
    request.member_epoch = LEAVE_STATIC_MEMBER_EPOCH;
    assert!(refused(&request).is_some());
    let mut request = join("m");
    request.instance_id = Some(String::new());
    assert!(refused(&request).is_some());
    assert!(validate_heartbeat("", &join("m"), &ConsumerGroupConfig::default()).is_err());
}

#[test]
fn unknown_assignors_and_regexes_are_refused() {
    let mut request = join("m");
    request.server_assignor = Some("sticky".into());
    assert_eq!(
        validate_heartbeat("g", &request, &ConsumerGroupConfig::default()),
        Err(GroupError::UnsupportedAssignor {
            assignor: "sticky".into()
        })
    );
    let config = ConsumerGroupConfig {
        assignors: vec![ConsumerAssignor::Uniform],
        ..ConsumerGroupConfig::default()
    };
    request.server_assignor = Some("range".into());
    assert!(validate_heartbeat("g", &request, &config).is_err());
    let mut request = join("m");
    request.subscribed_topic_regex = Some(String::new());
    assert_eq!(
        validate_heartbeat("g", &request, &ConsumerGroupConfig::default()),
        Ok(())
    );
    request.subscribed_topic_regex = Some("(t.*".into());
    assert_eq!(
        validate_heartbeat("g", &request, &ConsumerGroupConfig::default()),
        Err(GroupError::InvalidRegularExpression)
    );
    // A join by pattern alone is well formed; a join by neither is not.
    request.subscribed_topic_regex = Some("t.*".into());
    request.subscribed_topic_names = None;
    assert_eq!(
        validate_heartbeat("g", &request, &ConsumerGroupConfig::default()),
        Ok(())
    );
    request.subscribed_topic_regex = Some(String::new());
    assert!(refused(&request).is_some());
}

#[test]
fn group_states_follow_epochs() {
    let mut group = ConsumerGroup::new();
    assert_eq!(group.state(), ConsumerGroupState::Empty);
    let catalog: BTreeMap<String, TopicMetadata> = [(
        "t".to_string(),
        TopicMetadata {
            topic_id: Uuid::from_u128(1),
            partitions: 2,
        },
    )]
    .into();
    let config = ConsumerGroupConfig::default();
    group
        .heartbeat(&join("a"), "a", &config, &catalog, 0)
        .expect("joins");
    assert_eq!(group.state(), ConsumerGroupState::Stable);
    group.bump_group_epoch();
    assert_eq!(group.state(), ConsumerGroupState::Assigning);
}
