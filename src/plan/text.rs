//! The plan for a terminal or a CI log.

use std::fmt::Write;

use super::same::{self, Files, Shown};
use super::summary::Summary;
use super::{MachineSetAction, Plan, short, show_value};

/// Renders a plan as plain text.
pub fn render(plan: &Plan) -> String {
    let summary = Summary::of(plan);
    let mut out = String::new();
    let _ = writeln!(out, "winfleet plan: {} -> {}", short(plan.base.as_deref()), short(plan.head.as_deref()));
    if !plan.has_changes() {
        out.push_str("\nNo changes.\n");
    }
    instances(plan, &mut out);
    nodes(plan, &summary, &mut out);
    machine_sets(plan, &mut out);
    if !plan.warnings.is_empty() {
        out.push_str("\nWarnings:\n");
        for w in &plan.warnings {
            let _ = writeln!(out, "  ! {w}");
        }
    }
    if !plan.warnings_before.is_empty() {
        out.push_str("\nWarnings already true before this change:\n");
        for w in &plan.warnings_before {
            let _ = writeln!(out, "  ! {w}");
        }
    }
    if plan.has_changes() {
        let _ = writeln!(out, "\n{}", summary.line());
    }
    out
}

fn instances(plan: &Plan, out: &mut String) {
    let i = &plan.instances;
    if i.configure.is_empty() && i.update.is_empty() && i.deconfigure.is_empty() {
        return;
    }
    out.push_str("\nInstances:\n");
    for s in &i.configure {
        let _ =
            writeln!(out, "  + {} (user {}, port {}, {}) from {}", s.address, s.username, s.port, s.shell, s.origin);
    }
    for u in &i.update {
        let _ = writeln!(out, "  ~ {}", u.address);
        for c in &u.changes {
            let show = |v: &Option<String>| v.as_ref().map_or_else(|| "(none)".to_owned(), |s| format!("{s:?}"));
            let _ = writeln!(out, "      {}: {} -> {}", c.setting, show(&c.from), show(&c.to));
        }
    }
    for s in &i.deconfigure {
        let _ = writeln!(out, "  - {} (was in {})", s.address, s.origin);
    }
}

fn nodes(plan: &Plan, summary: &Summary, out: &mut String) {
    for (index, group) in plan.nodes.iter().enumerate() {
        let leaving = if group.deconfigure { " leaving" } else { "" };
        let _ = writeln!(out, "\nNodes{leaving} ({}): {}", group.nodes.len(), group.nodes.join(", "));
        if group.deconfigure {
            let held = plan.deconfigure_refused.as_ref().map(|_| super::leaving::HELD_BACK);
            for step in held.map(str::to_owned).into_iter().chain(super::leaving::steps(group)) {
                let _ = writeln!(out, "  deconfigure: {step}");
            }
        }
        for entry in same::shown(&group.operations) {
            match entry {
                Shown::Other(op) => {
                    let _ = writeln!(out, "  {}", op.headline());
                }
                Shown::Files(files) => file_change(&files, out),
            }
        }
        // A joining node is configured before it is a Node: no safe reboot.
        if summary.group_reboots(index) {
            out.push_str("  (safe reboot required)\n");
        }
    }
}

/// A file's change, or the one change several files share: every path,
/// then the diff once.
fn file_change(files: &Files<'_>, out: &mut String) {
    let sign = if files.created { "+" } else { "~" };
    for path in &files.paths {
        let _ = writeln!(out, "  {sign} {path}");
    }
    let diff = match files.paths.len() {
        1 => files.diff,
        n => {
            let _ = writeln!(out, "      (the same change in each of these {n} files)");
            files.body
        }
    };
    for line in diff.lines() {
        let _ = writeln!(out, "      {line}");
    }
}

fn machine_sets(plan: &Plan, out: &mut String) {
    if plan.machine_sets.is_empty() {
        return;
    }
    out.push_str("\nMachineSets:\n");
    for m in &plan.machine_sets {
        let sign = match m.action {
            MachineSetAction::Create => "+",
            MachineSetAction::Update => "~",
            MachineSetAction::Delete => "-",
        };
        let _ = write!(out, "  {sign} {}", m.name);
        if let Some(replicas) = super::replicas_text(m, "->") {
            let _ = write!(out, " ({replicas})");
        }
        out.push('\n');
        for f in &m.fields {
            let show = |v: &Option<serde_json::Value>| v.as_ref().map_or_else(|| "(none)".to_owned(), show_value);
            let _ = writeln!(out, "      {}: {} -> {}", f.pointer, show(&f.from), show(&f.to));
        }
    }
}
