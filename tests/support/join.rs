//! A lifecycle test bench: real sshd nodes with their own host names and a
//! systemctl shim, an API server with the cluster material a join needs, a
//! payload whose kubelet is the fake kubelet, and a config repository with
//! a posix services manifest. [`setup`] is the in-memory API served over
//! loopback (its tests reach into the server); [`bench`] is either API
//! server, chosen by [`Backend`].

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::fs;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use winfleet::cluster::connect::{Cluster, ClusterConfig, connect};
use winfleet::cluster::deconfigure::DeconfigureResult;
use winfleet::cluster::join::JoinOptions;
use winfleet::desired::model::{Desired, Instance};
use winfleet::engine::host::SshHost;
use winfleet::lifecycle::PayloadState;
use winfleet::payload::Payload;
use winfleet::reconcile::{self, Options, report::RoundReport};
use winfleet::ssh::{KnownHosts, Pool, Settings, load_key};

use super::apiserver::{ApiServer, Served, fixtures};
use super::controlplane::{Backend, TestApi};
use super::fleet::TestFleet;

pub use super::join_payload::{TOKEN, payload, services_manifest};

pub struct Setup {
    pub fleet: TestFleet,
    pub server: ApiServer,
    pub served: Served,
    pub cluster: Cluster,
    pub desired: Desired,
    pub payload: Arc<Payload>,
    pub pool: Pool,
    pub repo: tempfile::TempDir,
    pub options: Options,
}

pub async fn setup(names: &[&str]) -> Setup {
    let fleet = fleet(names);
    let server = ApiServer::new();
    let served = server.serve().await;
    let ca = server.ca_pem();
    server.seed(fixtures::bootstrap_secret(TOKEN, &ca));
    server.seed(fixtures::infrastructure(&served.url));
    server.seed(fixtures::network("172.30.0.0/16"));
    server.seed(fixtures::controller_config(&ca));
    server.add_token(TOKEN, "system:bootstrap:abcdef", &["system:bootstrappers", "system:bootstrappers:worker"]);
    let cluster = Cluster { client: server.client(), url: served.url.clone() };
    let Parts { payload, repo, desired, pool, options } = parts(&fleet);
    Setup { fleet, server, served, cluster, desired, payload, pool, repo, options }
}

/// The same bench on either API server ([`Backend`]): the cluster seeded
/// as an OpenShift cluster is ([`TestApi::start`]).
pub struct Bench {
    pub fleet: TestFleet,
    pub api: TestApi,
    pub cluster: Cluster,
    pub desired: Desired,
    pub payload: Arc<Payload>,
    pub pool: Pool,
    pub repo: tempfile::TempDir,
    pub options: Options,
}

/// Starts `backend` and a fleet of sshd nodes named `names`.
pub async fn bench(backend: Backend, names: &[&str]) -> Bench {
    let api = TestApi::start(backend).await;
    let fleet = fleet(names);
    // winfleet's own client, as `apply` and `run` build it from the
    // kubeconfig (kube's retry of every verb off: the admin client of the
    // harness retries a 429 for minutes, so a refused eviction would reach
    // the drain only then).
    let config = ClusterConfig { kubeconfig: Some(api.kubeconfig().to_path_buf()), context: None };
    let cluster = connect(&config).await.unwrap().expect("a kubeconfig was given");
    let Parts { payload, repo, desired, pool, options } = parts(&fleet);
    Bench { fleet, api, cluster, desired, payload, pool, repo, options }
}

impl Bench {
    /// One round over every listed instance.
    pub async fn round(&self) -> RoundReport {
        let instances: Vec<&Instance> = self.desired.instances.values().collect();
        let host = SshHost { pool: &self.pool };
        reconcile::round(Some(&self.cluster), &self.pool, &host, &self.desired, &instances, &self.options, |_| {}).await
    }

    /// The same round as a dry run (what `plan --live` runs).
    pub async fn plan(&self) -> RoundReport {
        let instances: Vec<&Instance> = self.desired.instances.values().collect();
        let host = SshHost { pool: &self.pool };
        let options = Options { dry_run: true, ..self.options.clone() };
        reconcile::round(Some(&self.cluster), &self.pool, &host, &self.desired, &instances, &options, |_| {}).await
    }

    /// Submits a kubelet client CSR named `name` for node `node` as a
    /// joining host would: with the bootstrap token, so the server records
    /// who asked (a near miss, when `node` is not a listed host's name).
    pub async fn submit_client_csr(&self, name: &str, node: &str) {
        submit_client_csr(&self.api, name, node).await;
    }

