//! The plan as a pull-request comment (GitHub/GitLab markdown).

use std::fmt::Write;

use super::text::summary_line;
use super::{MachineSetAction, Plan, short, show_value};
use crate::vocab::operation::Operation;

/// The first line of every plan comment: a CI job finds its own comment by
/// it and updates it instead of adding another (as Atlantis does).
pub const MARKER: &str = "<!-- winfleet-plan -->";

/// Node groups and MachineSets with more lines than this start collapsed.
const COLLAPSE_AFTER_LINES: usize = 20;

/// GitHub's limit for a comment is 65,536 characters; this leaves room.
pub const DEFAULT_MAX_BYTES: usize = 60_000;

/// Renders a plan as markdown within `max_bytes`: when the full comment is
/// larger, the largest node sections collapse to counts, largest first,
/// until it fits, with a note on how to see everything.
pub fn render_within(plan: &Plan, max_bytes: usize) -> String {
    let full = render_with(plan, &[]);
    if full.len() <= max_bytes {
        return full;
    }
    let mut by_size: Vec<(usize, usize)> =
        plan.nodes.iter().enumerate().map(|(i, group)| (node_body(group).len(), i)).collect();
    by_size.sort_by(|a, b| b.cmp(a));
    let mut collapsed = Vec::new();
    let mut out = full;
    for (_, i) in by_size {
        collapsed.push(i);
        out = render_with(plan, &collapsed);
        if out.len() <= max_bytes {
            break;
        }
    }
    out
}

/// Renders a plan as markdown ready to post as a PR comment.
pub fn render(plan: &Plan) -> String {
    render_with(plan, &[])
}

fn render_with(plan: &Plan, collapsed: &[usize]) -> String {
    let mut out = format!("{MARKER}\n");
    let _ = writeln!(out, "### winfleet plan: `{}` → `{}`\n", short(plan.base.as_deref()), short(plan.head.as_deref()));
    if !plan.has_changes() {
        out.push_str("**No changes.**\n");
    } else {
        let _ = writeln!(out, "**{}**", summary_line(plan));
    }
    if !plan.warnings.is_empty() {
        out.push('\n');
        for w in &plan.warnings {
            let _ = writeln!(out, "> [!WARNING]\n> {}\n", escape(&w.to_string()));
        }
    }
    if !plan.warnings_before.is_empty() {
        let mut body = String::new();
        for w in &plan.warnings_before {
            let _ = writeln!(body, "- {}", escape(&w.to_string()));
        }
        let title = format!("{} warning(s) already true before this change", plan.warnings_before.len());
        let _ = write!(out, "\n<details><summary>{title}</summary>\n\n{body}\n</details>\n");
    }
    instances(plan, &mut out);
    if !collapsed.is_empty() {
        let _ = writeln!(
            out,
            "\n> [!NOTE]\n> This comment is shortened to fit: {} node section(s) show counts only. \
             See every operation with `winfleet plan --output text` (the CI job's artifact) or `--output json`.\n",
            collapsed.len()
        );
    }
    for (i, group) in plan.nodes.iter().enumerate() {
        let body = if collapsed.contains(&i) {
            format!("{} operation(s); shortened to fit the comment\n", group.operations.len())
        } else {
            node_body(group)
        };
        let title = format!(
            "{} node(s): {} — {} operation(s){}",
            group.nodes.len(),
            group.nodes.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
            group.operations.len(),
            if group.reboot_required { ", safe reboot required" } else { "" }
        );
        details(&mut out, &title, &body);
    }
    for m in &plan.machine_sets {
        let verb = match m.action {
            MachineSetAction::Create => "create",
            MachineSetAction::Update => "update",
            MachineSetAction::Delete => "delete",
        };
        let replicas = super::replicas_text(m, "→").map_or(String::new(), |r| format!(", {r}"));
        let mut body = String::from("| field | base | head |\n|---|---|---|\n");
        for f in &m.fields {
            let show = |v: &Option<serde_json::Value>| {
                v.as_ref().map_or_else(|| "—".to_owned(), |v| format!("`{}`", escape(&show_value(v))))
            };
            let _ = writeln!(body, "| `{}` | {} | {} |", f.pointer, show(&f.from), show(&f.to));
        }
        details(&mut out, &format!("MachineSet `{}`: {verb}{replicas}", m.name), &body);
    }
    out
}

fn instances(plan: &Plan, out: &mut String) {
    let i = &plan.instances;
    if i.configure.is_empty() && i.update.is_empty() && i.deconfigure.is_empty() {
        return;
    }
    let mut body = String::from("| | instance | change |\n|---|---|---|\n");
    for s in &i.configure {
        let _ = writeln!(
            body,
            "| ➕ | `{}` | configure: user `{}`, port {}, {} (from `{}`) |",
            s.address,
            escape(&s.username),
            s.port,
            s.shell,
            s.origin
        );
    }
    for u in &i.update {
        let changes: Vec<String> = u
            .changes
            .iter()
            .map(|c| {
                let show =
                    |v: &Option<String>| v.as_ref().map_or_else(|| "(none)".to_owned(), |s| format!("`{}`", escape(s)));
                format!("{}: {} → {}", escape(&c.setting), show(&c.from), show(&c.to))
            })
            .collect();
        let _ = writeln!(body, "| ✏️ | `{}` | {} |", u.address, changes.join("<br>"));
    }
    for s in &i.deconfigure {
        let _ = writeln!(body, "| ➖ | `{}` | deconfigure (was in `{}`) |", s.address, s.origin);
    }
    details(out, "Instances", &body);
}

fn node_body(group: &super::NodeGroup) -> String {
    let mut body = String::new();
    for op in &group.operations {
        match op {
            Operation::WriteFile { path, created, diff } => {
                let _ = writeln!(body, "{} `{}`\n\n```diff\n{}```\n", if *created { "➕" } else { "✏️" }, path, diff);
            }
            Operation::RemoveRegistry { path, refused: None } => {
                let _ = writeln!(body, "➖ `{path}` (registry directory removed)\n");
            }
            Operation::RemoveRegistry { path, refused: Some(reason) } => {
                let _ = writeln!(body, "⚠️ `{path}` (registry directory kept: {})\n", escape(reason));
            }
            Operation::SetEnv { name, from, to } => {
                let from = from.as_ref().map_or_else(|| "(unset)".to_owned(), |f| format!("`{}`", escape(f)));
                let _ = writeln!(body, "✏️ environment `{name}`: {from} → `{}`\n", escape(to));
            }
            Operation::UnsetEnv { name, from } => {
                let _ = writeln!(body, "➖ environment `{name}`: `{}` → (unset)\n", escape(from));
            }
            other => {
                let _ = writeln!(body, "`{}`\n", escape(&other.headline()));
            }
        }
    }
    body
}

/// A collapsible section, open when short.
fn details(out: &mut String, summary: &str, body: &str) {
    let open = if body.lines().count() > COLLAPSE_AFTER_LINES { "" } else { " open" };
    let _ = writeln!(out, "<details{open}><summary>{summary}</summary>\n\n{body}\n</details>\n");
}

/// Escapes characters that would break a table cell or inline code.
fn escape(s: &str) -> String {
    s.replace('|', "\\|").replace('`', "'").replace('\n', " ")
}
