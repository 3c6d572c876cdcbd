//! `machine.openshift.io/v1beta1` MachineSet, in the real OpenShift shape.
//! `providerSpec.value` is platform-specific and kept as free-form JSON.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::instances::Taint;
use super::meta::ObjectMeta;

/// A Windows MachineSet.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MachineSet {
    /// `machine.openshift.io/v1beta1`.
    pub api_version: String,
    /// `MachineSet`.
    pub kind: String,
    /// Name and namespace (`openshift-machine-api`).
    pub metadata: ObjectMeta,
    /// The desired MachineSet.
    pub spec: MachineSetSpec,
}

/// `spec` of a [`MachineSet`].
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MachineSetSpec {
    /// Number of Machines.
    #[serde(default)]
    pub replicas: Option<i64>,
    /// Seconds a new Machine's node must be ready before it counts.
    #[serde(default)]
    pub min_ready_seconds: Option<i64>,
    /// `Random`, `Newest` or `Oldest`.
    #[serde(default)]
    pub delete_policy: Option<DeletePolicy>,
    /// Selects the Machines of this set.
    #[serde(default)]
    pub selector: LabelSelector,
    /// Template of the Machines.
    pub template: MachineTemplate,
    /// `MachineAPI` or `ClusterAPI`.
    #[serde(default, rename = "authoritativeAPI")]
    pub authoritative_api: Option<String>,
}

/// Which Machines a scale-down deletes first.
#[derive(Clone, Copy, Debug, Deserialize)]
pub enum DeletePolicy {
    /// Any.
    Random,
    /// The newest.
    Newest,
    /// The oldest.
    Oldest,
}

/// A Kubernetes label selector.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelector {
    /// Equality requirements.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    #[serde(default)]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// A set-based selector requirement.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    /// Label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`.
    pub operator: SelectorOperator,
    /// Values for `In`/`NotIn`.
    #[serde(default)]
    pub values: Vec<String>,
}

/// Operator of a [`LabelSelectorRequirement`].
#[derive(Clone, Copy, Debug, Deserialize)]
pub enum SelectorOperator {
    /// Value in set.
    In,
    /// Value not in set.
    NotIn,
    /// Key present.
    Exists,
    /// Key absent.
    DoesNotExist,
}

/// `spec.template`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MachineTemplate {
    /// Labels and annotations of each Machine.
    #[serde(default)]
    pub metadata: TemplateMeta,
    /// Spec of each Machine.
    pub spec: MachineSpec,
}

/// Labels and annotations in a template.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TemplateMeta {
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// `spec.template.spec`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MachineSpec {
    /// Labels and annotations given to the Node.
    #[serde(default)]
    pub metadata: TemplateMeta,
    /// Platform settings.
    pub provider_spec: ProviderSpec,
    /// Taints given to the Node.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// Hooks that hold Machine deletion.
    #[serde(default)]
    pub lifecycle_hooks: LifecycleHooks,
    /// Set by the platform; accepted for copied objects.
    #[serde(default, rename = "providerID")]
    pub provider_id: Option<String>,
    /// `MachineAPI` or `ClusterAPI`.
    #[serde(default, rename = "authoritativeAPI")]
    pub authoritative_api: Option<String>,
}

/// `providerSpec`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSpec {
    /// The platform's provider spec object (free-form).
    pub value: Map<String, Value>,
}

/// `lifecycleHooks`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LifecycleHooks {
    /// Hooks before drain.
    #[serde(default)]
    pub pre_drain: Vec<LifecycleHook>,
    /// Hooks before termination.
    #[serde(default)]
    pub pre_terminate: Vec<LifecycleHook>,
}

/// One lifecycle hook.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LifecycleHook {
    /// Hook name.
    pub name: String,
    /// Who owns it.
    pub owner: String,
}

/// The cloud platform a MachineSet's provider spec is for (the cluster's
/// vocabulary: [`crate::vocab::platform`]).
pub use crate::vocab::platform::Platform;

impl MachineSet {
    /// The platform, from the provider spec's `kind`.
    pub fn platform(&self) -> Platform {
        let kind = self.spec.template.spec.provider_spec.value.get("kind").and_then(Value::as_str).unwrap_or("");
        match kind {
            "VSphereMachineProviderSpec" => Platform::VSphere,
            "AzureMachineProviderSpec" => Platform::Azure,
            "AWSMachineProviderConfig" => Platform::Aws,
            "GCPMachineProviderSpec" => Platform::Gcp,
            "NutanixMachineProviderConfig" => Platform::Nutanix,
            _ => Platform::Other,
        }
    }
}
