//! Checks the node tests on a bench (tests/support/join.rs's `Bench` or
//! `Setup`) share: every node joined in a round, a round that writes
//! nothing, and where a node path lies on a test node.

use std::path::PathBuf;

use winfleet::cluster::join::JoinResult;
use winfleet::engine::report::NodeResult;
use winfleet::reconcile::report::RoundReport;

use super::fleet::{TestFleet, TestNode};
use super::join::logs;

/// Asserts `report`'s round joined every node of `fleet`.
pub fn assert_all_joined(fleet: &TestFleet, report: &RoundReport) {
    let joins = &report.cluster.as_ref().expect("a cluster round").joins;
    assert!(
        joins.len() == fleet.nodes.len() && joins.iter().all(|j| j.result == JoinResult::Joined),
        "{}\n{}",
        report.render_text(),
        logs(fleet)
    );
}

/// Asserts `report`'s round wrote nothing on any node.
pub fn assert_quiet(report: &RoundReport) {
    for node in &report.nodes {
        let NodeResult::Done { operations, .. } = &node.result else { panic!("{node:?}") };
        assert!(operations.is_empty(), "the next round writes nothing on {}: {operations:#?}", node.address);
    }
}

/// Where the node path `path` lies on the test node `node`: an absolute
/// path as it is, a relative one in the node's home.
pub fn on_node(node: &TestNode, path: &str) -> PathBuf {
    if path.starts_with('/') { PathBuf::from(path) } else { node.path(path) }
}
