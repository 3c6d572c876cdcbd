//! A real Kubernetes control plane for tests: etcd, kube-apiserver and
//! kube-controller-manager v1.37.2, built from the Kubernetes Go modules by
//! tests/controlplane (see its main.go) and started per test on free
//! loopback ports, with TLS, `Node,RBAC` authorization, NodeRestriction,
//! bootstrap tokens, TokenRequest, the CSR signer and the OpenShift CRDs.
//!
//! [`ControlPlane::start`] builds the binary when it is missing or older
//! than its Go sources (`go build`, cached by Go between runs), starts it in
//! a temporary directory, waits for its `ready <kubeconfig>` line, and seeds
//! what a real OpenShift cluster has and winfleet reads ([`seed_openshift`]).
//! Dropping it ends the whole process group. Its kube-apiserver can be
//! restarted ([`ControlPlane::restart_apiserver`]) or killed outright
//! ([`ControlPlane::kill_apiserver`]): the supervisor starts it again on
//! the same etcd, port and certificates.
//!
//! The tests that need it are #[ignore]d (a plain `cargo test` lists them
//! as ignored, never as passed); `scripts/test.sh` builds it and runs
//! them. Without `go` and without a built binary such a test fails with
//! the reason.
//!
//! [`TestApi`] is the one switch between this and the in-memory API
//! (tests/support/apiserver): the same client, kubeconfig and seeding for
//! both.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, SystemTime};

use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

#[path = "controlplane_api.rs"]
mod api;
#[path = "controlplane_seed.rs"]
mod seed;

pub use api::{Backend, TestApi, resource};
pub use seed::{controller_config, seed_openshift};

/// The Kubernetes version of the control plane.
pub const KUBERNETES_VERSION: &str = "v1.37.2";
/// A real bootstrap token (`[a-z0-9]{6}.[a-z0-9]{16}`), the one the join
/// tests' bootstrap Secret carries (tests/support/join_payload.rs).
pub const BOOTSTRAP_TOKEN: &str = super::join_payload::TOKEN;
/// The service network of the seeded Network `cluster` (the kube-apiserver's
/// own service range is 10.96.0.0/16; winfleet only derives the DNS IP).
pub const SERVICE_NETWORK: &str = "172.30.0.0/16";

/// How long the control plane may take to answer /readyz with every CRD
/// Established (a loaded 2-core machine takes 10 to 30 s).
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// How many times a start that lost a port race is made ([`ControlPlane::start_bare`]).
const PORT_RACE_ATTEMPTS: u32 = 3;

/// A running control plane; dropped, it is stopped.
pub struct ControlPlane {
    /// `https://127.0.0.1:PORT`
    pub url: String,
    /// An admin kubeconfig (client certificate in group system:masters).
    pub kubeconfig: PathBuf,
    /// The data directory: CA, keys, kubeconfigs, component logs.
    pub dir: PathBuf,
    client: kube::Client,
    child: Child,
    lines: Receiver<String>,
    _tmp: tempfile::TempDir,
}

/// Where the binary is built (gitignored: under target/).
pub fn binary() -> PathBuf {
    super::root().join("target/controlplane/controlplane")
}

fn sources() -> PathBuf {
    super::root().join("tests/controlplane")
}

/// The newest modification time under `dir` (a Go module's sources).
pub fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        let t = if meta.is_dir() { newest_source(&entry.path()) } else { meta.modified().unwrap() };
        newest = newest.max(t);
    }
    newest
}

