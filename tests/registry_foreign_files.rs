//! Issue 35 ("Hardening, third round: winfleet removes only what it
//! wrote"), items 1 and 2, on real sshd nodes with the real binary:
//!
//! 1. A registry directory someone else made (its hosts.toml the desired
//!    one, plus their own `ca.crt` and `client.key`) is adopted; when the
//!    registry leaves the repository, only winfleet's files go (hosts.toml
//!    and its marker) and the directory stays while it holds anything
//!    else; the plan says which files stay and why.
//! 2. Symbolic links on the node are never followed: a marker that is a
//!    link is no marker, a dangling marker link's target is not created, a
//!    `*.winfleet-tmp` link is not written through, and a registry
//!    directory that is a link is neither written into nor removed.
//!
//! A dry run and a real apply on a node prepared so change nothing that
//! winfleet did not write.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use support::fleet::{TestFleet, TestNode};
use support::mirror_repo::{apply, repo};

const MARKER: &str = ".winfleet-managed";
const CA: &str = "-----BEGIN CERTIFICATE-----\nsomeone else's CA\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nsomeone else's key\n-----END PRIVATE KEY-----\n";

/// The node's user owns `rel` and the directories leading to it, as if
/// someone on the node had made them (the tests may run as another user).
fn own(node: &TestNode, rel: &str) {
    let home = fs::metadata(node.path("")).unwrap();
    let mut prefix = std::path::PathBuf::new();
    for part in Path::new(rel).components() {
        prefix.push(part);
        std::os::unix::fs::lchown(node.path(prefix.to_str().unwrap()), Some(home.uid()), Some(home.gid())).unwrap();
    }
}

fn write(node: &TestNode, rel: &str, content: &str) {
    let path = node.path(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, content).unwrap();
    own(node, rel);
}

fn link(node: &TestNode, rel: &str, target: &str) {
    std::os::unix::fs::symlink(target, node.path(rel)).unwrap();
    own(node, rel);
}

/// Everything under the node's home, links not followed: (path, what).
fn snapshot(node: &TestNode) -> Vec<(String, String)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                out.push((rel, format!("link -> {}", fs::read_link(&path).unwrap().display())));
            } else if meta.is_dir() {
                out.push((rel, "dir".into()));
                walk(base, &path, out);
            } else {
                out.push((rel, fs::read_to_string(&path).unwrap_or_else(|_| "<binary>".into())));
            }
        }
    }
    let home = node.path("");
    let mut out = Vec::new();
    walk(&home, &home, &mut out);
    out.sort();
    out
}

