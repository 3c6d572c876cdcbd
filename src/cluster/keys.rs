//! Key rotation: the fleet's SSH key changed (the `--ssh-key` file or the
//! mounted Secret was replaced), so Nodes carry WMCO's `pub-key-hash` of
//! the old key.
//!
//! - A BYOH host that accepted the new key this round gets the annotation
//!   updated.
//! - One that refused it is reported with what to do ("add this public key
//!   to the host": the authorized_keys line and its fingerprint, never the
//!   private key) and left running.
//! - A Machine-backed node is replaced (its Machine deleted; its MachineSet
//!   creates a new one that joins with the new key), one disruption slot
//!   at a time, each replacement a Ready node before the next goes; a
//!   replacement that fails stops the rotation and says why
//!   ([`machines`]). Only Machines of MachineSets winfleet
//!   manages: winfleet never deletes a Machine whose MachineSet something
//!   else owns (it says so instead).
//!
//! [`plan`] is pure; [`apply`] writes it.

pub mod machines;

use std::collections::{BTreeMap, BTreeSet};

use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use serde::Serialize;
use serde_json::json;

use super::apply::api_error;
use super::associate::Association;
use super::cordon::patch;
use super::events::{Events, Reason, Regarding};
use super::join::PUB_KEY_HASH_ANNOTATION;
use super::{ClusterFacts, MACHINE_API_NAMESPACE, NodeObs};
use crate::desired::model::Instance;
use crate::engine::report::{NodeReport, NodeResult};
use crate::render::user_data::{FINGERPRINT_ANNOTATION, SECRET_NAME};

/// The fleet's key, as Nodes and administrators see it.
#[derive(Clone, Debug)]
pub struct FleetKey {
    /// WMCO's `pub-key-hash`.
    pub hash: String,
    /// The authorized_keys line (`<type> <base64>`).
    pub authorized_key: String,
    /// `SHA256:…`.
    pub fingerprint: String,
}

/// One node's key rotation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyReport {
    /// Node name.
    pub node: String,
    /// The instance address, or the Machine's name.
    pub address: String,
    /// What happens.
    #[serde(flatten)]
    pub result: KeyResult,
}

/// What key rotation does to one node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum KeyResult {
    /// The host accepted the new key: the annotation is (or, in a dry run,
    /// would be) updated.
    HashUpdated {
        /// Written (false in a dry run).
        done: bool,
    },
    /// The host refuses the new key: an administrator adds it.
    KeyRejected {
        /// The line to add to the host's authorized_keys.
        authorized_key: String,
        /// Its fingerprint.
        fingerprint: String,
    },
    /// The Machine is (or would be) deleted for its MachineSet to replace.
    MachineReplaced {
        /// The Machine.
        machine: String,
        /// Deleted (false in a dry run).
        done: bool,
    },
    /// The Machine waits for a later round.
    MachineWaiting {
        /// The Machine.
        machine: String,
        /// Why.
        reason: String,
    },
    /// The rotation over the Machine's MachineSet stopped: a replacement
    /// did not become a Ready node (its configure or join failed); the
    /// Machine is not deleted until it does.
    RotationStopped {
        /// The Machine that keeps the old key.
        machine: String,
        /// Its MachineSet.
        machine_set: String,
        /// The replacement that is not a Ready node.
        blocker: String,
        /// Why.
        reason: String,
        /// The stop is new this round: an Event says so (once).
        #[serde(skip)]
        announce: bool,
    },
    /// Writing failed.
    Failed {
        /// Why.
        reason: String,
    },
}

/// What the rotation acts on.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// Listed BYOH instances.
    pub byoh: &'a [&'a Instance],
    /// This round's node reports.
    pub reports: &'a [NodeReport],
    /// The cluster.
    pub facts: &'a ClusterFacts,
    /// Instance address → Node.
    pub associations: &'a BTreeMap<String, Association>,
    /// Why the `windows-user-data` Secret may not authorize the fleet's key
    /// (its write failed): no Machine is replaced.
    pub user_data_error: Option<&'a str>,
    /// Disruptions allowed at once.
    pub max_unavailable: usize,
}

/// Whether `node` trusts an older fleet key than the one whose hash is
/// `key_hash` (its `pub-key-hash` annotation differs; a Node without one
/// trusts none winfleet knows of).
pub fn trusts_older_key(node: &NodeObs, key_hash: &str) -> bool {
    node.annotations.get(PUB_KEY_HASH_ANNOTATION).is_some_and(|h| h != key_hash)
}

