//! The Machine side of a round as text: key rotation (Machine replacements
//! take longest, so they come first), the `windows-user-data` Secret, each
//! Machine's step, each Windows MachineSet's counts and the
//! MachineHealthChecks that can delete a Machine mid-configure. Pure.

use std::fmt::Write as _;

use crate::cluster::keys::{KeyReport, KeyResult};
use crate::cluster::user_data::UserDataAction;

use super::machines::{MachineStep, MachinesReport};

/// Key rotation lines.
pub fn render_keys(out: &mut String, keys: &[KeyReport], dry_run: bool) {
    let will = |done: bool| if done || !dry_run { "" } else { "to do: " };
    for k in keys {
        let what = match &k.result {
            KeyResult::MachineReplaced { machine, done } => {
                format!("{}replace Machine {machine} (deleted; its MachineSet creates a new one)", will(*done))
            }
            KeyResult::MachineWaiting { machine, reason } => format!("Machine {machine} waits: {reason}"),
            KeyResult::RotationStopped { machine, blocker, reason, .. } => format!(
                "key rotation STOPPED: Machine {machine} is not replaced: the replacement Machine {blocker} did not \
                 become a Ready node: {reason}"
            ),
            KeyResult::HashUpdated { done } => format!("{}pub-key-hash set to the new key", will(*done)),
            KeyResult::KeyRejected { authorized_key, fingerprint } => format!(
                "the host REFUSES the fleet's new SSH key; add this public key to its authorized_keys: {authorized_key} \
                 ({fingerprint}); left running"
            ),
            KeyResult::Failed { reason } => format!("FAILED: {reason}"),
        };
        let _ = writeln!(out, "  Key rotation {} ({}): {what}", k.node, k.address);
    }
}

/// The Secret, the Machines and the MachineSets' counts.
pub fn render_machines(out: &mut String, m: &MachinesReport, dry_run: bool) {
    if let Some(u) = &m.user_data {
        let secret = "Secret openshift-machine-api/windows-user-data";
        let what = match (&u.error, u.action) {
            (Some(e), _) => format!("FAILED: {e}"),
            (None, UserDataAction::InSync) => String::new(),
            (None, action) => {
                let verb = if action == UserDataAction::Create { "+ create" } else { "~ rewrite" };
                let from = u.previous.as_ref().map(|p| format!(" (was {p})")).unwrap_or_default();
                let done = if u.written {
                    ": applied"
                } else if dry_run {
                    ""
                } else {
                    ": not written"
                };
                format!("{verb}, authorizing the fleet key {}{from}{done}", u.fingerprint)
            }
        };
        if !what.is_empty() {
            let _ = writeln!(out, "  {secret}: {what}");
        }
    }
    for machine in &m.machines {
        let what = match &machine.step {
            MachineStep::Provisioning { phase } => format!("provisioning (phase {phase}, no InternalIP yet)"),
            MachineStep::Waiting { reason } => format!("waiting: {reason}"),
            MachineStep::Configuring { reason } => format!("configuring: {reason}"),
            MachineStep::Failed { reason } if machine.failed_rounds > 1 => {
                format!("FAILED ({} rounds in a row; never deleted by winfleet): {reason}", machine.failed_rounds)
            }
            MachineStep::Failed { reason } => format!("FAILED: {reason}"),
            MachineStep::Ready => "ready".to_owned(),
        };
        let at = machine.address.as_ref().map(|a| format!(" ({a})")).unwrap_or_default();
        let late = if m.taken_late.contains(&machine.machine) { " (got its address during the round)" } else { "" };
        let _ = writeln!(out, "  Machine {}{at}{late}: {what}", machine.machine);
    }
    for set in &m.machine_sets {
        let state = if set.ready() { "Ready" } else { "not Ready" };
        let _ = writeln!(out, "  MachineSet {} Machines: {state}: {}", set.name, set.counts());
    }
    for finding in &m.health_checks {
        let _ = writeln!(out, "  warning: {}", finding.message());
    }
}
