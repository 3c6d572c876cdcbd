//! The pull-request comment (`winfleet plan --output markdown`) always fits
//! its budget and, shortened, keeps what a reviewer needs (issue 29, point
//! 1): generated config repositories with 10, 1,000 and 10,000 instance
//! changes and 300 mirrors on 50 nodes, planned by the real binary between
//! two real Git revisions. Each comment is at most `--max-bytes` (and the
//! default budget, under GitHub's 65,536), starts with the marker, carries
//! the summary and every warning, and shows every group's representative
//! operation (a file's whole diff) with its node count; a shortened one
//! says how to see everything.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fmt::Write;
use std::path::Path;

use support::{GitRepo, winfleet};

/// GitHub refuses a comment over this many characters.
const GITHUB_LIMIT: usize = 65_536;

fn address(i: usize) -> String {
    format!("10.{}.{}.{}", 1 + i / 65_536, (i / 256) % 256, i % 256)
}

/// The windows-instances ConfigMap listing `instances` (address, user).
fn instances_yaml(instances: &[(String, &str)]) -> String {
    let mut out = String::from(
        "kind: ConfigMap\napiVersion: v1\nmetadata:\n  name: windows-instances\n  namespace: openshift-windows-machine-config-operator\ndata:\n",
    );
    for (address, user) in instances {
        let _ = write!(out, "  {address}: |-\n    username={user}\n");
    }
    out
}

/// An ImageDigestMirrorSet of `count` registries, each mirrored on
/// `mirror` under its own path (`mirror/registryN`), or on `mirror` itself
/// when it ends with `/` (then every registry's hosts.toml changes alike
/// when the mirror moves).
fn mirrors_yaml(count: usize, mirror: &str) -> String {
    let mut out = String::from(
        "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: generated\nspec:\n  imageDigestMirrors:\n",
    );
    for i in 0..count {
        let to = match mirror.strip_suffix('/') {
            Some(host) => host.to_owned(),
            None => format!("{mirror}/registry{i}"),
        };
        let _ = write!(out, "  - source: registry{i}.example.com\n    mirrors:\n    - {to}\n");
    }
    out
}

fn write_state(dir: &Path, instances: &[(String, &str)], mirrors: usize, mirror: &str) {
    std::fs::create_dir_all(dir.join("instances")).unwrap();
    std::fs::create_dir_all(dir.join("mirrors")).unwrap();
    std::fs::write(dir.join("instances/windows-instances.yaml"), instances_yaml(instances)).unwrap();
    std::fs::write(dir.join("mirrors/generated.yaml"), mirrors_yaml(mirrors, mirror)).unwrap();
}

/// A repository whose HEAD~1 is `base` and HEAD is `head`.
fn repository(base: (&[(String, &str)], usize, &str), head: (&[(String, &str)], usize, &str)) -> GitRepo {
    let git = GitRepo::new();
    for (state, message) in [(base, "base"), (head, "head")] {
        let dir = tempfile::tempdir().unwrap();
        write_state(dir.path(), state.0, state.1, state.2);
        git.commit_dir(dir.path(), message);
    }
    git
}

/// `changes` instance changes, a third each removed and added, the rest
/// updated (a new user), beside two unchanged instances; the mirror moves
/// for every node.
fn instance_changes(changes: usize) -> GitRepo {
    let (removed, added) = (changes / 3, changes / 3);
    let updated = changes - removed - added;
    let base: Vec<(String, &str)> = (0..removed + updated + 2).map(|i| (address(i), "Administrator")).collect();
    let mut head: Vec<(String, &str)> = (removed..removed + updated).map(|i| (address(i), "winadmin")).collect();
    head.extend((removed + updated..removed + updated + 2).map(|i| (address(i), "Administrator")));
    head.extend((0..added).map(|i| (address(100_000 + i), "Administrator")));
    repository((&base, 1, "mirror-a.corp.example"), (&head, 1, "mirror-b.corp.example"))
}

fn plan(git: &GitRepo, format: &str, extra: &[&str]) -> String {
    let mut args = vec!["plan", "--repo", git.path().to_str().unwrap(), "--base", "HEAD~1", "--output", format];
    args.extend_from_slice(extra);
    let (code, out, err) = winfleet(&args);
    assert_eq!(code, 2, "a plan with changes exits 2; stderr: {err}");
    out
}

/// What a group's representative operation looks like in the comment: a
/// file's diff (its hunks: files changed alike share one diff, without the
/// header naming one of them), else its path or name.
fn representative(op: &serde_json::Value) -> String {
    let field = |f: &str| op[f].as_str().map(str::to_owned);
    let hunks = |diff: String| diff.lines().skip(2).map(|l| format!("{l}\n")).collect::<String>();
    field("diff").map(hunks).or_else(|| field("path")).or_else(|| field("name")).unwrap_or_default()
}

