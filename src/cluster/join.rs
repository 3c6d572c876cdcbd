//! The join: what turns a configured host into a Ready, schedulable worker
//! once its bootstrap services run (steps 4 to 6 of a configure).
//!
//! Per node, each step observed first, so a round that stops anywhere is
//! finished by the next without repeating what is done:
//! 1. CSR and Node: the kubelet's client CSR is approved (by the approver
//!    pass running beside the joins, [`super::approve`]) and the Node is
//!    found by IPv4, as the association does.
//! 2. Cordon (recorded as winfleet's: only its own cordon is ever lifted,
//!    [`super::cordon`]): nothing schedules there before the node's
//!    networking runs.
//! 3. WMCO's metadata (BYOH and worker labels, the public key hash) and the
//!    instance's own labels, annotations and taints.
//! 4. The remaining services, their node variables resolved from the Node.
//! 5. Ready: the Ready condition True with a heartbeat newer than the
//!    services' start (the serving CSR is approved meanwhile).
//! 6. The version annotation (winfleet's desired version) and the uncordon,
//!    in one write: the annotation means "fully configured".

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams};
use russh::keys::PublicKey;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::NodeObs;
use super::apply::api_error;
use super::approve::{self, CsrReport};
use super::cordon::{cordon, patch_fresh, uncordon};
use super::events::{Events, Reason, Regarding};
use super::metadata::plan_node_metadata;
use super::observe::{WINDOWS_NODES, node_obs};
use super::ready::ready;
use crate::desired::model::Instance;
use crate::engine::report::NodeReport;
use crate::engine::{self, NodeContext};
use crate::lifecycle::Mode;
use crate::progress::{self, Phase};
use crate::ssh::Pool;

/// WMCO's BYOH label (WMCO-SPEC 4.1).
pub const BYOH_LABEL: &str = "windowsmachineconfig.openshift.io/byoh";
/// The worker role label.
pub const WORKER_LABEL: &str = "node-role.kubernetes.io/worker";
/// WMCO's annotation of the fleet key's hash.
pub const PUB_KEY_HASH_ANNOTATION: &str = "windowsmachineconfig.openshift.io/pub-key-hash";

/// How joins run.
#[derive(Clone, Copy, Debug)]
pub struct JoinOptions {
    /// Nodes joining at once.
    pub max_parallel: usize,
    /// How long the kubelet has to get its CSR approved and register its Node.
    pub register_timeout: Duration,
    /// How long the Node has to be Ready once its services run.
    pub ready_timeout: Duration,
    /// Interval between checks (and CSR passes).
    pub poll: Duration,
}

impl Default for JoinOptions {
    fn default() -> Self {
        Self {
            max_parallel: 32,
            register_timeout: Duration::from_secs(600),
            ready_timeout: Duration::from_secs(600),
            poll: Duration::from_secs(5),
        }
    }
}

/// A step of the join.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum JoinStep {
    /// The kubelet's CSR and its Node registration.
    Register,
    /// Cordoning the new Node.
    Cordon,
    /// WMCO's labels and annotations.
    Metadata,
    /// The services that need the Node.
    Services,
    /// Waiting for Ready.
    Ready,
    /// The version annotation and the uncordon.
    Finish,
}

impl JoinStep {
    /// The step in words.
    pub fn name(self) -> &'static str {
        match self {
            JoinStep::Register => "CSR approval and Node registration",
            JoinStep::Cordon => "cordon",
            JoinStep::Metadata => "Node labels and annotations",
            JoinStep::Services => "the services that need the Node",
            JoinStep::Ready => "wait for Ready",
            JoinStep::Finish => "version annotation and uncordon",
        }
    }
}

/// How a join ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum JoinResult {
    /// A Ready, labelled, uncordoned worker at the desired version.
    Joined,
    /// Stopped at a step; the next round goes on from there.
    Failed {
        /// Where.
        step: JoinStep,
        /// Why.
        reason: String,
    },
    /// Not started (winfleet is stopping, or the node's configure failed).
    NotStarted {
        /// Why.
        reason: String,
    },
    /// A dry run: the steps still to do.
    Planned {
        /// The steps, in order.
        steps: Vec<String>,
    },
}

/// One node's join.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JoinReport {
    /// Instance address.
    pub address: String,
    /// The Node, once found.
    pub node: Option<String>,
    /// How it ended.
    #[serde(flatten)]
    pub result: JoinResult,
    /// The services step's node report.
    #[serde(skip)]
    pub services: Option<NodeReport>,
}