/// Whether `go` runs here.
pub fn go_available() -> bool {
    Command::new("go").arg("version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

static BUILD: Mutex<()> = Mutex::new(());

/// Builds the Go program of the module `module` (a directory of the
/// repository) into `bin` when `bin` is missing or older than the
/// module's sources, with `flags` before `-o`; one build at a time. `what`
/// names it in messages. `Err` is why it cannot be had.
pub fn go_build(module: &str, bin: &Path, what: &str, flags: &[&str]) -> Result<PathBuf, String> {
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let sources = super::root().join(module);
    let fresh = std::fs::metadata(bin).and_then(|m| m.modified()).is_ok_and(|built| built >= newest_source(&sources));
    if fresh {
        return Ok(bin.to_owned());
    }
    if !go_available() {
        return Err(if bin.exists() {
            format!("{} is older than {module} and `go` is not installed", bin.display())
        } else {
            format!("`go` is not installed ({what} is built with Go 1.26)")
        });
    }
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    // Build beside the target and rename: another test binary may be
    // starting the old one, or building too.
    let name = bin.file_name().unwrap().to_string_lossy();
    let tmp = bin.with_file_name(format!("{name}.{}.tmp", std::process::id()));
    eprintln!("building {what}; the first build takes minutes");
    let out = Command::new("go")
        .arg("build")
        .args(flags)
        .arg("-o")
        .arg(&tmp)
        .arg(".")
        .current_dir(&sources)
        .output()
        .map_err(|e| format!("running go build: {e}"))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("go build in {module} failed:\n{}", String::from_utf8_lossy(&out.stderr)));
    }
    std::fs::rename(&tmp, bin).map_err(|e| format!("installing {}: {e}", bin.display()))?;
    Ok(bin.to_owned())
}

/// Builds the control plane when missing or stale ([`go_build`]), with
/// the version a release build stamps (tests/controlplane/ldflags, which
/// .ci/run uses too: without it /version says v0.0.0-master).
pub fn ensure_built() -> Result<PathBuf, String> {
    let ldflags = std::fs::read_to_string(sources().join("ldflags")).map_err(|e| format!("ldflags: {e}"))?;
    let what = format!("the control plane (Kubernetes {KUBERNETES_VERSION})");
    go_build("tests/controlplane", &binary(), &what, &["-ldflags", ldflags.trim()])
}

/// The binary; a test that cannot have it fails with the reason. Such
/// tests are #[ignore]d (a plain `cargo test` lists them as ignored, never
/// as passed), so one that runs was asked for (`scripts/test.sh`,
/// `--include-ignored`): it never passes without having run.
fn built() -> PathBuf {
    match ensure_built() {
        Ok(bin) => bin,
        Err(why) => panic!("the real control plane cannot be had here: {why}"),
    }
}

impl ControlPlane {
    /// Starts a control plane and seeds it like an OpenShift cluster (a
    /// test that cannot have it fails with the reason).
    pub async fn start() -> ControlPlane {
        let plane = Self::start_bare().await;
        seed_openshift(&plane).await;
        plane
    }

    /// Starts a control plane with only its CRDs (nothing seeded). Its
    /// ports are ones the kernel just said were free; another process can
    /// take one before etcd or kube-apiserver binds it (an outgoing
    /// connection's source port, say), so a start that lost that race is
    /// tried again, with new ports.
    pub async fn start_bare() -> ControlPlane {
        let bin = tokio::task::spawn_blocking(built).await.unwrap();
        let mut attempt = 1;
        loop {
            match Self::try_start(&bin).await {
                Ok(plane) => return plane,
                Err(why) if attempt < PORT_RACE_ATTEMPTS && why.contains("address already in use") => {
                    eprintln!("the control plane lost a port to another process (attempt {attempt}); starting again");
                    attempt += 1;
                }
                Err(why) => panic!("{why}"),
            }
        }
    }

    async fn try_start(bin: &Path) -> Result<ControlPlane, String> {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let log = std::fs::File::create(tmp.path().join("controlplane.log")).unwrap();
        let mut command = Command::new(bin);
        command.arg(&dir).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(log);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn().map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let (tx, lines) = channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let ready = tokio::task::spawn_blocking(move || {
            let line = lines.recv_timeout(READY_TIMEOUT);
            (line, lines)
        })
        .await
        .unwrap();
        let (line, lines) = ready;
        let kubeconfig = match line {
            Ok(line) if line.starts_with("ready ") => PathBuf::from(line.trim_start_matches("ready ")),
            other => {
                // Why it stopped: its exit status (a signal, when the OOM
                // killer took it) and the disk left where it writes.
                std::thread::sleep(Duration::from_millis(500));
                let exit = match child.try_wait() {
                    Ok(Some(status)) => format!("exited: {status}"),
                    _ => "still running".to_owned(),
                };
                let _ = child.kill();
                let disk = free_disk(tmp.path());
                let log = std::fs::read_to_string(tmp.path().join("controlplane.log")).unwrap_or_default();
                let components: String = ["kube-apiserver.log", "kube-controller-manager.log", "etcd.log"]
                    .iter()
                    .map(|f| format!("\n--- {f} (end)\n{}", tail(&dir.join(f), 20)))
                    .collect();
                return Err(format!(
                    "the control plane did not get ready: {other:?} ({exit}; {disk})\n--- controlplane.log\n{log}{components}"
                ));
            }
        };
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .unwrap();
        let mut config = config;
        config.headers.push(test_user_agent());
        let url = config.cluster_url.to_string().trim_end_matches('/').to_owned();
        let client = kube::Client::try_from(config).unwrap();
        Ok(ControlPlane { url, kubeconfig, dir, client, child, lines, _tmp: tmp })
    }

