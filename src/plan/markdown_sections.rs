//! The sections of the plan comment, each rendered within a byte budget
//! and naming at most a given number of members per group: the instances
//! (grouped by identical change), a group of nodes with identical
//! operations ([`super::markdown_group`]), a MachineSet, the warnings
//! already true before. A section cut to fit says what it leaves out and
//! how to see it. Pure.

use super::markdown_blocks::{FEW, details, escape, held_back, members, see_all, shortened, within};
use super::markdown_group as group;
use super::same::{self, Shown};
use super::{MachineSetAction, MachineSetChange, NodeGroup, Plan, show_value};

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
            Section::Group(_, group, _) => {
                let files = same::shown(&group.operations).iter().map(Shown::members).max().unwrap_or(0);
                group.nodes.len().max(files)
            }
            Section::Before(_) | Section::MachineSet(..) => 0,
        }
    }

    /// The section naming at most `members` members per group, within
    /// `budget` bytes; empty when not even its title fits.
    pub(super) fn render(&self, members: usize, budget: usize) -> String {
        let (title, lines, unnamed) = match self {
            Section::Before(plan) => before(plan),
            Section::Instances(plan) => instances(plan, members),
            Section::Group(plan, group, reboots) => return group::node_group(plan, group, *reboots, members, budget).0,
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
            Section::Group(plan, group, reboots) => group::node_group(plan, group, *reboots, FEW, usize::MAX).1,
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
