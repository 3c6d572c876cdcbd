//! The comment never exceeds its budget, whatever the budget, and keeps
//! its summary and its groups' representative diffs as long as they fit.

use super::{MARKER, MIN_MAX_BYTES, render, render_within};
use crate::plan::{InstanceChanges, InstanceSummary, NodeGroup, Plan, Warning};
use crate::vocab::operation::Operation;

fn write(registry: usize) -> Operation {
    let path = format!("C:\\k\\containerd\\registries\\registry{registry}.example.com\\hosts.toml");
    let diff = format!("--- base: {path}\n+++ head: {path}\n@@ -1 +1 @@\n-old{registry}\n+new{registry}\n");
    Operation::WriteFile { path, created: false, diff }
}

fn instance(i: usize) -> InstanceSummary {
    InstanceSummary {
        address: format!("10.0.{}.{}", i / 256, i % 256),
        username: "Administrator".into(),
        port: 22,
        shell: "powershell".into(),
        origin: "instances.yaml".into(),
    }
}

fn plan() -> Plan {
    let nodes = |from: usize, n: usize| (from..from + n).map(|i| instance(i).address).collect::<Vec<_>>();
    Plan {
        base: Some("a".repeat(40)),
        head: Some("b".repeat(40)),
        instances: InstanceChanges {
            configure: (0..40).map(instance).collect(),
            deconfigure: (100..140).map(instance).collect(),
            update: Vec::new(),
        },
        nodes: vec![
            NodeGroup { nodes: nodes(0, 40), operations: vec![write(0)], reboot_required: false, deconfigure: false },
            NodeGroup {
                nodes: nodes(200, 30),
                operations: (1..60).map(write).collect(),
                reboot_required: false,
                deconfigure: false,
            },
            NodeGroup {
                nodes: nodes(100, 40),
                operations: vec![Operation::RemoveService { name: "kubelet".into() }],
                reboot_required: false,
                deconfigure: true,
            },
        ],
        warnings: vec![Warning::plan("a warning a reviewer needs")],
        warnings_before: vec![Warning::plan("an old warning")],
        ..Plan::default()
    }
}

#[test]
fn no_budget_is_ever_exceeded() {
    let plan = plan();
    let whole = render(&plan);
    for budget in (MIN_MAX_BYTES..whole.len() + 100).step_by(53) {
        let comment = render_within(&plan, budget);
        assert!(comment.len() <= budget, "{} bytes over a budget of {budget}", comment.len());
    }
    assert_eq!(render_within(&plan, whole.len()), whole, "a comment that fits is whole");
}

#[test]
fn a_short_budget_keeps_the_summary_the_warnings_and_every_representative_diff() {
    let plan = plan();
    let comment = render_within(&plan, 4_000);
    assert!(comment.starts_with(MARKER));
    assert!(comment.contains("**Plan: 40 to configure, 30 to update, 40 to deconfigure;"), "{comment}");
    assert!(comment.contains("> [!WARNING]\n> a warning a reviewer needs\n"));
    for diff in ["-old0\n+new0\n", "-old1\n+new1\n"] {
        assert!(comment.contains(diff), "{diff} missing:\n{comment}");
    }
    assert!(comment.contains("service `kubelet` (stopped and deleted)"));
    assert!(
        comment
            .contains("| ➖ | `10.0.0.100`, `10.0.0.101`, `10.0.0.102`, `10.0.0.103`, `10.0.0.104` and 35 more (40) |"),
        "{comment}"
    );
    assert!(comment.contains("40 node(s): `10.0.0.0`, `10.0.0.1`, `10.0.0.2`"), "{comment}");
    assert!(comment.contains("See all: `winfleet plan --base aaaaaaaaaaaa --head bbbbbbbbbbbb --output text`"));
}

/// Whether `comment` is whole markdown: every `<details>` closed, every
/// code fence closed, ending with a line break.
fn well_formed(comment: &str) -> bool {
    comment.matches("<details").count() == comment.matches("</details>").count()
        && comment.matches("```").count().is_multiple_of(2)
        && comment.ends_with('\n')
}

#[test]
fn from_the_minimum_up_the_comment_keeps_marker_summary_and_note_and_cuts_only_between_blocks() {
    let mut plan = plan();
    let long =
        |n: usize| Warning::plan(format!("warning {n}: {}", "a sentence a reviewer should read whole. ".repeat(8)));
    plan.warnings.extend((0..12).map(long));
    let whole = render(&plan);
    for budget in (MIN_MAX_BYTES..whole.len()).step_by(41) {
        let comment = render_within(&plan, budget);
        assert!(comment.len() <= budget, "{} bytes over a budget of {budget}", comment.len());
        assert!(comment.starts_with(&format!("{MARKER}\n")), "{budget}: the marker first");
        assert!(comment.contains("**Plan: 40 to configure, "), "{budget}: the summary:\n{comment}");
        assert!(comment.contains("> This comment is shortened to fit"), "{budget}: the note:\n{comment}");
        assert!(well_formed(&comment), "{budget}: cut inside a block:\n{comment}");
        for shown in comment.split("> [!WARNING]\n> ").skip(1).filter(|w| w.starts_with("warning ")) {
            assert!(shown.split_once('\n').is_some_and(|(w, _)| w.ends_with("whole. ")), "{budget}: a warning cut");
        }
    }
}