/// Checks one comment against the JSON and text plans of the same change;
/// returns the comment.
fn check(git: &GitRepo, max_bytes: Option<usize>) -> String {
    let budget = max_bytes.unwrap_or(60_000);
    let extra: Vec<String> = max_bytes.map(|m| vec!["--max-bytes".to_owned(), m.to_string()]).unwrap_or_default();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let comment = plan(git, "markdown", &extra);
    assert!(comment.len() <= budget, "{} bytes over a budget of {budget}", comment.len());
    assert!(comment.len() < GITHUB_LIMIT);
    assert!(comment.starts_with("<!-- winfleet-plan -->\n"), "the marker is the first line");
    let text = plan(git, "text", &[]);
    let summary = text.lines().rev().find(|l| l.starts_with("Plan: ")).expect("the text plan's summary");
    assert!(comment.contains(&format!("**{summary}**")), "the summary is there: {summary}");
    let doc: serde_json::Value = serde_json::from_str(&plan(git, "json", &[])).unwrap();
    for warning in doc["warnings"].as_array().unwrap() {
        let message = warning["message"].as_str().unwrap();
        assert!(comment.contains(&format!("> [!WARNING]\n> {message}\n")), "the warning is whole: {message}");
    }
    let groups = doc["nodes"].as_array().unwrap();
    assert!(!groups.is_empty());
    for group in groups {
        let nodes = group["nodes"].as_array().unwrap();
        let first = nodes[0].as_str().unwrap();
        let count = format!("{} node(s)", nodes.len());
        assert!(comment.contains(&count) && comment.contains(&format!("`{first}`")), "the group {count} from {first}");
        let shown = representative(&group["operations"][0]);
        assert!(
            !shown.is_empty() && comment.contains(&shown),
            "the group of {first} shows its first operation:\n{shown}"
        );
    }
    let whole = plan(git, "markdown", &["--max-bytes", "100000000"]);
    if comment != whole {
        let see = "See all: `winfleet plan --base ";
        assert!(comment.contains(see) && comment.contains("--output text`"), "a cut section says how to see it");
        assert!(comment.contains("> This comment is shortened to fit"));
        assert!(comment.len() * 4 >= budget * 3, "the budget is spent: {} of {budget} bytes", comment.len());
    }
    comment
}

#[test]
fn ten_instance_changes_fit_whole() {
    let git = instance_changes(10);
    let comment = check(&git, None);
    assert!(!comment.contains("shortened"), "{comment}");
    check(&git, Some(3_000));
}

#[test]
fn a_thousand_instance_changes_fit_every_budget() {
    let git = instance_changes(1_000);
    check(&git, None);
    check(&git, Some(30_000));
}

#[test]
fn ten_thousand_instance_changes_fit_every_budget() {
    let git = instance_changes(10_000);
    let comment = check(&git, None);
    // The instances' rows: 3,333 added, 3,334 updated, 3,333 removed.
    for count in [3333, 3334] {
        assert!(comment.contains(&format!(" more ({count}) | ")), "a row of {count} instances is named by count");
    }
    check(&git, Some(30_000));
    check(&git, Some(8_000));
}

#[test]
fn a_thousand_removed_instances_fit_30000_bytes_and_say_the_guard_refuses() {
    let base: Vec<(String, &str)> = (0..1_010).map(|i| (address(i), "Administrator")).collect();
    let git = repository((&base, 1, "mirror.corp.example"), (&base[..10], 1, "mirror.corp.example"));
    let comment = check(&git, Some(30_000));
    assert!(comment.contains("0 of 1000 deconfigured: refused by prune.maxRemovalPercent"), "{comment}");
    assert!(comment.contains("1000 node(s) leave: `10.1.0.10`, `10.1.0.11`"), "numerically: {comment}");
}

#[test]
fn three_hundred_mirrors_on_fifty_nodes_show_their_diffs_within_the_budget() {
    let nodes: Vec<(String, &str)> = (0..50).map(|i| (address(i), "Administrator")).collect();
    let git = repository((&nodes, 300, "mirror-a.corp.example"), (&nodes, 300, "mirror-b.corp.example"));
    for budget in [None, Some(30_000)] {
        let comment = check(&git, budget);
        let diffs = comment.matches("```diff").count();
        assert!(diffs >= 20, "{diffs} whole diffs shown within {budget:?}");
        assert!(comment.contains("50 node(s): `10.1.0.0`"), "the group is named by count and members");
        assert!(comment.contains("_Shortened to fit: "), "the cut section says what it leaves out");
        assert!(comment.contains("`C:\\k\\containerd\\registries\\registry99.example.com\\hosts.toml`"));
    }
}

