//! The blocks every section of the plan comment is made of: a collapsible
//! section, escaped inline text, a list of members named up to a count,
//! the note of a cut section. Pure.

use super::{Plan, short};

/// Members a group names in its title, however short the comment.
pub(super) const FEW: usize = 5;

/// Sections with more lines than this start collapsed.
const COLLAPSE_AFTER_LINES: usize = 20;

/// What a cut section says: what it leaves out and how to see it.
pub(super) fn shortened(parts: &[String], see: &str) -> String {
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

/// What a leaving instance's row and a leaving group's title add when the
/// mass-removal guard will refuse.
pub(super) fn held_back(plan: &Plan) -> &'static str {
    if plan.deconfigure_refused.is_some() { ", held back by prune.maxRemovalPercent" } else { "" }
}

/// `a`, `b` and 3 more (5): at most `shown` names.
pub(super) fn members(names: &[&str], shown: usize) -> String {
    let listed: Vec<String> = names.iter().take(shown.max(1)).map(|n| format!("`{n}`")).collect();
    match names.len().saturating_sub(listed.len()) {
        0 => listed.join(", "),
        more => format!("{} and {more} more ({})", listed.join(", "), names.len()),
    }
}

/// The section, or nothing when it does not fit (not even its title).
pub(super) fn within(section: String, budget: usize) -> String {
    if section.len() <= budget { section } else { String::new() }
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
