//! Machines that fail to configure round after round (issue 26): the count
//! of rounds in a row is kept on the Machine (annotation
//! `winfleet.io/configure-failures`, so it survives restarts and leader
//! changes), and at the third an Event on the Machine says why. winfleet
//! never deletes such a Machine: the VM may need a person (a bad image, a
//! user data the cloud ignored), and deleting it would only start another.

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

use super::apply::api_error;
use super::events::{Events, Reason, Regarding};
use super::observe::machine_resource;
use super::{FAILURES_ANNOTATION, FIELD_MANAGER, MACHINE_API_NAMESPACE, MachineObs};

/// The round at which a failing Machine is reported with an Event.
pub const REPORT_AFTER: u32 = 3;

/// The count after this round: one more on a failure, zero otherwise. Pure.
pub fn next(previous: u32, failed: bool) -> u32 {
    if failed { previous.saturating_add(1) } else { 0 }
}

/// Records this round's outcome of configuring `machine` (`failure`: why
/// it failed) and returns the count of failed rounds in a row. The Event is
/// published once, at [`REPORT_AFTER`].
pub async fn record(client: &Client, events: &Events, machine: &MachineObs, failure: Option<&str>) -> u32 {
    let count = next(machine.configure_failures, failure.is_some());
    if count != machine.configure_failures {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), MACHINE_API_NAMESPACE, &machine_resource());
        let value = if count == 0 { json!(null) } else { json!(count.to_string()) };
        let patch = json!({ "metadata": { "annotations": { FAILURES_ANNOTATION: value } } });
        let params = PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
        if let Err(e) = api.patch(&machine.name, &params, &Patch::Merge(&patch)).await {
            tracing::warn!(machine = %machine.name, error = %api_error(&e), "cannot record the Machine's failed rounds");
        }
    }
    if let (REPORT_AFTER, Some(reason)) = (count, failure) {
        let note = format!(
            "configuring Machine {} failed {count} rounds in a row: {reason}; winfleet never deletes a Machine: \
             look at its VM, or delete the Machine for its MachineSet to replace it",
            machine.name
        );
        events.publish(Regarding::Machine(&machine.name, &machine.uid), Reason::MachineConfigureFailed, note).await;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_count_in_a_row_and_a_success_starts_again() {
        assert_eq!(next(0, true), 1);
        assert_eq!(next(2, true), REPORT_AFTER);
        assert_eq!(next(3, false), 0);
        assert_eq!(next(u32::MAX, true), u32::MAX);
    }
}
