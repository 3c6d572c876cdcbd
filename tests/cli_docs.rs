//! The command line's own documentation and logs: shell completions and
//! man pages come from the same definition as the arguments, and
//! `--log-format json` makes every stderr line JSON.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;

const SUBCOMMANDS: [&str; 7] = ["validate", "render", "plan", "apply", "run", "status", "payload"];

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
