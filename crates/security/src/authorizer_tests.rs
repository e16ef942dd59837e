use strom_protocol::acl::CLUSTER_NAME;

use super::*;

fn acl(
    resource_type: i8,
    name: &'static str,
    pattern_type: i8,
    principal: &'static str,
    operation: i8,
    permission_type: i8,
) -> AclBinding<'static> {
    AclBinding {
        resource_type: resource_type.into(),
        resource_name: name,
        pattern_type: pattern_type.into(),
        principal,
        host: "*",
        operation: operation.into(),
        permission_type: permission_type.into(),
    }
}

fn settings(super_users: &[&str], allow_everyone: bool) -> AuthorizerSettings {
    AuthorizerSettings {
        super_users: super_users
            .iter()
            .map(|user| Principal::parse(user).expect("principal"))
            .collect(),
        allow_everyone_if_no_acl_found: allow_everyone,
    }
}

fn check(acls: &[AclBinding<'_>], user: &str, op: i8, kind: i8, name: &str) -> bool {
    decide(
        &settings(&["User:admin"], false),
        acls.iter().copied(),
        &Principal::user(user),
        "127.0.0.1",
        Action {
            operation: op,
            resource_type: kind,
            name,
        },
    )
}

use operation::*;
use resource::{CLUSTER, GROUP, TOPIC};

#[test]
fn read_implies_describe_but_not_write() {
    let acls = [acl(
        TOPIC,
        "a",
        pattern::LITERAL,
        "User:alice",
        READ,
        permission::ALLOW,
    )];
    assert!(check(&acls, "alice", READ, TOPIC, "a"));
    assert!(check(&acls, "alice", DESCRIBE, TOPIC, "a"));
    assert!(!check(&acls, "alice", WRITE, TOPIC, "a"));
    assert!(!check(&acls, "alice", READ, TOPIC, "b"));
    assert!(!check(&acls, "bob", READ, TOPIC, "a"));
    assert!(!check(&acls, "alice", READ, GROUP, "a"));
}

#[test]
fn deny_beats_allow() {
    let acls = [
        acl(
            TOPIC,
            "*",
            pattern::LITERAL,
            "User:*",
            ALL,
            permission::ALLOW,
        ),
        acl(
            TOPIC,
            "secret",
            pattern::LITERAL,
            "User:alice",
            READ,
            permission::DENY,
        ),
    ];
    assert!(check(&acls, "alice", READ, TOPIC, "public"));
    assert!(!check(&acls, "alice", READ, TOPIC, "secret"));
    assert!(check(&acls, "bob", READ, TOPIC, "secret"));
    // A DENY of DESCRIBE does not deny READ; a DENY of ALL denies all.
    let acls = [
        acl(
            TOPIC,
            "t",
            pattern::LITERAL,
            "User:alice",
            ALL,
            permission::ALLOW,
        ),
        acl(
            TOPIC,
            "t",
            pattern::LITERAL,
            "User:alice",
            DESCRIBE,
            permission::DENY,
        ),
    ];
    assert!(check(&acls, "alice", READ, TOPIC, "t"));
    assert!(!check(&acls, "alice", DESCRIBE, TOPIC, "t"));
}

#[test]
fn a_prefixed_acl_covers_its_prefix_only() {
    let acls = [acl(
        TOPIC,
        "orders-",
        pattern::PREFIXED,
        "User:alice",
        WRITE,
        permission::ALLOW,
    )];
    assert!(check(&acls, "alice", WRITE, TOPIC, "orders-eu"));
    assert!(check(&acls, "alice", WRITE, TOPIC, "orders-"));
    assert!(!check(&acls, "alice", WRITE, TOPIC, "orders"));
    assert!(!check(&acls, "alice", WRITE, TOPIC, "payments-orders-eu"));
}

#[test]
fn super_users_bypass_and_no_acl_is_denied_unless_configured() {
    assert!(check(&[], "admin", ALTER, CLUSTER, CLUSTER_NAME));
    assert!(!check(&[], "alice", DESCRIBE, TOPIC, "a"));
    let open = settings(&[], true);
    let action = Action {
        operation: READ,
        resource_type: TOPIC,
        name: "a",
    };
    let alice = Principal::user("alice");
    assert!(decide(&open, std::iter::empty(), &alice, "h", action));
    // Once any ACL names the resource, the default no longer applies.
    let acls = [acl(
        TOPIC,
        "a",
        pattern::LITERAL,
        "User:bob",
        READ,
        permission::ALLOW,
    )];
    assert!(!decide(&open, acls.iter().copied(), &alice, "h", action));
}

#[test]
fn hosts_must_match() {
    let mut only_elsewhere = acl(
        TOPIC,
        "a",
        pattern::LITERAL,
        "User:alice",
        READ,
        permission::ALLOW,
    );
    only_elsewhere.host = "10.0.0.1";
    assert!(!check(&[only_elsewhere], "alice", READ, TOPIC, "a"));
    only_elsewhere.host = "127.0.0.1";
    assert!(check(&[only_elsewhere], "alice", READ, TOPIC, "a"));
}

#[test]
fn filters_match_like_kafkas() {
    let literal = acl(
        TOPIC,
        "orders",
        pattern::LITERAL,
        "User:alice",
        READ,
        permission::ALLOW,
    );
    let prefixed = acl(
        TOPIC,
        "ord",
        pattern::PREFIXED,
        "User:bob",
        WRITE,
        permission::DENY,
    );
    let group = acl(
        GROUP,
        "g",
        pattern::LITERAL,
        "User:alice",
        READ,
        permission::ALLOW,
    );
    let any = AclFilter {
        resource_type: resource::ANY,
        resource_name: None,
        pattern_type: pattern::ANY,
        principal: None,
        host: None,
        operation: operation::ANY,
        permission_type: permission::ANY,
    };
    assert!([&literal, &prefixed, &group]
        .iter()
        .all(|acl| any.matches(acl)));
    let matching = AclFilter {
        resource_type: TOPIC,
        resource_name: Some("orders".into()),
        pattern_type: pattern::MATCH,
        ..any.clone()
    };
    assert!(matching.matches(&literal) && matching.matches(&prefixed));
    assert!(!matching.matches(&group));
    let exact_prefixed = AclFilter {
        pattern_type: pattern::PREFIXED,
        ..matching.clone()
    };
    assert!(!exact_prefixed.matches(&prefixed), "the name must be equal");
    let by_principal = AclFilter {
        principal: Some("User:bob".into()),
        ..any
    };
    assert!(by_principal.matches(&prefixed) && !by_principal.matches(&literal));
}
