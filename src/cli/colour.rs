//! Colour for people at a terminal: plan symbols, status phases,
//! diagnostics, and the rule the log lines follow too. Only when the stream
//! is a terminal and `NO_COLOR` is unset or empty (<https://no-color.org>);
//! `CLICOLOR_FORCE` set to anything but `0` forces it without a terminal
//! (as cargo and many tools honour), and `NO_COLOR` still wins. JSON and
//! markdown are never coloured. The renderers stay plain: colour is added
//! to their lines here.
//!
//! The escape codes are anstyle's. The decision is written here, not taken
//! from anstream (already in the build through clap): anstream 1.0's
//! `AutoStream::choice` counts `CLICOLOR_FORCE=0` as forcing colour
//! (anstyle-query's `clicolor_force` asks only for a non-empty value), where
//! winfleet documents "set and not 0" (`winfleet man`, docs/usage.md), and
//! it also turns colour off for `TERM=dumb` or unset, which the logs' rule
//! here does not (docs/dependencies.md).

use std::ffi::OsString;
use std::io::IsTerminal;

use anstyle::{AnsiColor, Effects, Style};

const RED: Style = AnsiColor::Red.on_default();
const GREEN: Style = AnsiColor::Green.on_default();
const YELLOW: Style = AnsiColor::Yellow.on_default();
const CYAN: Style = AnsiColor::Cyan.on_default();
const BOLD: Style = Style::new().effects(Effects::BOLD);
const DIM: Style = Style::new().effects(Effects::DIMMED);

/// Which stream the text goes to.
#[derive(Clone, Copy, Debug)]
pub enum Stream {
    /// Results.
    Stdout,
    /// Messages and diagnostics.
    Stderr,
}

/// Whether to colour what goes to `stream`.
pub fn enabled(stream: Stream) -> bool {
    let terminal = match stream {
        Stream::Stdout => std::io::stdout().is_terminal(),
        Stream::Stderr => std::io::stderr().is_terminal(),
    };
    decide(terminal, std::env::var_os("NO_COLOR"), std::env::var_os("CLICOLOR_FORCE"))
}

/// Whether the log lines on stderr (a terminal or not) are coloured: on a
/// terminal and without `NO_COLOR`; `CLICOLOR_FORCE` is for the results
/// and diagnostics, not the logs.
pub fn logs(terminal: bool) -> bool {
    ansi(terminal, std::env::var_os("NO_COLOR"))
}

