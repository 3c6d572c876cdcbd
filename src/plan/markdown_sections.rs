//! The sections of the plan comment, each rendered within a byte budget
//! and naming at most a given number of members per group: the instances
//! (grouped by identical change), a group of nodes with identical
//! operations (its representative diff first, then the names of the other
//! operations, then more diffs), a MachineSet, the warnings already true
//! before. A section cut to fit says what it leaves out and how to see
//! it. Pure.

use std::fmt::Write;

use super::{MachineSetAction, MachineSetChange, NodeGroup, Plan, leaving, short, show_value};
use crate::vocab::operation::Operation;

/// Members a group names in its title, however short the comment.
pub(super) const FEW: usize = 5;

/// Sections with more lines than this start collapsed.
const COLLAPSE_AFTER_LINES: usize = 20;

/// One section of the comment.
pub(super) enum Section<'a> {
    /// The warnings the base revision has as well (folded).
    Before(&'a Plan),
    /// Instances to configure, update or deconfigure.
    Instances(&'a Plan),
    /// Nodes with identical operations, and whether they take a safe
    /// reboot ([`super::summary::Summary::group_reboots`]).
    Group(&'a Plan, &'a NodeGroup, bool),
    /// One MachineSet.
    MachineSet(&'a Plan, &'a MachineSetChange),
}

impl Section<'_> {
    /// The most members one of its groups has: naming more changes nothing.
    pub(super) fn max_members(&self) -> usize {
        match self {
            Section::Instances(plan) => rows(plan).iter().map(|r| r.members.len()).max().unwrap_or(0),
            Section::Group(_, group, _) => group.nodes.len(),
            Section::Before(_) | Section::MachineSet(..) => 0,
        }
    }

    /// The section naming at most `members` members per group, within
    /// `budget` bytes; empty when not even its title fits.
    pub(super) fn render(&self, members: usize, budget: usize) -> String {
        let (title, lines, unnamed) = match self {
            Section::Before(plan) => before(plan),
            Section::Instances(plan) => instances(plan, members),
            Section::Group(plan, group, reboots) => return node_group(plan, group, *reboots, members, budget).0,
            Section::MachineSet(_, m) => machine_set(m),
        };
        let room = budget.saturating_sub(details(&title, "").len());
        let see = see_all(self.plan());
        let note = |hidden: usize| {
            let parts: Vec<String> =
                (hidden > 0).then(|| format!("{hidden} line(s)")).into_iter().chain(unnamed.clone()).collect();
            (!parts.is_empty()).then(|| shortened(&parts, &see))
        };
        let all: usize = lines.iter().map(String::len).sum();
        if all + note(0).map_or(0, |n| n.len()) <= room {
            return details(&title, &(lines.concat() + &note(0).unwrap_or_default()));
        }
        let Some(room) = room.checked_sub(note(lines.len()).map_or(0, |n| n.len())) else { return String::new() };
        let mut body = String::new();
        let mut shown = 0;
        for line in &lines {
            if body.len() + line.len() > room {
                break;
            }
            body.push_str(line);
            shown += 1;
        }
        body.push_str(&note(lines.len() - shown).unwrap_or_default());
        within(details(&title, &body), budget)
    }

    /// The budget the section's representative part needs: a group's
    /// title and first operation whole (a leaving group's steps too); the
    /// instances' and a MachineSet's rows; nothing for the warnings
    /// already true before.
    pub(super) fn minimum(&self) -> usize {
        match self {
            Section::Group(plan, group, reboots) => node_group(plan, group, *reboots, FEW, usize::MAX).1,
            Section::Before(_) => 0,
            Section::Instances(_) | Section::MachineSet(..) => self.render(FEW, usize::MAX).len(),
        }
    }

    fn plan(&self) -> &Plan {
        match self {
            Section::Before(plan)
            | Section::Instances(plan)
            | Section::Group(plan, ..)
            | Section::MachineSet(plan, _) => plan,
        }
    }
}

