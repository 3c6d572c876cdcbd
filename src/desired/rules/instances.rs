//! Instances from both formats: WMCO's ConfigMap (decision 7) and
//! WindowsInstanceList. Addresses are checked and must be unique across all
//! files and formats.

use std::collections::BTreeSet;

use super::names::{canonical_address, check_label_key, check_label_value, check_reachable, check_username};
use crate::desired::Doc;
use crate::desired::kinds::configmap::InstancesConfigMap;
use crate::desired::kinds::instances::{Taint, WindowsInstanceList};
use crate::desired::model::FleetSettings;
use crate::desired::string_map::StringMap;
use crate::diagnostic::{Diagnostic, child, shown};
use crate::vocab::Shell;

/// An instance before its node spec is attached.
#[derive(Clone, Debug)]
pub struct Draft {
    /// Canonical address.
    pub address: String,
    /// SSH user.
    pub username: String,
    /// SSH port.
    pub port: u16,
    /// Shell dialect.
    pub shell: Shell,
    /// Managed labels.
    pub labels: StringMap,
    /// Managed annotations.
    pub annotations: StringMap,
    /// Managed taints.
    pub taints: Vec<Taint>,
    /// File that lists it.
    pub origin: String,
}

/// The namespace WMCO reads the windows-instances ConfigMap from.
pub const WMCO_NAMESPACE: &str = "openshift-windows-machine-config-operator";

/// Collects every instance, reporting each problem.
///
/// The lists' labels, annotations and taints move into the drafts (each
/// revision's documents are its own once typed), so a 10,000-instance
/// repository does not hold them twice.
pub fn collect(
    configmaps: &[Doc<InstancesConfigMap>],
    lists: &mut [Doc<WindowsInstanceList>],
    fleet: &FleetSettings,
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Draft> {
    let listed = configmaps.iter().map(|d| d.value.data.len()).sum::<usize>()
        + lists.iter().map(|d| d.value.spec.instances.len()).sum::<usize>();
    let mut seen = Seen(foldhash::HashMap::with_capacity_and_hasher(listed, Default::default()));
    let mut drafts = Vec::with_capacity(listed);
    for doc in configmaps {
        if let Some(namespace) = doc.value.metadata.namespace.as_deref().filter(|ns| *ns != WMCO_NAMESPACE) {
            diagnostics.push(doc.error(
                "/metadata/namespace",
                format!(
                    "the windows-instances ConfigMap is read in namespace {WMCO_NAMESPACE} (WMCO's), not {}: \
                     move it there or leave the namespace out",
                    shown(namespace)
                ),
            ));
        }
        for (key, value) in doc.value.entries() {
            let address = address((&doc.path, doc.index), Where::Key(key), key, fleet, &mut seen, diagnostics);
            let pointer = || child("/data", key);
            let username = match value.split_once('=') {
                Some(("username", name)) => match check_username(name, fleet.default_shell) {
                    Ok(()) => Some(name.to_owned()),
                    Err(reason) => {
                        diagnostics.push(doc.error(pointer(), reason));
                        None
                    }
                },
                Some((left, _)) => {
                    diagnostics.push(doc.error(
                        pointer(),
                        format!(
                            "value must be \"username=<name>\" (WMCO's format), but the part before '=' is {}",
                            shown(left)
                        ),
                    ));
                    None
                }
                None => {
                    diagnostics.push(
                        doc.error(pointer(), "value must be \"username=<name>\" (WMCO's format), but it has no '='"),
                    );
                    None
                }
            };
            if let (Some(address), Some(username)) = (address, username) {
                drafts.push(Draft {
                    address,
                    username,
                    port: fleet.default_port,
                    shell: fleet.default_shell,
                    labels: StringMap::new(),
                    annotations: StringMap::new(),
                    taints: Vec::new(),
                    origin: doc.path.clone(),
                });
            }
        }
    }
    for Doc { path, index, value, .. } in lists.iter_mut() {
        let doc = (&**path, *index);
        for (i, entry) in value.spec.instances.iter_mut().enumerate() {
            let address = address(doc, Where::Item(i), &entry.address, fleet, &mut seen, diagnostics);
            let at = || format!("/spec/instances/{i}");
            let username = match (&entry.username, &fleet.default_username) {
                (Some(name), _) => check_username(name, entry.shell.unwrap_or(fleet.default_shell))
                    .map(|()| name.clone())
                    .map_err(|r| (format!("{}/username", at()), r)),
                (None, Some(default)) => Ok(default.clone()),
                (None, None) => {
                    Err((at(), "missing username: set username here or spec.defaults.username in the Fleet".to_owned()))
                }
            };
            let username = username.map_err(|(p, r)| diagnostics.push(error(doc, p, r))).ok();
            let port = entry.port.unwrap_or(fleet.default_port);
            if port == 0 {
                diagnostics.push(error(doc, format!("{}/port", at()), "port must be from 1 to 65535"));
            }
            if !entry.labels.is_empty() {
                check_labels(doc, &at, &entry.labels, diagnostics);
            }
            if !entry.annotations.is_empty() {
                check_annotations(doc, &at, &entry.annotations, diagnostics);
            }
            if !entry.taints.is_empty() {
                check_taints(doc, &at(), &entry.taints, diagnostics);
            }
            if let (Some(address), Some(username)) = (address, username) {
                drafts.push(Draft {
                    address,
                    username,
                    port,
                    shell: entry.shell.unwrap_or(fleet.default_shell),
                    labels: std::mem::take(&mut entry.labels),
                    annotations: std::mem::take(&mut entry.annotations),
                    taints: std::mem::take(&mut entry.taints),
                    origin: path.clone(),
                });
            }
        }
    }
    drafts
}

/// First place each canonical address was listed: file and how to build
/// the pointer (built only when a duplicate is reported). Hashed with
/// foldhash, seeded per process: SipHash on 10,000 addresses was about
/// 2% of a plan's CPU time (docs/performance.md).
struct Seen<'d>(foldhash::HashMap<String, (&'d str, Where<'d>)>);

/// A document: its file and index.
type At<'d> = (&'d str, usize);

