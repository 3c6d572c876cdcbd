//! `?watch=true`: newline-delimited JSON watch events.
//!
//! - resourceVersion absent or "0": an ADDED event for every matching
//!   object first, then live events (`sendInitialEvents=true` also sends a
//!   BOOKMARK annotated `k8s.io/initial-events-end` after them, which is what
//!   kube's streaming-list watcher waits for);
//! - resourceVersion N: the logged events after N are replayed first; N
//!   older than the log (last 1000 events) → one ERROR event carrying a 410
//!   Expired Status, then the stream ends;
//! - selectors filter like the real cache: a MODIFIED object that starts
//!   matching is sent as ADDED, one that stops matching as DELETED;
//! - `timeoutSeconds` ends the stream (tokio time, so paused clocks work);
//!   `ApiServer::drop_watches` ends every open stream at once, as an API
//!   server restart or a broken connection would;
//!   a watcher falling more than 1000 events behind gets 410 and the end.
//!
//! Periodic bookmarks are not sent.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::time::Instant;

use super::resources::Resource;
use super::selectors::Selector;
use super::status::{ApiError, bad_request, gone};
use super::store::{Event, State};

/// What one watch sends.
pub(crate) struct WatchSpec {
    pub res: &'static Resource,
    pub namespace: Option<String>,
    pub selector: Selector,
    pub resource_version: Option<String>,
    pub timeout: Option<Duration>,
    pub bookmarks: bool,
    pub send_initial_events: bool,
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut s = json!({ "type": kind, "object": object }).to_string();
    s.push('\n');
    Bytes::from(s)
}

impl WatchSpec {
    fn in_scope(&self, obj: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| obj.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns))
    }

    /// The line this watch sends for an event, if any.
    fn render(&self, ev: &Event) -> Option<Bytes> {
        if ev.res != self.res.key() || !self.in_scope(&ev.object) {
            return None;
        }
        let now = self.selector.matches(&ev.object);
        let before = ev.old.as_ref().map(|o| self.selector.matches(o));
        let kind = match (ev.kind, before, now) {
            ("MODIFIED", Some(true), true) => "MODIFIED",
            ("MODIFIED", Some(false), true) => "ADDED",
            ("MODIFIED", Some(true), false) => "DELETED",
            ("MODIFIED", _, _) => return None,
            (kind, _, true) => kind,
            _ => return None,
        };
        Some(line(kind, &ev.object))
    }
}

fn expired(rv: &str, oldest: u64) -> Bytes {
    let status = gone(format!("too old resource version: {rv} ({oldest})")).body();
    line("ERROR", &status)
}

struct Stream {
    spec: WatchSpec,
    queue: VecDeque<Bytes>,
    rx: broadcast::Receiver<Arc<Event>>,
    deadline: Option<Instant>,
    done: bool,
    /// Changes when the server drops every watch.
    drops: tokio::sync::watch::Receiver<u64>,
}

/// Starts a watch: computes the initial events under the lock and
/// subscribes before releasing it, so nothing is missed or duplicated.
pub(crate) fn start(st: &State, spec: WatchSpec) -> Result<Body, ApiError> {
    let mut queue = VecDeque::new();
    let mut done = false;
    let from = spec.resource_version.as_deref().filter(|rv| !rv.is_empty() && *rv != "0");
    match from {
        None => {
            for obj in st.iter(spec.res, spec.namespace.as_deref()).filter(|o| spec.selector.matches(o)) {
                queue.push_back(line("ADDED", obj));
            }
            if spec.send_initial_events && spec.bookmarks {
                let bookmark = json!({
                    "apiVersion": spec.res.api_version(),
                    "kind": spec.res.kind,
                    "metadata": {
                        "resourceVersion": st.rv.to_string(),
                        "annotations": { "k8s.io/initial-events-end": "true" },
                    },
                });
                queue.push_back(line("BOOKMARK", &bookmark));
            }
        }
        Some(rv) => {
            let n: u64 = rv.parse().map_err(|_| bad_request(format!("invalid resource version: {rv}")))?;
            if n < st.log_floor {
                queue.push_back(expired(rv, st.log_floor + 1));
                done = true;
            } else {
                queue.extend(st.log.iter().filter(|e| e.rv > n).filter_map(|e| spec.render(e)));
            }
        }
    }
    let deadline = spec.timeout.map(|t| Instant::now() + t);
    let stream = Stream { spec, queue, rx: st.tx.subscribe(), deadline, done, drops: st.drops.subscribe() };
    let body = futures::stream::unfold(stream, |mut s| async move {
        loop {
            if let Some(b) = s.queue.pop_front() {
                return Some((Ok::<_, std::convert::Infallible>(b), s));
            }
            if s.done {
                return None;
            }
            let deadline = async {
                match s.deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            // A drop comes first: events committed after it belong to
            // the watch that reconnects.
            let received = tokio::select! {
                biased;
                _ = s.drops.changed() => return None,
                () = deadline => return None,
                r = s.rx.recv() => r,
            };
            match received {
                Ok(ev) => {
                    if let Some(b) = s.spec.render(&ev) {
                        s.queue.push_back(b);
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    s.queue.push_back(expired("(lagged)", 0));
                    s.done = true;
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Ok(Body::from_stream(body))
}
