//! The Node writes that the join, the upgrade, the deconfigure and the key
//! rotation share: a merge patch conditional on the Node as just read (tried
//! again when the kubelet's status updates win the race), winfleet's cordon
//! with its disruption marker, and the lifting of that cordon with the
//! version annotation.
//!
//! Only winfleet's own cordon is ever lifted: the cordon records itself in
//! [`CORDONED_ANNOTATION`], and [`uncordon`] uncordons only a Node carrying it.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use super::apply::api_error;
use super::observe::node_obs;
use super::{CORDONED_ANNOTATION, FIELD_MANAGER, NodeObs, UPGRADING_ANNOTATION};
use crate::lifecycle::VERSION_ANNOTATION;
use crate::progress::{self, Phase};

/// A merge patch of the Node, as is (no condition on its version).
pub(crate) async fn patch(nodes: &Api<Node>, name: &str, patch: &Value) -> Result<NodeObs, String> {
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
    nodes.patch(name, &params, &Patch::Merge(patch)).await.map(|n| node_obs(&n)).map_err(|e| api_error(&e))
}

/// A merge patch conditional on the Node as read just before, built from
/// it by `body` (`None`: nothing to write). A Node changed in between (the
/// kubelet's status updates do that every few seconds) is read and tried
/// again, up to five times.
pub(crate) async fn patch_fresh(
    nodes: &Api<Node>,
    name: &str,
    mut body: impl FnMut(&NodeObs) -> Option<Value>,
) -> Result<NodeObs, String> {
    let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
    let mut conflicts = 0;
    loop {
        let node = nodes.get(name).await.map(|n| node_obs(&n)).map_err(|e| api_error(&e))?;
        let Some(mut patch) = body(&node) else { return Ok(node) };
        patch["metadata"]["resourceVersion"] = json!(node.resource_version);
        match nodes.patch(name, &params, &Patch::Merge(&patch)).await {
            Ok(n) => return Ok(node_obs(&n)),
            Err(kube::Error::Api(e)) if e.code == 409 && conflicts < 5 => conflicts += 1,
            Err(e) => return Err(api_error(&e)),
        }
    }
}

/// Cordons a schedulable Node, recording the cordon as winfleet's; with
/// `marker`, sets that disruption marker (an upgrade's, a deconfigure's) in
/// the same write. Returns whether it wrote (a Node that already carries
/// the marker, left by a crash, is not written again).
pub(crate) async fn cordon(nodes: &Api<Node>, name: &str, marker: Option<(&str, &str)>) -> Result<bool, String> {
    let mut wrote = false;
    progress::step(name, Phase::Cordon, "cordoning");
    patch_fresh(nodes, name, |n| {
        let marked = marker.is_none_or(|(key, _)| n.annotations.contains_key(key));
        if marked && n.unschedulable {
            return None;
        }
        let mut annotations = serde_json::Map::new();
        if let Some((key, value)) = marker.filter(|_| !marked) {
            annotations.insert(key.to_owned(), json!(value));
        }
        if !n.unschedulable {
            annotations.insert(CORDONED_ANNOTATION.to_owned(), json!("true"));
        }
        wrote = true;
        Some(json!({ "metadata": { "annotations": annotations }, "spec": { "unschedulable": true } }))
    })
    .await?;
    Ok(wrote)
}

/// Lifts winfleet's cordon (never an administrator's) and the upgrade
/// marker; with `version`, sets the version annotation in the same write.
pub(crate) async fn uncordon(nodes: &Api<Node>, name: &str, version: Option<&str>) -> Result<(), String> {
    patch_fresh(nodes, name, |n| {
        let mut annotations = json!({ UPGRADING_ANNOTATION: null, CORDONED_ANNOTATION: null });
        if let Some(v) = version {
            annotations[VERSION_ANNOTATION] = json!(v);
        }
        let mut body = json!({ "metadata": { "annotations": annotations } });
        if n.annotations.contains_key(CORDONED_ANNOTATION) {
            body["spec"] = json!({ "unschedulable": false });
        }
        Some(body)
    })
    .await
    .map(drop)
}
