use super::*;

fn ip(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

#[test]
fn per_ip_limit_refuses_only_that_address_and_frees_on_close() {
    let quotas = ConnectionQuotas::new(ConnectionLimitSettings {
        max_connections_per_ip: 2,
        ..ConnectionLimitSettings::default()
    });
    let first = quotas.admit("PLAINTEXT", ip(1)).expect("first");
    let _second = quotas.admit("PLAINTEXT", ip(1)).expect("second");
    let before = CONNECTION_LIMITS.refused();
    assert_eq!(
        quotas.admit("PLAINTEXT", ip(1)).unwrap_err(),
        ConnectionRefusal::PerIp {
            ip: ip(1),
            limit: 2
        }
    );
    assert!(CONNECTION_LIMITS.refused() > before);
    // Another address still connects.
    let _other = quotas.admit("PLAINTEXT", ip(2)).expect("other address");
    drop(first);
    let _again = quotas.admit("PLAINTEXT", ip(1)).expect("a place was freed");
    assert_eq!(quotas.open_connections(), 3);
}

#[test]
fn overrides_win_over_the_per_ip_default() {
    let quotas = ConnectionQuotas::new(ConnectionLimitSettings {
        max_connections_per_ip: 1,
        per_ip_overrides: HashMap::from([(ip(1), 3), (ip(2), 0)]),
        ..ConnectionLimitSettings::default()
    });
    let permits: Vec<_> = (0..3)
        .map(|_| quotas.admit("a", ip(1)).expect("override of 3"))
        .collect();
    assert!(quotas.admit("a", ip(1)).is_err());
    assert!(
        quotas.admit("a", ip(2)).is_err(),
        "an override of 0 refuses all"
    );
    let _third = quotas.admit("a", ip(3)).expect("the default of 1");
    assert!(quotas.admit("a", ip(3)).is_err());
    drop(permits);
}

#[test]
fn broker_and_listener_limits() {
    let quotas = ConnectionQuotas::new(ConnectionLimitSettings {
        max_connections: 3,
        listeners: HashMap::from([(
            "external".to_owned(),
            ListenerConnectionLimits {
                max_connections: Some(1),
                max_connection_creation_rate: None,
            },
        )]),
        ..ConnectionLimitSettings::default()
    });
    let _external = quotas.admit("EXTERNAL", ip(1)).expect("external");
    assert_eq!(
        quotas.admit("external", ip(2)).unwrap_err(),
        ConnectionRefusal::Listener {
            listener: "external".into(),
            limit: 1
        }
    );
    let _a = quotas.admit("internal", ip(2)).expect("internal");
    let _b = quotas.admit("internal", ip(3)).expect("internal");
    assert_eq!(
        quotas.admit("internal", ip(4)).unwrap_err(),
        ConnectionRefusal::Broker { limit: 3 }
    );
}

#[test]
fn lowered_limits_apply_to_the_next_connections() {
    let quotas = ConnectionQuotas::new(ConnectionLimitSettings::default());
    let open: Vec<_> = (0..3)
        .map(|_| quotas.admit("a", ip(1)).expect("no limit"))
        .collect();
    quotas.update(ConnectionLimitSettings {
        max_connections_per_ip: 2,
        ..ConnectionLimitSettings::default()
    });
    assert_eq!(quotas.open_connections(), 3, "open connections stay");
    assert!(quotas.admit("a", ip(1)).is_err());
    drop(open);
    assert_eq!(quotas.open_connections(), 0);
    assert!(quotas.admit("a", ip(1)).is_ok());
}

#[test]
fn creation_rate_delays_the_next_accept() {
    let quotas = ConnectionQuotas::new(ConnectionLimitSettings {
        max_connection_creation_rate: 2,
        ..ConnectionLimitSettings::default()
    });
    let start = Instant::now();
    assert_eq!(quotas.record_creation("a", start), Duration::ZERO);
    assert_eq!(quotas.record_creation("a", start), Duration::ZERO);
    let delay = quotas.record_creation("a", start);
    assert_eq!(delay, Duration::from_millis(500));
    // A second later the bucket has refilled.
    let later = start + Duration::from_secs(2);
    assert_eq!(quotas.record_creation("a", later), Duration::ZERO);
}

#[test]
fn listener_rate_applies_to_its_listener_only() {
    let quotas = ConnectionQuotas::new(ConnectionLimitSettings {
        listeners: HashMap::from([(
            "slow".to_owned(),
            ListenerConnectionLimits {
                max_connections: None,
                max_connection_creation_rate: Some(1),
            },
        )]),
        ..ConnectionLimitSettings::default()
    });
    let start = Instant::now();
    assert_eq!(quotas.record_creation("SLOW", start), Duration::ZERO);
    assert_eq!(
        quotas.record_creation("SLOW", start),
        Duration::from_secs(1)
    );
    for _ in 0..100 {
        assert_eq!(quotas.record_creation("fast", start), Duration::ZERO);
    }
}

#[test]
fn the_inter_broker_listener_is_exempt_from_the_broker_wide_limit_only() {
    let quotas = ConnectionQuotas::new(ConnectionLimitSettings {
        max_connections: 1,
        protected_listener: Some("replication".to_owned()),
        listeners: HashMap::from([(
            "replication".to_owned(),
            ListenerConnectionLimits {
                max_connections: Some(2),
                max_connection_creation_rate: None,
            },
        )]),
        ..ConnectionLimitSettings::default()
    });
    let _client = quotas.admit("client", ip(1)).expect("the one client");
    assert!(quotas.admit("client", ip(2)).is_err());
    let _a = quotas.admit("REPLICATION", ip(3)).expect("exempt");
    let _b = quotas.admit("replication", ip(4)).expect("exempt");
    assert_eq!(
        quotas.admit("replication", ip(5)).unwrap_err(),
        ConnectionRefusal::Listener {
            listener: "replication".into(),
            limit: 2
        }
    );
}