/// A node to join.
#[derive(Clone, Debug)]
pub struct Candidate<'a> {
    /// Its instance (spec with cluster material).
    pub instance: &'a Instance,
    /// Its IPv4 address (the Node is found by it).
    pub ipv4: Option<Ipv4Addr>,
    /// A BYOH instance (not a Machine's node): gets WMCO's BYOH label.
    pub byoh: bool,
}

/// What every join shares.
pub struct Shared<'a> {
    /// The cluster.
    pub client: &'a Client,
    /// Events.
    pub events: &'a Events,
    /// SSH.
    pub pool: &'a Pool,
    /// Instances → observed host names, for CSR approval: the whole
    /// round's, which grows while it runs (a batch of Machines taken late
    /// adds its own), so that no batch takes another's exact host name for
    /// a near match. Read afresh by each pass.
    pub hosts: &'a std::sync::Mutex<BTreeMap<String, String>>,
    /// The CSRs whose near match or refusal was already said (an Event):
    /// the whole round's, so that a CSR two batches' passes see is said
    /// once.
    pub reported: &'a Mutex<BTreeSet<String>>,
    /// WMCO's pub-key-hash of the fleet key.
    pub key_hash: &'a str,
    /// Options.
    pub options: JoinOptions,
    /// Stop taking new work.
    pub stop: &'a CancellationToken,
}

/// Joins `candidates`, approving CSRs beside them; returns each join's
/// report and the CSR passes' reports (the last word per CSR).
pub async fn join_all(shared: &Shared<'_>, candidates: Vec<Candidate<'_>>) -> (Vec<JoinReport>, Vec<CsrReport>) {
    let csrs: Mutex<BTreeMap<String, CsrReport>> = Mutex::new(BTreeMap::new());
    let pass = || async {
        let mut seen = shared.reported.lock().await;
        let hosts = shared.hosts.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        match approve::pass(shared.client, shared.events, &hosts, &mut seen).await {
            Ok(reports) => {
                let mut all = csrs.lock().await;
                for r in reports {
                    all.insert(r.csr.clone(), r);
                }
            }
            Err(e) => tracing::warn!("CSR approval pass failed: {e}"),
        }
    };
    pass().await;
    let joins = async {
        let mut waiting = candidates.into_iter();
        let mut running = FuturesUnordered::new();
        let mut reports = Vec::new();
        loop {
            while running.len() < shared.options.max_parallel.max(1) {
                let Some(candidate) = waiting.next() else { break };
                if shared.stop.is_cancelled() {
                    reports.push(JoinReport {
                        address: candidate.instance.address.clone(),
                        node: None,
                        result: JoinResult::NotStarted {
                            reason: "winfleet is stopping; the next round joins it".into(),
                        },
                        services: None,
                    });
                    continue;
                }
                running.push(join_one(shared, candidate));
            }
            let Some(report) = running.next().await else { break };
            reports.push(report);
        }
        reports
    };
    let approver = async {
        loop {
            tokio::time::sleep(shared.options.poll).await;
            pass().await;
        }
    };
    let mut reports = tokio::select! {
        reports = joins => reports,
        () = approver => Vec::new(),
    };
    pass().await;
    reports.sort_by(|a, b| a.address.cmp(&b.address));
    (reports, csrs.into_inner().into_values().collect())
}

