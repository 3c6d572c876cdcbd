//! The Machine bench: a test API server, the cloud of
//! [`super::machine_provider`] beside it driven by a Machine API (the
//! project's model or machine-api-operator's real controllers:
//! [`MachineApi`]), a payload whose kubelet is the fake kubelet, and a
//! config repository with a posix services manifest and one Windows
//! MachineSet (no instance listed).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use winfleet::cluster::connect::Cluster;
use winfleet::desired::model::{Desired, Instance};
use winfleet::engine::host::SshHost;
use winfleet::engine::report::NodeReport;
use winfleet::payload::Payload;
use winfleet::reconcile::{self, Options, report::RoundReport};
use winfleet::ssh::{KnownHosts, Pool, Settings, load_key};

use super::controlplane::{Backend, TestApi};
use super::join::load;
use super::join_payload::{payload, services_manifest};
use super::machine_provider::Cloud;

pub const SET: &str = "winworker";
pub const MS: &str = "machine.openshift.io/v1beta1";
pub const MAPI: &str = "openshift-machine-api";

/// Which Machine API drives the cloud.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MachineApi {
    /// The project's model (tests/support/machine_model.rs), on either API server.
    Model,
    /// machine-api-operator's controllers (tests/support/machine_api_real.rs),
    /// on the real control plane only.
    Real,
}

pub struct MachineBench {
    pub cloud: Cloud,
    pub api: TestApi,
    pub cluster: Cluster,
    pub desired: Desired,
    pub payload: Arc<Payload>,
    pub pool: Pool,
    pub repo: tempfile::TempDir,
    pub options: Options,
}

/// A MachineSet document; `replicas: None` leaves the count to the cluster
/// (an autoscaler).
pub fn machine_set(replicas: Option<u32>) -> String {
    let replicas = replicas.map(|r| format!("  replicas: {r}\n")).unwrap_or_default();
    format!(
        "apiVersion: machine.openshift.io/v1beta1\nkind: MachineSet\nmetadata:\n  name: {SET}\n  namespace: {MAPI}\n  \
         labels:\n    machine.openshift.io/cluster-api-cluster: test-7xk2p\nspec:\n{replicas}  selector:\n    matchLabels:\n      \
         machine.openshift.io/cluster-api-cluster: test-7xk2p\n      machine.openshift.io/cluster-api-machineset: {SET}\n  \
         template:\n    metadata:\n      labels:\n        machine.openshift.io/cluster-api-cluster: test-7xk2p\n        \
         machine.openshift.io/cluster-api-machine-role: worker\n        machine.openshift.io/cluster-api-machine-type: worker\n        \
         machine.openshift.io/cluster-api-machineset: {SET}\n        machine.openshift.io/os-id: Windows\n    spec:\n      \
         metadata:\n        labels:\n          node-role.kubernetes.io/worker: \"\"\n      providerSpec:\n        value:\n          \
         kind: VSphereMachineProviderSpec\n          userDataSecret:\n            name: windows-user-data\n"
    )
}

impl MachineBench {
    /// `backend` with a cloud of `vms` VMs and the MachineSet at `replicas`.
    pub async fn start(backend: Backend, vms: usize, replicas: Option<u32>) -> Self {
        Self::start_with_hosts(backend, vms, 0, replicas).await
    }

    /// The same with `hosts` BYOH hosts listed in the repository beside
    /// the MachineSet ([`Cloud::start_with_hosts`]).
    pub async fn start_with_hosts(backend: Backend, vms: usize, hosts: usize, replicas: Option<u32>) -> Self {
        Self::start_on(backend, MachineApi::Model, vms, hosts, replicas).await
    }

    /// The bench with `machine_api` driving the cloud (`MachineApi::Real`
    /// needs `Backend::Real`).
    pub async fn start_on(
        backend: Backend,
        machine_api: MachineApi,
        vms: usize,
        hosts: usize,
        replicas: Option<u32>,
    ) -> Self {
        assert!(
            machine_api == MachineApi::Model || backend == Backend::Real,
            "the real Machine API needs the real control plane"
        );
        let api = TestApi::start(backend).await;
        let cloud = match machine_api {
            MachineApi::Model => Cloud::start_with_hosts(api.client(), vms, hosts),
            MachineApi::Real => Cloud::start_real(api.kubeconfig(), vms, hosts).await,
        };
        Self::with_cloud(api, cloud, replicas)
    }

    /// The in-memory API with the model's cloud of VMs named `names`.
    pub async fn start_with_vm_names(names: &[&str], replicas: Option<u32>) -> Self {
        let api = TestApi::start(Backend::InMemory).await;
        let cloud = Cloud::start_with_vm_names(api.client(), names);
        Self::with_cloud(api, cloud, replicas)
    }

    fn with_cloud(api: TestApi, cloud: Cloud, replicas: Option<u32>) -> Self {
        let cluster = Cluster { client: api.client(), url: api.url().to_owned() };
        let payload = Arc::new(Payload::load(&payload(&cloud.dir)).unwrap());
        let repo = tempfile::tempdir().unwrap();
        let fleet_yaml = format!(
            "{}  payload:\n    digest: {}\n    posixDir: payload\n  services:\n    posixDir: units\n",
            cloud.fleet_yaml, payload.digest
        );
        fs::write(repo.path().join("fleet.yaml"), fleet_yaml).unwrap();
        fs::write(repo.path().join("services.yaml"), services_manifest()).unwrap();
        fs::create_dir_all(repo.path().join("machinesets")).unwrap();
        fs::write(repo.path().join("machinesets/winworker.yaml"), machine_set(replicas)).unwrap();
        let listed: String = cloud.hosts().iter().map(|a| format!("  - address: {a}\n")).collect();
        if !listed.is_empty() {
            let list = "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: byoh\nspec:\n  instances:\n";
            fs::write(repo.path().join("instances.yaml"), format!("{list}{listed}")).unwrap();
        }
        let pool = Pool::new(
            load_key(&cloud.key).unwrap(),
            KnownHosts::load(&cloud.known_hosts, false).unwrap(),
            Settings { connect_timeout: Duration::from_secs(2), ..Settings::default() },
        );
        let options = super::join::options(&payload);
        let desired = load(repo.path());
        MachineBench { cloud, api, cluster, desired, payload, pool, repo, options }
    }