/// What a cut section says: what it leaves out and how to see it.
fn shortened(parts: &[String], see: &str) -> String {
    format!("\n_Shortened to fit: {} not shown. See all: {see}._\n", parts.join(", "))
}

/// How to see everything: the text plan of the same two revisions.
pub(super) fn see_all(plan: &Plan) -> String {
    match (&plan.base, &plan.head) {
        (Some(base), Some(head)) => {
            format!("`winfleet plan --base {} --head {} --output text`", short(Some(base)), short(Some(head)))
        }
        _ => "`winfleet plan … --output text`".to_owned(),
    }
}

type Parts = (String, Vec<String>, Option<String>);

fn before(plan: &Plan) -> Parts {
    let title = format!("{} warning(s) already true before this change", plan.warnings_before.len());
    (title, plan.warnings_before.iter().map(|w| format!("- {}\n", escape(&w.to_string()))).collect(), None)
}

/// Instances with an identical change: one row.
struct Row<'a> {
    sign: &'static str,
    members: Vec<&'a str>,
    change: String,
}

fn rows(plan: &Plan) -> Vec<Row<'_>> {
    fn add<'a>(rows: &mut Vec<Row<'a>>, sign: &'static str, member: &'a str, change: String) {
        match rows.iter_mut().find(|r| r.sign == sign && r.change == change) {
            Some(row) => row.members.push(member),
            None => rows.push(Row { sign, members: vec![member], change }),
        }
    }
    let mut rows = Vec::new();
    let i = &plan.instances;
    for s in &i.configure {
        let change = format!(
            "configure: user `{}`, port {}, {} (from `{}`)",
            escape(&s.username),
            s.port,
            s.shell,
            escape(&s.origin)
        );
        add(&mut rows, "➕", &s.address, change);
    }
    for u in &i.update {
        let show = |v: &Option<String>| v.as_ref().map_or_else(|| "(none)".to_owned(), |s| format!("`{}`", escape(s)));
        let changes: Vec<String> =
            u.changes.iter().map(|c| format!("{}: {} → {}", escape(&c.setting), show(&c.from), show(&c.to))).collect();
        add(&mut rows, "✏️", &u.address, changes.join("<br>"));
    }
    let held = held_back(plan);
    for s in &i.deconfigure {
        add(&mut rows, "➖", &s.address, format!("deconfigure{held} (was in `{}`)", escape(&s.origin)));
    }
    rows
}

/// What a leaving instance's row and a leaving group's title add when the
/// mass-removal guard will refuse.
fn held_back(plan: &Plan) -> &'static str {
    if plan.deconfigure_refused.is_some() { ", held back by prune.maxRemovalPercent" } else { "" }
}

/// `a`, `b` and 3 more (5): at most `shown` names.
fn members(names: &[&str], shown: usize) -> String {
    let listed: Vec<String> = names.iter().take(shown.max(1)).map(|n| format!("`{n}`")).collect();
    match names.len().saturating_sub(listed.len()) {
        0 => listed.join(", "),
        more => format!("{} and {more} more ({})", listed.join(", "), names.len()),
    }
}

fn instances(plan: &Plan, shown: usize) -> Parts {
    let rows = rows(plan);
    let mut lines = vec!["| | instance(s) | change |\n|---|---|---|\n".to_owned()];
    let mut unnamed = 0;
    for row in &rows {
        unnamed += row.members.len().saturating_sub(shown.max(1));
        lines.push(format!("| {} | {} | {} |\n", row.sign, members(&row.members, shown), row.change));
    }
    let note = (unnamed > 0).then(|| format!("{unnamed} instance address(es)"));
    ("Instances".to_owned(), lines, note)
}

