//! The command line's own documentation and logs: shell completions and
//! man pages come from the same definition as the arguments (with EXIT
//! STATUS and ENVIRONMENT sections), the README's usage lists every
//! subcommand, `apply` needs no `--once`, and `--log-format json` makes
//! every stderr line JSON, usage errors included.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

const SUBCOMMANDS: [&str; 10] =
    ["validate", "render", "plan", "apply", "run", "status", "payload", "import", "suspend", "resume"];

/// The subcommands `winfleet --help` lists (the clap definition itself).
fn listed_subcommands() -> Vec<String> {
    let (code, help, err) = winfleet(&["--help"]);
    assert_eq!(code, 0, "{err}");
    let commands = help.split("Commands:").nth(1).unwrap().split("Options:").next().unwrap();
    commands
        .lines()
        .filter_map(|l| l.strip_prefix("  ")?.split_whitespace().next().map(str::to_owned))
        .filter(|name| name != "help")
        .collect()
}

fn winfleet(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_winfleet")).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn completions_for_every_shell_name_every_subcommand() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, out, err) = winfleet(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        for sub in SUBCOMMANDS {
            assert!(out.contains(sub), "{shell} completions miss {sub}:\n{out}");
        }
        assert!(out.contains("log-format"), "{shell}: the global flag completes too");
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    let (code, out, err) = winfleet(&["completions", "cmd.exe"]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("cmd.exe"), "{err}");
}

#[test]
fn the_man_page_lists_the_subcommands_and_each_has_its_own_page() {
    let (code, page, err) = winfleet(&["man"]);
    assert_eq!(code, 0, "{err}");
    assert!(page.contains(".TH winfleet 1"), "{page}");
    for sub in SUBCOMMANDS {
        assert!(page.contains(&format!("winfleet\\-{sub}(1)")), "the page lists {sub}:\n{page}");
    }
    let (code, apply, err) = winfleet(&["man", "apply"]);
    assert_eq!(code, 0, "{err}");
    assert!(apply.contains(".TH winfleet-apply 1"), "{apply}");
    assert!(apply.contains("\\-\\-drain\\-timeout"), "{apply}");
    assert!(apply.contains("\\-\\-log\\-format"), "global flags are on every page: {apply}");
    let (code, digest, err) = winfleet(&["man", "payload", "digest"]);
    assert_eq!(code, 0, "{err}");
    assert!(digest.contains(".TH winfleet-payload-digest 1"), "{digest}");
    let (code, _, err) = winfleet(&["man", "nonsense"]);
    assert_eq!(code, 1);
    assert!(err.contains("no such subcommand: nonsense"), "{err}");
}

#[test]
fn with_log_format_json_every_stderr_line_of_a_failing_validate_is_json() {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/invalid/fleet-drift-interval-zero/repo");
    let repo = dir.to_str().unwrap();
    let (code, out, err) = winfleet(&["validate", "--repo", repo, "--log-format", "json"]);
    assert_eq!(code, 1, "{out}{err}");
    let lines: Vec<Value> =
        err.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    let diagnostic = lines.iter().find(|l| l["fields"]["pointer"] == "/spec/drift/interval").unwrap();
    assert_eq!(diagnostic["level"], "ERROR", "{diagnostic}");
    assert_eq!(diagnostic["fields"]["path"], "fleet.yaml");
    assert!(lines.iter().any(|l| l["fields"]["message"].as_str().unwrap().starts_with("invalid: 1 error(s)")), "{err}");
    // The same run in text: the familiar lines.
    let (_, _, text) = winfleet(&["validate", "--repo", repo]);
    assert!(text.contains("fleet.yaml:17:5: /spec/drift/interval:"), "{text}");
}

#[test]
fn the_readme_usage_lists_every_subcommand() {
    let readme = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let usage = readme.split("## Usage").nth(1).unwrap().split("```").nth(1).unwrap();
    let listed = listed_subcommands();
    for sub in SUBCOMMANDS {
        assert!(listed.iter().any(|l| l == sub), "winfleet --help lists {sub}: {listed:?}");
    }
    for sub in &listed {
        assert!(
            usage.lines().any(|l| l.starts_with(&format!("winfleet {sub} "))),
            "README usage lacks {sub}:\n{usage}"
        );
    }
}