#[test]
fn three_hundred_files_changed_alike_show_one_diff_naming_every_file_and_node_in_natural_order() {
    let nodes: Vec<(String, &str)> = (0..50).map(|i| (address(i), "Administrator")).collect();
    let git = repository((&nodes, 300, "mirror-a.corp.example/"), (&nodes, 300, "mirror-b.corp.example/"));
    let path = |i: usize| format!("C:\\k\\containerd\\registries\\registry{i}.example.com\\hosts.toml");
    let changed = "+[host.\"https://mirror-b.corp.example/v2\"]\n";
    let comment = check(&git, None);
    assert_eq!(comment.matches(changed).count(), 1, "one diff for 300 files alike:\n{comment}");
    assert!(comment.contains("✏️ 300 files, the same change in each: "), "{comment}");
    assert!(!comment.contains("_Shortened to fit"), "everything fits once the copies are gone:\n{comment}");
    let order = |names: Vec<String>| {
        let at: Vec<usize> = names.iter().map(|n| comment.find(n.as_str()).expect(n)).collect();
        assert!(at.is_sorted(), "{names:?} appear in this order");
    };
    order((0..50).map(|i| format!("`{}`", address(i))).collect());
    order([2, 10, 11, 100, 299].map(|i| format!("`{}`", path(i))).to_vec());
    let text = plan(&git, "text", &[]);
    assert_eq!(text.matches(changed.trim_end()).count(), 1, "the text plan too:\n{text}");
    assert!(text.contains("(the same change in each of these 300 files)"), "{text}");
    assert_eq!((0..300).filter(|&i| text.contains(&format!("  ~ {}\n", path(i)))).count(), 300);
    assert!(text.find(&path(2)).unwrap() < text.find(&path(10)).unwrap(), "registries in natural order");
    let doc: serde_json::Value = serde_json::from_str(&plan(&git, "json", &[])).unwrap();
    assert_eq!(doc["nodes"][0]["operations"].as_array().unwrap().len(), 300, "the JSON keeps every operation");
    assert_eq!(doc["nodes"][0]["nodes"][2], "10.1.0.2", "addresses numerically in the JSON as well");
    check(&git, Some(3_000));
}

#[test]
fn a_max_bytes_below_the_minimum_is_a_usage_error_naming_the_minimum() {
    let nodes: Vec<(String, &str)> = (0..3).map(|i| (address(i), "Administrator")).collect();
    let git = repository((&nodes, 3, "mirror-a.corp.example"), (&nodes, 3, "mirror-b.corp.example"));
    let repo = git.path().to_str().unwrap();
    for max in ["0", "10", "500", "999"] {
        let args = ["plan", "--repo", repo, "--base", "HEAD~1", "--output", "markdown", "--max-bytes", max];
        let (code, out, err) = winfleet(&args);
        // Usage errors exit 1 (src/main.rs): for `plan`, 2 means "changes".
        assert_eq!(code, 1, "--max-bytes {max} is a usage error: {out}{err}");
        assert!(out.is_empty(), "no comment for --max-bytes {max}: {out}");
        assert!(err.contains("--max-bytes") && err.contains("at least 1000 bytes"), "{err}");
    }
    let comment = plan(&git, "markdown", &["--max-bytes", "1000"]);
    assert!(comment.len() <= 1000 && comment.starts_with("<!-- winfleet-plan -->\n"), "{comment}");
    assert!(comment.contains("**Plan: 0 to configure, 3 to update,"), "{comment}");
    assert!(comment.contains("> This comment is shortened to fit 1000 bytes"), "{comment}");
}

#[test]
fn a_shortened_comment_ends_between_blocks_at_every_budget() {
    let nodes: Vec<(String, &str)> = (0..50).map(|i| (address(i), "Administrator")).collect();
    let git = repository((&nodes, 300, "mirror-a.corp.example"), (&nodes, 300, "mirror-b.corp.example"));
    for budget in [1_000, 1_100, 1_500, 2_500, 4_000, 7_000] {
        let comment = plan(&git, "markdown", &["--max-bytes", &budget.to_string()]);
        assert!(comment.len() <= budget, "{} bytes over {budget}", comment.len());
        assert!(comment.contains("**Plan: 0 to configure, 50 to update"), "{budget}: the summary:\n{comment}");
        assert!(comment.contains("> This comment is shortened to fit"), "{budget}: the note");
        let details = (comment.matches("<details").count(), comment.matches("</details>").count());
        assert_eq!(details.0, details.1, "{budget}: a section cut inside:\n{comment}");
        assert!(comment.matches("```").count().is_multiple_of(2), "{budget}: a diff cut inside:\n{comment}");
        assert!(comment.ends_with('\n'), "{budget}: ends mid-line:\n{comment}");
    }
}
