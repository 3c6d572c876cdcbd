//! The repository against the cluster (issue 27, item 4): with
//! `spec.sources` `repository` (the default), where the repository's Proxy
//! and mirror sets differ from the cluster's own objects (which drive the
//! Linux nodes), so Windows and Linux nodes would pull through different
//! proxies or mirrors. Never a blocking error: the repository's values are
//! applied; the difference is shown in `plan --live`, in status (the
//! summary's `ClusterDisagrees` condition) and as a Warning Event.
//!
//! Once per change: each object's differences are hashed, and the hashes
//! last reported are kept in the annotation `winfleet.io/cluster-disagrees`
//! of winfleet's Namespace (so a restart does not report them again; in
//! this process's memory too, for a cluster without that Namespace). An
//! object whose hash changed gets one Warning `ClusterDisagrees`; one whose
//! differences are gone gets one Normal `ClusterAgrees`.
//!
//! Values are shown with a proxy URL's password redacted.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, Patch};
use serde::Serialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::events::{Events, Reason, Regarding};
use super::sources::ClusterConfig;
use crate::desired::kinds::fleet::ConfigSource;
use crate::desired::model::Desired;
use crate::node::display_env_value;

/// The Namespace annotation holding what was last reported.
pub const REPORTED_ANNOTATION: &str = "winfleet.io/cluster-disagrees";

/// One field that differs between the repository and the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Disagreement {
    /// `Kind/name` of the object (`Proxy/cluster`, `ImageDigestMirrorSet/x`).
    pub object: String,
    /// The field (`spec.httpProxy`, `spec.imageDigestMirrors[source=quay.io/org]`),
    /// or `(object)` for a set only one side has.
    pub field: String,
    /// The repository's value (`(none)` when unset or absent).
    pub repository: String,
    /// The cluster's value (`(none)` when unset or absent).
    pub cluster: String,
}

impl Disagreement {
    /// One line: `Proxy/cluster spec.httpProxy: repository "a", cluster "b"`.
    pub fn line(&self) -> String {
        format!("{} {}: repository {}, cluster {}", self.object, self.field, self.repository, self.cluster)
    }
}

const NONE: &str = "(none)";
const WHOLE: &str = "(object)";

/// Every difference for the sources the repository holds (pure), sorted.
pub fn compare(desired: &Desired, cluster: &ClusterConfig) -> Vec<Disagreement> {
    let mut out = Vec::new();
    if desired.fleet.proxy_source == ConfigSource::Repository {
        let empty = json!({});
        let repository = desired.proxy.as_ref().unwrap_or(&empty);
        let observed = cluster.proxy.as_ref().map_or(&empty, |p| &p.spec);
        for (field, pointer) in [
            ("spec.httpProxy", "/httpProxy"),
            ("spec.httpsProxy", "/httpsProxy"),
            ("spec.noProxy", "/noProxy"),
            ("spec.trustedCA.name", "/trustedCA/name"),
        ] {
            let (ours, theirs) = (text(repository.pointer(pointer)), text(observed.pointer(pointer)));
            if ours != theirs {
                out.push(Disagreement {
                    object: "Proxy/cluster".into(),
                    field: field.into(),
                    repository: shown(&ours),
                    cluster: shown(&theirs),
                });
            }
        }
    }
    if desired.fleet.mirrors_source == ConfigSource::Repository {
        let mut names: Vec<&String> = desired.mirror_sets.keys().chain(cluster.mirror_sets.keys()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let ours = desired.mirror_sets.get(name);
            let theirs = cluster.mirror_sets.get(name).map(|o| &o.spec);
            mirror_set(name, ours, theirs, &mut out);
        }
    }
    out
}

