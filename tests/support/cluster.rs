//! The config repository and round helpers of the cluster tests against
//! the in-memory API server (tests/cluster.rs, tests/safe_reboot.rs).

#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use winfleet::desired::model::{Desired, Instance};
use winfleet::reconcile::{self, Options, report::RoundReport};
use winfleet::ssh::{KnownHosts, Pool, Settings};

use super::apiserver::ApiServer;

pub const MAPI: &str = "openshift-machine-api";
pub const MS: &str = "machine.openshift.io/v1beta1";

/// A config repository in a temporary directory.
pub struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    /// Instances are posix hosts on 127.0.0.1 port 1: SSH is refused at
    /// once, so these tests exercise only the cluster part (and that a
    /// failing node does not stop it).
    pub fn new() -> Self {
        let repo = Repo { dir: tempfile::tempdir().unwrap() };
        repo.write(
            "fleet.yaml",
            "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: t\nspec:\n  lab:\n    allowLoopbackAddresses: true\n  defaults:\n    username: u\n    port: 1\n    shell: posix\n",
        );
        repo
    }

    pub fn write(&self, rel: &str, content: &str) {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub fn remove(&self, rel: &str) {
        std::fs::remove_file(self.dir.path().join(rel)).unwrap();
    }

    pub fn machine_set(&self, name: &str, replicas: i64, adopt: bool) {
        let template =
            std::fs::read_to_string(super::root().join("examples-repo/machinesets/winworker-aws.yaml")).unwrap();
        let mut text = template
            .replace("prod-7xk2p-windows-us-east-1a", name)
            .replace("replicas: 1", &format!("replicas: {replicas}"));
        if adopt {
            text = text.replace(
                "  namespace: openshift-machine-api\n",
                "  namespace: openshift-machine-api\n  annotations:\n    winfleet.io/adopt: \"true\"\n",
            );
        }
        self.write(&format!("machinesets/{name}.yaml"), &text);
    }

    pub fn instances(&self, entries: &str) {
        self.write(
            "instances.yaml",
            &format!("apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: t\nspec:\n  instances:\n{entries}"),
        );
    }

    pub fn desired(&self) -> Desired {
        let snapshot = winfleet::source::read_worktree(self.dir.path()).unwrap();
        let loaded = winfleet::desired::load(&snapshot, Default::default());
        loaded.desired.unwrap_or_else(|| panic!("invalid repo: {:#?}", loaded.diagnostics))
    }
}

/// An SSH pool whose connections fail fast (nothing listens on port 1).
pub fn pool(dir: &Path) -> Pool {
    let key = dir.join("id");
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-N", "", "-t", "ed25519", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(dir.join("known_hosts"), "").unwrap();
    let settings = Settings { retries: 0, connect_timeout: Duration::from_secs(2), ..Settings::default() };
    Pool::new(
        winfleet::ssh::load_key(&key).unwrap(),
        KnownHosts::load(&dir.join("known_hosts"), false).unwrap(),
        settings,
    )
}

pub fn options(dry_run: bool) -> Options {
    Options { dry_run, max_parallel: 4, whole_fleet: true, ..Options::default() }
}

/// One whole round of the library pipeline against the API server.
pub async fn round(api: &ApiServer, repo: &Repo, dry_run: bool) -> RoundReport {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path());
    let desired = repo.desired();
    let instances: Vec<&Instance> = desired.instances.values().collect();
    let cluster = winfleet::cluster::connect::Cluster { client: api.client(), url: "in-memory".into() };
    let host = winfleet::engine::host::SshHost { pool: &pool };
    reconcile::round(Some(&cluster), &pool, &host, &desired, &instances, &options(dry_run), |_| {}).await
}

pub fn event_reasons(api: &ApiServer, name: &str) -> Vec<String> {
    api.list("events.k8s.io/v1", "Event")
        .into_iter()
        .filter(|e| e["regarding"]["name"] == name)
        .map(|e| e["reason"].as_str().unwrap().to_owned())
        .collect()
}

/// Writes to one object, not counting the test's own (out-of-band) ones.
pub fn written(api: &ApiServer, resource: &str, name: &str) -> usize {
    let by_test = |w: &&super::apiserver::Write| w.field_manager.as_deref() == Some("test");
    api.history().iter().filter(|w| w.resource == resource && w.name == name && !by_test(w)).count()
}
