//! The wait for a Ready Node that joins, upgrades and safe reboots share:
//! the Ready condition True with a heartbeat newer than a given moment
//! (the services' start, the reboot), polled within a timeout.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use tokio::time::Instant;

use super::apply::api_error;
use crate::progress::{self, Phase};

/// Waits until the Node is Ready with a heartbeat newer than `since`,
/// for `timeout`, looking every `poll`.
pub async fn ready(
    nodes: &Api<Node>,
    name: &str,
    since: jiff::Timestamp,
    (timeout, poll): (Duration, Duration),
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    progress::step(name, Phase::WaitReady, "waiting for a Ready Node");
    loop {
        let last = match nodes.get_opt(name).await {
            Ok(Some(node)) => match ready_heartbeat(&node) {
                Some((true, Some(beat))) if beat > since => return Ok(()),
                Some((true, _)) => "Ready, but no heartbeat since its services started".to_owned(),
                Some((false, _)) => "not Ready".to_owned(),
                None => "no Ready condition".to_owned(),
            },
            Ok(None) => format!("Node {name} is gone"),
            Err(e) => format!("cannot read Node {name}: {}", api_error(&e)),
        };
        if Instant::now() >= deadline {
            return Err(format!("the Node was not Ready within {}s: {last}", timeout.as_secs()));
        }
        tokio::time::sleep(poll).await;
    }
}

/// The Ready condition: whether True, and its last heartbeat.
pub fn ready_heartbeat(node: &Node) -> Option<(bool, Option<jiff::Timestamp>)> {
    let condition = node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")?;
    let beat = condition.last_heartbeat_time.as_ref().map(|t| t.0);
    Some((condition.status == "True", beat))
}