/// The rotation's plan: Machine replacements first (they take longest),
/// then BYOH hosts.
pub fn plan(inputs: Inputs<'_>, key: &FleetKey) -> Vec<KeyReport> {
    let stale = |n: &NodeObs| trusts_older_key(n, &key.hash);
    let mut out = machines::plan(inputs, &stale);
    for instance in inputs.byoh {
        let Some(node) = inputs
            .associations
            .get(&instance.address)
            .and_then(Association::node)
            .and_then(|n| inputs.facts.nodes.get(n))
        else {
            continue;
        };
        if !stale(node) {
            continue;
        }
        let Some(report) = inputs.reports.iter().find(|r| r.address == instance.address) else { continue };
        let result = match &report.result {
            NodeResult::Done { .. } => KeyResult::HashUpdated { done: false },
            NodeResult::Failed { reason, .. } if crate::ssh::is_auth_refusal(reason) => KeyResult::KeyRejected {
                authorized_key: key.authorized_key.clone(),
                fingerprint: key.fingerprint.clone(),
            },
            _ => continue,
        };
        out.push(KeyReport { node: node.name.clone(), address: instance.address.clone(), result });
    }
    // Replacements first: they take longest.
    out.sort_by_key(|k| !matches!(k.result, KeyResult::MachineReplaced { .. }));
    out
}

/// Why the `windows-user-data` Secret does not authorize the key with
/// `fingerprint` (as its annotation records), read from the API; `None`
/// when it does. Machines are replaced only once it does.
pub async fn user_data_gap(client: &Client, fingerprint: &str) -> Option<String> {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), MACHINE_API_NAMESPACE);
    match secrets.get_opt(SECRET_NAME).await {
        Ok(Some(secret)) => {
            let has = secret.metadata.annotations.as_ref().and_then(|a| a.get(FINGERPRINT_ANNOTATION));
            (has.map(String::as_str) != Some(fingerprint))
                .then(|| format!("it authorizes {}", has.map_or("another key", String::as_str)))
        }
        Ok(None) => Some("it does not exist".into()),
        Err(e) => Some(format!("cannot read it: {}", api_error(&e))),
    }
}

/// Writes the plan: annotations updated, Machines deleted, Events for
/// every change and every refusal.
pub async fn apply(
    client: &Client,
    events: &Events,
    facts: &ClusterFacts,
    key: &FleetKey,
    plan: Vec<KeyReport>,
) -> Vec<KeyReport> {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let gvk = GroupVersionKind::gvk("machine.openshift.io", "v1beta1", "Machine");
    let machines: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), MACHINE_API_NAMESPACE, &ApiResource::from_gvk(&gvk));
    let mut out = Vec::new();
    let mut announced = BTreeSet::new();
    for mut report in plan {
        let uid = facts.nodes.get(&report.node).map(|n| n.uid.clone()).unwrap_or_default();
        let regarding = Regarding::Node(&report.node, &uid);
        report.result = match report.result {
            KeyResult::HashUpdated { .. } => {
                let body = json!({ "metadata": { "annotations": { PUB_KEY_HASH_ANNOTATION: key.hash } } });
                match patch(&nodes, &report.node, &body).await {
                    Ok(_) => {
                        let note = format!("the host accepts the fleet's new SSH key {}", key.fingerprint);
                        events.publish(regarding, Reason::PublicKeyUpdated, note).await;
                        KeyResult::HashUpdated { done: true }
                    }
                    Err(e) => KeyResult::Failed { reason: format!("cannot update {PUB_KEY_HASH_ANNOTATION}: {e}") },
                }
            }
            KeyResult::KeyRejected { authorized_key, fingerprint } => {
                let note = format!(
                    "the host refuses the fleet's new SSH key: add this public key to {}'s authorized_keys: \
                     {authorized_key} ({fingerprint}); the node is left running",
                    report.address
                );
                events.publish(regarding, Reason::PublicKeyRejected, note).await;
                KeyResult::KeyRejected { authorized_key, fingerprint }
            }
            KeyResult::MachineReplaced { machine, .. } => {
                match machines.delete(&machine, &DeleteParams::default()).await {
                    Ok(_) => {
                        let note = format!(
                            "Machine {machine} deleted: its Node trusts an older fleet SSH key; its MachineSet \
                             replaces it"
                        );
                        events.publish(regarding, Reason::MachineReplaced, note).await;
                        KeyResult::MachineReplaced { machine, done: true }
                    }
                    Err(e) => {
                        KeyResult::Failed { reason: format!("cannot delete Machine {machine}: {}", api_error(&e)) }
                    }
                }
            }
            KeyResult::RotationStopped { machine, machine_set, blocker, reason, announce } => {
                if announce && announced.insert(machine_set.clone()) {
                    let uid = facts.machine_sets.get(&machine_set).and_then(|o| o.pointer("/metadata/uid"));
                    let note = format!(
                        "key rotation stopped: Machine {blocker}, a replacement, did not become a Ready node: \
                         {reason}; Machine {machine} keeps the old key and is not deleted until it is (look at \
                         {blocker}'s VM, or delete {blocker} for the MachineSet to replace it)"
                    );
                    let regarding = Regarding::MachineSet(&machine_set, uid.and_then(|u| u.as_str()).unwrap_or(""));
                    events.publish(regarding, Reason::KeyRotationStopped, note).await;
                }
                KeyResult::RotationStopped { machine, machine_set, blocker, reason, announce }
            }
            other => other,
        };
        out.push(report);
    }
    out
}