#[test]
fn the_man_page_has_exit_status_and_environment_sections() {
    let (code, page, err) = winfleet(&["man"]);
    assert_eq!(code, 0, "{err}");
    let exit = page.split(".SH \"EXIT STATUS\"").nth(1).expect("an EXIT STATUS section");
    for code in ["0", "1", "2", "3", "4"] {
        assert!(exit.contains(&format!("\\fB{code}\\fR")), "exit status {code}:\n{exit}");
    }
    let environment = page.split(".SH ENVIRONMENT").nth(1).expect("an ENVIRONMENT section");
    for var in
        ["WINFLEET_LOG_FORMAT", "WINFLEET_REPO", "WINFLEET_CONTROL_TOKEN_FILE", "WINFLEET_KUBECONFIG", "RUST_LOG"]
    {
        assert!(environment.contains(&format!("\\fB{}\\fR", var.replace('-', "\\-"))), "{var}:\n{environment}");
    }
    let (code, apply, err) = winfleet(&["man", "apply"]);
    assert_eq!(code, 0, "{err}");
    let environment = apply.split(".SH ENVIRONMENT").nth(1).expect("every page has one");
    assert!(environment.contains("\\-\\-log\\-format"), "{environment}");
}

#[test]
fn apply_runs_without_once_and_still_accepts_it() {
    let missing = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/no-such-repo");
    let repo = missing.to_str().unwrap();
    for args in [vec!["apply", "--repo", repo], vec!["apply", "--once", "--repo", repo]] {
        let (code, out, err) = winfleet(&args);
        // Past parsing: the missing repository is the error, not a flag.
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(!err.contains("Usage:") && !err.contains("--once"), "{args:?}: {err}");
        assert!(err.contains("no-such-repo"), "{args:?}: {err}");
    }
}

#[test]
fn usage_errors_honour_log_format_json() {
    for args in [
        vec!["plan", "--log-format", "json", "--no-such-flag"],
        vec!["--log-format=json", "nonsense"],
        vec!["apply", "--log-format", "json", "--output", "yaml"],
    ] {
        let (code, out, err) = winfleet(&args);
        assert_eq!(code, 1, "{args:?}: {out}");
        assert!(!err.trim().is_empty(), "{args:?}");
        for line in err.lines() {
            let line: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{args:?}: {e}: {line}"));
            assert_eq!(line["level"], "ERROR", "{line}");
            assert!(line["fields"]["message"].as_str().unwrap().contains("error:"), "{line}");
        }
    }
    // Without it, clap's own text.
    let (code, _, err) = winfleet(&["plan", "--no-such-flag"]);
    assert_eq!(code, 1);
    assert!(err.contains("Usage:"), "{err}");
}

#[test]
fn identical_diagnostics_are_grouped_with_a_count() {
    let tmp = tempfile::tempdir().unwrap();
    let mut list =
        String::from("apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: many\n");
    list.push_str("spec:\n  instances:\n");
    for i in 1..=30 {
        list.push_str(&format!("  - address: 10.0.0.{i}\n    bogus: 1\n"));
    }
    std::fs::write(tmp.path().join("many.yaml"), list).unwrap();
    let repo = tmp.path().to_str().unwrap();

    let (code, _, err) = winfleet(&["validate", "--repo", repo]);
    assert_eq!(code, 1, "{err}");
    let located: Vec<&str> = err.lines().filter(|l| l.starts_with("many.yaml:") && !l.contains("more like")).collect();
    assert_eq!(located.len(), 3, "three shown with their location:\n{err}");
    let folded = "many.yaml: 27 more like this, from /spec/instances/3/bogus: unknown field \"bogus\"";
    assert!(err.lines().any(|l| l == folded), "the rest counted:\n{err}");
    assert!(err.contains("30 error(s)"), "the verdict still counts them all:\n{err}");

    let (code, _, err) = winfleet(&["validate", "--repo", repo, "--log-format", "json"]);
    assert_eq!(code, 1, "{err}");
    let lines: Vec<Value> = err.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let more: Vec<&Value> = lines.iter().filter(|l| l["fields"].get("more").is_some()).collect();
    assert_eq!(more.len(), 1, "{err}");
    assert_eq!(more[0]["fields"]["more"], 27);
    assert_eq!(more[0]["fields"]["first"], "/spec/instances/3/bogus");
    assert_eq!(lines.iter().filter(|l| l["fields"]["pointer"].is_string()).count(), 3, "{err}");
}
