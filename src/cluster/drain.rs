//! Draining a cordoned node through the Eviction API, so that
//! PodDisruptionBudgets are honoured: DaemonSet pods, mirror pods and
//! finished pods stay; a blocked eviction (429) is retried and reported until
//! the drain timeout; an evicted pod counts as gone when the API no longer
//! has it.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, EvictParams, ListParams};
use tokio::time::Instant;

use super::apply::api_error;
use super::events::{Events, Reason, Regarding};
use crate::progress::{self, Phase};

/// How a drain runs.
#[derive(Clone, Copy, Debug)]
pub struct DrainOptions {
    /// Give up after this long.
    pub timeout: Duration,
    /// Wait between attempts while pods remain.
    pub retry: Duration,
}

/// Whether a pod is left on the node by a drain.
fn stays(pod: &Pod) -> bool {
    let daemon_set = pod
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|o| o.iter().any(|o| o.kind == "DaemonSet" && o.controller == Some(true)));
    let mirror = pod.metadata.annotations.as_ref().is_some_and(|a| a.contains_key("kubernetes.io/config.mirror"));
    let finished =
        pod.status.as_ref().and_then(|s| s.phase.as_deref()).is_some_and(|p| p == "Succeeded" || p == "Failed");
    daemon_set || mirror || finished
}

fn pod_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

fn pod_reference(pod: &Pod) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    }
}

/// Why an eviction was refused with 429, in a sentence: the
/// PodDisruptionBudget's own words when the API server gives them (the
/// `DisruptionBudget` cause, "The disruption budget db needs 2 healthy pods
/// and has 2 currently", which names the budget and its numbers; the
/// message alone, "Cannot evict pod as it would violate the pod's
/// disruption budget.", names neither), else the message. Pure.
fn blocked_reason(pod: &str, status: &kube::core::Status) -> String {
    let causes = status.details.as_ref().map(|d| d.causes.as_slice()).unwrap_or_default();
    match causes.iter().find(|c| c.reason == "DisruptionBudget" && !c.message.is_empty()) {
        Some(cause) => format!("eviction of pod {pod} is blocked by its PodDisruptionBudget: {}", cause.message),
        None => format!("eviction of pod {pod} is blocked: {}", status.message.trim_end_matches('.')),
    }
}

/// Evicts every pod that must leave `node`; returns how many were evicted.
pub async fn drain(
    client: &Client,
    events: &Events,
    node: (&str, &str),
    options: DrainOptions,
) -> Result<usize, String> {
    let (name, uid) = node;
    let deadline = Instant::now() + options.timeout;
    let on_node = ListParams::default().fields(&format!("spec.nodeName={name}"));
    let all: Api<Pod> = Api::all(client.clone());
    let mut evicted: BTreeSet<String> = BTreeSet::new();
    let mut reported_blocked: BTreeSet<String> = BTreeSet::new();
    // The pod last said to be waited for: progress names each pod once.
    let mut waiting_for = String::new();
    progress::step(name, Phase::Drain, "draining");
    loop {
        let pods = match all.list(&on_node).await {
            Ok(pods) => pods.items,
            // The API server restarting or overloaded: try again until the deadline.
            Err(kube::Error::Api(e)) if e.code >= 500 && Instant::now() < deadline => {
                tokio::time::sleep(options.retry).await;
                continue;
            }
            Err(e) => return Err(format!("cannot list the node's pods: {}", api_error(&e))),
        };
        let remaining: Vec<&Pod> = pods.iter().filter(|p| !stays(p)).collect();
        if remaining.is_empty() {
            progress::step(name, Phase::Drain, &format!("drained: {} pod(s) evicted", evicted.len()));
            return Ok(evicted.len());
        }
        if let Some(first) = remaining.first().map(|p| pod_name(p))
            && first != waiting_for
        {
            let others = remaining.len() - 1;
            let more = if others > 0 { format!(" and {others} other pod(s)") } else { String::new() };
            progress::step(name, Phase::Drain, &format!("waiting for pod {first}{more} to leave"));
            waiting_for = first;
        }
        let mut blocked = Vec::new();
        for pod in &remaining {
            let pod_uid = pod.metadata.uid.clone().unwrap_or_default();
            if evicted.contains(&pod_uid) || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
            let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
            match api
                .evict(
                    pod.metadata.name.as_deref().unwrap_or_default(),
                    &EvictParams { post_options: crate::cluster::post_params(), ..EvictParams::default() },
                )
                .await
            {
                Ok(_) => {
                    evicted.insert(pod_uid);
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(kube::Error::Api(e)) if e.code == 429 => {
                    let why = blocked_reason(&pod_name(pod), &e);
                    if reported_blocked.insert(pod_uid) {
                        progress::step(name, Phase::Drain, &format!("{why}; retrying"));
                        let (regarding, pod_ref) = (Regarding::Node(name, uid), Some(pod_reference(pod)));
                        events
                            .publish_about(regarding, pod_ref, Reason::DrainBlocked, format!("{why}; retrying"))
                            .await;
                    }
                    blocked.push(why);
                }
                Err(kube::Error::Api(e)) if e.code == 503 || e.code == 504 => {
                    blocked.push(format!("eviction of pod {}: {}", pod_name(pod), e.message));
                }
                Err(e) => return Err(format!("cannot evict pod {}: {}", pod_name(pod), api_error(&e))),
            }
        }
        if Instant::now() >= deadline {
            let left: Vec<String> = remaining.iter().map(|p| pod_name(p)).collect();
            let mut reason = format!(
                "drain timed out after {}s with {} pod(s) left: {}",
                options.timeout.as_secs(),
                left.len(),
                left.join(", ")
            );
            if let Some(first) = blocked.first() {
                reason.push_str(&format!(" ({first})"));
            }
            return Err(reason);
        }
        tokio::time::sleep(
            options.retry.min(deadline.saturating_duration_since(Instant::now())).max(Duration::from_millis(1)),
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(message: &str, causes: serde_json::Value) -> kube::core::Status {
        serde_json::from_value(serde_json::json!({
            "code": 429, "reason": "TooManyRequests", "message": message, "details": { "causes": causes },
        }))
        .expect("a Status")
    }

    #[test]
    fn a_blocked_eviction_names_the_budget_and_its_numbers_when_the_server_says_them() {
        let refused = status(
            "Cannot evict pod as it would violate the pod's disruption budget.",
            serde_json::json!([{ "reason": "DisruptionBudget",
                "message": "The disruption budget db needs 2 healthy pods and has 2 currently" }]),
        );
        assert_eq!(
            blocked_reason("apps/db-0", &refused),
            "eviction of pod apps/db-0 is blocked by its PodDisruptionBudget: \
             The disruption budget db needs 2 healthy pods and has 2 currently"
        );
    }

    #[test]
    fn a_blocked_eviction_without_a_budget_cause_says_the_servers_message() {
        let busy = status("Too many requests, please try again later.", serde_json::json!([]));
        assert_eq!(
            blocked_reason("apps/db-0", &busy),
            "eviction of pod apps/db-0 is blocked: Too many requests, please try again later"
        );
    }
}