/// Colour only on a terminal, and never when `NO_COLOR` is set to anything
/// but the empty string (<https://no-color.org>).
fn ansi(terminal: bool, no_color: Option<OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// The logs' rule ([`ansi`]), with `CLICOLOR_FORCE` standing in for the
/// terminal.
fn decide(terminal: bool, no_color: Option<OsString>, force: Option<OsString>) -> bool {
    let forced = force.is_some_and(|v| !v.is_empty() && v != "0");
    ansi(terminal || forced, no_color)
}

fn paint(style: Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}

/// A text plan or round report: additions green, removals red, changes
/// and warnings yellow, diff hunks cyan, the summary bold.
pub fn plan(text: &str) -> String {
    map_lines(text, |body| {
        let trimmed = body.trim_start();
        let colour = if trimmed.starts_with("+++") || trimmed.starts_with("---") {
            Some(BOLD)
        } else if trimmed.starts_with('+') {
            Some(GREEN)
        } else if trimmed.starts_with('-') {
            Some(RED)
        } else if trimmed.starts_with("~ ") || trimmed.starts_with("! ") {
            Some(YELLOW)
        } else if trimmed.starts_with("@@") {
            Some(CYAN)
        } else if trimmed.starts_with("Plan:") {
            Some(BOLD)
        } else {
            None
        };
        match colour {
            Some(c) if !body.is_empty() => paint(c, body),
            _ => body.to_owned(),
        }
    })
}

/// `text` with each line (without its newline) replaced by `line`'s
/// answer; the newlines stay as they are.
fn map_lines(text: &str, mut line: impl FnMut(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for whole in text.split_inclusive('\n') {
        let (body, end) = whole.strip_suffix('\n').map_or((whole, ""), |b| (b, "\n"));
        out.push_str(&line(body));
        out.push_str(end);
    }
    out
}

fn phase_colour(phase: &str) -> Option<Style> {
    Some(match phase {
        "Ready" => GREEN,
        "Failed" | "Conflict" => RED,
        "Progressing" | "Waiting" | "Drifted" => YELLOW,
        "Unknown" => DIM,
        _ => return None,
    })
}

/// `winfleet status`'s table: the word in each table's PHASE column.
pub fn status(text: &str) -> String {
    let mut column: Option<usize> = None;
    map_lines(text, |body| {
        if body.trim().is_empty() {
            column = None;
        } else if let Some(at) = body.find(" PHASE ").map(|i| i + 1).filter(|_| body.chars().all(|c| !c.is_lowercase()))
        {
            column = Some(at);
        } else if let Some(at) = column
            && let Some(rest) = body.get(at..)
        {
            let word = rest.split(' ').next().unwrap_or_default();
            if let Some(c) = phase_colour(word) {
                return format!("{}{}{}", &body[..at], paint(c, word), &rest[word.len()..]);
            }
        }
        body.to_owned()
    })
}

/// A diagnostic line: red for an error, yellow for a warning.
pub fn diagnostic(line: &str, error: bool) -> String {
    paint(if error { RED } else { YELLOW }, line)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESET: anstyle::Reset = anstyle::Reset;

    #[test]
    fn colour_needs_a_terminal_and_no_no_color() {
        assert!(ansi(true, None));
        assert!(ansi(true, Some(OsString::new())));
        assert!(!ansi(true, Some(OsString::from("1"))));
        assert!(!ansi(false, None));
    }

    #[test]
    fn the_escape_codes_are_the_plain_sgr_ones() {
        assert_eq!(paint(RED, "x"), "\x1b[31mx\x1b[0m");
        assert_eq!(paint(GREEN, "x"), "\x1b[32mx\x1b[0m");
        assert_eq!(paint(YELLOW, "x"), "\x1b[33mx\x1b[0m");
        assert_eq!(paint(CYAN, "x"), "\x1b[36mx\x1b[0m");
        assert_eq!(paint(BOLD, "x"), "\x1b[1mx\x1b[0m");
        assert_eq!(paint(DIM, "x"), "\x1b[2mx\x1b[0m");
    }

    #[test]
    fn colour_needs_a_terminal_or_a_force_and_no_color_wins() {
        assert!(decide(true, None, None));
        assert!(!decide(false, None, None));
        assert!(decide(false, None, Some("1".into())));
        assert!(!decide(false, None, Some("0".into())));
        assert!(!decide(true, Some("1".into()), Some("1".into())));
        assert!(decide(true, Some(OsString::new()), None));
    }

    #[test]
    fn plan_lines_are_coloured_by_their_symbol() {
        let text = "Instances:\n  + 10.0.0.1\n  - 10.0.0.2\n  ~ a\n      --- base: x\n      -old\n      +new\n\
                    \n  ! warn\nPlan: 1 to configure\n";
        let out = plan(text);
        assert!(out.contains(&format!("{GREEN}  + 10.0.0.1{RESET}\n")), "{out:?}");
        assert!(out.contains(&format!("{RED}  - 10.0.0.2{RESET}\n")), "{out:?}");
        assert!(out.contains(&format!("{YELLOW}  ~ a{RESET}\n")), "{out:?}");
        assert!(out.contains(&format!("{BOLD}      --- base: x{RESET}\n")), "{out:?}");
        assert!(out.contains(&format!("{RED}      -old{RESET}\n{GREEN}      +new{RESET}\n\n")), "{out:?}");
        assert!(out.starts_with("Instances:\n") && out.ends_with(&format!("{BOLD}Plan: 1 to configure{RESET}\n")));
        assert_eq!(strip(&out), text);
    }

    #[test]
    fn only_the_phase_column_of_the_tables_is_coloured() {
        let text = "Last round: Succeeded\n\nADDRESS   PHASE   NODE  MESSAGE\n10.0.0.1  Ready   n1    Ready at rev\n\
                    10.0.0.2  Failed  n2    -\n\nMACHINESET  PHASE        MESSAGE\nws          Progressing  Ready soon\n";
        let out = status(text);
        assert!(out.contains(&format!("10.0.0.1  {GREEN}Ready{RESET}   n1    Ready at rev\n")), "{out:?}");
        assert!(out.contains(&format!("10.0.0.2  {RED}Failed{RESET}  n2")), "{out:?}");
        assert!(out.contains(&format!("ws          {YELLOW}Progressing{RESET}  Ready soon")), "{out:?}");
        assert!(out.starts_with("Last round: Succeeded\n"), "{out:?}");
        assert_eq!(strip(&out), text);
    }

    fn strip(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find('\x1b') {
            out.push_str(&rest[..at]);
            let after = &rest[at..];
            rest = after.find('m').map_or("", |m| &after[m + 1..]);
        }
        out.push_str(rest);
        out
    }
}
