//! Colour on a terminal, none in a pipe or with NO_COLOR (issue 29, item
//! 9): the text plan's symbols and the diagnostics, through the binary.
//! A test has no terminal, so `CLICOLOR_FORCE=1` stands in for one (the
//! convention cargo honours too); NO_COLOR still wins.

#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use support::GitRepo;

const ESC: &str = "\x1b[";

fn run(repo: &str, args: &[&str], env: &[(&str, &str)]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_winfleet"))
        .args(args)
        .arg("--repo")
        .arg(repo)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn the_text_plan_is_coloured_only_when_asked_and_never_with_no_color() {
    let case = support::fixture("plan/change-mirror-and-proxy");
    let git = GitRepo::new();
    git.commit_dir(&case.join("base"), "base");
    git.commit_dir(&case.join("head"), "head");
    let repo = git.path().to_str().unwrap();
    let plan = ["plan", "--base", "HEAD~1"];

    let (piped, _) = run(repo, &plan, &[]);
    assert!(!piped.contains(ESC) && piped.contains("  ~ 192.0.2.10"), "{piped}");
    let (forced, _) = run(repo, &plan, &[("CLICOLOR_FORCE", "1")]);
    assert!(forced.contains("\x1b[33m  ~ 192.0.2.10\x1b[0m"), "{forced:?}");
    assert!(forced.contains("\x1b[31m      -[host"), "{forced:?}");
    assert!(forced.contains("\x1b[32m      +[host"), "{forced:?}");
    let (no_color, _) = run(repo, &plan, &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]);
    assert_eq!(no_color, piped, "NO_COLOR wins");
    // Markdown and JSON are never coloured.
    let (markdown, _) = run(repo, &["plan", "--base", "HEAD~1", "--output", "markdown"], &[("CLICOLOR_FORCE", "1")]);
    assert!(!markdown.contains(ESC), "{markdown}");
}

#[test]
fn diagnostics_are_red_for_errors_when_asked() {
    let git = GitRepo::new();
    git.commit_dir(&support::fixture("plan/comment-only/base"), "good");
    std::fs::write(git.path().join("bad.yaml"), "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n").unwrap();
    git.commit_all("bad");
    let repo = git.path().to_str().unwrap();
    let (_, plain) = run(repo, &["validate"], &[]);
    assert!(plain.contains("bad.yaml:2:1: /kind: unknown kind \"Secret\"") && !plain.contains(ESC), "{plain}");
    let (_, coloured) = run(repo, &["validate"], &[("CLICOLOR_FORCE", "1")]);
    assert!(coloured.contains("\x1b[31mbad.yaml:2:1: /kind: unknown kind \"Secret\""), "{coloured:?}");
}
