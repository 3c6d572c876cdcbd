//! The daemon in process for the end-to-end tests: a repository on a bare
//! remote for a [`TestFleet`], the daemon's configuration, and the HTTP
//! calls (readiness, signed webhooks) the tests make.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use hmac::{KeyInit, Mac};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::broadcast;
use winfleet::daemon::round::RoundRecord;
use winfleet::daemon::source::SourceConfig;
use winfleet::daemon::triggers::webhook::WebhookConfig;
use winfleet::daemon::{self, Config, Handle};
use winfleet::source::transport::GitAuth;
use winfleet::ssh::{KnownHosts, Pool, Settings, load_key};

use super::fleet::TestFleet;
use super::remote::Remote;

/// The webhook secret every test daemon uses.
pub const SECRET: &[u8] = b"webhook-secret-for-tests";

pub fn instances(fleet: &TestFleet) -> String {
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: t\nspec:\n  instances:\n",
    );
    for node in &fleet.nodes {
        list.push_str(&format!("  - address: {}\n", node.address));
    }
    list
}

pub fn mirrors(mirror: &str) -> String {
    format!(
        "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: mirrors\nspec:\n  imageDigestMirrors:\n  - source: quay.io\n    mirrors:\n    - {mirror}\n"
    )
}

/// A remote holding a valid repository for `fleet` (`extra_fleet` is
/// appended to the Fleet's spec).
pub fn remote(fleet: &TestFleet, extra_fleet: &str) -> Remote {
    let fleet_yaml = format!("{}{extra_fleet}", fleet.fleet_yaml());
    Remote::new(&[
        ("fleet.yaml", &fleet_yaml),
        ("instances.yaml", &instances(fleet)),
        ("mirrors.yaml", &mirrors("mirror.corp.example/quay")),
    ])
}

pub fn config(remote: &Remote) -> Config {
    Config {
        source: SourceConfig::Remote { url: remote.url(), branch: "main".into() },
        auth: GitAuth::default(),
        cache_dir: remote.scratch(&format!("cache-{}", fastrand::u32(..))),
        status_url: None,
        author_name: "winfleet".into(),
        author_email: "winfleet@test.invalid".into(),
        poll_interval: Duration::from_secs(3600),
        shutdown_timeout: Duration::from_secs(20),
        max_parallel: None,
        drain_timeout: Duration::from_secs(60),
        reboot_timeout: Duration::from_secs(60),
        pull_secret: None,
        metrics_addr: Some("127.0.0.1:0".parse().unwrap()),
        webhook: Some(("127.0.0.1:0".parse().unwrap(), WebhookConfig::new(SECRET.to_vec(), "main"))),
        leader_election: None,
        watch_cluster: false,
        seed: 42,
        payload_dir: None,
        join: Default::default(),
        control_token: None,
        verify: None,
        path: None,
        pod: None,
        git_sync: None,
    }
}

pub fn pool(fleet: &TestFleet) -> Pool {
    pool_with(fleet, Settings::default())
}

/// A pool for the fleet's nodes with `settings`.
pub fn pool_with(fleet: &TestFleet, settings: Settings) -> Pool {
    Pool::new(load_key(&fleet.key).unwrap(), KnownHosts::load(&fleet.known_hosts, false).unwrap(), settings)
}

pub async fn start(fleet: &TestFleet, config: Config) -> Handle {
    daemon::start(config, None, pool(fleet)).await.unwrap()
}

pub async fn next(records: &mut broadcast::Receiver<RoundRecord>) -> RoundRecord {
    tokio::time::timeout(Duration::from_secs(120), records.recv())
        .await
        .expect("a round within 120 s")
        .expect("the daemon is running")
}

/// GETs a path of the operations endpoint; the HTTP status.
pub async fn get(addr: SocketAddr, path: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response);
    text.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0)
}

pub async fn wait_ready(handle: &Handle) {
    let addr = handle.metrics_addr.unwrap();
    tokio::time::timeout(Duration::from_secs(60), async {
        while get(addr, "/readyz").await != 200 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("ready after the first fetch");
}

/// POSTs to the webhook; the HTTP status.
pub async fn post(addr: SocketAddr, headers: &[(&str, String)], body: &[u8]) -> u16 {
    post_answer(addr, headers, body).await.0
}

/// POSTs to the webhook; the HTTP status and the answer's body.
pub async fn post_answer(addr: SocketAddr, headers: &[(&str, String)], body: &[u8]) -> (u16, String) {
    post_to(addr, "/webhook", headers, body).await
}

/// POSTs to `path`; the HTTP status and the answer's body.
pub async fn post_to(addr: SocketAddr, path: &str, headers: &[(&str, String)], body: &[u8]) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request =
        format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.unwrap();
    let text = String::from_utf8_lossy(&response);
    let status = text.split_whitespace().nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default();
    (status, body)
}

pub fn github_signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
    mac.update(body);
    let hex: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// A GitHub push notification for main.
pub async fn push_hook(handle: &Handle) -> u16 {
    push_hook_answer(handle).await.0
}

/// A GitHub push notification for main; the status and the answer's body.
pub async fn push_hook_answer(handle: &Handle) -> (u16, String) {
    let body = br#"{"ref":"refs/heads/main","after":"0000000000000000000000000000000000000000"}"#;
    let headers = [("X-GitHub-Event", "push".to_owned()), ("X-Hub-Signature-256", github_signature(SECRET, body))];
    post_answer(handle.webhook_addr.unwrap(), &headers, body).await
}

pub fn hosts_toml(fleet: &TestFleet, i: usize) -> Option<String> {
    fleet.nodes[i].read("certs.d/quay.io/hosts.toml")
}

pub async fn stop(handle: Handle) {
    handle.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(60), handle.task).await.unwrap().unwrap().unwrap();
}

pub fn daemon_command(remote: &Remote, fleet: &TestFleet, cache: &PathBuf, metrics: u16) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_winfleet"));
    cmd.args(["run", "--repo-url", &remote.url(), "--cache-dir", cache.to_str().unwrap()])
        .args(["--ssh-key", fleet.key.to_str().unwrap(), "--known-hosts", fleet.known_hosts.to_str().unwrap()])
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics}"), "--max-parallel", "1", "--poll-interval", "1h"])
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", cache)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// Makes every script on `fleet`'s nodes a second slower (each decodes
/// base64) and every file rename too, so a signal or a kill lands inside a
/// round.
pub fn slow_writes(fleet: &TestFleet) {
    for node in &fleet.nodes {
        node.shim("base64", "#!/bin/sh\nsleep 1\nexec /usr/bin/base64 \"$@\"\n");
        node.shim("mv", "#!/bin/sh\nsleep 1\nexec /bin/mv \"$@\"\n");
    }
}

/// Every line `child` writes to stderr, as it comes.
pub fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stderr = child.stderr.take().expect("stderr is piped");
    let (lines, log) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    log
}

/// Reads `log` until a line says a node of `fleet` was applied; the lines read.
pub fn until_a_node_is_applied(log: &std::sync::mpsc::Receiver<String>, fleet: &TestFleet) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let line = log.recv_timeout(Duration::from_secs(120)).expect("the daemon logs its first node");
        let done = fleet.nodes.iter().any(|n| line.contains(&n.address) && line.contains("applied"));
        seen.push(line);
        if done {
            return seen;
        }
    }
}