    /// An admin client (group system:masters).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The cluster CA (it signs the serving certificate and kubelet CSRs).
    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.dir.join("ca.crt")).unwrap()
    }

    /// A client with a bearer token instead of the admin certificate.
    pub async fn client_with_token(&self, token: &str) -> kube::Client {
        kube::Client::try_from(self.token_config(token).await).unwrap()
    }

    /// A kube Config with a bearer token (and the cluster CA).
    pub async fn token_config(&self, token: &str) -> kube::Config {
        let mut config = kube::Config::new(self.url.parse().unwrap());
        config.root_cert = Some(vec![pem_der(&self.ca_pem())]);
        config.auth_info.token = Some(token.to_owned().into());
        config.headers.push(test_user_agent());
        config
    }

    /// Writes a kubeconfig authenticating with `token`; returns its path.
    pub fn token_kubeconfig(&self, name: &str, token: &str) -> PathBuf {
        let path = self.dir.join(format!("{name}.kubeconfig"));
        let text = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{ "name": "controlplane", "cluster": {
                "server": self.url, "certificate-authority": self.dir.join("ca.crt") } }],
            "users": [{ "name": name, "user": { "token": token } }],
            "contexts": [{ "name": name, "context": { "cluster": "controlplane", "user": name, "namespace": "default" } }],
            "current-context": name,
        });
        std::fs::write(&path, serde_json::to_string_pretty(&text).unwrap()).unwrap();
        path
    }

    /// Restarts kube-apiserver (same port, same etcd): every watch ends.
    pub async fn restart_apiserver(&self) {
        let status = Command::new("kill").args(["-USR1", &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
        let lines = &self.lines;
        let line = tokio::task::block_in_place(|| lines.recv_timeout(READY_TIMEOUT));
        assert_eq!(line.as_deref(), Ok("restarted"), "kube-apiserver did not come back");
    }

    /// Kills kube-apiserver outright (SIGKILL, as the OOM killer or a
    /// node failure would): every connection drops at once, nothing is
    /// finished. The supervisor starts it again on the same etcd, port and
    /// certificates; [`Self::wait_revived`] waits for that.
    pub fn kill_apiserver(&self) {
        assert!(self.apiserver_killer().kill_once(), "kube-apiserver was killed");
    }

    /// A handle that kills kube-apiserver once, from any thread (a watch
    /// task, a round's callback).
    pub fn apiserver_killer(&self) -> ApiServerKiller {
        ApiServerKiller { pid_file: self.dir.join("kube-apiserver.pid"), killed: Default::default() }
    }

    /// Waits until the supervisor has kube-apiserver ready again after
    /// [`Self::kill_apiserver`].
    pub async fn wait_revived(&self) {
        let lines = &self.lines;
        let line = tokio::task::block_in_place(|| lines.recv_timeout(READY_TIMEOUT));
        assert_eq!(line.as_deref(), Ok("revived"), "kube-apiserver did not come back after it was killed");
    }

    /// The end of a component's log (kube-apiserver.log, kube-controller-manager.log, etcd.log).
    pub fn log_tail(&self, file: &str, lines: usize) -> String {
        tail(&self.dir.join(file), lines)
    }

    /// Creates `obj` (any kind the server serves), then writes its
    /// `status` through the status subresource when it has one, as a
    /// controller would; returns the stored object.
    pub async fn seed(&self, obj: Value) -> Value {
        create_with_status(&self.client, obj).await
    }

    /// Server-side applies `obj` as field manager `manager` (forced).
    pub async fn apply(&self, obj: &Value, manager: &str) -> Value {
        let (api, name) = dynamic_api(&self.client, obj).await;
        let params = PatchParams::apply(manager).force();
        let out = api.patch(&name, &params, &Patch::Apply(obj)).await.unwrap_or_else(|e| panic!("apply {name}: {e}"));
        serde_json::to_value(out).unwrap()
    }

    /// Reads an object; `None` when it does not exist.
    pub async fn get(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let probe =
            json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": namespace}});
        let (api, _) = dynamic_api(&self.client, &probe).await;
        api.get_opt(name).await.unwrap().map(|o| serde_json::to_value(o).unwrap())
    }
}

/// Kills the control plane's kube-apiserver once ([`ControlPlane::apiserver_killer`]).
#[derive(Clone)]
pub struct ApiServerKiller {
    pid_file: PathBuf,
    killed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl ApiServerKiller {
    /// SIGKILLs kube-apiserver unless this handle (or a clone) already
    /// did; whether this call killed it.
    pub fn kill_once(&self) -> bool {
        if self.killed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        let pid = std::fs::read_to_string(&self.pid_file).unwrap();
        let status = Command::new("kill").args(["-KILL", pid.trim()]).status().unwrap();
        assert!(status.success(), "kill -KILL {}", pid.trim());
        true
    }

    /// Whether it was killed.
    pub fn killed(&self) -> bool {
        self.killed.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // The whole process group: the supervisor and its kube-apiserver
        // and kube-controller-manager children.
        let group = format!("-{}", self.child.id());
        let quiet = |signal: &str| {
            let _ = Command::new("kill").args([signal, "--", &group]).stderr(Stdio::null()).status();
        };
        quiet("-TERM");
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        quiet("-KILL");
        let _ = self.child.wait();
    }
}

/// The User-Agent of the tests' own clients: what they write is recorded
/// under field manager `winfleet-test`, never `unknown`, so that a test can
/// tell an unnamed write of winfleet's from its own
/// (tests/real_cluster_field_managers.rs).
fn test_user_agent() -> (http::HeaderName, http::HeaderValue) {
    (http::header::USER_AGENT, http::HeaderValue::from_static("winfleet-test/0"))
}

/// The space left on the file system of `dir`, as `df` says it.
fn free_disk(dir: &Path) -> String {
    match Command::new("df").arg("-Pk").arg(dir).output() {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            let free =
                text.lines().nth(1).and_then(|l| l.split_whitespace().nth(3)).and_then(|k| k.parse::<u64>().ok());
            free.map_or_else(|| format!("df said: {}", text.trim()), |kb| format!("{} MB free", kb / 1024))
        }
        Err(e) => format!("df: {e}"),
    }
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn pem_der(pem: &str) -> Vec<u8> {
    use base64::Engine;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD.decode(body).unwrap()
}

/// The dynamic Api for an object's apiVersion/kind (discovered), and its name.
async fn dynamic_api(client: &kube::Client, obj: &Value) -> (Api<DynamicObject>, String) {
    let api_version = obj["apiVersion"].as_str().expect("apiVersion");
    let kind = obj["kind"].as_str().expect("kind");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .unwrap_or_else(|e| panic!("the server does not serve {api_version} {kind}: {e}"));
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let namespace = obj.pointer("/metadata/namespace").and_then(Value::as_str);
    let api = match (caps.scope, namespace) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    };
    (api, name)
}

async fn create_with_status(client: &kube::Client, obj: Value) -> Value {
    let (api, name) = dynamic_api(client, &obj).await;
    let mut object: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
    object.metadata.resource_version = None;
    let created =
        api.create(&PostParams::default(), &object).await.unwrap_or_else(|e| panic!("seed {}: {e}", obj["kind"]));
    let Some(status) = obj.get("status") else { return serde_json::to_value(created).unwrap() };
    let patch = json!({ "status": status });
    match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(o) => serde_json::to_value(o).unwrap(),
        // No status subresource (Network): the status was stored with the object.
        Err(kube::Error::Api(e)) if e.code == 404 => serde_json::to_value(created).unwrap(),
        Err(e) => panic!("seed {} status: {e}", obj["kind"]),
    }
}