    /// Reaches the VMs at `port` instead of their sshd's own (a network
    /// model's relays in front of them: tests/support/netem.rs), trusting
    /// `known_hosts` (the cloud's, moved to that port): the fleet document,
    /// the pool and [`Cloud::known_hosts`] follow.
    pub fn route(&mut self, port: u16, known_hosts: std::path::PathBuf) {
        let own = self.cloud.fleet().port;
        let fleet_yaml = self.repo.path().join("fleet.yaml");
        let text = fs::read_to_string(&fleet_yaml).unwrap();
        fs::write(&fleet_yaml, text.replace(&format!("    port: {own}\n"), &format!("    port: {port}\n"))).unwrap();
        self.pool = Pool::new(
            load_key(&self.cloud.key).unwrap(),
            KnownHosts::load(&known_hosts, false).unwrap(),
            Settings { connect_timeout: Duration::from_secs(2), ..Settings::default() },
        );
        self.cloud.known_hosts = known_hosts;
        self.reload();
    }

    /// Loads the repository again.
    pub fn reload(&mut self) {
        self.desired = load(self.repo.path());
    }

    /// Changes the payload with `edit` (on the payload directory), pins
    /// the new digest in the repository and loads it (a commit that
    /// changes the pin).
    pub fn repin(&mut self, edit: impl FnOnce(&std::path::Path)) {
        let src = self.cloud.dir.join("payload-src");
        super::join::repin(&src, self.repo.path(), &mut self.payload, &mut self.options, edit);
        self.reload();
    }

    /// Sets the MachineSet's replicas in Git and loads it.
    pub fn scale_in_git(&mut self, replicas: Option<u32>) {
        fs::write(self.repo.path().join("machinesets/winworker.yaml"), machine_set(replicas)).unwrap();
        self.reload();
    }

    /// One whole-fleet round (no instance is listed: the Machines are the fleet).
    pub async fn round(&self) -> RoundReport {
        self.round_with(|_| {}).await
    }

    /// The same, `on_node` seeing each node's report as the round makes it.
    pub async fn round_with(&self, on_node: impl FnMut(&NodeReport) + Send) -> RoundReport {
        let instances: Vec<&Instance> = self.desired.instances.values().collect();
        let host = SshHost { pool: &self.pool };
        reconcile::round(Some(&self.cluster), &self.pool, &host, &self.desired, &instances, &self.options, on_node)
            .await
    }

    /// A dry run (`plan --live`).
    pub async fn plan(&self) -> RoundReport {
        let instances: Vec<&Instance> = self.desired.instances.values().collect();
        let host = SshHost { pool: &self.pool };
        let options = Options { dry_run: true, ..self.options.clone() };
        reconcile::round(Some(&self.cluster), &self.pool, &host, &self.desired, &instances, &options, |_| {}).await
    }

    /// Rounds until `done` holds for a round's report (at most `rounds`);
    /// returns every report.
    pub async fn rounds_until(&self, rounds: usize, done: impl Fn(&RoundReport) -> bool) -> Vec<RoundReport> {
        let mut reports = Vec::new();
        for _ in 0..rounds {
            let report = self.round().await;
            let finished = done(&report);
            reports.push(report);
            if finished {
                return reports;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let last = reports.last().map(RoundReport::render_text).unwrap_or_default();
        panic!("not done after {rounds} rounds; the last said:\n{last}");
    }

    /// The Machines, by name.
    pub async fn machines(&self) -> Vec<Value> {
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
            self.api.client(),
            MAPI,
            &super::controlplane::resource("machine.openshift.io", "v1beta1", "Machine", "machines"),
        );
        let list = api.list(&Default::default()).await.unwrap();
        list.items.into_iter().map(|m| serde_json::to_value(m).unwrap()).collect()
    }

    /// The Node `name`, which must exist.
    pub async fn node(&self, name: &str) -> Value {
        self.api.get("v1", "Node", None, name).await.unwrap_or_else(|| panic!("Node {name} is not registered"))
    }

    /// The reasons of the (core/v1) Events about the Machine `name` (the
    /// Machine API's controllers write those).
    pub async fn machine_events(&self, name: &str) -> Vec<String> {
        let events: kube::Api<k8s_openapi::api::core::v1::Event> = kube::Api::namespaced(self.api.client(), MAPI);
        let list = events.list(&Default::default()).await.unwrap().items;
        list.into_iter().filter(|e| e.involved_object.name.as_deref() == Some(name)).filter_map(|e| e.reason).collect()
    }

    /// The version the repository pins.
    pub fn version(&self) -> String {
        let spec = self.desired.specs.values().next().unwrap().lifecycle.as_ref().unwrap();
        spec.at_runtime(&self.options.payload, None).version
    }
}

/// Whether the MachineSet's Machines are all Ready, as the round reports.
pub fn machine_set_ready(report: &RoundReport) -> bool {
    report.cluster.as_ref().and_then(|c| c.machines.machine_set(SET)).is_some_and(|s| s.ready())
}
