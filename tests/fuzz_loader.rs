//! The loader under mutated input, a short seeded pass (the long one is
//! `cargo bench --bench fuzz`): no panic, no hang, every diagnostic with a
//! file and a position, and nothing reported valid that the YAML reader
//! rejects. See tests/support/fuzz.rs. Node-side inputs (the services
//! manifest, the payload's file names, MachineSet fields) are mutated too,
//! and what the loader accepts is rendered and planned without a panic
//! (tests/support/fuzz_node.rs). CI runs both with a new seed each day.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

#[test]
fn mutated_repositories_never_panic_hang_or_pass_unlocated() {
    let seed = std::env::var("FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261124);
    let cases = std::env::var("FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(400);
    // A hang detector, not a performance figure: a case gets a minute.
    let (run, findings) = support::fuzz::run(seed, cases, false, Duration::from_secs(60));
    assert!(
        findings.is_empty(),
        "{} finding(s) in {run} cases (seed {seed}):\n{}",
        findings.len(),
        findings.join("\n")
    );
}

#[test]
fn mutated_node_side_inputs_never_panic_render_or_the_dry_run_plan_issue_35() {
    let seed = std::env::var("FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261124);
    let cases = std::env::var("FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(400) / 2;
    let (run, rendered, findings) = support::fuzz_node::run(seed, cases);
    assert!(run > cases / 2, "only {run} of {cases} cases found something to mutate");
    assert!(rendered > run / 10, "only {rendered} of {run} mutated revisions were valid, so little was rendered");
    assert!(
        findings.is_empty(),
        "{} finding(s) in {run} cases (seed {seed}):\n{}",
        findings.len(),
        findings.join("\n")
    );
}
