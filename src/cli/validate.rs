//! `winfleet validate`.

use std::process::ExitCode;

use super::{RepoArgs, load, output};

pub fn run(args: &RepoArgs) -> anyhow::Result<ExitCode> {
    if let Err(refused) = args.verify.check(&args.repo, args.path.as_deref(), args.rev.as_deref())? {
        return Ok(refused.report(""));
    }
    let loaded = load::load(&args.repo, args.path.as_deref(), args.rev.as_deref(), None)?;
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
