//! The daemon's HTTP side: health and readiness probes, Prometheus metrics,
//! and the webhook receiver that turns a verified push into a
//! [`Trigger::Webhook`].
//!
//! Two routers, so the operator can expose only the webhook to the outside
//! and keep the probes and metrics on a cluster-internal port. This module
//! decides nothing about the request's authenticity ([`webhook::verify`]
//! does) and never runs a round itself: it only sends a trigger down the
//! daemon's channel (and, in the git-sync layout, wakes git-sync:
//! [`git_sync`](crate::daemon::triggers::git_sync)). Both are served within [`Limits`]
//! (`serve`: a connection limit, header-read, request and idle timeouts).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::daemon::http::metrics::Metrics;
use crate::daemon::leadership::forward::{Forwarder, Route};
use crate::daemon::leadership::suspend::{ControlToken, Suspension};
use crate::daemon::triggers::git_sync::GitSyncSignal;
use crate::daemon::triggers::webhook::{self, MAX_BODY_BYTES, Verdict, WebhookConfig};
use crate::daemon::triggers::{Trigger, TriggerSender};

pub mod health;
pub mod metrics;
mod serve;

pub use serve::Limits;

/// The content type of `GET /metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the handlers share with the daemon loop.
#[derive(Clone, Debug)]
pub struct HttpState {
    /// The metrics registry, served at `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Set by the daemon after the first successful fetch; `/readyz` reports it.
    pub ready: Arc<AtomicBool>,
    /// Whether the daemon's loop makes progress; `/healthz` reports it.
    pub liveness: Arc<health::Liveness>,
    /// The webhook secret and tracked branch; `None` refuses every webhook.
    pub webhook: Option<Arc<WebhookConfig>>,
    /// Where a verified push sends its [`Trigger::Webhook`].
    pub triggers: TriggerSender,
    /// With leader election: hands a follower's webhooks to the leader.
    pub forward: Option<Forwarder>,
    /// The out-of-band suspension `POST /suspend` and `POST /resume` change.
    pub suspension: Suspension,
    /// The token those need; None turns them off.
    pub control: Option<ControlToken>,
    /// The git-sync sidecar a verified push wakes (`--git-sync-signal`).
    pub git_sync: Option<Arc<GitSyncSignal>>,
}

/// `GET /healthz`, `GET /readyz` and `GET /metrics`.
pub fn ops_router(state: HttpState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// `POST /webhook` (and `POST /`), with bodies limited to 1 MiB; and
/// `POST /suspend`, `POST /resume` (see [`crate::daemon::leadership::suspend`]), on this port
/// because the replicas reach each other's here.
pub fn webhook_router(state: HttpState) -> Router {
    Router::new()
        .route("/webhook", post(receive))
        .route("/", post(receive))
        .route("/suspend", post(suspend))
        .route("/resume", post(resume))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Serves `router` on `listener` with the default [`Limits`] until
/// `shutdown` is cancelled, then lets requests in flight finish and returns.
pub async fn serve(listener: TcpListener, router: Router, shutdown: CancellationToken) -> std::io::Result<()> {
    serve_with(listener, router, Limits::default(), shutdown).await
}

/// Serves `router` on `listener` within `limits` (connections at once,
/// header-read, request and idle timeouts) until `shutdown` is cancelled,
/// then lets requests in flight finish and returns.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, ?limits, "serving HTTP");
    }
    serve::run(listener, router, limits, shutdown).await
}

async fn healthz(State(state): State<HttpState>) -> (StatusCode, String) {
    match state.liveness.check(tokio::time::Instant::now()) {
        Ok(()) => (StatusCode::OK, "ok".into()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

async fn readyz(State(state): State<HttpState>) -> (StatusCode, &'static str) {
    if state.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready: waiting for the first successful fetch")
    }
}

async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], state.metrics.encode())
}

