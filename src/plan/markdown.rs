//! The plan as a pull-request comment (GitHub/GitLab markdown), within a
//! byte budget (`--max-bytes`) that it never exceeds.
//!
//! The budget is spent in order of review value: the summary and the
//! warnings (each whole, in order, as many as fit) first; then each
//! section's core: one full representative diff per group of nodes with
//! identical operations (named by count and a few members), the instances grouped by identical change, each MachineSet;
//! then per-node detail (every member named). A section cut to fit says
//! what it leaves out and how to see it (`winfleet plan … --output text`).
//! The sections themselves are in [`super::markdown_sections`]. Pure.

use std::fmt::Write;

use super::budget::water_fill;
use super::markdown_blocks::{FEW, escape, see_all};
use super::markdown_sections::Section;
use super::summary::Summary;
use super::{Plan, short};

/// The first line of every plan comment: a CI job finds its own comment by
/// it and updates it instead of adding another (as Atlantis does).
pub const MARKER: &str = "<!-- winfleet-plan -->";

/// GitHub's limit for a comment is 65,536 characters; this leaves room.
pub const DEFAULT_MAX_BYTES: usize = 60_000;

/// The smallest budget: the marker, the title, the summary line and the
/// note that the comment is shortened always fit in it (together about 650
/// bytes with six-digit counts; the rest is margin). `--max-bytes` refuses
/// less (a usage error), and [`render_within`] treats less as this.
pub const MIN_MAX_BYTES: usize = 1_000;

/// Renders a plan as markdown ready to post as a PR comment, whole.
pub fn render(plan: &Plan) -> String {
    render_within(plan, usize::MAX)
}

/// Renders a plan as markdown of at most `max_bytes` bytes (at least
/// [`MIN_MAX_BYTES`]): whole when it fits, else shortened in order of
/// review value (see the module's doc), with a note on how to see
/// everything. It is cut only between blocks (a warning, a table row, an
/// operation, a section), never inside one.
pub fn render_within(plan: &Plan, max_bytes: usize) -> String {
    let max_bytes = max_bytes.max(MIN_MAX_BYTES);
    let sections = sections(plan);
    let whole: Vec<String> = sections.iter().map(|s| s.render(usize::MAX, usize::MAX)).collect();
    let (head, _) = head(plan, usize::MAX);
    if head.len() + whole.iter().map(String::len).sum::<usize>() <= max_bytes {
        return assemble(&head, "", &whole);
    }
    let n = sections.len();
    let reserve = note(plan, max_bytes, n, n, plan.warnings.len()).len();
    let (head, dropped) = self::head(plan, max_bytes.saturating_sub(reserve));
    let room = max_bytes.saturating_sub(head.len() + reserve);
    let mut chosen = allocate(&sections, &whole, room);
    loop {
        let shortened = chosen.iter().zip(&whole).filter(|(c, w)| c != w && !c.is_empty()).count();
        let left_out = chosen.iter().filter(|c| c.is_empty()).count();
        let out = assemble(&head, &note(plan, max_bytes, shortened, left_out, dropped), &chosen);
        // The allocation keeps within the room; should it ever not, whole
        // sections go, the last first, rather than a cut inside one.
        match chosen.iter().rposition(|c| !c.is_empty()) {
            Some(last) if out.len() > max_bytes => chosen[last].clear(),
            _ => return out,
        }
    }
}

