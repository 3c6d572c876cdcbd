//! The demo's cluster side. Where the test control plane is built (the
//! test suite builds it), or WINFLEET_DEMO_REAL=1 asks to build it with
//! Go, a REAL control plane: etcd, kube-apiserver and
//! kube-controller-manager v1.37.2 built from the Kubernetes Go modules by
//! tests/controlplane (tests/support/controlplane.rs starts it, seeded as an
//! OpenShift cluster is: its CRDs, Infrastructure, Network, Proxy, the
//! kubelet CA, a bootstrap token). Otherwise winfleet's in-memory test API
//! server (tests/support/apiserver), labelled SIMULATED. Either way each
//! node's kubelet is the tests' fake kubelet (tests/support/kubelet.rs),
//! run by the systemctl shim on each demo node: against the real control
//! plane it bootstraps through a real CSR that kube-controller-manager
//! signs once winfleet approves it. The nodes simulate reboots: the shim
//! stops their services, gives them a new boot id and starts them.
//!
//! The Machine API is the one the tests use (the model,
//! tests/support/machine_model.rs, over the cloud of
//! tests/support/machine_provider.rs): it creates a Machine per replica of each Windows MachineSet winfleet
//! applies, boots a "VM" for it (a stopped sshd node of the same fleet,
//! started with the key the `windows-user-data` Secret authorizes), moves
//! its phase and sets its nodeRef once its Node registers. winfleet
//! configures each Provisioned Machine as it does an instance.
//!
//! Everything shown is read back through the Kubernetes API, the same way
//! for both servers.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::controlplane::{self, Backend, TestApi};
use crate::fleet::TestFleet;
use crate::join_payload;
use crate::machine_provider::Cloud;

/// The infrastructure ID examples-repo's MachineSets carry.
const INFRASTRUCTURE: &str = "prod-7xk2p";

pub struct DemoCluster {
    /// The Machine API and its cloud; its fleet holds the demo's nodes too
    /// (the instances, after the VMs): one SSH port, key and known_hosts
    /// for both, as on a real cluster. Stops before the API server.
    pub cloud: Cloud,
    pub api: TestApi,
    pub payload: PathBuf,
    pub digest: String,
    /// Runs the API clients (and the in-memory server); dropped last.
    runtime: tokio::runtime::Runtime,
}