/// One webhook request: verify, trigger, hand to the leader when this
/// replica follows, count, log, answer. The body is read through the
/// [`DefaultBodyLimit`], so at most 1 MiB is ever buffered.
async fn receive(
    State(state): State<HttpState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> (StatusCode, String) {
    let bytes = body.as_ref().ok().cloned();
    let route = state.forward.as_ref().map(|forwarder| forwarder.route(&headers));
    let mut answered = answer(&state, &headers, body, route.as_ref());
    if let (ACCEPTED, Some(git_sync)) = (answered.0, &state.git_sync) {
        // This pod's sidecar fetches now, whether this replica leads or not.
        nudge(Arc::clone(git_sync)).await;
    }
    if let ((ACCEPTED, ..), Some(forwarder), Some(route), Some(bytes)) = (&answered, &state.forward, route, bytes)
        && let Some(handed) = hand_over(forwarder, route, &headers, bytes).await
    {
        answered = handed;
    }
    let (result, status, message) = answered;
    state.metrics.webhook_request(result);
    (status, message)
}

/// A follower's accepted webhook goes on to the leader; None when it stays
/// here (this replica leads, or the leader cannot be reached: it then sees
/// the change at its next poll).
async fn hand_over(
    forwarder: &Forwarder,
    route: Route,
    headers: &HeaderMap,
    body: Bytes,
) -> Option<(&'static str, StatusCode, String)> {
    match route {
        // A forwarded request on a follower was refused before it was accepted.
        Route::Here | Route::NotLeading(_) => None,
        Route::NoLeader => {
            tracing::warn!(
                "webhook accepted by a follower that knows no leader; the leader sees the change at its next poll"
            );
            None
        }
        Route::Leader(url) => match forwarder.forward(&url, "/webhook", headers, body).await {
            Ok(_) => {
                tracing::info!(leader = %url, "webhook handed to the leader");
                Some(("forwarded", StatusCode::ACCEPTED, "accepted; handed to the leader".to_owned()))
            }
            Err(e) => {
                tracing::warn!(error = %e, "webhook accepted but not handed to the leader; it sees the change at its next poll");
                None
            }
        },
    }
}

const ACCEPTED: &str = "accepted";

/// Wakes git-sync before the answer goes out, so the push is being fetched
/// by the time the sender hears 202. Reading /proc is blocking IO.
async fn nudge(git_sync: Arc<GitSyncSignal>) {
    let signal = git_sync.signal_name();
    let Ok(nudge) = tokio::task::spawn_blocking(move || git_sync.nudge()).await else {
        tracing::warn!(signal, "could not signal git-sync: the task did not finish");
        return;
    };
    for (pid, errno) in &nudge.failed {
        tracing::warn!(pid, signal, error = %errno, "could not signal git-sync");
    }
    if nudge.signalled.is_empty() {
        tracing::warn!(
            signal,
            "no git-sync process to signal: the push waits for git-sync's next period (is shareProcessNamespace set?)"
        );
    } else {
        tracing::info!(pids = ?nudge.signalled, signal, "signalled git-sync to fetch now");
    }
}

/// The answer to one webhook request: verified, then (when it asks for a
/// round) sent down the trigger channel, unless it is a forwarded request
/// reaching a follower, which never acts on one.
fn answer(
    state: &HttpState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    route: Option<&Route>,
) -> (&'static str, StatusCode, String) {
    let body = match body {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            tracing::info!(limit = MAX_BODY_BYTES, "webhook refused: body too large");
            return ("too_large", StatusCode::PAYLOAD_TOO_LARGE, "body larger than 1 MiB".to_owned());
        }
        Err(rejection) => {
            tracing::info!(error = %rejection.body_text(), "webhook refused: body unreadable");
            return ("bad_request", StatusCode::BAD_REQUEST, "could not read the body".to_owned());
        }
    };
    let Some(config) = &state.webhook else {
        tracing::warn!("webhook refused: no webhook secret is configured");
        return ("unauthorized", StatusCode::UNAUTHORIZED, "unauthorized".to_owned());
    };
    match webhook::verify(config, headers, &body) {
        Verdict::Trigger => {
            if let Some(Route::NotLeading(leader)) = route {
                tracing::warn!(
                    leader = leader.as_deref().unwrap_or("unknown"),
                    "forwarded webhook refused: this replica does not lead"
                );
                return ("ignored", StatusCode::CONFLICT, Route::not_leading_message(leader.as_deref()));
            }
            let received = tokio::time::Instant::now();
            if state.triggers.send(Trigger::Webhook { received }).is_err() {
                tracing::warn!("webhook verified, but the daemon loop has stopped");
                return ("ignored", StatusCode::SERVICE_UNAVAILABLE, "not accepted: the daemon is stopping".to_owned());
            }
            tracing::info!(branch = %config.branch, "webhook accepted: push to the tracked branch");
            (ACCEPTED, StatusCode::ACCEPTED, "accepted".to_owned())
        }
        Verdict::Ignored(reason) => {
            tracing::info!(%reason, "webhook ignored");
            ("ignored", StatusCode::ACCEPTED, reason)
        }
        Verdict::Ping => {
            tracing::info!("webhook ping answered");
            ("ignored", StatusCode::OK, "pong".to_owned())
        }
        Verdict::Unauthorized => {
            tracing::info!("webhook refused: missing or wrong signature or token");
            ("unauthorized", StatusCode::UNAUTHORIZED, "unauthorized".to_owned())
        }
        Verdict::BadRequest(reason) => {
            tracing::info!(%reason, "webhook refused: bad request");
            ("bad_request", StatusCode::BAD_REQUEST, reason)
        }
    }
}

