//! Helpers for tests that drive the node engine directly on the test
//! fleet's first node (tests/lifecycle_node.rs, tests/lifecycle_leftovers.rs).

use super::fleet::TestFleet;

/// An instance of the fleet's first node (posix, the fleet's user) with
/// `spec`, for tests that drive the engine directly.
pub fn instance_of(fleet: &TestFleet, spec: winfleet::node::NodeSpec) -> winfleet::desired::model::Instance {
    let node = &fleet.nodes[0];
    winfleet::desired::model::Instance {
        address: node.address.clone(),
        username: fleet.user.clone(),
        port: node.port,
        shell: winfleet::vocab::Shell::Posix,
        labels: Default::default(),
        annotations: Default::default(),
        taints: Vec::new(),
        origin: "test".into(),
        spec: std::sync::Arc::new(spec),
    }
}

/// A node report's operations as `headline: outcome` lines.
pub fn operation_lines(report: &winfleet::engine::report::NodeReport) -> Vec<String> {
    match &report.result {
        winfleet::engine::report::NodeResult::Done { operations, .. } => operations
            .iter()
            .map(|o| {
                format!(
                    "{}: {}",
                    o.operation.headline(),
                    o.outcome.as_ref().map_or("planned".into(), |x| x.to_string())
                )
            })
            .collect(),
        other => panic!("node did not finish: {other:?}"),
    }
}
