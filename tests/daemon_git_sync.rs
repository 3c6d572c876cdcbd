//! The git-sync layout's webhook, end to end: a verified push makes the
//! daemon signal the git-sync process beside it (`--git-sync-signal`), which
//! fetches at once; the file watch then sees the link flip and the daemon
//! applies the push. The poll is an hour away and the stand-in has no
//! period at all, so only the signal can bring the push in.
//!
//! The stand-in is a real process found the way the daemon finds git-sync
//! in a pod (by its name under /proc): a shell script that, like git-sync
//! with `--sync-on-signal=SIGHUP`, traps the signal and then fetches, adds a
//! worktree and flips the link.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use hmac::{KeyInit, Mac};
use support::fleet::TestFleet;
use support::remote::GitSync;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use winfleet::daemon::round::RoundKind;
use winfleet::daemon::source::SourceConfig;
use winfleet::daemon::triggers::git_sync::GitSyncSignal;
use winfleet::daemon::triggers::webhook::WebhookConfig;
use winfleet::daemon::{self, Config};
use winfleet::source::transport::GitAuth;
use winfleet::ssh::{KnownHosts, Pool, Settings, load_key};

const SECRET: &[u8] = b"webhook-secret-for-git-sync";

/// git-sync's part: sync on SIGHUP only. `ready` is written once the trap
/// is set (before that, SIGHUP would end the shell).
const STAND_IN: &str = r#"#!/bin/sh
root="$1"; upstream="$2"; log="$3"
sync() {
  git -C "$root" fetch -q "$upstream" main
  sha=$(git -C "$root" rev-parse FETCH_HEAD)
  git -C "$root" worktree add -q --detach "$root/.worktrees/$sha" "$sha"
  ln -sfn ".worktrees/$sha" "$root/.current.tmp"
  mv -T "$root/.current.tmp" "$root/current"
  echo "synced $sha" >> "$log"
}
trap sync HUP
echo ready >> "$log"
while :; do sleep 1 & wait $!; done
"#;

/// The stand-in process, killed when dropped.
struct StandIn {
    child: Child,
    name: String,
    log: PathBuf,
}

impl StandIn {
    /// Starts the script under a name no other process on this machine has
    /// (the kernel keeps 15 bytes of it), and waits until its trap is set.
    fn start(dir: &Path, sync: &GitSync) -> Self {
        let name = format!("gs-{}-{}", std::process::id(), fastrand::u16(..));
        let script = dir.join(&name);
        std::fs::write(&script, STAND_IN).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = dir.join("stand-in.log");
        // A shell cannot trap a signal it started with ignored (a test run
        // under nohup ignores SIGHUP): the stand-in starts with its default.
        let child = Command::new("env")
            .arg("--default-signal=HUP")
            .arg(&script)
            .arg(sync.root())
            .arg(sync.upstream())
            .arg(&log)
            .spawn()
            .unwrap();
        let stand_in = Self { child, name, log };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !stand_in.log().contains("ready") {
            assert!(std::time::Instant::now() < deadline, "the stand-in never set its trap");
            std::thread::sleep(Duration::from_millis(10));
        }
        stand_in
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn files(fleet: &TestFleet, mirror: &str) -> Vec<(&'static str, String)> {
    let mut instances = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: t\nspec:\n  instances:\n",
    );
    for node in &fleet.nodes {
        instances.push_str(&format!("  - address: {}\n", node.address));
    }
    let mirrors = format!(
        "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: mirrors\nspec:\n  imageDigestMirrors:\n  - source: quay.io\n    mirrors:\n    - {mirror}\n"
    );
    vec![("fleet.yaml", fleet.fleet_yaml()), ("instances.yaml", instances), ("mirrors.yaml", mirrors)]
}

fn config(dir: &Path, sync: &GitSync, git_sync: GitSyncSignal) -> Config {
    Config {
        source: SourceConfig::Checkout { path: sync.link() },
        auth: GitAuth::default(),
        cache_dir: dir.join("cache"),
        status_url: None,
        author_name: "winfleet".into(),
        author_email: "winfleet@test.invalid".into(),
        poll_interval: Duration::from_secs(3600),
        shutdown_timeout: Duration::from_secs(20),
        max_parallel: None,
        drain_timeout: Duration::from_secs(60),
        reboot_timeout: Duration::from_secs(60),
        pull_secret: None,
        metrics_addr: None,
        webhook: Some(("127.0.0.1:0".parse().unwrap(), WebhookConfig::new(SECRET.to_vec(), "main"))),
        leader_election: None,
        watch_cluster: false,
        seed: 42,
        payload_dir: None,
        join: Default::default(),
        git_sync: Some(git_sync),
        control_token: None,
        verify: None,
        path: None,
        pod: None,
    }
}

/// A signed GitHub push to main; the HTTP status.
async fn push_hook(addr: std::net::SocketAddr) -> u16 {
    let body = br#"{"ref":"refs/heads/main","after":"0000000000000000000000000000000000000000"}"#;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET).unwrap();
    mac.update(body);
    let signature: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    let request = format!(
        "POST /webhook HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\nX-GitHub-Event: push\r\nX-Hub-Signature-256: sha256={signature}\r\n\r\n",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response);
    text.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
}

async fn next(
    records: &mut tokio::sync::broadcast::Receiver<daemon::round::RoundRecord>,
) -> daemon::round::RoundRecord {
    tokio::time::timeout(Duration::from_secs(120), records.recv())
        .await
        .expect("a round within 120 s")
        .expect("the daemon is running")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_to_the_webhook_makes_git_sync_fetch_at_once_and_is_applied() {
    let fleet = TestFleet::start(1);
    let dir = tempfile::tempdir().unwrap();
    let sync = GitSync::new(dir.path(), &files(&fleet, "mirror.corp.example/quay"));
    let stand_in = StandIn::start(dir.path(), &sync);
    let signal = GitSyncSignal::new("SIGHUP", &stand_in.name).unwrap();
    let pool = Pool::new(
        load_key(&fleet.key).unwrap(),
        KnownHosts::load(&fleet.known_hosts, false).unwrap(),
        Settings::default(),
    );
    let mut handle = daemon::start(config(dir.path(), &sync, signal), None, pool).await.unwrap();
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    assert!(fleet.nodes[0].read("certs.d/quay.io/hosts.toml").unwrap().contains("mirror.corp.example/v2/quay"));

    // A push upstream that git-sync has not fetched; the webhook announces it.
    let pushed = sync.commit_upstream(&files(&fleet, "mirror2.corp.example/quay"));
    assert_eq!(push_hook(handle.webhook_addr.unwrap()).await, 202);

    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str()), (RoundKind::Commit, pushed.as_str()));
    assert!(stand_in.log().contains(&format!("synced {pushed}")), "{}", stand_in.log());
    assert!(fleet.nodes[0].read("certs.d/quay.io/hosts.toml").unwrap().contains("mirror2.corp.example/v2/quay"));
    handle.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(60), handle.task).await.unwrap().unwrap().unwrap();
}
