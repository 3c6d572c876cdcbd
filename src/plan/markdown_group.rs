//! A group of nodes with identical operations in the plan comment: its
//! title, a leaving group's steps, its members, then its operations (files
//! changed alike as one entry, [`super::same`]): the first whole, the
//! names of the others, then more whole ones as the budget allows. Pure.

use std::fmt::Write;

use super::markdown_blocks::{FEW, details, escape, held_back, members, see_all, shortened, within};
use super::same::{self, Shown};
use super::{NodeGroup, Plan, leaving};
use crate::vocab::operation::Operation;

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
/// first operation whole need ([`super::markdown_sections::Section::minimum`]).
pub(super) fn node_group(
    plan: &Plan,
    group: &NodeGroup,
    reboots: bool,
    shown: usize,
    budget: usize,
) -> (String, usize) {
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
    let entries = same::shown(&group.operations);
    let full: Vec<String> = entries.iter().map(|e| full_form(e, shown)).collect();
    let brief: Vec<String> = entries.iter().map(|e| brief_form(e, shown)).collect();
    let diffs = |forms: &[Form]| {
        entries.iter().zip(forms).filter(|(e, f)| **f != Form::Full && matches!(e, Shown::Files(_))).count()
    };
    // File names a shown entry leaves out (an omitted one counts as an
    // operation left out).
    let unnamed_files = |forms: &[Form]| -> usize {
        entries
            .iter()
            .zip(forms)
            .filter(|(_, f)| **f != Form::Omitted)
            .map(|(e, _)| e.members().saturating_sub(shown.max(1)))
            .sum()
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
        if unnamed_files(forms) > 0 {
            parts.push(format!("{} file name(s)", unnamed_files(forms)));
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

/// An entry whole: a file's diff, or the change files share with at most
/// `shown` of their names.
fn full_form(entry: &Shown<'_>, shown: usize) -> String {
    match entry {
        Shown::Files(files) if files.paths.len() == 1 => {
            format!("{} `{}`\n\n```diff\n{}```\n\n", sign(files.created), files.paths[0], files.diff)
        }
        Shown::Files(files) => {
            format!("{}\n```diff\n{}```\n\n", brief_form(entry, shown), files.body)
        }
        Shown::Other(op) => operation_line(op) + "\n",
    }
}

/// An entry by name: a file's path, the files' count and at most `shown`
/// of their names.
fn brief_form(entry: &Shown<'_>, shown: usize) -> String {
    match entry {
        Shown::Files(files) if files.paths.len() == 1 => format!("{} `{}`\n", sign(files.created), files.paths[0]),
        Shown::Files(files) => format!(
            "{} {} files, the same change in each: {}\n",
            sign(files.created),
            files.paths.len(),
            members(&files.paths, shown)
        ),
        Shown::Other(op) => operation_line(op),
    }
}

fn sign(created: bool) -> &'static str {
    if created { "➕" } else { "✏️" }
}

fn operation_line(op: &Operation) -> String {
    match op {
        Operation::WriteFile { path, created, .. } => format!("{} `{path}`\n", sign(*created)),
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
