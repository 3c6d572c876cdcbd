//! `winfleet plan` between two real Git revisions, in all three output
//! formats, against snapshots; and its exit codes (0 none, 2 changes, 1 error).
//!
//! Layout: tests/fixtures/plan/<situation>/{base,head}/ are the two
//! repository states; expected.{txt,md,json} the plans.

mod support;

use support::{GitRepo, winfleet};

#[test]
fn plans_match_their_snapshots_in_every_format() {
    let mut failures = Vec::new();
    for case in support::cases("plan") {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let git = GitRepo::new();
        git.commit_dir(&case.join("base"), "base");
        git.commit_dir(&case.join("head"), "head");
        let repo = git.path().to_str().unwrap();
        for (format, ext) in [("text", "txt"), ("markdown", "md"), ("json", "json")] {
            let (code, out, err) = winfleet(&["plan", "--repo", repo, "--base", "HEAD~1", "--output", format]);
            let expected_code = if name == "comment-only" { 0 } else { 2 };
            if code != expected_code {
                failures.push(format!("{name} ({format}): exit {code}, expected {expected_code}; stderr: {err}"));
            }
            if let Err(e) = support::check_golden(&case.join(format!("expected.{ext}")), &out) {
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    support::report(failures);
}

#[test]
fn plan_json_is_valid_json_with_a_format_version() {
    let case = support::fixture("plan/machinesets");
    let git = GitRepo::new();
    git.commit_dir(&case.join("base"), "base");
    git.commit_dir(&case.join("head"), "head");
    let (_, out, _) =
        winfleet(&["plan", "--repo", git.path().to_str().unwrap(), "--base", "HEAD~1", "--output", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["formatVersion"], 2);
    assert_eq!(doc["hasChanges"], true);
    assert_eq!(doc["machineSets"].as_array().unwrap().len(), 3);
}

#[test]
fn an_invalid_head_exits_1_with_its_diagnostics_and_prints_no_plan() {
    let git = GitRepo::new();
    git.commit_dir(&support::fixture("plan/comment-only/base"), "good");
    std::fs::write(git.path().join("bad.yaml"), "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n").unwrap();
    git.commit_all("bad");
    let (code, out, err) = winfleet(&["plan", "--repo", git.path().to_str().unwrap(), "--base", "HEAD~1"]);
    assert_eq!(code, 1);
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("bad.yaml:2:1: /kind: unknown kind \"Secret\""), "{err}");
    assert!(err.contains("head revision HEAD is invalid: 1 error(s)"), "{err}");
}

#[test]
fn an_invalid_base_plans_everything_as_new_and_says_so() {
    let git = GitRepo::new();
    std::fs::write(git.path().join("bad.yaml"), "a: [1\n").unwrap();
    git.commit_all("broken main");
    git.commit_dir(&support::fixture("plan/comment-only/base"), "fix");
    let (code, out, _) = winfleet(&["plan", "--repo", git.path().to_str().unwrap(), "--base", "HEAD~1"]);
    assert_eq!(code, 2);
    assert!(
        out.contains("! base revision HEAD~1 is invalid (1 error(s)): everything in head is shown as new"),
        "{out}"
    );
    assert!(out.contains("+ 192.0.2.10"), "{out}");
}

#[test]
fn unknown_revisions_and_bad_arguments_exit_1() {
    let git = GitRepo::new();
    git.commit_dir(&support::fixture("plan/comment-only/base"), "only");
    let repo = git.path().to_str().unwrap();
    let (code, _, err) = winfleet(&["plan", "--repo", repo, "--base", "no-such-rev"]);
    assert_eq!(code, 1);
    assert!(err.contains("no-such-rev"), "{err}");
    assert_eq!(winfleet(&["plan", "--repo", repo]).0, 1, "--base is required");
    assert_eq!(winfleet(&["plan", "--repo", repo, "--base", "HEAD", "--output", "yaml"]).0, 1);
}

#[test]
fn a_markdown_plan_over_its_budget_is_shortened_says_what_it_leaves_out_and_keeps_the_marker() {
    let case = support::fixture("plan/add-instance-and-mirror");
    let git = GitRepo::new();
    git.commit_dir(&case.join("base"), "base");
    git.commit_dir(&case.join("head"), "head");
    let repo = git.path().to_str().unwrap();
    let plan = |extra: &[&str]| {
        let mut args = vec!["plan", "--repo", repo, "--base", "HEAD~1", "--output", "markdown"];
        args.extend_from_slice(extra);
        winfleet(&args).1
    };
    let full = plan(&[]);
    assert!(full.starts_with("<!-- winfleet-plan -->\n"), "a bot finds its comment by the first line:\n{full}");
    assert!(!full.contains("shortened to fit"));
    let budget = full.len() - 200;
    let short = plan(&["--max-bytes", &budget.to_string()]);
    assert!(short.len() <= budget, "{} bytes over a budget of {budget}", short.len());
    assert!(short.starts_with("<!-- winfleet-plan -->\n"));
    assert!(short.contains("This comment is shortened to fit") && short.contains("--output json"), "{short}");
    assert!(short.contains("_Shortened to fit: ") && short.contains("--output text`._"), "{short}");
}

#[test]
fn warnings_that_hold_on_the_base_too_are_folded_away_from_the_change() {
    // Base: the proxy with a committed password (warned about). Head: the
    // same, and a new mirror: the password warning is not the change's.
    let case = support::fixture("plan/change-mirror-and-proxy");
    let head = tempfile::tempdir().unwrap();
    let copied = std::process::Command::new("cp").arg("-r").arg(case.join("head/.")).arg(head.path()).status();
    assert!(copied.unwrap().success());
    let git = GitRepo::new();
    git.commit_dir(head.path(), "base");
    let mirrors = "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: extra\nspec:\n  imageDigestMirrors:\n  - source: ghcr.io/corp\n    mirrors:\n    - mirror.corp.example/corp\n";
    std::fs::write(head.path().join("extra-mirrors.yaml"), mirrors).unwrap();
    git.commit_dir(head.path(), "head");
    let repo = git.path().to_str().unwrap();
    let (_, text, _) = winfleet(&["plan", "--repo", repo, "--base", "HEAD~1"]);
    let (warnings, before) = text.split_once("Warnings already true before this change:").expect(&text);
    assert!(before.contains("carries a password"), "the base has the same proxy password:\n{text}");
    assert!(!warnings.contains("carries a password"), "{text}");
    let (_, json, _) = winfleet(&["plan", "--repo", repo, "--base", "HEAD~1", "--output", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["warningsBefore"].as_array().map(Vec::len), Some(1), "{json}");
    let folded = &doc["warningsBefore"][0];
    assert_eq!(
        (folded["file"].as_str(), folded["line"].as_u64(), folded["column"].as_u64()),
        (Some("proxy.yaml"), Some(6), Some(3))
    );
    assert_eq!(
        (folded["pointer"].as_str(), folded["severity"].as_str(), folded["code"].as_str()),
        (Some("/spec/httpProxy"), Some("warning"), Some("validation"))
    );
    assert!(folded["message"].as_str().unwrap().starts_with("proxy URL \"http://svc-winfleet:<redacted>@"), "{json}");
}

/// The numbers of a summary line (`Plan: 1 to configure, …`), in order.
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit()).filter_map(|s| s.parse().ok()).collect()
}

#[test]
fn the_three_formats_give_the_same_numbers_for_every_fixture() {
    let mut failures = Vec::new();
    for case in support::cases("plan") {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let git = GitRepo::new();
        git.commit_dir(&case.join("base"), "base");
        git.commit_dir(&case.join("head"), "head");
        let repo = git.path().to_str().unwrap();
        let plan = |format: &str| winfleet(&["plan", "--repo", repo, "--base", "HEAD~1", "--output", format]).1;
        let (text, markdown) = (plan("text"), plan("markdown"));
        let doc: serde_json::Value = serde_json::from_str(&plan("json")).unwrap();
        let s = &doc["summary"];
        let n = |key: &str| s[key].as_u64().unwrap_or_else(|| panic!("{name}: summary.{key} in {s}"));
        let m = |key: &str| s["machineSets"][key].as_u64().unwrap_or_else(|| panic!("{name}: machineSets.{key}"));
        let mut expected = vec![n("configure"), n("update")];
        if s["deconfigureRefused"] == true {
            expected.push(0);
        }
        expected.extend([n("deconfigure"), n("nodesChanged"), n("safeReboots"), m("create"), m("update"), m("delete")]);
        let groups = doc["nodes"].as_array().unwrap();
        let reboots: Vec<u64> = groups.iter().map(|g| g["safeReboots"].as_u64().unwrap()).collect();
        if reboots.iter().sum::<u64>() != n("safeReboots") {
            failures.push(format!("{name}: the groups' safeReboots {reboots:?} do not add up to the summary's"));
        }
        let rebooting = reboots.iter().filter(|r| **r > 0).count();
        let text_line = text.lines().find(|l| l.starts_with("Plan: "));
        let md_line = markdown.lines().find(|l| l.starts_with("**Plan: "));
        let has_changes = doc["hasChanges"] == true;
        for (format, line, marked) in [
            ("text", text_line, text.matches("(safe reboot required)").count()),
            ("markdown", md_line, markdown.matches(", safe reboot required</summary>").count()),
        ] {
            match line {
                Some(line) if numbers(line) != expected => {
                    failures.push(format!("{name} ({format}): {line} against the JSON's {expected:?}"))
                }
                None if has_changes => failures.push(format!("{name} ({format}): no summary line")),
                _ => {}
            }
            if marked != rebooting {
                failures.push(format!(
                    "{name} ({format}): {marked} group(s) say a safe reboot is required, the JSON {rebooting}"
                ));
            }
        }
    }
    support::report(failures);
}