impl DemoCluster {
    /// The real control plane when it is built here (or WINFLEET_DEMO_REAL
    /// asks to build it), else the in-memory one (says which and why); the
    /// Machine API beside it with a cloud of `vms` VMs, and one node per
    /// name in `hosts` for the instances.
    pub fn start(hosts: &[String], vms: usize) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let backend = if std::env::var_os("WINFLEET_DEMO_SIMULATED").is_some() {
            println!("WINFLEET_DEMO_SIMULATED is set: the cluster is simulated");
            Backend::InMemory
        } else if !controlplane::binary().exists() && std::env::var_os("WINFLEET_DEMO_REAL").is_none() {
            println!(
                "the real control plane is not built here (the test suite builds it; or run the demo with \
                 WINFLEET_DEMO_REAL=1 to build it with Go first, 10 to 15 minutes on 2 cores): the cluster is SIMULATED"
            );
            Backend::InMemory
        } else {
            if !controlplane::binary().exists() {
                println!(
                    "building the real control plane (Kubernetes {}, tests/controlplane) with Go; \
                     the first build takes 10 to 15 minutes on 2 cores",
                    controlplane::KUBERNETES_VERSION
                );
            }
            match controlplane::ensure_built() {
                Ok(_) => Backend::Real,
                Err(why) => {
                    println!("no real control plane here ({why}): the cluster is SIMULATED");
                    Backend::InMemory
                }
            }
        };
        let api = runtime.block_on(TestApi::start(backend));
        // A kube client starts its buffer task: inside the runtime.
        let client = {
            let _entered = runtime.enter();
            api.client()
        };
        runtime.block_on(async {
            patch_status(&client, "Infrastructure", json!({"infrastructureName": INFRASTRUCTURE})).await;
            patch_status(&client, "Proxy", json!({"noProxy": ".cluster.local,10.128.0.0/14"})).await;
        });
        // The provider's loop is a task of the runtime.
        let cloud = {
            let _entered = runtime.enter();
            Cloud::start_with_named_hosts(api.client(), vms, hosts)
        };
        for node in &cloud.fleet().nodes {
            node.simulate_reboots();
        }
        let payload = join_payload::payload(&cloud.dir);
        let digest = winfleet::payload::Payload::load(&payload).unwrap().digest;
        Self { cloud, api, payload, digest, runtime }
    }

    /// Runs `f` on the fleet (the VMs, then the instances' nodes).
    pub fn with_fleet<R>(&self, f: impl FnOnce(&TestFleet) -> R) -> R {
        f(&self.cloud.fleet())
    }

    /// How the demo names the cluster in what it prints.
    pub fn label(&self) -> &'static str {
        match self.api.backend() {
            Backend::Real => "REAL cluster",
            Backend::InMemory => "SIMULATED cluster",
        }
    }

    /// One line on what the cluster is.
    pub fn describe(&self) -> String {
        match self.api.backend() {
            Backend::Real => format!(
                "REAL cluster: kube-apiserver, kube-controller-manager and etcd (Kubernetes {}, built from \
                 the Kubernetes Go modules) at {}; each node's kubelet is the tests' fake kubelet, \
                 bootstrapping through real CSRs",
                controlplane::KUBERNETES_VERSION,
                self.api.url()
            ),
            Backend::InMemory => format!(
                "SIMULATED cluster: winfleet's in-memory Kubernetes API (its test server, not a kube-apiserver) \
                 at {}; each node's kubelet is the tests' fake kubelet",
                self.api.url()
            ),
        }
    }

    pub fn kubeconfig(&self) -> &Path {
        self.api.kubeconfig()
    }

    /// The Fleet's additions: the payload it runs and where services go.
    pub fn fleet_yaml(&self) -> String {
        format!("  payload:\n    digest: {}\n    posixDir: payload\n  services:\n    posixDir: units\n", self.digest)
    }

    fn list(&self, api_version: &str, kind: &str) -> Vec<Value> {
        self.runtime.block_on(async { list(&self.api.client(), api_version, kind).await })
    }

    /// The Nodes, as `oc get nodes -L` would show what winfleet set.
    pub fn nodes(&self) -> String {
        let mut out = String::from("NAME          READY  SCHEDULABLE  VERSION (annotation)  LABELS (winfleet's)\n");
        for node in self.list("v1", "Node") {
            let ready = node["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .map_or("?", |c| c["status"].as_str().unwrap_or("?"));
            let version = node["metadata"]["annotations"]["windowsmachineconfig.openshift.io/version"]
                .as_str()
                .map_or_else(|| "-".to_owned(), |v| v.chars().take(12).collect());
            let labels: Vec<String> = node["metadata"]["labels"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| k.starts_with("example.com/") || k.contains("byoh"))
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect();
            let _ = writeln!(
                out,
                "{:<13} {:<6} {:<12} {:<21} {}",
                node["metadata"]["name"].as_str().unwrap_or_default(),
                ready,
                if node["spec"]["unschedulable"] == true { "no" } else { "yes" },
                version,
                labels.join(",")
            );
        }
        out
    }

    /// The CertificateSigningRequests, who asked and what became of them.
    pub fn csrs(&self) -> String {
        let mut out = String::new();
        for csr in self.list("certificates.k8s.io/v1", "CertificateSigningRequest") {
            let approved = csr["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Approved"))
                .map_or("pending", |_| "approved");
            let issued = if csr["status"]["certificate"].is_string() { ", issued" } else { "" };
            let outcome = format!("{approved}{issued}");
            let _ = writeln!(
                out,
                "  {:<46} {:<17} asked by {}",
                csr["spec"]["signerName"].as_str().unwrap_or_default(),
                outcome,
                csr["spec"]["username"].as_str().unwrap_or_default(),
            );
        }
        out
    }

    /// The MachineSets winfleet created, with their replicas and how many
    /// are ready (as the Machine API counts them).
    pub fn machinesets(&self) -> String {
        let mut out = String::new();
        for set in self.list("machine.openshift.io/v1beta1", "MachineSet") {
            let _ = writeln!(
                out,
                "  {}/{} replicas {}, ready {}",
                set["metadata"]["namespace"].as_str().unwrap_or_default(),
                set["metadata"]["name"].as_str().unwrap_or_default(),
                set["spec"]["replicas"],
                set["status"]["readyReplicas"].as_u64().unwrap_or(0)
            );
        }
        out
    }

    /// The Machines the Machine API created, as `oc get machines` shows
    /// them: phase, address and Node.
    pub fn machines(&self) -> String {
        let mut out = String::from("  NAME                                  PHASE        ADDRESS         NODE\n");
        for machine in self.list("machine.openshift.io/v1beta1", "Machine") {
            let _ = writeln!(
                out,
                "  {:<37} {:<12} {:<15} {}",
                machine["metadata"]["name"].as_str().unwrap_or_default(),
                machine["status"]["phase"].as_str().unwrap_or("-"),
                machine["status"]["addresses"][0]["address"].as_str().unwrap_or("-"),
                machine["status"]["nodeRef"]["name"].as_str().unwrap_or("-"),
            );
        }
        out
    }

    /// The Events winfleet posted with one of `reasons`, oldest first.
    pub fn events(&self, reasons: &[&str]) -> String {
        let mut events: Vec<Value> = self.list("v1", "Event");
        events.extend(self.list("events.k8s.io/v1", "Event"));
        events.sort_by_key(|e| e["metadata"]["resourceVersion"].as_str().and_then(|v| v.parse::<u64>().ok()));
        let mut lines: Vec<String> = events
            .iter()
            .filter(|e| reasons.iter().any(|r| e["reason"] == *r))
            .map(|e| {
                let node = e["involvedObject"]["name"].as_str().or_else(|| e["regarding"]["name"].as_str());
                let note = e["message"].as_str().or_else(|| e["note"].as_str()).unwrap_or_default();
                format!("  {:<18} {:<14} {note}", e["reason"].as_str().unwrap_or_default(), node.unwrap_or_default())
            })
            .collect();
        lines.dedup();
        lines.join("\n") + "\n"
    }
}

/// The API resource of `kind` (no discovery: the in-memory API server
/// serves none), its plural as Kubernetes forms it for these kinds.
fn resource(group: &str, version: &str, kind: &str) -> kube::api::ApiResource {
    let lower = kind.to_ascii_lowercase();
    let plural = match lower.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{lower}s"),
    };
    controlplane::resource(group, version, kind, &plural)
}

/// Every object of a kind, in every namespace, as JSON.
async fn list(client: &kube::Client, api_version: &str, kind: &str) -> Vec<Value> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource(group, version, kind));
    let items = api.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    items.into_iter().map(|o| serde_json::to_value(o).unwrap()).collect()
}

/// Merges `status` into the cluster-scoped config.openshift.io object
/// `cluster` of `kind`, through its status subresource.
async fn patch_status(client: &kube::Client, kind: &str, status: Value) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource("config.openshift.io", "v1", kind));
    api.patch_status("cluster", &PatchParams::default(), &Patch::Merge(json!({ "status": status })))
        .await
        .unwrap_or_else(|e| panic!("setting the {kind} status: {e}"));
}
