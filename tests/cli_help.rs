//! Issue 39, item 11: the command line says only what it means. `resume`
//! takes no `--reason` (it would be sent nowhere); `plan --help` and
//! `apply --help` group their options under headings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

/// The headings of a `--help` text, in order.
fn headings(help: &str) -> Vec<&str> {
    help.lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(':') && !l.is_empty())
        .filter(|l| !l.starts_with("Usage"))
        .collect()
}

#[test]
fn resume_refuses_a_reason_it_would_send_nowhere() {
    let token = tempfile::NamedTempFile::new().unwrap();
    let (code, _, err) =
        support::winfleet(&["resume", "--token-file", token.path().to_str().unwrap(), "--reason", "fixed"]);
    assert_eq!(
        (code, err.as_str()),
        (
            1,
            "error: unexpected argument '--reason' found\n\nUsage: winfleet resume --token-file <FILE>\n\n\
             For more information, try '--help'.\n"
        )
    );
    let (code, help, _) = support::winfleet(&["suspend", "--help"]);
    assert!(code == 0 && help.contains("--reason <TEXT>"), "suspend keeps its reason:\n{help}");
}

#[test]
fn plan_help_groups_its_options_under_headings() {
    let (code, help, err) = support::winfleet(&["plan", "--help"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        headings(&help),
        [
            "Options:",
            "Repository:",
            "Output:",
            "Live plan (--live):",
            "Nodes (SSH):",
            "Cluster:",
            "Rollout:",
            "Signed commits:"
        ],
        "{help}"
    );
}

#[test]
fn apply_help_groups_its_options_under_the_same_headings() {
    let (code, help, err) = support::winfleet(&["apply", "--help"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        headings(&help),
        ["Options:", "Repository:", "Signed commits:", "Nodes (SSH):", "Cluster:", "Rollout:"],
        "{help}"
    );
}