    /// The first node leaves the repository (its line of instances.yaml
    /// goes); the round deconfigures it, and nothing else.
    pub async fn remove_first(&mut self) {
        let path = self.repo.path().join("instances.yaml");
        let text = fs::read_to_string(&path).unwrap();
        let first = format!("  - address: {}\n", self.fleet.nodes[0].address);
        let start = text.find(&first).unwrap();
        let end = text[start + first.len()..].find("  - address: ").map_or(text.len(), |e| start + first.len() + e);
        fs::write(&path, format!("{}{}", &text[..start], &text[end..])).unwrap();
        self.reload();
        let report = self.round().await;
        let deconfigures = &report.cluster.as_ref().unwrap().deconfigures;
        assert!(
            matches!(deconfigures[..], [ref d] if matches!(d.result, DeconfigureResult::Deconfigured { .. })),
            "{}\n{}",
            report.render_text(),
            logs(&self.fleet)
        );
    }

    /// The Node `name`, which must exist.
    pub async fn node(&self, name: &str) -> Value {
        self.api.get("v1", "Node", None, name).await.unwrap_or_else(|| panic!("Node {name} is not registered"))
    }
}

fn fleet(names: &[&str]) -> TestFleet {
    let fleet = TestFleet::start_named(names);
    for node in &fleet.nodes {
        node.install_systemctl("units");
    }
    fleet
}

/// What a bench holds besides its API server.
struct Parts {
    payload: Arc<Payload>,
    repo: tempfile::TempDir,
    desired: Desired,
    pool: Pool,
    options: Options,
}

fn parts(fleet: &TestFleet) -> Parts {
    let payload = Arc::new(Payload::load(&payload(fleet.dir())).unwrap());
    let repo = tempfile::tempdir().unwrap();
    let fleet_yaml = format!(
        "{}  payload:\n    digest: {}\n    posixDir: payload\n  services:\n    posixDir: units\n",
        fleet.fleet_yaml(),
        payload.digest
    );
    fs::write(repo.path().join("fleet.yaml"), fleet_yaml).unwrap();
    fs::write(repo.path().join("services.yaml"), services_manifest()).unwrap();
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: join\nspec:\n  instances:\n",
    );
    for node in &fleet.nodes {
        let _ = writeln!(list, "  - address: {}\n    labels: {{example.com/team: payments}}", node.address);
    }
    fs::write(repo.path().join("instances.yaml"), list).unwrap();
    let desired = load(repo.path());
    let pool = Pool::new(
        load_key(&fleet.key).unwrap(),
        KnownHosts::load(&fleet.known_hosts, false).unwrap(),
        Settings::default(),
    );
    let options = options(&payload);
    Parts { payload, repo, desired, pool, options }
}

/// A whole-fleet round's options on a bench: `payload` loaded, eight
/// nodes at a time, joins and rollouts polled every 200 ms.
pub fn options(payload: &Arc<Payload>) -> Options {
    Options {
        max_parallel: 8,
        whole_fleet: true,
        payload: PayloadState::Loaded(Arc::clone(payload)),
        join: JoinOptions {
            max_parallel: 8,
            register_timeout: Duration::from_secs(60),
            ready_timeout: Duration::from_secs(60),
            poll: Duration::from_millis(200),
        },
        rollout: winfleet::cluster::rollout::RolloutOptions { poll: Duration::from_millis(200), ..Default::default() },
        ..Options::default()
    }
}

/// The payload and repository methods [`Setup`] and [`Bench`] share (both
/// hold a fleet, a repository, a payload, options and the desired state).
macro_rules! payload_methods {
    ($bench:ty) => {
        impl $bench {
            /// Changes the payload with `edit` (on the payload directory),
            /// pins the new digest in the repository and loads it.
            pub fn repin(&mut self, edit: impl FnOnce(&Path)) {
                let src = self.fleet.dir().join("payload-src");
                repin(&src, self.repo.path(), &mut self.payload, &mut self.options, edit);
                self.reload();
            }

            /// Loads the repository again.
            pub fn reload(&mut self) {
                self.desired = load(self.repo.path());
            }

            /// The desired version.
            pub fn version(&self) -> String {
                version(&self.desired)
            }
        }
    };
}

payload_methods!(Setup);
payload_methods!(Bench);

/// Changes the payload source directory `dir` with `edit`, pins the new
/// digest in `repo`'s fleet.yaml and makes it the round's payload.
pub fn repin(dir: &Path, repo: &Path, payload: &mut Arc<Payload>, options: &mut Options, edit: impl FnOnce(&Path)) {
    edit(dir);
    let old = payload.digest.clone();
    *payload = Arc::new(Payload::load(dir).unwrap());
    let fleet_yaml = repo.join("fleet.yaml");
    let text = fs::read_to_string(&fleet_yaml).unwrap().replace(&old, &payload.digest);
    fs::write(&fleet_yaml, text).unwrap();
    options.payload = PayloadState::Loaded(Arc::clone(payload));
}

/// The repository at `repo`, loaded (it must be valid).
pub fn load(repo: &Path) -> Desired {
    let loaded = winfleet::desired::load(&winfleet::source::read_worktree(repo).unwrap(), Default::default());
    loaded.desired.unwrap_or_else(|| panic!("{:#?}", loaded.diagnostics))
}

fn version(desired: &Desired) -> String {
    desired.specs.values().next().unwrap().lifecycle.as_ref().unwrap().version.clone()
}

