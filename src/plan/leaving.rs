//! What a leaving node's deconfigure does, step by step, as the plan's
//! text and markdown say it (the order of `cluster::deconfigure`: cordon
//! and drain, services, files, registry entries and proxy variables, a
//! reboot when one is owed, the Node deleted). Pure.

use super::NodeGroup;
use crate::vocab::operation::Operation;

/// The files a deconfigure removes besides the registry directories.
const RECORDED: &str = "exactly what winfleet's install record on the node lists (payload and generated files, \
                        kubelet certificates, directories winfleet created, when empty)";

/// What a leaving group says when the mass-removal guard will refuse.
pub const HELD_BACK: &str = "held back: none of this runs, refused by prune.maxRemovalPercent (see the warning)";

/// The steps of a leaving group's deconfigure, one line each.
pub fn steps(group: &NodeGroup) -> Vec<String> {
    let mut out = Vec::new();
    out.push("cordon and drain (pods evicted through the Eviction API)".to_owned());
    let services: Vec<&str> = group
        .operations
        .iter()
        .filter_map(|op| match op {
            Operation::RemoveService { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    if !services.is_empty() {
        out.push(format!("services stopped and deleted: {}", services.join(", ")));
    }
    let registries =
        group.operations.iter().filter(|op| matches!(op, Operation::RemoveRegistry { refused: None, .. })).count();
    let directories = format!("{registries} registry director{}", if registries == 1 { "y" } else { "ies" });
    out.push(match (services.is_empty(), registries) {
        (true, _) => format!("files removed: {directories}"),
        (false, 0) => format!("files removed: {RECORDED}"),
        (false, _) => format!("files removed: {RECORDED}, and {directories}"),
    });
    let variables: Vec<&str> = group
        .operations
        .iter()
        .filter_map(|op| match op {
            Operation::UnsetEnv { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    if variables.is_empty() {
        out.push("reboot: only if one is owed (the Node's reboot-required annotation)".to_owned());
    } else {
        out.push(format!("proxy variables removed: {}; then a reboot", variables.join(", ")));
    }
    out.push("the Node object deleted (with a cluster; without one the hosts stay configured)".to_owned());
    out
}
