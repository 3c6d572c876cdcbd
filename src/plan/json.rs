//! The plan as JSON: the versioned format documented in docs/plan-format.md.
//! Its `summary` and each group's `safeReboots` are the counts the text and
//! markdown plans show ([`super::summary`]).

use serde::Serialize;

use super::summary::Summary;
use super::{FORMAT_VERSION, InstanceChanges, MachineSetChange, NodeGroup, Plan, Warning};

/// The document: [`Plan`]'s fields in its order, with the counts.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    format_version: u32,
    has_changes: bool,
    summary: &'a Summary,
    base: &'a Option<String>,
    head: &'a Option<String>,
    instances: &'a InstanceChanges,
    nodes: Vec<Group<'a>>,
    machine_sets: &'a [MachineSetChange],
    warnings: &'a [Warning],
    #[serde(skip_serializing_if = "<[Warning]>::is_empty")]
    warnings_before: &'a [Warning],
    #[serde(skip_serializing_if = "Option::is_none")]
    deconfigure_refused: &'a Option<String>,
}

/// A group of nodes with its safe reboots beside `rebootRequired`: a group
/// of joining nodes requires one by its operations but takes none.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Group<'a> {
    #[serde(flatten)]
    group: &'a NodeGroup,
    safe_reboots: usize,
}

/// Renders a plan as pretty-printed JSON with a trailing newline.
pub fn render(plan: &Plan) -> String {
    let summary = Summary::of(plan);
    let nodes = plan.nodes.iter().zip(&summary.group_reboots).map(|(group, r)| Group { group, safe_reboots: *r });
    let doc = Document {
        format_version: FORMAT_VERSION,
        has_changes: plan.has_changes(),
        summary: &summary,
        base: &plan.base,
        head: &plan.head,
        instances: &plan.instances,
        nodes: nodes.collect(),
        machine_sets: &plan.machine_sets,
        warnings: &plan.warnings,
        warnings_before: &plan.warnings_before,
        deconfigure_refused: &plan.deconfigure_refused,
    };
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}