async fn join_one(shared: &Shared<'_>, candidate: Candidate<'_>) -> JoinReport {
    let mut report = JoinReport {
        address: candidate.instance.address.clone(),
        node: None,
        result: JoinResult::Joined,
        services: None,
    };
    let fail = |step, reason: String| JoinResult::Failed { step, reason };
    let nodes: Api<Node> = Api::all(shared.client.clone());
    let address = candidate.instance.address.as_str();
    progress::step(address, Phase::Join, "waiting for its kubelet's CSRs and its Node to register");
    let node = match registered(shared, &nodes, candidate.ipv4).await {
        Ok(node) => node,
        Err(reason) => {
            progress::step(address, Phase::Failed, &format!("join stopped at {}: {reason}", JoinStep::Register.name()));
            report.result = fail(JoinStep::Register, reason);
            return report;
        }
    };
    progress::step(address, Phase::Join, &format!("registered as Node {}", node.name));
    report.node = Some(node.name.clone());
    let regarding = || Regarding::Node(&node.name, &node.uid);
    let host_key = shared.pool.host_key(address, candidate.instance.port);
    let steps = async {
        cordon(&nodes, &node.name, None).await.map_err(|e| (JoinStep::Cordon, e))?;
        let node = metadata(&nodes, &candidate, &node.name, (shared.key_hash, host_key.as_ref()))
            .await
            .map_err(|e| (JoinStep::Metadata, e))?;
        let started = jiff::Timestamp::now();
        let context = NodeContext { mode: Some(Mode::Join), node: Some(node.object.clone()), disrupt: true };
        let services = engine::node(shared.pool, candidate.instance, false, &context).await;
        let failed = services.failed().then(|| engine::report::node_line(&services));
        report.services = Some(services);
        if let Some(line) = failed {
            return Err((JoinStep::Services, line));
        }
        ready(&nodes, &node.name, started, (shared.options.ready_timeout, shared.options.poll))
            .await
            .map_err(|e| (JoinStep::Ready, e))?;
        let version = candidate.instance.spec.lifecycle.as_ref().map(|l| l.version.clone()).unwrap_or_default();
        uncordon(&nodes, &node.name, Some(&version)).await.map_err(|e| (JoinStep::Finish, e))
    };
    match steps.await {
        Ok(()) => {
            progress::step(address, Phase::Done, &format!("joined as Node {}, Ready", node.name));
            let note = format!("instance {} joined as a Ready worker", candidate.instance.address);
            shared.events.publish(regarding(), Reason::NodeJoined, note).await;
        }
        Err((step, reason)) => {
            progress::step(address, Phase::Failed, &format!("join stopped at {}: {reason}", step.name()));
            let note = format!("joining instance {} stopped at {}: {reason}", candidate.instance.address, step.name());
            shared.events.publish(regarding(), Reason::JoinFailed, note).await;
            report.result = fail(step, reason);
        }
    }
    report
}

/// Waits for the Node whose addresses hold `ipv4`.
async fn registered(shared: &Shared<'_>, nodes: &Api<Node>, ipv4: Option<Ipv4Addr>) -> Result<NodeObs, String> {
    let Some(ip) = ipv4 else { return Err("the instance has no IPv4 address to find its Node by".into()) };
    let deadline = Instant::now() + shared.options.register_timeout;
    loop {
        let list = nodes.list(&ListParams::default().labels(WINDOWS_NODES)).await.map_err(|e| api_error(&e))?;
        let found: Vec<NodeObs> = list
            .items
            .iter()
            .map(node_obs)
            .filter(|n| n.addresses.iter().any(|a| a.parse::<Ipv4Addr>().is_ok_and(|a| a == ip)))
            .collect();
        match found.as_slice() {
            [one] => return Ok(one.clone()),
            [] => {}
            many => {
                let names: Vec<&str> = many.iter().map(|n| n.name.as_str()).collect();
                return Err(format!(
                    "address {ip} belongs to more than one Node ({}); winfleet does not guess",
                    names.join(", ")
                ));
            }
        }
        if Instant::now() >= deadline || shared.stop.is_cancelled() {
            return Err(format!(
                "no Windows Node with address {ip} registered within {}s: is the kubelet running, and its CSR approved (see the CSR report)?",
                shared.options.register_timeout.as_secs()
            ));
        }
        tokio::time::sleep(shared.options.poll).await;
    }
}

/// WMCO's labels and annotation, and the instance's own metadata.
/// With the host key the node's SSH connection had accepted: WMCO's
/// `ssh-host-key` annotations ([`super::host_key`]).
async fn metadata(
    nodes: &Api<Node>,
    candidate: &Candidate<'_>,
    name: &str,
    (key_hash, host_key): (&str, Option<&PublicKey>),
) -> Result<NodeObs, String> {
    patch_fresh(nodes, name, |node| {
        let mut body =
            plan_node_metadata(candidate.instance, node).map_or_else(|| json!({ "metadata": {} }), |p| p.patch);
        if node.annotations.get(PUB_KEY_HASH_ANNOTATION).map(String::as_str) != Some(key_hash) {
            body["metadata"]["annotations"][PUB_KEY_HASH_ANNOTATION] = Value::String(key_hash.to_owned());
        }
        for (key, value) in super::host_key::missing(host_key, node) {
            body["metadata"]["annotations"][key] = Value::String(value);
        }
        let mut wanted: Vec<(&str, &str)> = vec![(WORKER_LABEL, "")];
        if candidate.byoh {
            wanted.push((BYOH_LABEL, "true"));
        }
        for (key, value) in wanted {
            if node.labels.get(key).map(String::as_str) != Some(value) {
                body["metadata"]["labels"][key] = Value::String(value.to_owned());
            }
        }
        let unchanged = body["metadata"].as_object().is_none_or(|m| m.keys().all(|k| k == "resourceVersion"))
            && body.get("spec").is_none();
        (!unchanged).then_some(body)
    })
    .await
}
