//! The cluster side: Nodes, MachineSets and safe reboots through the
//! Kubernetes API (docs/cluster.md; WMCO-SPEC, docs/wmco-spec.md, 3, 4 and 6).
//!
//! Pure planning sits beside a thin IO shell, as for nodes:
//! - [`connect`]: the `kube::Client` from a kubeconfig or the pod's service
//!   account, or SSH-only mode when no cluster is configured.
//! - [`observe`]: read-only snapshot of the Windows Nodes, MachineSets,
//!   Machines and the cluster Proxy ([`ClusterFacts`]).
//! - [`associate`]: instance ↔ Node by exact IPv4 match (WMCO's rule).
//! - [`metadata`] and [`machinesets`]: the pure cluster plan.
//! - [`fault`]: a failed API request's class and plain sentence (verb,
//!   object), the one place API errors become words.
//! - [`apply`]: the whole plan sent with `dryRun=All` first, then written,
//!   with an Event per change and failure ([`events`]).
//! - [`monitoring`]: the Service, Endpoints and ServiceMonitor for the
//!   Windows nodes' windows_exporter, as WMCO's metric controller kept them.
//! - [`pull_secret`]: the registry credentials from `openshift-config/pull-secret`,
//!   read every round.
//! - [`drain`] and [`rollout`]: cordon, drain through the Eviction API,
//!   reboot over SSH, wait, uncordon; at most `maxUnavailable` at a time.

pub mod apply;
pub mod approve;
pub mod associate;
pub mod connect;
pub mod cordon;
pub mod csr;
pub mod deconfigure;
pub mod disagree;
pub mod drain;
pub mod events;
pub mod fault;
pub mod health_checks;
pub mod host_key;
pub mod join;
pub mod keys;
pub mod machine_config;
pub mod machine_failures;
pub mod machinesets;
pub mod material;
pub mod metadata;
pub mod monitoring;
pub mod network;
pub mod node_manager;
pub mod observe;
pub mod prerequisites;
pub mod pull_secret;
pub mod ready;
pub mod replan;
pub mod rollout;
pub mod slots;
pub mod sources;
pub mod trusted_ca;
pub mod upgrade;
pub mod user_data;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use serde_json::Value;

use crate::vocab::platform::Platform;

/// The field manager of every winfleet write.
pub const FIELD_MANAGER: &str = "winfleet";

/// Patch options naming winfleet as the field manager (a merge patch that
/// names none is recorded under the manager the API server derives from the
/// User-Agent).
pub fn patch_params() -> kube::api::PatchParams {
    kube::api::PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..kube::api::PatchParams::default() }
}

/// Create and replace options naming winfleet as the field manager.
pub fn post_params() -> kube::api::PostParams {
    kube::api::PostParams { field_manager: Some(FIELD_MANAGER.into()), ..kube::api::PostParams::default() }
}
/// The label on every object winfleet creates; only such objects are pruned.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "winfleet");
/// Namespace of Machine API objects.
pub const MACHINE_API_NAMESPACE: &str = "openshift-machine-api";
/// The Node annotation that records which label, annotation and taint keys
/// winfleet set, so that keys leaving the repository are removed (as
/// kubectl's last-applied annotation does).
pub const MANAGED_KEYS_ANNOTATION: &str = "winfleet.io/managed-keys";
/// WMCO's signal that a node owes a reboot (WMCO-SPEC 4.1); winfleet sets it
/// when a reboot is owed and clears it once the node is back.
pub const REBOOT_REQUIRED_ANNOTATION: &str = "windowsmachineconfig.openshift.io/reboot-required";
/// Set while winfleet disrupts a node: the node's boot id before the reboot
/// (empty when unknown). A node carrying it counts against maxUnavailable
/// until it is back, across crashes and rounds.
pub const REBOOTING_ANNOTATION: &str = "winfleet.io/rebooting";
/// Set while winfleet upgrades a node: the version it upgrades to. Like
/// [`REBOOTING_ANNOTATION`] it holds a disruption slot until the node is
/// back, across crashes and rounds.
pub const UPGRADING_ANNOTATION: &str = "winfleet.io/upgrading";
/// Marks a node winfleet is deconfiguring (its instance left the
/// repository); a crash in the middle is finished by the next round.
pub const DECONFIGURING_ANNOTATION: &str = "winfleet.io/deconfiguring";
/// Rounds in a row whose configure of a Machine failed
/// ([`machine_failures`]); winfleet never deletes the Machine for it.
pub const FAILURES_ANNOTATION: &str = "winfleet.io/configure-failures";
/// Set when winfleet (not an administrator) cordoned the node, so that only
/// its own cordon is lifted.
pub const CORDONED_ANNOTATION: &str = "winfleet.io/cordoned";