/// The names in a directory of the node (none when it is gone).
fn names_in(node: &TestNode, rel: &str) -> Vec<String> {
    let Ok(entries) = fs::read_dir(node.path(rel)) else { return Vec::new() };
    let mut names: Vec<String> = entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

#[test]
fn issue_35_an_adopted_registry_directory_keeps_the_files_winfleet_did_not_write() {
    let fleet = TestFleet::start(1);
    let node = &fleet.nodes[0];
    let both = repo(&fleet, "", &["quay.io/a", "registry.redhat.io/b"]);
    let (code, out, err) = apply(&fleet, &both, &[]);
    assert_eq!(code, 0, "{out}{err}");
    let hosts = node.read("certs.d/quay.io/hosts.toml").unwrap();

    // Someone else's directory: the desired hosts.toml, their CA and key.
    fs::remove_dir_all(node.path("certs.d/quay.io")).unwrap();
    write(node, "certs.d/quay.io/hosts.toml", &hosts);
    write(node, "certs.d/quay.io/ca.crt", CA);
    write(node, "certs.d/quay.io/client.key", KEY);
    let (code, out, err) = apply(&fleet, &both, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(node.path(&format!("certs.d/quay.io/{MARKER}")).is_file(), "adopted: marked");

    // The registry leaves the repository.
    let without = repo(&fleet, "", &["registry.redhat.io/b"]);
    let before = snapshot(node);
    let (code, planned, err) = apply(&fleet, &without, &["--dry-run"]);
    assert_eq!(code, 2, "changes planned, none failed\n{planned}{err}");
    assert_eq!(snapshot(node), before, "a dry run changes nothing");

    let (code, out, err) = apply(&fleet, &without, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(names_in(node, "certs.d/quay.io"), ["ca.crt", "client.key"], "only winfleet's files went\n{out}");
    assert_eq!(node.read("certs.d/quay.io/ca.crt").as_deref(), Some(CA));
    assert_eq!(node.read("certs.d/quay.io/client.key").as_deref(), Some(KEY));
    for text in [&planned, &out] {
        let line = "certs.d/quay.io (winfleet's hosts.toml and marker removed; registry directory kept: ca.crt, \
                    client.key are not winfleet's)";
        assert!(text.contains(line), "the plan and the apply say so:\n{text}");
    }

    // A directory winfleet made and nobody added to still goes whole.
    let last = repo(&fleet, "", &["docker.io/z"]);
    let (code, out, err) = apply(&fleet, &last, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("certs.d/registry.redhat.io (registry directory removed): applied"), "{out}");
    assert_eq!(names_in(node, "certs.d"), ["docker.io", "quay.io"]);

    let (code, out, err) = apply(&fleet, &last, &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 changed"), "the next round writes nothing (no marker: not winfleet's):\n{out}");
    assert_eq!(names_in(node, "certs.d/quay.io"), ["ca.crt", "client.key"]);
}

/// Links someone put on the node where winfleet writes and removes.
fn prepare_links(node: &TestNode) {
    // A file and a directory of someone else's, outside certs.d.
    write(node, "precious", "someone else's\n");
    write(node, "elsewhere/notes", "someone else's notes\n");
    // linked.io (desired): the registry directory is a link.
    link(node, "certs.d/linked.io", "../elsewhere");
    // quay.io (desired): its marker is a dangling link.
    fs::remove_file(node.path(&format!("certs.d/quay.io/{MARKER}"))).unwrap();
    link(node, &format!("certs.d/quay.io/{MARKER}"), "../../created-by-winfleet");
    // docker.io (desired, changed): its temporary file is a link.
    write(node, "certs.d/docker.io/hosts.toml", "server = \"https://changed\"\n");
    link(node, "certs.d/docker.io/.hosts.toml.winfleet-tmp", "../../precious");
    // gone.io (not desired): someone's directory whose marker is a link.
    write(node, "certs.d/gone.io/hosts.toml", "server = \"https://theirs\"\n");
    write(node, "certs.d/gone.io/data", "someone else's data\n");
    link(node, &format!("certs.d/gone.io/{MARKER}"), "../../precious");
}

#[test]
fn issue_35_links_on_the_node_are_never_followed() {
    let fleet = TestFleet::start(1);
    let node = &fleet.nodes[0];
    let desired = repo(&fleet, "", &["quay.io/a", "docker.io/b", "linked.io/c"]);
    let (code, out, err) = apply(&fleet, &repo(&fleet, "", &["quay.io/a", "docker.io/b"]), &[]);
    assert_eq!(code, 0, "{out}{err}");
    prepare_links(node);
    let before = snapshot(node);

    let (code, planned, err) = apply(&fleet, &desired, &["--dry-run"]);
    assert_eq!(code, 2, "changes planned, none failed\n{planned}{err}");
    assert_eq!(snapshot(node), before, "a dry run changes nothing");

    let (code, out, err) = apply(&fleet, &desired, &[]);
    assert!(!node.path("created-by-winfleet").exists(), "a dangling marker link's target is not created\n{out}");
    assert_eq!(node.read("precious").as_deref(), Some("someone else's\n"), "no write through a link\n{out}");
    assert_eq!(names_in(node, "elsewhere"), ["notes"], "nothing written into a linked directory\n{out}");
    assert_eq!(names_in(node, "certs.d/gone.io"), [MARKER, "data", "hosts.toml"], "nothing removed\n{out}");
    assert_ne!(code, 0, "the refused writes are failures\n{out}{err}");
    for text in [&planned, &out] {
        assert!(text.contains("certs.d/linked.io (registry directory not written: it is a symbolic link"), "{text}");
        assert!(!text.contains("gone.io"), "a directory whose marker is a link is not winfleet's:\n{text}");
    }
    for (rel, why) in [
        ("certs.d/linked.io", "is a symbolic link"),
        (&format!("certs.d/quay.io/{MARKER}"), "is a symbolic link"),
        ("certs.d/docker.io/.hosts.toml.winfleet-tmp", "is a symbolic link"),
    ] {
        assert!(out.contains(rel) && out.contains(why), "{rel} {why}:\n{out}");
    }
    let after = snapshot(node);
    let changed: Vec<_> = after.iter().filter(|e| !before.contains(e)).collect();
    assert!(changed.is_empty(), "nothing changed on the node: {changed:#?}\n{out}");
    assert_eq!(after, before);
}
