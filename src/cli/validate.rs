//! `winfleet validate`, and with `--payload-dir` the services manifest's
//! named files against that payload (issue 36).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use winfleet::desired::Desired;
use winfleet::diagnostic::{self, Diagnostic};
use winfleet::lifecycle::named_paths;
use winfleet::payload::Payload;

use super::{ValidateArgs, load, output};

pub fn run(args: &ValidateArgs) -> anyhow::Result<ExitCode> {
    let (payload_dir, args) = (&args.payload_dir, &args.repo);
    if let Err(refused) = args.verify.check(&args.repo, args.path.as_deref(), args.rev.as_deref())? {
        return Ok(refused.report(""));
    }
    let mut loaded = load::load(&args.repo, args.path.as_deref(), args.rev.as_deref(), None)?;
    if let (Some(dir), Some(desired)) = (payload_dir, &loaded.desired) {
        let findings = unprovided(desired, dir)?;
        if !findings.is_empty() {
            loaded.diagnostics.extend(findings);
            diagnostic::sort(&mut loaded.diagnostics);
            loaded.desired = None;
        }
    }
    output::diagnostics(&loaded.diagnostics);
    let warnings = loaded.diagnostics.len() - loaded.errors();
    match &loaded.desired {
        Some(d) => {
            let lifecycle = match (&d.services, &d.fleet.payload_digest) {
                (Some(m), Some(digest)) => {
                    format!(", services manifest {} ({} service(s)), payload {digest}", m.name, m.services.len())
                }
                _ => String::new(),
            };
            output::out(&format!(
                "valid: {} instance(s), {} MachineSet(s), {} registry mirror set(s), proxy {}{lifecycle}; {warnings} warning(s)\n",
                d.instances.len(),
                d.machine_sets.len(),
                d.registries.len(),
                if d.specs.values().any(|s| !s.environment.is_empty()) { "set" } else { "not set" },
            ));
            Ok(ExitCode::SUCCESS)
        }
        None => {
            output::error(&format!("invalid: {} error(s), {warnings} warning(s)", loaded.errors()));
            Ok(ExitCode::from(1))
        }
    }
}

/// The files the services manifest names that neither the payload at
/// `dir` (the pinned one) nor winfleet provides, on any platform (no
/// cluster says which).
fn unprovided(desired: &Desired, dir: &Path) -> anyhow::Result<Vec<Diagnostic>> {
    let mut found: Vec<Diagnostic> = Vec::new();
    let lifecycles = desired.specs.values().filter_map(|s| s.lifecycle.as_deref());
    let mut payload = None;
    for lifecycle in lifecycles {
        let payload = match &payload {
            Some(p) => p,
            None => payload.insert(Payload::load(dir).with_context(|| format!("--payload-dir {}", dir.display()))?),
        };
        payload.check_pin(&lifecycle.payload_digest)?;
        for d in named_paths::unprovided(&lifecycle.with_payload(payload), None) {
            if !found.contains(&d) {
                found.push(d);
            }
        }
    }
    Ok(found)
}