async fn suspend(State(state): State<HttpState>, headers: HeaderMap, body: Bytes) -> (StatusCode, String) {
    let reason = String::from_utf8_lossy(&body).into_owned();
    control(&state, &headers, "/suspend", Some(reason), body).await
}

async fn resume(State(state): State<HttpState>, headers: HeaderMap, body: Bytes) -> (StatusCode, String) {
    control(&state, &headers, "/resume", None, body).await
}

/// Suspends or resumes here, or hands the request to the leader; a
/// follower never acts on a forwarded request (409, naming the leader).
async fn control(
    state: &HttpState,
    headers: &HeaderMap,
    path: &str,
    reason: Option<String>,
    body: Bytes,
) -> (StatusCode, String) {
    let Some(token) = &state.control else {
        let message = "suspend and resume are off: start winfleet run with --control-token-file";
        return (StatusCode::FORBIDDEN, message.to_owned());
    };
    if !token.admits(headers) {
        tracing::warn!(path, "control request refused: missing or wrong bearer token");
        return (StatusCode::UNAUTHORIZED, "unauthorized".to_owned());
    }
    if let Some(forwarder) = &state.forward {
        match forwarder.route(headers) {
            Route::Here => {}
            Route::NoLeader => {
                return (StatusCode::SERVICE_UNAVAILABLE, "no leader is known yet; try again".to_owned());
            }
            Route::NotLeading(leader) => {
                tracing::warn!(
                    path,
                    leader = leader.as_deref().unwrap_or("unknown"),
                    "forwarded control request refused: this replica does not lead"
                );
                return (StatusCode::CONFLICT, Route::not_leading_message(leader.as_deref()));
            }
            Route::Leader(url) => {
                return match forwarder.forward(&url, path, headers, body).await {
                    Ok(answer) => (StatusCode::OK, answer),
                    Err(e) => (StatusCode::BAD_GATEWAY, format!("{e}; try again")),
                };
            }
        }
    }
    let changed = state.suspension.set(reason.as_deref());
    match state.suspension.reason() {
        Some(reason) => {
            if changed {
                tracing::warn!(%reason, "suspended: rounds observe and report, and change nothing");
            }
            (StatusCode::OK, format!("suspended: {reason}"))
        }
        None => {
            if changed {
                tracing::warn!("resumed: the revision in force is applied now");
                let _ = state.triggers.send(Trigger::Resumed);
            }
            (StatusCode::OK, "resumed".to_owned())
        }
    }
}