/// A Windows Node as observed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeObs {
    /// Node name.
    pub name: String,
    /// UID (Events refer to it).
    pub uid: String,
    /// resourceVersion the plan was made from (writes are conditional on it).
    pub resource_version: String,
    /// Every `status.addresses` entry (all types).
    pub addresses: Vec<String>,
    /// The Ready condition is True.
    pub ready: bool,
    /// `spec.unschedulable`.
    pub unschedulable: bool,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    pub annotations: BTreeMap<String, String>,
    /// Taints.
    pub taints: Vec<Taint>,
    /// The whole object (services' node variables read it).
    pub object: Value,
}

impl NodeObs {
    /// Whether winfleet is rebooting this node (cordoned for a reboot that
    /// has not finished).
    pub fn in_reboot(&self) -> bool {
        self.annotations.contains_key(REBOOTING_ANNOTATION)
    }

    /// Whether winfleet is disrupting this node in any way (a reboot or an
    /// upgrade not finished): it holds a disruption slot.
    pub fn in_disruption(&self) -> bool {
        self.annotations.contains_key(REBOOTING_ANNOTATION) || self.annotations.contains_key(UPGRADING_ANNOTATION)
    }
}

/// A Machine as observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineObs {
    /// Machine name.
    pub name: String,
    /// `status.phase`.
    pub phase: Option<String>,
    /// `status.addresses`.
    pub addresses: Vec<String>,
    /// `status.nodeRef.name`.
    pub node: Option<String>,
    /// The MachineSet it belongs to (label `machine.openshift.io/cluster-api-machineset`).
    pub machine_set: Option<String>,
    /// Its first `InternalIP` IPv4 address (WMCO-SPEC 6: a valid Machine has one).
    pub internal_ip: Option<String>,
    /// Labelled `windowsmachineconfig.openshift.io/ignore=true`: WMCO and winfleet leave it alone.
    pub ignored: bool,
    /// An Azure Machine (its SSH user is `capi`, not `Administrator`).
    pub azure: bool,
    /// Being deleted (`metadata.deletionTimestamp`, or phase `Deleting`).
    pub deleting: bool,
    /// UID (Events refer to it).
    pub uid: String,
    /// Rounds in a row whose configure of it failed (winfleet's annotation).
    pub configure_failures: u32,
}

/// Everything winfleet reads from the cluster in one round.
#[derive(Clone, Debug, Default)]
pub struct ClusterFacts {
    /// Windows Nodes (`kubernetes.io/os=windows`), by name.
    pub nodes: BTreeMap<String, NodeObs>,
    /// MachineSets in openshift-machine-api that are Windows ones or that
    /// winfleet manages, by name (the whole object).
    pub machine_sets: BTreeMap<String, Value>,
    /// Windows Machines (`machine.openshift.io/os-id=Windows`), by name.
    pub machines: BTreeMap<String, MachineObs>,
    /// `status.noProxy` of the cluster Proxy `cluster`, when there is one.
    pub cluster_no_proxy: Option<String>,
    /// The platform the Infrastructure `cluster` names (`None` without one).
    pub platform: Platform,
    /// MachineHealthChecks in openshift-machine-api (the whole objects;
    /// none without the resource).
    pub health_checks: Vec<Value>,
}

/// Whether a label map carries winfleet's managed-by label.
pub fn is_managed(labels: Option<&Value>) -> bool {
    labels.and_then(|l| l.get(MANAGED_BY.0)).and_then(Value::as_str) == Some(MANAGED_BY.1)
}
