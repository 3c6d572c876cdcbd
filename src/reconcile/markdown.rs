//! A live round (`plan --live --output markdown`) as a pull-request comment
//! within `--max-bytes`, which it never exceeds: the marker, a title and the
//! round's summary lines first, so a reviewer reads the counts before the
//! detail and a shortened comment keeps them; then the report as text in a
//! code block, cut only between lines, with a note saying what was left
//! out and how to see it. Pure.

use std::fmt::Write;

use super::report::RoundReport;
use crate::plan::markdown::{MARKER, MIN_MAX_BYTES};

/// The longest code fence used; a report with a run of backticks this
/// long has them shown as quotes.
const MAX_FENCE: usize = 16;

const TITLE: &str = "### winfleet plan --live: a dry run against the live fleet\n\n";

impl RoundReport {
    /// The round as markdown of at most `max_bytes` bytes (at least
    /// [`MIN_MAX_BYTES`]).
    pub fn render_markdown(&self, max_bytes: usize) -> String {
        let max_bytes = max_bytes.max(MIN_MAX_BYTES);
        let mut text = self.render_text();
        let mut longest = longest_backticks(&text);
        if longest >= MAX_FENCE {
            // A fence that long would eat the budget: the text's backticks
            // are shown as quotes instead, as in the plan's table cells.
            text = text.replace('`', "'");
            longest = 0;
        }
        let fence = "`".repeat(longest.max(2) + 1);
        let (open, close) = (format!("{fence}text\n"), format!("{fence}\n"));
        let fences = open.len() + close.len();
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        // The note as long as it can be (every line left out), so the cut
        // below leaves room for it whatever it counts.
        let reserve = 1 + note(max_bytes, lines.len()).len();
        let head = head(&self.summary_lines(), max_bytes.saturating_sub(fences + reserve));
        if head.len() + fences + text.len() <= max_bytes {
            return format!("{head}{open}{text}{close}");
        }
        let room = max_bytes.saturating_sub(head.len() + fences + reserve);
        let (mut kept, mut used) = (0, 0);
        for line in &lines {
            if used + line.len() > room {
                break;
            }
            (kept, used) = (kept + 1, used + line.len());
        }
        let shown: String = lines[..kept].concat();
        format!("{head}{open}{shown}{close}\n{}", note(max_bytes, lines.len() - kept))
    }
}

/// The marker, the title and the summary lines, each in bold, within
/// `room` bytes in all (a line too long for its share is shortened).
fn head(summaries: &[String], room: usize) -> String {
    let mut out = format!("{MARKER}\n{TITLE}");
    // Each line is framed by `**`…`**\n`; a blank line ends the head.
    let share = room.saturating_sub(out.len() + 1) / summaries.len().max(1);
    for line in summaries {
        let line = shorten(&escape(line), share.saturating_sub(5));
        let _ = writeln!(out, "**{line}**");
    }
    out.push('\n');
    out
}

fn note(max_bytes: usize, left_out: usize) -> String {
    format!(
        "> [!NOTE]\n> This comment is shortened to fit {max_bytes} bytes: the report's last {left_out} line(s) are \
         left out. See everything with `winfleet plan --live --output text` (the CI job's artifact) or \
         `--output json`.\n"
    )
}

/// The longest run of backticks in `text`: the code fence must be longer,
/// so that no line of it (a file's diff may hold one) closes the block.
fn longest_backticks(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// Markdown's punctuation in a summary line (a blocked node's reason is
/// free text) taken literally.
fn escape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        if matches!(c, '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '~' | '|' | '#') {
            out.push('\\');
        }
        out.push(if c == '\n' { ' ' } else { c });
    }
    out
}

/// `line` within `max` bytes, cut at a character with "…" when longer
/// (never inside an escape).
fn shorten(line: &str, max: usize) -> String {
    if line.len() <= max {
        return line.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = &line[..end];
    // An escape's backslash cut from its character would escape the "…".
    if cut.ends_with('\\') && !(cut.len() - cut.trim_end_matches('\\').len()).is_multiple_of(2) {
        cut = &cut[..cut.len() - 1];
    }
    format!("{cut}…")
}

#[cfg(test)]
#[path = "markdown_tests.rs"]
mod tests;
