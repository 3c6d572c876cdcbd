//! The cluster watch: a Windows Node, or a Windows Machine that appears
//! or changes phase once it is `Provisioned` or `Running` with an address
//! (issue 26: a Provisioned Machine is configured by winfleet, so it must
//! not wait for a drift check), that was not there before becomes a
//! [`Trigger::ClusterChange`] carrying its addresses, so the daemon
//! reconciles that node at once instead of at the next drift check. A new
//! pending kubelet CSR becomes a change without addresses (a whole-fleet
//! round: which instance it is for is known only from the host names the
//! round observes), so a joining host's CSR is approved at once.

use std::collections::BTreeSet;

use futures::{Stream, StreamExt};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::cluster::MACHINE_API_NAMESPACE;
use crate::cluster::csr::{CLIENT_SIGNER, SERVING_SIGNER};
use crate::cluster::observe::{WINDOWS_MACHINES, WINDOWS_NODES, machine_resource};
use crate::daemon::triggers::{Trigger, TriggerSender};

/// Watches Windows Nodes and Machines until `shutdown`.
pub async fn run(client: Client, triggers: TriggerSender, shutdown: CancellationToken) {
    let nodes: Api<Node> = Api::all(client.clone());
    let client_for_csrs = client.clone();
    let machines: Api<DynamicObject> = Api::namespaced_with(client, MACHINE_API_NAMESPACE, &machine_resource());
    let node_events = watcher::watcher(nodes, watcher::Config::default().labels(WINDOWS_NODES))
        .default_backoff()
        .map(|e| e.map(|e| summarize(e, |n: Node| (n.name_any(), node_addresses(&n)))));
    let machine_events = watcher::watcher(machines, watcher::Config::default().labels(WINDOWS_MACHINES))
        .default_backoff()
        .map(|e| e.map(|e| summarize(e, machine_summary)));
    let csrs: Api<CertificateSigningRequest> = Api::all(client_for_csrs);
    let csr_events = watcher::watcher(csrs, watcher::Config::default())
        .default_backoff()
        .map(|e| e.map(|e| summarize(e, |c: CertificateSigningRequest| (c.name_any(), pending_kubelet_csr(&c)))));
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = forward("Node", node_events, &triggers, |a| a) => {}
        () = forward("Machine", machine_events, &triggers, |a| a) => {}
        () = forward("CSR", csr_events, &triggers, |_| Vec::new()) => {}
    }
}

/// A pending CSR of a kubelet signer: its signer (as the "address" that
/// marks it new); nothing otherwise.
fn pending_kubelet_csr(csr: &CertificateSigningRequest) -> Vec<String> {
    let decided = csr.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| !c.is_empty());
    let kubelet = [CLIENT_SIGNER, SERVING_SIGNER].contains(&csr.spec.signer_name.as_str());
    if kubelet && !decided { vec![csr.spec.signer_name.clone()] } else { Vec::new() }
}

/// Sends a trigger for every object that newly has addresses; the initial
/// listing (and every re-listing) only records what exists.
async fn forward<S>(kind: &str, events: S, triggers: &TriggerSender, to_addresses: impl Fn(Vec<String>) -> Vec<String>)
where
    S: Stream<Item = Result<Event<(String, Vec<String>)>, watcher::Error>>,
{
    let mut known = Known::default();
    futures::pin_mut!(events);
    while let Some(event) = events.next().await {
        match event {
            Ok(event) => {
                if let Some(addresses) = known.event(event) {
                    tracing::info!(kind, addresses = ?addresses, "a new Windows {kind} appeared; reconciling it");
                    let addresses = to_addresses(addresses);
                    if triggers.send(Trigger::ClusterChange { addresses }).is_err() {
                        return;
                    }
                }
            }
            // The watcher backs off and resumes by itself; a cluster without
            // the Machine API (not OpenShift) keeps answering 404 here.
            Err(e) => tracing::debug!(kind, error = %e, "watch interrupted"),
        }
    }
}

/// Names of objects that have addresses, across (re)listings.
#[derive(Debug, Default)]
struct Known {
    ready: BTreeSet<String>,
    listing: Option<Vec<(String, Vec<String>)>>,
    /// The first listing is done: a later one is a relisting, after a
    /// watch the server ended with 410 Gone (its resourceVersion too old,
    /// as after a kube-apiserver restart), and what it shows that was not
    /// known appeared while the watch was down.
    listed: bool,
}

impl Known {
    /// The addresses to reconcile, when this event shows a new object.
    fn event(&mut self, event: Event<(String, Vec<String>)>) -> Option<Vec<String>> {
        match event {
            Event::Init => {
                self.listing = Some(Vec::new());
                None
            }
            Event::InitApply((name, addresses)) => {
                if !addresses.is_empty()
                    && let Some(listing) = &mut self.listing
                {
                    listing.push((name, addresses));
                }
                None
            }
            Event::InitDone => {
                let listing = self.listing.take()?;
                let relisting = std::mem::replace(&mut self.listed, true);
                let new: Vec<String> = listing
                    .iter()
                    .filter(|(name, _)| relisting && !self.ready.contains(name))
                    .flat_map(|(_, addresses)| addresses.iter().cloned())
                    .collect();
                self.ready = listing.into_iter().map(|(name, _)| name).collect();
                (!new.is_empty()).then_some(new)
            }
            Event::Apply((name, addresses)) => (!addresses.is_empty() && self.ready.insert(name)).then_some(addresses),
            Event::Delete((name, _)) => {
                self.ready.remove(&name);
                None
            }
        }
    }
}

