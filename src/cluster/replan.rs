//! A Node that changed between the round's observation and its write.
//!
//! Node metadata patches are conditional on the resourceVersion the round
//! observed (the managed-keys record is computed from the Node as read),
//! and a kubelet updates its Node's status every few seconds: a patch can
//! meet a 409 in the dry run or in the write. That says nothing about the
//! plan's other writes, so only that Node is read again and planned again
//! (its new patch sent alone, dry run first when the dry run met it); a
//! Node that changes each time it is read is left for the next round and
//! reported so, and the rest of the plan goes on.

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;

use super::metadata::{NodeMetadataPlan, plan_node_metadata};
use super::observe::node_obs;
use crate::desired::model::Instance;

/// How many times a Node that keeps changing is read and planned again.
pub const REPLANS: usize = 3;

/// Whether `e` is a write refused because the object changed since it
/// was read (409 on a patch conditional on its resourceVersion).
pub fn moved(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 409)
}

/// The plan of `plan`'s Node as it is now: read again and planned for its
/// instance (one of `instances`). `Ok(None)`: the Node needs nothing any
/// more (someone made the same change).
pub async fn replan(
    client: &Client,
    plan: &NodeMetadataPlan,
    instances: &[&Instance],
) -> Result<Option<NodeMetadataPlan>, kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let fresh = node_obs(&nodes.get(&plan.node).await?);
    // The plan was made for one of these instances; without it (never the
    // case) the Node is left as it is.
    let Some(instance) = instances.iter().find(|i| i.address == plan.instance) else { return Ok(None) };
    Ok(plan_node_metadata(instance, &fresh))
}

/// Why a Node is left for the next round.
pub fn left_reason() -> String {
    format!(
        "the Node changed each of the {REPLANS} times it was read again (its kubelet writes it): \
         not written this round; the next round plans it again"
    )
}
