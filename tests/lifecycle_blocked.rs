//! A node lifecycle that cannot proceed (issue 23, defect 13): `apply
//! --once` with a `--payload-dir` that is not the pinned payload says why
//! on every node's line and in the summary, and counts those nodes failed.
//! The binary against real sshd nodes, SSH-only.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fmt::Write as _;

use support::fleet::TestFleet;
use support::join_payload::{payload, services_manifest};
use winfleet::payload::Payload;

const PINNED: &str = "sha256:abababababababababababababababababababababababababababababababab";

#[test]
fn issue_23_apply_once_with_a_payload_that_is_not_the_pinned_one_says_why_per_node_and_in_the_summary() {
    let fleet = TestFleet::start(3);
    let repo = tempfile::tempdir().unwrap();
    let fleet_yaml =
        format!("{}  payload:\n    digest: {PINNED}\n  services:\n    posixDir: units\n", fleet.fleet_yaml());
    std::fs::write(repo.path().join("fleet.yaml"), fleet_yaml).unwrap();
    std::fs::write(repo.path().join("services.yaml"), services_manifest()).unwrap();
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: t\nspec:\n  instances:\n",
    );
    for node in &fleet.nodes {
        let _ = writeln!(list, "  - address: {}", node.address);
    }
    std::fs::write(repo.path().join("instances.yaml"), list).unwrap();
    let dir = payload(fleet.dir());
    let found = Payload::load(&dir).unwrap().digest;
    assert_ne!(found, PINNED);

    let (code, out, err) = support::winfleet(&[
        "apply",
        "--once",
        "--repo",
        repo.path().to_str().unwrap(),
        "--ssh-key",
        fleet.key.to_str().unwrap(),
        "--known-hosts",
        fleet.known_hosts.to_str().unwrap(),
        "--payload-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    let both = |text: &str| text.contains(&found) && text.contains(PINNED);
    for node in &fleet.nodes {
        let who =
            |l: &&str| l.starts_with(&format!("{} (", node.address)) || l.starts_with(&format!("{}: ", node.address));
        let line = out.lines().find(who).expect(&out);
        assert!(line.contains("BLOCKED") && both(line), "the node's line says why: {line}");
        let progress = err.lines().find(|l| l.contains(&node.address)).unwrap_or_default();
        assert!(both(progress), "the node's progress line says why: {err}");
    }
    let summary = out.lines().find(|l| l.starts_with("Applied: ")).expect(&out);
    assert!(summary.contains("0 in sync") && summary.contains("3 failed"), "{summary}");
    assert!(summary.contains("3 blocked") && both(summary), "the summary says why: {summary}");
}
