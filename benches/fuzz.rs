//! The long fuzz pass over the loader: the harness of tests/fuzz_loader.rs
//! with the heavy mutations (5000-deep nesting, 50 MB scalars, 10^5
//! documents) for FUZZ_SECONDS (600) seconds, a new seed per batch. Prints the
//! cases run, the slowest case and every finding.
//! `cargo bench --bench fuzz` (FUZZ_SECONDS=600, SEED=1 by default).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, missing_docs)]

#[path = "../tests/support/fuzz.rs"]
mod fuzz;
#[path = "../tests/support/fuzz_node.rs"]
mod fuzz_node;

use std::time::{Duration, Instant};

fn main() {
    let env = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let (seconds, first_seed) = (env("FUZZ_SECONDS", 600), env("SEED", 1));
    let started = Instant::now();
    let (mut cases, mut findings, mut seed) = (0, Vec::new(), first_seed);
    while started.elapsed() < Duration::from_secs(seconds) {
        let batch = Instant::now();
        let (run, found) = fuzz::run(seed, 200, seed % 4 == 0, Duration::from_secs(120));
        cases += run;
        findings.extend(found);
        let (run, _, found) = fuzz_node::run(seed, 100);
        cases += run;
        findings.extend(found);
        println!("seed {seed}: {run} cases in {:.1} s", batch.elapsed().as_secs_f64());
        seed += 1;
    }
    println!();
    println!(
        "{cases} cases in {:.0} s (seeds {first_seed}..{}), {} finding(s)",
        started.elapsed().as_secs_f64(),
        seed - 1,
        findings.len()
    );
    for f in &findings {
        println!("  {f}");
    }
}
