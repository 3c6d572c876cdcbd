//! Loading two revisions together shares the parse and the checks (kind,
//! schema, typed parse) of every file they both hold; the result is the
//! same, to the byte, as each revision checking every file itself and as
//! each revision loaded alone: the same diagnostics with their file, line
//! and column, the same plan.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;

use winfleet::desired::{LoadOptions, Loaded, load, load_many, load_many_checking_each};
use winfleet::plan::{json, offline, text};
use winfleet::source::{Snapshot, read_worktree};

/// Everything a caller sees of a pair of loads: each revision's
/// diagnostics as printed, and the plan between them in text and JSON.
fn seen(base: &Loaded, head: &Loaded) -> String {
    let mut out = String::new();
    for (name, loaded) in [("base", base), ("head", head)] {
        out.push_str(&format!("{name}: valid {}\n", loaded.desired.is_some()));
        for d in &loaded.diagnostics {
            out.push_str(&format!("{d}\n"));
        }
    }
    if let Some(head) = &head.desired {
        let plan = offline::plan(base.desired.as_ref(), head);
        out.push_str(&text::render(&plan));
        out.push_str(&json::render(&plan));
    }
    out
}

fn both(loads: Vec<Loaded>) -> String {
    let [base, head]: [Loaded; 2] = loads.try_into().unwrap();
    seen(&base, &head)
}

/// The repositories: every plan fixture's two revisions, and every valid and
/// invalid fixture against itself (every file shared) and against the next
/// one (some files shared, some not).
fn pairs() -> Vec<(String, Snapshot, Snapshot)> {
    let mut pairs = Vec::new();
    for case in support::cases("plan") {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        pairs.push((name, read_worktree(&case.join("base")).unwrap(), read_worktree(&case.join("head")).unwrap()));
    }
    let repos: Vec<PathBuf> = support::cases("valid")
        .into_iter()
        .chain(support::cases("invalid"))
        .map(|c| c.join("repo"))
        .filter(|r| r.is_dir())
        .collect();
    assert!(repos.len() > 50, "fixtures missing: {}", repos.len());
    for (i, repo) in repos.iter().enumerate() {
        let next = &repos[(i + 1) % repos.len()];
        let name = |p: &PathBuf| p.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned();
        let snapshot = read_worktree(repo).unwrap();
        pairs.push((format!("{} twice", name(repo)), snapshot.clone(), snapshot.clone()));
        pairs.push((format!("{} then {}", name(repo), name(next)), snapshot, read_worktree(next).unwrap()));
    }
    pairs
}

#[test]
fn revisions_loaded_together_give_what_each_checking_every_file_gives() {
    let options = LoadOptions::default();
    let mut failures = Vec::new();
    let mut shared_invalid = 0;
    for (name, base, head) in pairs() {
        let together = both(load_many(&[&base, &head], options));
        let checking_each = both(load_many_checking_each(&[&base, &head], options));
        let alone = seen(&load(&base, options), &load(&head, options));
        if together != checking_each || together != alone {
            failures.push(format!(
                "{name}:\n--- together\n{together}\n--- checking each\n{checking_each}\n--- alone\n{alone}"
            ));
        }
        shared_invalid += usize::from(name.ends_with("twice") && together.contains("head: valid false"));
    }
    assert!(shared_invalid > 40, "too few invalid repositories shared whole: {shared_invalid}");
    support::report(failures);
}