fn mirror_set(name: &str, ours: Option<&Value>, theirs: Option<&Value>, out: &mut Vec<Disagreement>) {
    let whole = |repository: &str, cluster: &str| Disagreement {
        object: name.to_owned(),
        field: WHOLE.into(),
        repository: repository.into(),
        cluster: cluster.into(),
    };
    let (ours, theirs) = match (ours, theirs) {
        (Some(o), Some(t)) => (o, t),
        (Some(_), None) => return out.push(whole("present", "absent")),
        (None, Some(_)) => return out.push(whole("absent", "present")),
        (None, None) => return,
    };
    let list = if name.starts_with("ImageTagMirrorSet/") { "imageTagMirrors" } else { "imageDigestMirrors" };
    let (ours, theirs) = (entries(ours, list), entries(theirs, list));
    let mut sources: Vec<&String> = ours.keys().chain(theirs.keys()).collect();
    sources.sort();
    sources.dedup();
    for source in sources {
        let (o, t) = (ours.get(source), theirs.get(source));
        if o != t {
            let show = |e: Option<&String>| e.cloned().unwrap_or_else(|| NONE.to_owned());
            out.push(Disagreement {
                object: name.to_owned(),
                field: format!("spec.{list}[source={source}]"),
                repository: show(o),
                cluster: show(t),
            });
        }
    }
}

/// A set's entries by source: its mirrors in order and its policy.
fn entries(spec: &Value, list: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for entry in spec.get(list).and_then(Value::as_array).into_iter().flatten() {
        let source = text(entry.get("source"));
        let mirrors: Vec<String> =
            entry.get("mirrors").and_then(Value::as_array).into_iter().flatten().map(|m| text(Some(m))).collect();
        let policy = text(entry.get("mirrorSourcePolicy"));
        let mut shown = format!("mirrors [{}]", mirrors.join(", "));
        if !policy.is_empty() {
            let _ = write!(shown, " {policy}");
        }
        // A source listed twice in one set: both entries, in order.
        out.entry(source).and_modify(|s| *s = format!("{s}; {shown}")).or_insert(shown);
    }
    out
}

fn text(value: Option<&Value>) -> String {
    value.and_then(Value::as_str).unwrap_or_default().trim().to_owned()
}

fn shown(value: &str) -> String {
    if value.is_empty() { NONE.to_owned() } else { format!("{:?}", display_env_value(value)) }
}

/// Each object's differences as one hash (12 hex digits), by object.
pub fn hashes(disagreements: &[Disagreement]) -> BTreeMap<String, String> {
    let mut lines: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for d in disagreements {
        lines.entry(&d.object).or_default().push(d.line());
    }
    lines
        .into_iter()
        .map(|(object, lines)| {
            let digest = Sha256::digest(lines.join("\n").as_bytes());
            let hex: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
            (object.to_owned(), hex)
        })
        .collect()
}

/// The annotation's value for `hashes` (`Kind/name=hash,...`, sorted).
pub fn memory_text(hashes: &BTreeMap<String, String>) -> String {
    hashes.iter().map(|(o, h)| format!("{o}={h}")).collect::<Vec<_>>().join(",")
}

/// The hashes an annotation's value holds (anything unreadable is dropped).
pub fn parse_memory(text: &str) -> BTreeMap<String, String> {
    text.split(',').filter_map(|e| e.split_once('=')).map(|(o, h)| (o.to_owned(), h.to_owned())).collect()
}

/// What to report (pure): the objects whose differences are new or
/// changed, and the objects whose differences are gone.
pub fn changes<'a>(
    reported: &'a BTreeMap<String, String>,
    now: &'a BTreeMap<String, String>,
) -> (Vec<&'a str>, Vec<&'a str>) {
    let new = now.iter().filter(|(o, h)| reported.get(*o) != Some(h)).map(|(o, _)| o.as_str()).collect();
    let gone = reported.keys().filter(|o| !now.contains_key(*o)).map(String::as_str).collect();
    (new, gone)
}

