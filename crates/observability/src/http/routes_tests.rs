//! Requests through [`respond`]: the listener's authentication before the
//! console, with the fake broker behind it.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, Weak};

use base64::Engine;
use http_body_util::BodyExt;
use hyper::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use strom_protocol::acl::{operation, resource};

use super::*;
use crate::fake_broker::FakeBroker;
use crate::http::auth::{HttpAuthentication, HttpSecurity, CHALLENGE};
use crate::http::{console, Readiness};
use crate::view::{BrokerView, ViewSlot};

const PEER: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 7)),
    40_000,
);

/// A listener's state with `security` over `broker` (`None`: still
/// starting).
fn state(security: HttpSecurity, broker: Option<&Arc<FakeBroker>>) -> HttpState {
    let slot: Arc<ViewSlot> = Arc::new(OnceLock::new());
    if let Some(broker) = broker {
        let view: Weak<FakeBroker> = Arc::downgrade(broker);
        let _ = slot.set(view as Weak<dyn BrokerView>);
    }
    HttpState::new(
        crate::collect::BrokerCollector::new(
            Arc::new(crate::BrokerMetrics::new(&[], true)),
            crate::view::NetworkCounts::default,
            Arc::clone(&slot),
        ),
        slot,
        Arc::new(Readiness::default()),
        Arc::new(console::History::default()),
        (security, None),
    )
}

fn basic() -> HttpSecurity {
    HttpSecurity {
        authentication: HttpAuthentication::Basic,
        authenticate_metrics: false,
    }
}

/// A broker where `alice` may describe `orders` and nothing else.
fn broker() -> Arc<FakeBroker> {
    Arc::new(FakeBroker {
        grants: vec![("alice", operation::DESCRIBE, resource::TOPIC, "orders")],
        ..FakeBroker::default()
    })
}

/// GET `path` with `credentials` (`user:password`) if any: status, the
/// challenge header and the body.
async fn get(
    state: &HttpState,
    path: &str,
    credentials: Option<&str>,
) -> (StatusCode, Option<String>, String) {
    let mut request = Request::builder().uri(path);
    if let Some(credentials) = credentials {
        let token = base64::engine::general_purpose::STANDARD.encode(credentials);
        request = request.header(AUTHORIZATION, format!("Basic {token}"));
    }
    let response = respond(state, request.body(()).expect("request"), PEER).await;
    let status = response.status();
    let challenge = response
        .headers()
        .get(WWW_AUTHENTICATE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body = response.into_body().collect().await.expect("body");
    let body = String::from_utf8(body.to_bytes().to_vec()).expect("utf-8");
    (status, challenge, body)
}

fn failures(state: &HttpState) -> u64 {
    state.authentication_failures.get()
}

#[tokio::test]
async fn the_console_needs_credentials_with_basic() {
    let broker = broker();
    let state = state(basic(), Some(&broker));
    for path in [
        "/console",
        "/api/topics",
        "/api/topics/orders/records",
        "/nothing",
    ] {
        let (status, challenge, _) = get(&state, path, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        assert_eq!(challenge.as_deref(), Some(CHALLENGE), "{path}");
    }
    assert_eq!(failures(&state), 0, "no credentials is not a failed login");
    let (status, challenge, _) = get(&state, "/api/topics", Some("alice:wrong")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(challenge.as_deref(), Some(CHALLENGE));
    let (status, _, _) = get(&state, "/api/topics", Some("mallory:mallory-secret")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(failures(&state), 2);
    let (status, _, body) = get(&state, "/api/topics", Some("alice:alice-secret")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("\"orders\""), "{body}");
    let (status, _, body) = get(&state, "/metrics", None).await;
    assert_eq!(status, StatusCode::OK, "metrics stay open by default");
    assert!(
        body.contains("strom_http_authentication_failures_total 2"),
        "{body}"
    );
    assert_eq!(get(&state, "/health/live", None).await.0, StatusCode::OK);
}

#[tokio::test]
async fn the_authenticated_user_sees_what_its_acls_allow() {
    let broker = broker();
    let state = state(basic(), Some(&broker));
    let (status, _, body) = get(&state, "/api/topics", Some("bob:bob-secret")).await;
    assert_eq!((status, body.trim()), (StatusCode::OK, "{\"topics\":[]}"));
    let records = "/api/topics/orders/records";
    let (status, _, _) = get(&state, records, Some("alice:alice-secret")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "DESCRIBE does not read");
    let (status, _, body) = get(&state, records, Some("root:root-secret")).await;
    assert_eq!(status, StatusCode::OK, "a super user reads");
    assert!(body.contains("\"high_watermark\":10"), "{body}");
    assert_eq!(failures(&state), 0);
}

#[tokio::test]
async fn metrics_and_probes_need_credentials_when_asked() {
    let broker = broker();
    let security = HttpSecurity {
        authenticate_metrics: true,
        ..basic()
    };
    let state = state(security, Some(&broker));
    for path in ["/metrics", "/health/live", "/health/ready"] {
        assert_eq!(get(&state, path, None).await.0, StatusCode::UNAUTHORIZED);
    }
    let (status, _, _) = get(&state, "/health/live", Some("bob:bob-secret")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = get(&state, "/metrics", Some("bob:bob-secret")).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn without_authentication_nothing_is_asked_or_hidden() {
    let broker = broker();
    let state = state(HttpSecurity::default(), Some(&broker));
    let (status, challenge, body) = get(&state, "/api/topics/orders/records", None).await;
    assert_eq!((status, challenge), (StatusCode::OK, None));
    assert!(body.contains("\"high_watermark\":10"), "{body}");
    let (status, _, _) = get(&state, "/api/topics", Some("alice:wrong")).await;
    assert_eq!(status, StatusCode::OK, "credentials are not looked at");
    assert_eq!(failures(&state), 0);
}

#[tokio::test]
async fn credentials_cannot_be_checked_before_the_broker_serves() {
    let state = state(basic(), None);
    let (status, _, _) = get(&state, "/api/topics", Some("alice:alice-secret")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        get(&state, "/api/topics", None).await.0,
        StatusCode::UNAUTHORIZED
    );
    let post = Request::builder()
        .method(Method::POST)
        .uri("/api/topics")
        .body(())
        .expect("request");
    let response = respond(&state, post, PEER).await;
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test(start_paused = true)]
async fn browsing_turns_are_paced_by_what_was_read() {
    let pacing = BrowsePacing::default();
    let start = tokio::time::Instant::now();
    let first = pacing.turn().await;
    assert_eq!(
        tokio::time::Instant::now(),
        start,
        "the first turn starts at once"
    );
    // A turn that read a second's worth delays the next one by a second.
    pacing.read(BROWSE_BYTES_PER_SECOND);
    drop(first);
    let _second = pacing.turn().await;
    let waited = tokio::time::Instant::now() - start;
    assert!(
        waited >= std::time::Duration::from_secs(1)
            && waited < std::time::Duration::from_millis(1100),
        "{waited:?}"
    );
    assert!(is_browsing("/api/topics/orders/records"));
    assert!(is_browsing("/api/topics/orders/records/raw"));
    assert!(!is_browsing("/api/topics/orders"));
}