/// Each section's text within `room` bytes in all: every core first (the
/// budget shared evenly when they do not all fit), then detail.
fn allocate(sections: &[Section<'_>], whole: &[String], room: usize) -> Vec<String> {
    let core: Vec<String> = sections.iter().map(|s| s.render(FEW, usize::MAX)).collect();
    let core_bytes: usize = core.iter().map(String::len).sum();
    if core_bytes > room {
        // Every representative part first, then the rest of each core.
        let minimum: Vec<usize> = sections.iter().map(Section::minimum).collect();
        let first = water_fill(&minimum, room);
        let rest: Vec<usize> = core.iter().zip(&minimum).map(|(c, m)| c.len().saturating_sub(*m)).collect();
        let second = water_fill(&rest, room - first.iter().sum::<usize>());
        let shares: Vec<usize> = first.iter().zip(&second).map(|(a, b)| a + b).collect();
        let mut chosen: Vec<String> = sections.iter().zip(&shares).map(|(s, b)| s.render(FEW, *b)).collect();
        // What the cut sections left unused goes round once more.
        let unused = room.saturating_sub(chosen.iter().map(String::len).sum());
        let wants: Vec<usize> = core.iter().zip(&chosen).map(|(c, x)| c.len() - x.len().min(c.len())).collect();
        let extra = water_fill(&wants, unused);
        for (i, s) in sections.iter().enumerate() {
            if extra[i] > 0 {
                let again = s.render(FEW, chosen[i].len() + extra[i]);
                if again.len() > chosen[i].len() {
                    chosen[i] = again;
                }
            }
        }
        return chosen;
    }
    let wants: Vec<usize> = whole.iter().zip(&core).map(|(w, c)| w.len().saturating_sub(c.len())).collect();
    let shares = water_fill(&wants, room - core_bytes);
    sections
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let fits = |text: &String| text.len() <= core[i].len() + shares[i];
            if fits(&whole[i]) {
                return whole[i].clone();
            }
            // The most members named that fit (rendering grows with them).
            let (mut low, mut high) = (FEW, s.max_members());
            let mut best = core[i].clone();
            while low < high {
                let mid = low + (high - low).div_ceil(2);
                let text = s.render(mid, usize::MAX);
                if fits(&text) {
                    (low, best) = (mid, text);
                } else {
                    high = mid - 1;
                }
            }
            best
        })
        .collect()
}

fn sections(plan: &Plan) -> Vec<Section<'_>> {
    let mut out = Vec::new();
    if !plan.warnings_before.is_empty() {
        out.push(Section::Before(plan));
    }
    let i = &plan.instances;
    if !(i.configure.is_empty() && i.update.is_empty() && i.deconfigure.is_empty()) {
        out.push(Section::Instances(plan));
    }
    let reboots = Summary::of(plan).group_reboots;
    out.extend(plan.nodes.iter().zip(reboots).map(|(g, r)| Section::Group(plan, g, r > 0)));
    out.extend(plan.machine_sets.iter().map(|m| Section::MachineSet(plan, m)));
    out
}

/// The marker, the title, the summary and the warnings within `room`, in
/// order, each whole; also returns how many warnings did not fit (the note
/// counts them).
fn head(plan: &Plan, room: usize) -> (String, usize) {
    let mut out = format!("{MARKER}\n");
    let _ = writeln!(out, "### winfleet plan: `{}` → `{}`\n", short(plan.base.as_deref()), short(plan.head.as_deref()));
    if !plan.has_changes() {
        out.push_str("**No changes.**\n");
    } else {
        let _ = writeln!(out, "**{}**", Summary::of(plan).line());
    }
    if plan.warnings.is_empty() {
        return (out, 0);
    }
    out.push('\n');
    let mut dropped = 0;
    for warning in &plan.warnings {
        let frame = format!("> [!WARNING]\n> {}\n\n", escape(&warning.to_string()));
        if dropped == 0 && out.len() + frame.len() <= room {
            out.push_str(&frame);
        } else {
            dropped += 1;
        }
    }
    (out, dropped)
}

/// The note a shortened comment carries under its warnings.
fn note(plan: &Plan, max_bytes: usize, shortened: usize, left_out: usize, warnings: usize) -> String {
    let mut what = format!("{shortened} section(s) show less than everything, each saying what it leaves out");
    if left_out > 0 {
        let _ = write!(what, "; {left_out} section(s) are left out");
    }
    if warnings > 0 {
        let _ = write!(what, "; the last {warnings} warning(s) are left out");
    }
    format!(
        "> [!NOTE]\n> This comment is shortened to fit {max_bytes} bytes: {what}. See everything with {} \
         (the CI job's artifact) or `--output json`.\n\n",
        see_all(plan)
    )
}

fn assemble(head: &str, note: &str, sections: &[String]) -> String {
    let mut out = String::from(head);
    let more = !note.is_empty() || sections.iter().any(|s| !s.is_empty());
    if more && !out.ends_with("\n\n") {
        out.push('\n');
    }
    out.push_str(note);
    sections.iter().for_each(|s| out.push_str(s));
    out
}

#[cfg(test)]
#[path = "markdown_tests.rs"]
mod tests;