fn error(doc: At<'_>, pointer: impl Into<String>, message: impl Into<String>) -> Diagnostic {
    Diagnostic::error(doc.0, doc.1, pointer, message)
}

#[derive(Clone, Copy)]
enum Where<'d> {
    Key(&'d str),
    Item(usize),
}

impl Where<'_> {
    fn pointer(self) -> String {
        match self {
            Where::Key(key) => child("/data", key),
            Where::Item(i) => format!("/spec/instances/{i}/address"),
        }
    }
}

fn address<'d>(
    doc: At<'d>,
    at: Where<'d>,
    written: &str,
    fleet: &FleetSettings,
    seen: &mut Seen<'d>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<String> {
    let canonical = canonical_address(written)
        .and_then(|canonical| {
            check_reachable(&canonical, fleet.allow_loopback).map(|()| canonical.clone()).map_err(|reason| {
                // `0x7f000001` is read as 127.0.0.1: say so.
                match written.parse::<std::net::Ipv4Addr>() {
                    Err(_) if canonical.parse::<std::net::Ipv4Addr>().is_ok() => {
                        format!("{} is read as {canonical}: {reason}", shown(written))
                    }
                    _ => reason,
                }
            })
        })
        .map_err(|reason| diagnostics.push(error(doc, at.pointer(), reason)))
        .ok()?;
    if let Some((path, first)) = seen.0.get(&canonical) {
        let message = format!("instance {canonical} is listed twice: it is already in {path} at {}", first.pointer());
        diagnostics.push(error(doc, at.pointer(), message));
        return None;
    }
    seen.0.insert(canonical.clone(), (doc.0, at));
    Some(canonical)
}

fn check_labels(doc: At<'_>, at: &impl Fn() -> String, labels: &StringMap, diagnostics: &mut Vec<Diagnostic>) {
    for (key, value) in labels {
        // Built only for a diagnostic: most labels are fine.
        let pointer = || child(&format!("{}/labels", at()), key);
        if let Err(reason) = check_label_key(key).and_then(|()| check_label_value(value)) {
            diagnostics.push(error(doc, pointer(), format!("label {reason}")));
        } else if is_reserved(key) || key.starts_with("kubernetes.io/") || key.starts_with("node.kubernetes.io/") {
            diagnostics.push(error(
                doc,
                pointer(),
                format!(
                    "label {key} is kept by Kubernetes, WMCO or winfleet itself and cannot be set from the repository"
                ),
            ));
        }
    }
}

fn check_annotations(
    doc: At<'_>,
    at: &impl Fn() -> String,
    annotations: &StringMap,
    diagnostics: &mut Vec<Diagnostic>,
) {
    for key in annotations.keys() {
        let pointer = || child(&format!("{}/annotations", at()), key);
        if let Err(reason) = check_label_key(key) {
            diagnostics.push(error(doc, pointer(), format!("annotation {reason}")));
        } else if is_reserved(key) {
            diagnostics.push(error(
                doc,
                pointer(),
                format!("annotation {key} is kept by winfleet or WMCO itself and cannot be set from the repository"),
            ));
        }
    }
}

/// Annotation prefixes winfleet and WMCO write themselves.
fn is_reserved(key: &str) -> bool {
    key.starts_with("winfleet.io/") || key.starts_with("windowsmachineconfig.openshift.io/")
}

fn check_taints(doc: At<'_>, at: &str, taints: &[Taint], diagnostics: &mut Vec<Diagnostic>) {
    let mut seen = BTreeSet::new();
    for (j, taint) in taints.iter().enumerate() {
        let pointer = format!("{at}/taints/{j}");
        if let Err(reason) = check_label_key(&taint.key).and_then(|()| check_label_value(&taint.value)) {
            diagnostics.push(error(doc, &pointer, format!("taint {reason}")));
        } else if taint.key == "os" || taint.key.starts_with("node.kubernetes.io/") || is_reserved(&taint.key) {
            diagnostics.push(error(
                doc,
                &pointer,
                format!(
                    "taint {} is kept by the kubelet, Kubernetes or winfleet itself (cordon, os=Windows) and cannot be managed from the repository",
                    taint.key
                ),
            ));
        }
        if !seen.insert((&taint.key, taint.effect)) {
            diagnostics.push(error(
                doc,
                &pointer,
                format!("taint {} with effect {:?} is listed twice", taint.key, taint.effect),
            ));
        }
    }
}
