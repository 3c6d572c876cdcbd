//! Every invalid-repository fixture is rejected with exactly the diagnostics
//! in its `expected.txt` (text and location), and nothing is rendered.
//!
//! Layout: tests/fixtures/invalid/<situation>/repo/… is the repository,
//! tests/fixtures/invalid/<situation>/expected.txt the diagnostics, one per
//! line, as `winfleet validate` prints them.

mod support;

use winfleet::desired::{LoadOptions, load};
use winfleet::source::read_worktree;

#[test]
fn every_invalid_fixture_is_rejected_with_its_exact_diagnostics() {
    let cases = support::cases("invalid");
    assert!(cases.len() >= 50, "expected at least 50 invalid fixtures, found {}", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let snapshot = read_worktree(&case.join("repo")).unwrap();
        let loaded = load(&snapshot, LoadOptions::default());
        if loaded.desired.is_some() || loaded.errors() == 0 {
            failures.push(format!("{name}: accepted, but it is an invalid fixture"));
            continue;
        }
        let actual: String = loaded.diagnostics.iter().map(|d| format!("{d}\n")).collect();
        if let Err(e) = support::check_golden(&case.join("expected.txt"), &actual) {
            failures.push(format!("{name}: {e}"));
        }
    }
    support::report(failures);
}
