//! The plan as JSON: the versioned format documented in docs/plan-format.md.

use serde::Serialize;

use super::{FORMAT_VERSION, Plan};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    format_version: u32,
    has_changes: bool,
    #[serde(flatten)]
    plan: &'a Plan,
}

/// Renders a plan as pretty-printed JSON with a trailing newline.
pub fn render(plan: &Plan) -> String {
    let doc = Document { format_version: FORMAT_VERSION, has_changes: plan.has_changes(), plan };
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}