/// An event with each object reduced to its name and addresses.
fn summarize<K>(event: Event<K>, f: impl Fn(K) -> (String, Vec<String>)) -> Event<(String, Vec<String>)> {
    match event {
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(f(o)),
        Event::InitDone => Event::InitDone,
        Event::Apply(o) => Event::Apply(f(o)),
        Event::Delete(o) => Event::Delete(f(o)),
    }
}

fn node_addresses(node: &Node) -> Vec<String> {
    let addresses = node.status.as_ref().and_then(|s| s.addresses.as_ref());
    addresses.into_iter().flatten().map(|a| a.address.to_ascii_lowercase()).collect()
}

/// A Machine as its name and phase (so that a phase change reads as a new
/// object) and its addresses once it is Provisioned or Running (before
/// that there is nothing to reach over SSH; a Machine being deleted is not
/// reconciled).
fn machine_summary(machine: DynamicObject) -> (String, Vec<String>) {
    let phase = machine.data.pointer("/status/phase").and_then(|p| p.as_str()).unwrap_or_default();
    let deleting = machine.metadata.deletion_timestamp.is_some();
    let reachable = matches!(phase, "Provisioned" | "Running") && !deleting;
    let addresses = machine.data.pointer("/status/addresses").and_then(|a| a.as_array());
    let addresses = match (reachable, addresses) {
        (true, Some(list)) => {
            list.iter().filter_map(|a| a.get("address").and_then(|v| v.as_str())).map(str::to_ascii_lowercase).collect()
        }
        _ => Vec::new(),
    };
    (format!("{}/{phase}", machine.name_any()), addresses)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str, addresses: &[&str]) -> (String, Vec<String>) {
        (name.to_owned(), addresses.iter().map(|a| (*a).to_owned()).collect())
    }

    #[test]
    fn only_objects_new_since_the_listing_trigger() {
        let mut known = Known::default();
        assert_eq!(known.event(Event::Init), None);
        assert_eq!(known.event(Event::InitApply(obj("win-1", &["10.0.0.1"]))), None);
        assert_eq!(known.event(Event::InitDone), None);
        assert_eq!(known.event(Event::Apply(obj("win-1", &["10.0.0.1"]))), None, "an update of a known Node");
        assert_eq!(known.event(Event::Apply(obj("win-2", &[]))), None, "no address yet");
        assert_eq!(known.event(Event::Apply(obj("win-2", &["10.0.0.2"]))), Some(vec!["10.0.0.2".to_owned()]));
        assert_eq!(known.event(Event::Apply(obj("win-2", &["10.0.0.2"]))), None, "only once");
        known.event(Event::Delete(obj("win-2", &[])));
        assert_eq!(known.event(Event::Apply(obj("win-2", &["10.0.0.2"]))), Some(vec!["10.0.0.2".to_owned()]));
    }

    #[test]
    fn a_relisting_triggers_for_what_appeared_while_the_watch_was_down() {
        // Issue 24, item 7: after 410 Gone the watcher lists again; a Node
        // added meanwhile is only in that listing, never in a watch event.
        let mut known = Known::default();
        known.event(Event::Init);
        known.event(Event::InitApply(obj("win-1", &["10.0.0.1"])));
        assert_eq!(known.event(Event::InitDone), None, "the first listing triggers nothing");
        known.event(Event::Init);
        known.event(Event::InitApply(obj("win-1", &["10.0.0.1"])));
        known.event(Event::InitApply(obj("win-3", &["10.0.0.3"])));
        known.event(Event::InitApply(obj("win-4", &[])));
        assert_eq!(known.event(Event::InitDone), Some(vec!["10.0.0.3".to_owned()]));
        assert_eq!(known.event(Event::Apply(obj("win-3", &["10.0.0.3"]))), None, "only once");
        assert_eq!(known.event(Event::Apply(obj("win-4", &["10.0.0.4"]))), Some(vec!["10.0.0.4".to_owned()]));
    }

    fn machine(phase: &str, deleting: bool) -> DynamicObject {
        let mut object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
            "metadata": { "name": "win-a" },
            "status": { "phase": phase, "addresses": [{ "type": "InternalIP", "address": "10.0.0.9" }] },
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        if deleting {
            object.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH));
        }
        object
    }

    #[test]
    fn a_machine_triggers_when_provisioned_and_again_when_running_never_while_deleting() {
        let mut known = Known::default();
        known.event(Event::Init);
        known.event(Event::InitDone);
        assert_eq!(known.event(Event::Apply(machine_summary(machine("Provisioning", false)))), None, "no VM yet");
        let address = Some(vec!["10.0.0.9".to_owned()]);
        assert_eq!(known.event(Event::Apply(machine_summary(machine("Provisioned", false)))), address);
        assert_eq!(known.event(Event::Apply(machine_summary(machine("Provisioned", false)))), None, "only once");
        assert_eq!(known.event(Event::Apply(machine_summary(machine("Running", false)))), address, "a new phase");
        assert_eq!(known.event(Event::Apply(machine_summary(machine("Deleting", true)))), None);
    }

    #[test]
    fn a_relisting_does_not_trigger_for_what_exists() {
        let mut known = Known::default();
        known.event(Event::Init);
        known.event(Event::InitDone);
        known.event(Event::Init);
        known.event(Event::InitApply(obj("win-1", &["10.0.0.1"])));
        known.event(Event::InitDone);
        assert_eq!(known.event(Event::Apply(obj("win-1", &["10.0.0.1"]))), None);
    }
}
