//! A repository of the test fleet's instances and one ImageDigestMirrorSet,
//! and `winfleet apply --once` on it: what the registry-directory tests
//! share (tests/registry_ownership.rs, tests/registry_foreign_files.rs).

#![allow(dead_code, clippy::unwrap_used)]

use std::fmt::Write as _;
use std::fs;

use super::fleet::TestFleet;

/// The fleet's instances, the Fleet (with `fleet_extra` appended) and a
/// mirror for each of `sources`.
pub fn repo(fleet: &TestFleet, fleet_extra: &str, sources: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("fleet.yaml"), format!("{}{fleet_extra}", fleet.fleet_yaml())).unwrap();
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: test\nspec:\n  instances:\n",
    );
    for node in &fleet.nodes {
        let _ = writeln!(list, "  - address: {}", node.address);
    }
    fs::write(dir.path().join("instances.yaml"), list).unwrap();
    let mut mirrors = String::from(
        "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: m\nspec:\n  imageDigestMirrors:\n",
    );
    for source in sources {
        let _ = write!(mirrors, "  - source: {source}\n    mirrors:\n    - mirror.example.com/{source}\n");
    }
    fs::write(dir.path().join("mirrors.yaml"), mirrors).unwrap();
    dir
}

/// `winfleet apply --once` on `repo` with the fleet's key and known hosts.
pub fn apply(fleet: &TestFleet, repo: &tempfile::TempDir, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["apply", "--once", "--repo", repo.path().to_str().unwrap(), "--ssh-key"];
    args.push(fleet.key.to_str().unwrap());
    args.extend(["--known-hosts", fleet.known_hosts.to_str().unwrap()]);
    args.extend_from_slice(extra);
    super::winfleet(&args)
}