/// The Events to publish (object, reason, note) for the differences that
/// changed since `reported` (pure): a Warning per object whose differences
/// are new or changed, a Normal per object whose differences are gone.
pub fn notes(reported: &BTreeMap<String, String>, found: &[Disagreement]) -> Vec<(String, Reason, String)> {
    let now = hashes(found);
    let (new, gone) = changes(reported, &now);
    let disagrees = new.into_iter().map(|object| {
        let lines: Vec<String> = found.iter().filter(|d| d.object == object).map(Disagreement::line).collect();
        let note = format!(
            "the repository's {object} differs from the cluster's, so Windows nodes (the repository's) and Linux \
             nodes (the cluster's) do not agree: {}; fix the repository, or set the Fleet's spec.sources to cluster",
            lines.join("; ")
        );
        (object.to_owned(), Reason::ClusterDisagrees, note)
    });
    let agrees = gone.into_iter().map(|object| {
        let note = format!("the repository's {object} agrees with the cluster's again");
        (object.to_owned(), Reason::ClusterAgrees, note)
    });
    disagrees.chain(agrees).collect()
}

/// The Namespace patch that remembers `now`, when what the Namespace holds
/// (`stored`; `None`: no Namespace to write to) differs (pure).
pub fn memory_patch(stored: Option<&BTreeMap<String, String>>, now: &BTreeMap<String, String>) -> Option<Value> {
    if stored? == now {
        return None;
    }
    let value = if now.is_empty() { Value::Null } else { Value::String(memory_text(now)) };
    Some(json!({"metadata": {"annotations": {REPORTED_ANNOTATION: value}}}))
}

/// The memory of this process, for a cluster without winfleet's Namespace.
static REPORTED: Mutex<Option<BTreeMap<String, String>>> = Mutex::new(None);

/// Publishes an Event per object whose differences changed since they were
/// last reported, and remembers them (nothing is written in a dry run).
pub async fn publish(client: &Client, events: &Events, cluster: &ClusterConfig, found: &[Disagreement]) {
    let namespace = super::monitoring::namespace();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let stored = match namespaces.get_opt(&namespace).await {
        Ok(ns) => ns.map(|ns| {
            let annotations = ns.metadata.annotations.unwrap_or_default();
            parse_memory(annotations.get(REPORTED_ANNOTATION).map_or("", String::as_str))
        }),
        Err(e) => {
            tracing::warn!(error = %super::apply::api_error(&e), "cannot read what was last reported of the cluster's disagreements");
            None
        }
    };
    let process = REPORTED.lock().ok().and_then(|m| m.clone());
    let reported = stored.clone().or(process).unwrap_or_default();
    for (object, reason, note) in notes(&reported, found) {
        events.publish(regarding(&object, cluster), reason, note).await;
    }
    let now = hashes(found);
    if let Ok(mut memory) = REPORTED.lock() {
        *memory = Some(now.clone());
    }
    if let Some(patch) = memory_patch(stored.as_ref(), &now)
        && let Err(e) = namespaces.patch(&namespace, &crate::cluster::patch_params(), &Patch::Merge(&patch)).await
    {
        tracing::warn!(error = %super::apply::api_error(&e), "cannot remember the cluster's disagreements reported");
    }
}

fn regarding<'a>(object: &'a str, cluster: &'a ClusterConfig) -> Regarding<'a> {
    let (kind, name) = object.split_once('/').unwrap_or((object, ""));
    let uid = match kind {
        "Proxy" => cluster.proxy.as_ref().map(|p| p.uid.as_str()),
        _ => cluster.mirror_sets.get(object).map(|o| o.uid.as_str()),
    };
    Regarding::Config(kind, name, uid.unwrap_or_default())
}

/// The fields that differ, for status: `Proxy/cluster spec.httpProxy; ...`.
pub fn fields(disagreements: &[Disagreement]) -> String {
    disagreements.iter().map(|d| format!("{} {}", d.object, d.field)).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
#[path = "disagree_tests.rs"]
mod tests;
