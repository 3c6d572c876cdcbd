//! The plan as a pull-request comment (GitHub/GitLab markdown).

use std::fmt::Write;

use super::text::summary_line;
use super::{MachineSetAction, Operation, Plan, short, show_value};

/// Node groups and MachineSets with more lines than this start collapsed.
const COLLAPSE_AFTER_LINES: usize = 20;

/// Renders a plan as markdown ready to post as a PR comment.
pub fn render(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### winfleet plan: `{}` → `{}`\n", short(plan.base.as_deref()), short(plan.head.as_deref()));
    if !plan.has_changes() {
        out.push_str("**No changes.**\n");
    } else {
        let _ = writeln!(out, "**{}**", summary_line(plan));
    }
    if !plan.warnings.is_empty() {
        out.push('\n');
        for w in &plan.warnings {
            let _ = writeln!(out, "> [!WARNING]\n> {}\n", escape(w));
        }
    }
    instances(plan, &mut out);
    for group in &plan.nodes {
        let body = node_body(group);
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
            Operation::RemoveRegistry { path } => {
                let _ = writeln!(body, "➖ `{path}` (registry directory removed)\n");
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