fn machine_set(m: &MachineSetChange) -> Parts {
    let verb = match m.action {
        MachineSetAction::Create => "create",
        MachineSetAction::Update => "update",
        MachineSetAction::Delete => "delete",
    };
    let replicas = super::replicas_text(m, "→").map_or(String::new(), |r| format!(", {r}"));
    let mut lines = vec!["| field | base | head |\n|---|---|---|\n".to_owned()];
    for f in &m.fields {
        let show = |v: &Option<serde_json::Value>| {
            v.as_ref().map_or_else(|| "—".to_owned(), |v| format!("`{}`", escape(&show_value(v))))
        };
        lines.push(format!("| `{}` | {} | {} |\n", f.pointer, show(&f.from), show(&f.to)));
    }
    (format!("MachineSet `{}`: {verb}{replicas}", m.name), lines, None)
}

fn group_title(plan: &Plan, group: &NodeGroup, reboots: bool) -> String {
    let names: Vec<&str> = group.nodes.iter().map(String::as_str).collect();
    let ops = group.operations.len();
    if group.deconfigure {
        let held = held_back(plan);
        let reboot = if group.reboot_required { ", then a reboot" } else { "" };
        format!(
            "{} node(s) leave: {} — deconfigure, {ops} operation(s){reboot}{held}",
            names.len(),
            members(&names, FEW)
        )
    } else {
        // A joining node is configured before it is a Node: no safe reboot.
        let reboot = if reboots { ", safe reboot required" } else { "" };
        format!("{} node(s): {} — {ops} operation(s){reboot}", names.len(), members(&names, FEW))
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Form {
    Full,
    Brief,
    Omitted,
}

/// A group: its title, a leaving group's deconfigure steps, its members
/// (when more than the title names), then its operations: the first in
/// full (the representative diff), the names of the others, then as many
/// more in full as fit, in order. Also returns the budget its title and
/// first operation whole need ([`Section::minimum`]).
fn node_group(plan: &Plan, group: &NodeGroup, reboots: bool, shown: usize, budget: usize) -> (String, usize) {
    let title = group_title(plan, group, reboots);
    let mut room = budget.saturating_sub(details(&title, "").len());
    let mut body = String::new();
    if group.deconfigure {
        if plan.deconfigure_refused.is_some() {
            let _ = writeln!(body, "⚠️ {}\n", leaving::HELD_BACK);
        }
        body.push_str("**Deconfigure**, in this order:\n\n");
        for (n, step) in leaving::steps(group).iter().enumerate() {
            let _ = writeln!(body, "{}. {}", n + 1, escape(step));
        }
        body.push('\n');
    }
    let names: Vec<&str> = group.nodes.iter().map(String::as_str).collect();
    let named = if names.len() > FEW && shown > FEW {
        let line = format!("Nodes: {}\n\n", members(&names, shown));
        body.push_str(&line);
        shown.min(names.len())
    } else {
        FEW.min(names.len())
    };
    let full: Vec<String> = group.operations.iter().map(full_form).collect();
    let brief: Vec<String> = group.operations.iter().map(brief_form).collect();
    let diffs = |forms: &[Form]| {
        group
            .operations
            .iter()
            .zip(forms)
            .filter(|(op, f)| **f != Form::Full && matches!(op, Operation::WriteFile { .. }))
            .count()
    };
    let note = |forms: &[Form]| {
        let omitted = forms.iter().filter(|f| **f == Form::Omitted).count();
        let mut parts = Vec::new();
        if diffs(forms) > 0 {
            parts.push(format!("{} file diff(s)", diffs(forms)));
        }
        if omitted > 0 {
            parts.push(format!("{omitted} operation(s)"));
        }
        if named < names.len() {
            parts.push(format!("{} node name(s)", names.len() - named));
        }
        (!parts.is_empty()).then(|| shortened(&parts, &see_all(plan)))
    };
    let worst = vec![Form::Omitted; full.len()];
    let minimum = details(&title, "").len()
        + body.len()
        + full.first().map_or(0, String::len)
        + note(&worst).map_or(0, |n| n.len());
    if body.len() > room {
        return (String::new(), minimum);
    }
    let all_full = vec![Form::Full; full.len()];
    let need: usize = full.iter().map(String::len).sum();
    let mut forms = all_full.clone();
    if body.len() + need > room || note(&all_full).is_some() {
        room = room.saturating_sub(body.len() + note(&worst).map_or(0, |n| n.len()));
        forms = fit_forms(&full, &brief, room);
    }
    for (j, form) in forms.iter().enumerate() {
        match form {
            Form::Full => body.push_str(&full[j]),
            Form::Brief => body.push_str(&brief[j]),
            Form::Omitted => {}
        }
    }
    if let Some(note) = note(&forms) {
        body.push_str(&note);
    }
    (within(details(&title, &body), budget), minimum)
}

/// The section, or nothing when it does not fit (not even its title).
fn within(section: String, budget: usize) -> String {
    if section.len() <= budget { section } else { String::new() }
}

/// Which operations are shown in full, by name, or not at all within
/// `room`: the first in full (the representative diff), then every name
/// that fits, then more in full, in order.
fn fit_forms(full: &[String], brief: &[String], room: usize) -> Vec<Form> {
    let mut forms = vec![Form::Omitted; full.len()];
    let mut used = 0;
    if let (Some(f), Some(b)) = (full.first(), brief.first()) {
        if f.len() <= room {
            (forms[0], used) = (Form::Full, f.len());
        } else if b.len() <= room {
            (forms[0], used) = (Form::Brief, b.len());
        }
    }
    for j in 1..full.len() {
        if used + brief[j].len() > room {
            break;
        }
        forms[j] = Form::Brief;
        used += brief[j].len();
    }
    for j in 1..full.len() {
        let grow = full[j].len().saturating_sub(brief[j].len());
        if forms[j] == Form::Brief && used + grow <= room {
            forms[j] = Form::Full;
            used += grow;
        }
    }
    forms
}

fn full_form(op: &Operation) -> String {
    match op {
        Operation::WriteFile { path, created, diff } => {
            format!("{} `{}`\n\n```diff\n{}```\n\n", if *created { "➕" } else { "✏️" }, path, diff)
        }
        other => brief_form(other) + "\n",
    }
}

fn brief_form(op: &Operation) -> String {
    match op {
        Operation::WriteFile { path, created, .. } => format!("{} `{path}`\n", if *created { "➕" } else { "✏️" }),
        Operation::RemoveRegistry { path, refused: None, kept } if kept.is_empty() => {
            format!("➖ `{path}` (registry directory removed)\n")
        }
        Operation::RemoveRegistry { path, refused: Some(reason), .. } => {
            format!("⚠️ `{path}` (registry directory kept: {})\n", escape(reason))
        }
        Operation::SetEnv { name, from, to } => {
            let from = from.as_ref().map_or_else(|| "(unset)".to_owned(), |f| format!("`{}`", escape(f)));
            format!("✏️ environment `{name}`: {from} → `{}`\n", escape(to))
        }
        Operation::UnsetEnv { name, from } => format!("➖ environment `{name}`: `{}` → (unset)\n", escape(from)),
        Operation::RemoveService { name } => format!("➖ service `{}` (stopped and deleted)\n", escape(name)),
        other => format!("`{}`\n", escape(&other.headline())),
    }
}

/// A collapsible section, open when short.
pub(super) fn details(summary: &str, body: &str) -> String {
    let open = if body.lines().count() > COLLAPSE_AFTER_LINES { "" } else { " open" };
    format!("<details{open}><summary>{summary}</summary>\n\n{body}\n</details>\n\n")
}

/// Escapes characters that would break a table cell or inline code.
pub(super) fn escape(s: &str) -> String {
    s.replace('|', "\\|").replace('`', "'").replace('\n', " ")
}