pub async fn round(setup: &Setup) -> RoundReport {
    let instances: Vec<&Instance> = setup.desired.instances.values().collect();
    let host = SshHost { pool: &setup.pool };
    reconcile::round(Some(&setup.cluster), &setup.pool, &host, &setup.desired, &instances, &setup.options, |_| {}).await
}

/// A new ed25519 key pair at `new_ed25519` in the fleet's directory (for
/// a key rotation): the private key's path and the public key's line.
pub fn new_key(fleet: &TestFleet) -> (PathBuf, String) {
    let new_key = fleet.dir().join("new_ed25519");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&new_key)
        .status()
        .unwrap();
    assert!(made.success());
    let new_public = fs::read_to_string(fleet.dir().join("new_ed25519.pub")).unwrap();
    (new_key, new_public)
}

/// The services' logs and the systemctl calls of every node (for failures).
pub fn logs(fleet: &TestFleet) -> String {
    let mut out = String::new();
    for node in &fleet.nodes {
        let listing = std::process::Command::new("ls").arg("-la").arg(node.dir.join("services")).output().unwrap();
        let _ = writeln!(out, "--- {} services/\n{}", node.address, String::from_utf8_lossy(&listing.stdout));
        for name in ["systemctl", "kubelet", "containerd", "hybrid-overlay-node"] {
            let text = fs::read_to_string(node.dir.join("services").join(format!("{name}.log"))).unwrap_or_default();
            let _ = writeln!(out, "--- {} {name}.log\n{text}", node.address);
        }
    }
    out
}

/// `winfleet apply --once` on the setup's repository, as a process a test
/// can kill mid-round.
pub fn spawn_apply(setup: &Setup) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_winfleet"))
        .args(["apply", "--once", "--repo"])
        .arg(setup.repo.path())
        .arg("--ssh-key")
        .arg(&setup.fleet.key)
        .arg("--known-hosts")
        .arg(&setup.fleet.known_hosts)
        .arg("--kubeconfig")
        .arg(&setup.served.kubeconfig)
        .arg("--payload-dir")
        .arg(&setup.payload.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (at most a minute) until `ready` holds.
pub async fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(std::time::Instant::now() < deadline, "{what} never happened");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub fn node(server: &ApiServer, name: &str) -> Value {
    server.get("v1", "Node", None, name).unwrap_or_else(|| panic!("Node {name} is not registered"))
}

/// Asserts what a join leaves on Node `name`: WMCO's BYOH and worker
/// labels, the kubelet's and the instance's own labels, the version and
/// pub-key-hash annotations, winfleet's cordon lifted, schedulable.
/// WMCO's SSH host key annotations on `node` pin the host key of the sshd
/// in `dir` (its `host_ed25519.pub`): the key in base64 wire format, and
/// its algorithm.
pub fn assert_host_key(node: &Value, dir: &Path) {
    let line = fs::read_to_string(dir.join("host_ed25519.pub")).unwrap();
    let mut fields = line.split_whitespace();
    let (kind, wire) = (fields.next().unwrap(), fields.next().unwrap());
    let annotations = &node["metadata"]["annotations"];
    assert_eq!(annotations["windowsmachineconfig.openshift.io/ssh-host-key"], wire, "{annotations}");
    assert_eq!(annotations["windowsmachineconfig.openshift.io/ssh-host-key-type"], kind, "{annotations}");
}

pub fn assert_joined(node: &Value, name: &str, version: &str, key_hash: &str) {
    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["windowsmachineconfig.openshift.io/byoh"], "true", "{name}");
    assert_eq!(labels["node-role.kubernetes.io/worker"], "", "{name}: winfleet's label (a kubelet may not set it)");
    assert_eq!(labels["node.openshift.io/os_id"], "Windows", "from the kubelet's --node-labels");
    assert_eq!(labels["example.com/team"], "payments", "the instance's own label");
    let annotations = &node["metadata"]["annotations"];
    assert_eq!(annotations["windowsmachineconfig.openshift.io/version"], version);
    assert_eq!(annotations["windowsmachineconfig.openshift.io/pub-key-hash"], key_hash);
    assert!(annotations.get("winfleet.io/cordoned").is_none(), "{name}: winfleet's cordon is lifted");
    assert_ne!(node["spec"]["unschedulable"], true, "{name} is schedulable");
}

/// A joining host's client CSR for `node` (as its kubelet submits it with the
/// bootstrap token), named `name`.
pub async fn submit_client_csr(api: &super::controlplane::TestApi, name: &str, node: &str) {
    use base64::Engine;
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    use kube::api::{Api, PostParams};
    let (pem, _) = super::kubelet::certificate_request(node, &[]);
    let csr: CertificateSigningRequest = serde_json::from_value(serde_json::json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": { "name": name },
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "usages": ["digital signature", "client auth"],
        },
    }))
    .unwrap();
    let client = api.client_with_token(super::controlplane::BOOTSTRAP_TOKEN).await;
    Api::<CertificateSigningRequest>::all(client).create(&PostParams::default(), &csr).await.unwrap();
}
