//! A repository for the node engine's tests and `winfleet apply --once` on
//! it (tests/node_engine.rs): the fleet's instances, mirror sets and a
//! Proxy, written as the tests need them.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::fleet::TestFleet;
use super::winfleet;

/// A config repository for a test fleet, written to a directory.
pub struct Repo {
    dir: tempfile::TempDir,
}

/// The mirror sets of a repository: (source, mirrors).
type Mirrors<'a> = &'a [(&'a str, &'a [&'a str])];

impl Repo {
    pub fn new(fleet: &TestFleet) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repo { dir };
        repo.write("fleet.yaml", &fleet.fleet_yaml());
        let mut list = String::from(
            "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: test\nspec:\n  instances:\n",
        );
        for node in &fleet.nodes {
            list.push_str(&format!("  - address: {}\n", node.address));
        }
        repo.write("instances.yaml", &list);
        repo
    }

    pub fn path(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }

    pub fn write(&self, rel: &str, content: &str) {
        fs::write(self.dir.path().join(rel), content).unwrap();
    }

    pub fn remove(&self, rel: &str) {
        fs::remove_file(self.dir.path().join(rel)).unwrap();
    }

    pub fn mirrors(&self, sets: Mirrors<'_>) {
        let mut doc = String::from(
            "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: mirrors\nspec:\n  imageDigestMirrors:\n",
        );
        for (source, mirrors) in sets {
            doc.push_str(&format!("  - source: {source}\n    mirrors:\n"));
            for m in *mirrors {
                doc.push_str(&format!("    - {m}\n"));
            }
        }
        self.write("mirrors.yaml", &doc);
    }

    pub fn proxy(&self, http: &str, no_proxy: &str) {
        self.write(
            "proxy.yaml",
            &format!(
                "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: {}\n  noProxy: {}\n",
                yaml_str(http),
                yaml_str(no_proxy)
            ),
        );
    }

    /// The hosts.toml content each registry should get, from the library.
    pub fn expected_hosts(&self) -> BTreeMap<String, String> {
        let snapshot = winfleet::source::read_worktree(self.dir.path()).unwrap();
        let loaded = winfleet::desired::load(&snapshot, Default::default());
        let desired = loaded.desired.unwrap_or_else(|| panic!("invalid repo: {:?}", loaded.diagnostics));
        let spec = &desired.specs[&winfleet::vocab::Shell::Posix];
        spec.registries.iter().map(|(k, f)| (k.clone(), f.content().to_owned())).collect()
    }
}

pub fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// `winfleet apply --once` with the fleet's key and pinned host keys.
pub fn apply(fleet: &TestFleet, repo: &Repo, extra: &[&str]) -> (i32, String, String) {
    apply_with(repo, &fleet.key, &fleet.known_hosts, extra)
}

/// `winfleet apply --once` with a given key and known_hosts file.
pub fn apply_with(repo: &Repo, key: &Path, known_hosts: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["apply", "--once", "--repo", repo.path(), "--ssh-key", path(key), "--known-hosts"];
    args.push(path(known_hosts));
    args.extend_from_slice(extra);
    winfleet(&args)
}

pub fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}
