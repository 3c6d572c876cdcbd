//! The typed shapes of the documents a config repository holds.
//!
//! One file per kind. Every struct rejects unknown fields, and each has a
//! JSON Schema twin in `schema/` (tests check that the two agree on every
//! fixture). The OpenShift kinds keep the real API shapes, so objects can be
//! copied from a cluster or from the product documentation.

pub mod configmap;
pub mod fleet;
pub mod instances;
pub mod machineset;
pub mod meta;
pub mod mirrors;
pub mod proxy;
pub mod services;

use serde_json::Value;

/// The kinds winfleet reads, identified by apiVersion and kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `v1` ConfigMap named `windows-instances` (WMCO's BYOH list).
    InstancesConfigMap,
    /// `v1` ConfigMap named `windows-services-<version>` (WMCO's services manifest).
    ServicesConfigMap,
    /// `winfleet.io/v1alpha1` WindowsInstanceList.
    WindowsInstanceList,
    /// `machine.openshift.io/v1beta1` MachineSet.
    MachineSet,
    /// `config.openshift.io/v1` ImageDigestMirrorSet.
    ImageDigestMirrorSet,
    /// `config.openshift.io/v1` ImageTagMirrorSet.
    ImageTagMirrorSet,
    /// `config.openshift.io/v1` Proxy.
    Proxy,
    /// `winfleet.io/v1alpha1` Fleet.
    Fleet,
}

/// Every kind with its apiVersion and kind strings, in documentation order.
pub const KINDS: [(Kind, &str, &str); 8] = [
    (Kind::InstancesConfigMap, "v1", "ConfigMap"),
    (Kind::ServicesConfigMap, "v1", "ConfigMap"),
    (Kind::WindowsInstanceList, "winfleet.io/v1alpha1", "WindowsInstanceList"),
    (Kind::MachineSet, "machine.openshift.io/v1beta1", "MachineSet"),
    (Kind::ImageDigestMirrorSet, "config.openshift.io/v1", "ImageDigestMirrorSet"),
    (Kind::ImageTagMirrorSet, "config.openshift.io/v1", "ImageTagMirrorSet"),
    (Kind::Proxy, "config.openshift.io/v1", "Proxy"),
    (Kind::Fleet, "winfleet.io/v1alpha1", "Fleet"),
];

/// The name of the only ConfigMap winfleet reads (WMCO-SPEC 3.1).
pub const INSTANCES_CONFIGMAP: &str = "windows-instances";

impl Kind {
    /// The schema file stem for this kind (`schema/<stem>.schema.json`).
    pub fn schema_name(self) -> &'static str {
        match self {
            Kind::InstancesConfigMap => "configmap-windows-instances",
            Kind::ServicesConfigMap => "configmap-windows-services",
            Kind::WindowsInstanceList => "windowsinstancelist",
            Kind::MachineSet => "machineset",
            Kind::ImageDigestMirrorSet => "imagedigestmirrorset",
            Kind::ImageTagMirrorSet => "imagetagmirrorset",
            Kind::Proxy => "proxy",
            Kind::Fleet => "fleet",
        }
    }

    /// The `kind` string.
    pub fn name(self) -> &'static str {
        KINDS.iter().find(|k| k.0 == self).map_or("", |k| k.2)
    }
}

/// Why a document is not one of the kinds winfleet reads.
#[derive(Debug, PartialEq, Eq)]
pub enum Unrecognised {
    /// Not a mapping, or no string `apiVersion`/`kind`: pointer and message.
    NotAnObject(&'static str, String),
    /// A kind/apiVersion pair winfleet does not read: pointer and message.
    Unknown(&'static str, String),
}

/// Identifies a document's kind from its `apiVersion` and `kind`.
pub fn identify(doc: &Value) -> Result<Kind, Unrecognised> {
    let Some(obj) = doc.as_object() else {
        return Err(Unrecognised::NotAnObject(
            "",
            "document is not a Kubernetes object (expected a mapping with apiVersion and kind)".into(),
        ));
    };
    let field = |name: &'static str| match obj.get(name) {
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(_) => Err(Unrecognised::NotAnObject(
            if name == "kind" { "/kind" } else { "/apiVersion" },
            format!("{name} must be a string"),
        )),
        None => Err(Unrecognised::NotAnObject(
            "",
            format!("document has no {name}: every document must be a Kubernetes object"),
        )),
    };
    let (api_version, kind) = (field("apiVersion")?, field("kind")?);
    if let Some((k, _, _)) = KINDS.iter().find(|(_, a, n)| *a == api_version && *n == kind) {
        if *k == Kind::InstancesConfigMap {
            let name = doc.pointer("/metadata/name").and_then(Value::as_str);
            return match name {
                Some(INSTANCES_CONFIGMAP) => Ok(Kind::InstancesConfigMap),
                Some(n) if n.starts_with(services::SERVICES_CONFIGMAP_PREFIX) => Ok(Kind::ServicesConfigMap),
                _ => Err(Unrecognised::Unknown(
                    "/metadata/name",
                    format!(
                        "ConfigMap {} is not read by winfleet: only the ConfigMap named {INSTANCES_CONFIGMAP} (instances) \
                         and those named {}<version> (WMCO's services manifest) are",
                        name.map_or("without a name".to_owned(), crate::diagnostic::shown),
                        services::SERVICES_CONFIGMAP_PREFIX
                    ),
                )),
            };
        }
        return Ok(*k);
    }
    if let Some((_, a, _)) = KINDS.iter().find(|(_, _, n)| *n == kind) {
        return Err(Unrecognised::Unknown(
            "/apiVersion",
            format!("kind {kind} is read with apiVersion {a}, not {}", crate::diagnostic::shown(api_version)),
        ));
    }
    Err(Unrecognised::Unknown(
        "/kind",
        format!(
            "unknown kind {} (apiVersion {}): winfleet reads ConfigMap windows-instances (v1), \
         WindowsInstanceList and Fleet (winfleet.io/v1alpha1), MachineSet (machine.openshift.io/v1beta1), \
         ImageDigestMirrorSet, ImageTagMirrorSet and Proxy (config.openshift.io/v1)",
            crate::diagnostic::shown(kind),
            crate::diagnostic::shown(api_version)
        ),
    ))
}
