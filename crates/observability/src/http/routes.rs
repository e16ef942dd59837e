//! Requests to responses: the paths the HTTP listener serves.

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};

use super::access::{Access, Answer};
use super::auth::{Refusal, CHALLENGE};
use super::browse::BROWSE_BYTES_PER_SECOND;
use super::HttpState;
use crate::view::Viewer;

/// The exposition's content type when the client asks for OpenMetrics
/// (Prometheus does).
const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of Prometheus' classic text format, served otherwise.
const CLASSIC_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Answers one request from `peer`: asks for credentials where the
/// listener's security settings want them, then routes it.
pub(crate) async fn respond<B>(
    state: &HttpState,
    request: Request<B>,
    peer: std::net::SocketAddr,
) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET and HEAD are served\n",
        );
    }
    match super::auth::login(state, &request, peer).await {
        Ok(viewer) if is_browsing(request.uri().path()) => {
            // One browsing request at a time, paced by what the ones
            // before it read; its reads and decoding run off the async
            // workers (which serve the Kafka listeners too).
            let _turn = state.browse.turn().await;
            off_the_workers(|| route(state, &request, viewer.as_ref()))
        }
        Ok(viewer) => route(state, &request, viewer.as_ref()),
        Err(Refusal::Unauthenticated) => challenge(),
        Err(Refusal::Starting) => text(StatusCode::SERVICE_UNAVAILABLE, "the broker is starting\n"),
    }
}

/// Runs blocking work where it does not hold up other tasks: in place
/// on a multi-threaded runtime (its other tasks move to other workers),
/// directly elsewhere.
fn off_the_workers<T>(work: impl FnOnce() -> T) -> T {
    let multi_threaded = tokio::runtime::Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_threaded {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

/// Whether `path` reads records (the message browser).
fn is_browsing(path: &str) -> bool {
    path.starts_with("/api/topics/")
        && (path.ends_with("/records") || path.ends_with("/records/raw"))
}

/// The message browser's share of the broker: requests take turns, and a
/// turn starts only once the reads of the turns before it fit
/// [`BROWSE_BYTES_PER_SECOND`].
#[derive(Debug)]
pub(crate) struct BrowsePacing {
    turns: tokio::sync::Semaphore,
    /// When the next turn may start.
    next: std::sync::Mutex<tokio::time::Instant>,
}

impl Default for BrowsePacing {
    fn default() -> Self {
        BrowsePacing {
            turns: tokio::sync::Semaphore::new(1),
            next: std::sync::Mutex::new(tokio::time::Instant::now()),
        }
    }
}

impl BrowsePacing {
    /// Waits for this request's turn.
    async fn turn(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        let permit = self.turns.acquire().await.ok();
        let next = *self
            .next
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        tokio::time::sleep_until(next).await;
        permit
    }

    /// Records that a request read `bytes`: the next turn waits for them.
    fn read(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let cost =
            std::time::Duration::from_secs_f64(bytes as f64 / BROWSE_BYTES_PER_SECOND as f64);
        let mut next = self
            .next
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *next = (*next).max(tokio::time::Instant::now()) + cost;
    }
}

/// A 401 answer with the Basic challenge.
fn challenge() -> Response<Full<Bytes>> {
    let mut response = text(StatusCode::UNAUTHORIZED, "authentication required\n");
    response
        .headers_mut()
        .insert(WWW_AUTHENTICATE, HeaderValue::from_static(CHALLENGE));
    response
}

/// Answers one request of `viewer` (`None`: a request that needed no
/// credentials, shown everything).
pub(crate) fn route<B>(
    state: &HttpState,
    request: &Request<B>,
    viewer: Option<&Viewer>,
) -> Response<Full<Bytes>> {
    match request.uri().path() {
        "/metrics" => metrics(state, wants_openmetrics(request)),
        "/health/live" => text(StatusCode::OK, "live\n"),
        "/health/ready" => ready(state),
        "/" | "/console" | "/console/" => with_type(
            StatusCode::OK,
            "text/html; charset=utf-8",
            Bytes::from_static(super::console::PAGE.as_bytes()),
        ),
        path if path.starts_with("/api/") => {
            console_api(state, viewer, path, request.uri().query())
        }
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

fn console_api(
    state: &HttpState,
    viewer: Option<&Viewer>,
    path: &str,
    query: Option<&str>,
) -> Response<Full<Bytes>> {
    let Some(broker) = state.broker() else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "the broker is starting\n");
    };
    let access = Access::new(broker.as_ref(), viewer);
    let answer = super::console::api(&access, &state.history, path, query);
    state.browse.read(access.scanned.get());
    match answer {
        Answer::Json(body) => json(StatusCode::OK, &body),
        Answer::NotFound => text(StatusCode::NOT_FOUND, "not found\n"),
        Answer::Forbidden => text(
            StatusCode::FORBIDDEN,
            "the authenticated user's ACLs do not allow this\n",
        ),
        Answer::BadRequest(problem) => json(
            StatusCode::BAD_REQUEST,
            &serde_json::json!({ "error": problem }),
        ),
        Answer::Raw {
            body, text: true, ..
        } => with_type(StatusCode::OK, "text/plain; charset=utf-8", body),
        Answer::Raw { body, filename, .. } => download(body, &filename),
    }
}

fn wants_openmetrics<B>(request: &Request<B>) -> bool {
    request
        .headers()
        .get_all(hyper::header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("application/openmetrics-text"))
}

fn metrics(state: &HttpState, openmetrics: bool) -> Response<Full<Bytes>> {
    let Ok(body) = crate::exposition::exposition(&state.registry) else {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot encode the metrics\n",
        );
    };
    if openmetrics {
        with_type(StatusCode::OK, OPENMETRICS_CONTENT_TYPE, Bytes::from(body))
    } else {
        let classic = crate::exposition::classic_text(&body);
        with_type(StatusCode::OK, CLASSIC_CONTENT_TYPE, Bytes::from(classic))
    }
}

fn ready(state: &HttpState) -> Response<Full<Bytes>> {
    let ready = state.ready_state();
    let body = serde_json::json!({
        "ready": ready.ready(),
        "logs_loaded": ready.logs_loaded,
        "registered": ready.registered,
        "unfenced": ready.unfenced,
        "listeners_accepting": ready.listeners_accepting,
        "stopping": ready.stopping,
    });
    let status = if ready.ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json(status, &body)
}

/// A JSON response.
pub(crate) fn json(status: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut text = body.to_string();
    text.push('\n');
    with_type(status, "application/json", Bytes::from(text))
}

/// Bytes saved as `filename` by the browser.
fn download(body: Bytes, filename: &str) -> Response<Full<Bytes>> {
    let mut response = with_type(StatusCode::OK, "application/octet-stream", body);
    // The name is the topic's (legal topic names are [a-zA-Z0-9._-]) and
    // numbers; anything else is replaced so the header stays valid.
    let safe: String = filename
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{safe}\"")) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_DISPOSITION, value);
    }
    response
}

/// A plain-text response.
pub(crate) fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    with_type(
        status,
        "text/plain; charset=utf-8",
        Bytes::from_static(body.as_bytes()),
    )
}

/// A response with a body of `content_type`.
pub(crate) fn with_type(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
