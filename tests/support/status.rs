//! Status rendering from hand-built round reports: one round's input
//! ([`Round`]) and the node, cluster and operation reports it is made of.

use winfleet::cluster::rollout::{RebootReport, RebootResult};
use winfleet::desired::kinds::fleet::DriftMode;
use winfleet::engine::report::{NodeReport, NodeResult, OpReport, Stage};
use winfleet::node::outcome::Outcome;
use winfleet::reconcile::report::{ClusterReport, RoundReport};
use winfleet::status::model::Status;
use winfleet::status::{RoundInput, render, to_files};
use winfleet::vocab::operation::Operation;

pub const REV1: &str = "1111111111111111111111111111111111111111";
pub const REV2: &str = "2222222222222222222222222222222222222222";

/// One round's input, owned.
pub struct Round {
    pub now: i64,
    pub attempted: String,
    pub applied: Option<String>,
    pub invalid: Vec<String>,
    pub instances: Vec<String>,
    pub machine_sets: Vec<String>,
    pub report: Option<RoundReport>,
    pub drift_check: bool,
    pub drift_mode: DriftMode,
    pub secrets: Vec<String>,
}

impl Round {
    /// A round at `now` (seconds) over `instances`, with `rev` applied.
    pub fn new(now: i64, rev: &str, instances: &[&str]) -> Self {
        Self {
            now,
            attempted: rev.to_owned(),
            applied: Some(rev.to_owned()),
            invalid: Vec::new(),
            instances: instances.iter().map(|s| s.to_string()).collect(),
            machine_sets: Vec::new(),
            report: None,
            drift_check: false,
            drift_mode: DriftMode::Correct,
            secrets: Vec::new(),
        }
    }

    /// With this round report.
    pub fn report(mut self, report: RoundReport) -> Self {
        self.report = Some(report);
        self
    }

    /// The status this round renders over `previous`.
    pub fn render(&self, previous: &Status) -> Status {
        render(previous, &self.input())
    }

    /// The renderer's input for this round.
    pub fn input(&self) -> RoundInput<'_> {
        RoundInput {
            now: jiff::Timestamp::from_second(self.now).unwrap(),
            attempted: &self.attempted,
            applied: self.applied.as_deref(),
            invalid: &self.invalid,
            instances: &self.instances,
            machine_sets: &self.machine_sets,
            report: self.report.as_ref(),
            drift_check: self.drift_check,
            drift_mode: self.drift_mode,
            secrets: &self.secrets,
            suspended_by: None,
        }
    }
}

/// A round report.
pub fn round(dry_run: bool, nodes: Vec<NodeReport>, cluster: Option<ClusterReport>) -> RoundReport {
    RoundReport { dry_run, nodes, cluster }
}

/// A node's report ending with `result`.
pub fn node(address: &str, result: NodeResult) -> NodeReport {
    NodeReport { result, ..NodeReport::new(address) }
}

/// A node that finished with `operations` (three more in sync).
pub fn done(address: &str, operations: Vec<OpReport>, reboot_required: bool) -> NodeReport {
    node(address, NodeResult::Done { operations, in_sync: 3, reboot_required })
}

/// A node with nothing to change.
pub fn in_sync(address: &str) -> NodeReport {
    done(address, Vec::new(), false)
}

/// A node whose observation failed.
pub fn failed(address: &str, reason: &str) -> NodeReport {
    node(address, NodeResult::Failed { stage: Stage::Observe, reason: reason.to_owned() })
}

/// An environment variable set.
pub fn set_env(name: &str, to: &str, outcome: Option<Outcome>) -> OpReport {
    OpReport { operation: Operation::SetEnv { name: name.to_owned(), from: None, to: to.to_owned() }, outcome }
}

/// A file written.
pub fn write_file(path: &str, outcome: Option<Outcome>) -> OpReport {
    OpReport { operation: Operation::WriteFile { path: path.to_owned(), created: false, diff: String::new() }, outcome }
}

/// A cluster report with nothing in it.
pub fn cluster() -> ClusterReport {
    ClusterReport { api: "https://api.test:6443".into(), ..ClusterReport::default() }
}

/// One node's reboot.
pub fn reboot(address: &str, node: &str, result: RebootResult) -> RebootReport {
    RebootReport { node: node.to_owned(), address: address.to_owned(), result }
}

/// One rendered status file as text.
pub fn file(status: &Status, path: &str) -> String {
    String::from_utf8(to_files(status).remove(path).unwrap_or_else(|| panic!("no file {path}"))).unwrap()
}
