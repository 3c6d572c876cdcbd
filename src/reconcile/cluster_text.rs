//! A round as text (the nodes' part is the engine's); the cluster part: the cluster line (its platform),
//! keys, Machines, MachineSets, Node metadata, joins, upgrades, reboots and
//! the one-line summary. Pure.

use std::fmt::Write as _;

use super::machines_text::{render_keys, render_machines};
use super::report::{ClusterReport, RoundReport};
use super::upgrades_text::render_upgrades;
use crate::cluster::approve::CsrOutcome;
use crate::cluster::deconfigure::DeconfigureResult;
use crate::cluster::join::JoinResult;
use crate::cluster::rollout::RebootResult;
use crate::engine::report as node_report;
use crate::node::outcome::Outcome;
use crate::plan::{MachineSetAction, replicas_text, show_value};

impl RoundReport {
    /// The round as text: nodes, then the cluster, then the summaries.
    pub fn render_text(&self) -> String {
        let mut out = node_report::render_text(&self.nodes, self.dry_run);
        if let Some(cluster) = &self.cluster {
            render_cluster(&mut out, cluster, self.dry_run);
        }
        out
    }

    /// The summary lines [`RoundReport::render_text`] ends its parts with:
    /// the nodes', then the cluster's.
    pub fn summary_lines(&self) -> Vec<String> {
        let nodes = node_report::summary(&self.nodes, self.dry_run);
        std::iter::once(nodes).chain(self.cluster.as_ref().map(|c| cluster_summary(c, self.dry_run))).collect()
    }
}

fn outcome_suffix(outcome: Option<&Outcome>) -> String {
    outcome.map(|o| format!(": {o}")).unwrap_or_default()
}

