//! Issue "Hardening, second round", defect 1: nothing outside winfleet's own
//! registry directories is ever removed. Real sshd nodes, the real binary.
//!
//! - A registries directory that is a root, a system directory or a home is
//!   refused at validate, before any node is touched.
//! - In a registries directory shared with others, only the directories
//!   winfleet created (its marker inside) are removed; one it finds with
//!   the desired content is adopted (marked), never rewritten.
//! - The mass-removal guard counts registry directories.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;

use support::fleet::{TestFleet, TestNode};
use support::mirror_repo::{apply, repo};

const MARKER: &str = ".winfleet-managed";

fn dirs_on(node: &TestNode) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(node.path("certs.d"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_registries_directory_of_the_root_is_refused_at_validate_and_no_node_is_touched() {
    let fleet = TestFleet::start(1);
    for dir in ["/", "/etc", "/etc/containerd", "."] {
        let repo = repo(&fleet, "", &["quay.io/a"]);
        let yaml = fleet.fleet_yaml().replace("posixDir: certs.d", &format!("posixDir: {dir:?}"));
        fs::write(repo.path().join("fleet.yaml"), yaml).unwrap();
        let (code, out, err) = apply(&fleet, &repo, &["--dry-run"]);
        assert_eq!(code, 1, "{dir}: invalid, not applied\n{out}{err}");
        assert!(err.contains("nothing was planned"), "{dir}: {err}");
        assert!(err.contains("/spec/registries/posixDir"), "{dir}: {err}");
        assert!(err.contains("winfleet writes inside this directory and removes there"), "{dir}: {err}");
        assert_eq!(fleet.nodes[0].connections(), 0, "{dir}: validation comes before any connection");
    }
}

#[test]
fn only_directories_winfleet_created_are_removed_and_a_found_one_is_adopted() {
    let fleet = TestFleet::start(1);
    let node = &fleet.nodes[0];
    let (code, out, err) = apply(&fleet, &repo(&fleet, "", &["quay.io/a", "registry.redhat.io/b"]), &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(node.path(&format!("certs.d/quay.io/{MARKER}")).is_file(), "each directory is marked");
    // Someone else's directories beside winfleet's, one named like a
    // registry, one like a system directory.
    for other in ["foreign.io", "bin"] {
        fs::create_dir_all(node.path(&format!("certs.d/{other}"))).unwrap();
        fs::write(node.path(&format!("certs.d/{other}/hosts.toml")), "server = \"https://x\"\n").unwrap();
    }
    // quay.io's marker is lost (a directory WMCO wrote, say): same content.
    let quay = node.read("certs.d/quay.io/hosts.toml").unwrap();
    fs::remove_file(node.path(&format!("certs.d/quay.io/{MARKER}"))).unwrap();

    let (code, out, err) = apply(&fleet, &repo(&fleet, "", &["quay.io/a"]), &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(dirs_on(node), ["bin", "foreign.io", "quay.io"], "registry.redhat.io went, nothing else\n{out}");
    assert_eq!(node.read("certs.d/foreign.io/hosts.toml").as_deref(), Some("server = \"https://x\"\n"));
    assert!(node.path(&format!("certs.d/quay.io/{MARKER}")).is_file(), "adopted\n{out}");
    assert_eq!(node.read("certs.d/quay.io/hosts.toml").unwrap(), quay);

    let (code, out, err) = apply(&fleet, &repo(&fleet, "", &["quay.io/a"]), &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 changed"), "the next round writes nothing:\n{out}");
}

#[test]
fn the_mass_removal_guard_counts_registry_directories() {
    let fleet = TestFleet::start(1);
    let node = &fleet.nodes[0];
    let all = ["a.io/x", "b.io/x", "c.io/x", "d.io/x"];
    assert_eq!(apply(&fleet, &repo(&fleet, "", &all), &[]).0, 0);

    // 3 of 4 directories (75%) with the default limit of 50%: kept.
    let (code, out, err) = apply(&fleet, &repo(&fleet, "", &all[..1]), &[]);
    assert_ne!(code, 0, "a refused removal is a failure\n{out}{err}");
    assert!(out.contains("would remove 3 of the node's 4 registry directories (75%)"), "{out}");
    assert_eq!(dirs_on(node), ["a.io", "b.io", "c.io", "d.io"]);

    // A commit that raises the limit lets them go.
    let raised = "  prune:\n    maxRemovalPercent: 75\n";
    let (code, out, err) = apply(&fleet, &repo(&fleet, raised, &all[..1]), &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(dirs_on(node), ["a.io"]);
}
