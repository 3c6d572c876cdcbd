//! The demo's cluster side, simulated and labelled so: winfleet's in-memory
//! Kubernetes API server (the one its tests use, tests/support/apiserver)
//! served on loopback, seeded with what a join reads, and a payload whose
//! kubelet is the tests' fake kubelet (tests/support/kubelet.rs), run by
//! the systemctl shim on each demo node. The nodes simulate reboots: the
//! shim stops their services, gives them a new boot id and starts them.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::{Value, json};

use crate::apiserver::{ApiServer, Served, fixtures};
use crate::fleet::TestFleet;
use crate::join;

/// The infrastructure ID examples-repo's MachineSets carry.
const INFRASTRUCTURE: &str = "prod-7xk2p";

pub struct SimulatedCluster {
    pub server: ApiServer,
    pub served: Served,
    pub payload: PathBuf,
    pub digest: String,
    /// Runs the served API; dropped last.
    _runtime: tokio::runtime::Runtime,
}

impl SimulatedCluster {
    pub fn start(fleet: &TestFleet) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let server = ApiServer::new();
        let served = runtime.block_on(server.serve());
        let ca = server.ca_pem();
        server.seed(fixtures::bootstrap_secret(join::TOKEN, &ca));
        let mut infrastructure = fixtures::infrastructure(&served.url);
        infrastructure["status"]["infrastructureName"] = json!(INFRASTRUCTURE);
        server.seed(infrastructure);
        server.seed(fixtures::network("172.30.0.0/16"));
        server.seed(fixtures::controller_config(&ca));
        server.seed(fixtures::proxy_cluster(".cluster.local,10.128.0.0/14"));
        server.add_token(
            join::TOKEN,
            "system:bootstrap:abcdef",
            &["system:bootstrappers", "system:bootstrappers:worker"],
        );
        for node in &fleet.nodes {
            node.install_systemctl("units");
            node.simulate_reboots();
        }
        let payload = join::payload(fleet.dir());
        let digest = winfleet::payload::Payload::load(&payload).unwrap().digest;
        Self { server, served, payload, digest, _runtime: runtime }
    }

    /// The Fleet's additions: the payload it runs and where services go.
    pub fn fleet_yaml(&self) -> String {
        format!("  payload:\n    digest: {}\n    posixDir: payload\n  services:\n    posixDir: units\n", self.digest)
    }

    /// The Nodes, as `oc get nodes -L` would show what winfleet set.
    pub fn nodes(&self) -> String {
        let mut out = String::from("NAME          READY  SCHEDULABLE  VERSION (annotation)  LABELS (winfleet's)\n");
        for node in self.server.list("v1", "Node") {
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

    /// The CertificateSigningRequests and who approved them.
    pub fn csrs(&self) -> String {
        let mut out = String::new();
        for csr in self.server.list("certificates.k8s.io/v1", "CertificateSigningRequest") {
            let approved = csr["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Approved"))
                .map_or("pending", |_| "approved");
            let issued = if csr["status"]["certificate"].is_string() { ", issued" } else { "" };
            let _ = writeln!(
                out,
                "  {:<24} {:<46} {approved}{issued}",
                csr["spec"]["username"].as_str().unwrap_or_default(),
                csr["spec"]["signerName"].as_str().unwrap_or_default(),
            );
        }
        out
    }

    /// The MachineSets winfleet created, with their replicas.
    pub fn machinesets(&self) -> String {
        let mut out = String::new();
        for set in self.server.list("machine.openshift.io/v1beta1", "MachineSet") {
            let _ = writeln!(
                out,
                "  {}/{} replicas {}",
                set["metadata"]["namespace"].as_str().unwrap_or_default(),
                set["metadata"]["name"].as_str().unwrap_or_default(),
                set["spec"]["replicas"]
            );
        }
        out
    }

    /// The Events winfleet posted about the reboots, oldest first.
    pub fn events(&self, reasons: &[&str]) -> String {
        let mut events: Vec<Value> = self.server.list("v1", "Event");
        events.extend(self.server.list("events.k8s.io/v1", "Event"));
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