fn render_cluster(out: &mut String, c: &ClusterReport, dry_run: bool) {
    match c.platform {
        Some(platform) => {
            let _ = writeln!(out, "Cluster {} (platform {platform}):", c.api);
        }
        None => {
            let _ = writeln!(out, "Cluster {}:", c.api);
        }
    }
    if let Some(error) = &c.error {
        let _ = writeln!(out, "  FAILED: {error}");
    }
    render_keys(out, &c.keys, dry_run);
    render_machines(out, &c.machines, dry_run);
    for ms in &c.machine_sets {
        let change = &ms.change;
        let sign = match change.action {
            MachineSetAction::Create => "+ create",
            MachineSetAction::Update => "~ update",
            MachineSetAction::Delete => "- delete",
        };
        let replicas = replicas_text(change, "->").map(|r| format!(", {r}")).unwrap_or_default();
        let _ = writeln!(out, "  MachineSet {}: {sign}{replicas}{}", change.name, outcome_suffix(ms.outcome.as_ref()));
        if change.action == MachineSetAction::Update {
            for field in &change.fields {
                let show = |v: &Option<serde_json::Value>| v.as_ref().map_or_else(|| "(absent)".to_owned(), show_value);
                let _ = writeln!(out, "      {}: {} -> {}", field.pointer, show(&field.from), show(&field.to));
            }
        }
        for taken in &ms.taken_over {
            let _ = writeln!(out, "      takes over {taken}");
        }
        for field in &ms.defaulted {
            let show = |v: &Option<serde_json::Value>| v.as_ref().map_or_else(|| "(absent)".to_owned(), show_value);
            let _ = writeln!(
                out,
                "      defaulted by the API server: {}: {} -> {}",
                field.pointer,
                show(&field.from),
                show(&field.to)
            );
        }
    }
    for conflict in &c.conflicts {
        let _ = writeln!(out, "  MachineSet {}: ! conflict: {}", conflict.name, conflict.reason);
    }
    for node in &c.nodes {
        let changes: Vec<String> = node
            .changes
            .iter()
            .map(|s| {
                let show = |v: &Option<String>| v.as_ref().map_or_else(|| "(absent)".to_owned(), |v| format!("{v:?}"));
                format!("{}: {} -> {}", s.setting, show(&s.from), show(&s.to))
            })
            .collect();
        let what = if changes.is_empty() { "record the keys winfleet manages".to_owned() } else { changes.join("; ") };
        let _ = writeln!(
            out,
            "  Node {} ({}): ~ {what}{}",
            node.node,
            node.instance,
            outcome_suffix(node.outcome.as_ref())
        );
    }
    for u in &c.unassociated {
        let _ = writeln!(out, "  ! {}: no Node associated: {}", u.address, u.reason);
    }
    for r in &c.rejected {
        let _ = writeln!(out, "  ! dry run rejected {}: {}", r.target, r.outcome);
    }
    if !c.rejected.is_empty() {
        let _ = writeln!(
            out,
            "  ! the cluster plan was rejected in its dry run: none of its MachineSet and Node metadata writes was made"
        );
    }
    if let Some(e) = &c.material_error {
        let _ = writeln!(out, "  ! cluster material for joining nodes: {e}");
    }
    super::sources_text::render_text(out, &c.disagreements, c.sources_error.as_deref());
    if let Some(refused) = &c.prerequisites.refused {
        let _ = writeln!(out, "  Prerequisites REFUSED: no node joins or upgrades this round: {refused}");
    }
    for note in &c.prerequisites.notes {
        let _ = writeln!(out, "  - prerequisites: {note}");
    }
    if let Some(note) = &c.network_note {
        let _ = writeln!(out, "  - network configuration: {note}");
    }
    if let Some(note) = &c.exporter_tls_note {
        let _ = writeln!(out, "  - exporter TLS: {note}");
    }
    if let Some(note) = &c.worker_ignition {
        let _ = writeln!(out, "  - worker ignition: {note}");
    }
    for csr in &c.csrs {
        let what = match &csr.outcome {
            CsrOutcome::Approved { instance, kind } => format!("approved ({kind:?} certificate of {instance})"),
            CsrOutcome::Refused { instance, reason } => format!("NOT approved for {instance}: {reason}"),
            CsrOutcome::NearMatch { resembles } => {
                format!("NOT approved: node name close to, not equal to, the host name of {}", resembles.join(", "))
            }
        };
        let _ = writeln!(out, "  CSR {} (node {}): {what}", csr.csr, csr.node);
    }
    for j in &c.joins {
        let who = j.node.as_ref().map_or_else(|| j.address.clone(), |n| format!("{n} ({})", j.address));
        let what = match &j.result {
            JoinResult::Joined => "joined: Ready, labelled, uncordoned, at the desired version".to_owned(),
            JoinResult::Failed { step, reason } => format!("FAILED at {}: {reason}", step.name()),
            JoinResult::NotStarted { reason } => format!("not started: {reason}"),
            JoinResult::Planned { steps } => format!("to do: {}", steps.join("; ")),
        };
        let _ = writeln!(out, "  Join {who}: {what}");
    }
    render_upgrades(out, &c.upgrades, c.upgrade_slots, &c.machines.machines);
    if let Some(reason) = &c.deconfigure_refused {
        let _ = writeln!(out, "  Deconfigure REFUSED: {reason}");
    }
    for d in &c.deconfigures {
        let what = match &d.result {
            DeconfigureResult::Deconfigured { evicted, operations, rebooted } => format!(
                "deconfigured, {evicted} pod(s) evicted, {operations} operation(s) on the node{}, Node deleted",
                if *rebooted { ", rebooted" } else { "" }
            ),
            DeconfigureResult::Failed { stage, reason } => format!("FAILED at {}: {reason}", stage.name()),
            DeconfigureResult::NotStarted { reason } if c.deconfigure_refused.as_ref() == Some(reason) => {
                "not started (refused, above)".to_owned()
            }
            DeconfigureResult::NotStarted { reason } => format!("not started: {reason}"),
            DeconfigureResult::Planned { operations } => {
                format!("to do: cordon, drain; {}; delete the Node", operations.join("; "))
            }
        };
        let _ = writeln!(out, "  Deconfigure {} ({}): {what}", d.node, d.address);
    }
    for r in &c.reboots {
        let who = if r.node.is_empty() { r.address.clone() } else { format!("{} ({})", r.node, r.address) };
        let what = match &r.result {
            RebootResult::Rebooted { evicted, resumed: false } => format!("rebooted safely, {evicted} pod(s) evicted"),
            RebootResult::Rebooted { evicted, resumed: true } => {
                format!("finished the safe reboot an earlier round started, {evicted} pod(s) evicted")
            }
            RebootResult::Failed { stage, reason } => format!("FAILED ({}): {reason}", stage.name()),
            RebootResult::NotStarted { reason } => format!("not started: {reason}"),
        };
        let _ = writeln!(out, "  Reboot {who}: {what}");
    }
    let _ = writeln!(out, "{}", cluster_summary(c, dry_run));
}

/// One line about the cluster part.
fn cluster_summary(c: &ClusterReport, dry_run: bool) -> String {
    let failed = |o: &Option<Outcome>| matches!(o, Some(Outcome::Failed(_)));
    let write_failures = c.machine_sets.iter().filter(|m| failed(&m.outcome)).count()
        + c.nodes.iter().filter(|n| failed(&n.outcome)).count();
    let rebooted = c.reboots.iter().filter(|r| matches!(r.result, RebootResult::Rebooted { .. })).count();
    let reboot_failed = c.reboots.iter().filter(|r| matches!(r.result, RebootResult::Failed { .. })).count();
    let verb = if dry_run { "Cluster plan" } else { "Cluster" };
    format!(
        "{verb}: {} MachineSet change(s), {} conflict(s), {} Node metadata change(s), {} unassociated instance(s), \
         {} write(s) failed, {} rejected in the dry run; reboots: {rebooted} done, {reboot_failed} failed.",
        c.machine_sets.len(),
        c.conflicts.len(),
        c.nodes.len(),
        c.unassociated.len(),
        write_failures,
        c.rejected.len(),
    )
}
