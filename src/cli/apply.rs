//! `winfleet apply --once`: one round over the cluster and the nodes.

use std::process::ExitCode;

use super::{ApplyArgs, RoundFormat, live, output};

pub fn run(args: &ApplyArgs) -> anyhow::Result<ExitCode> {
    let repo = &args.repo;
    if let Err(refused) = repo.verify.check(&repo.repo, repo.path.as_deref(), repo.rev.as_deref())? {
        return Ok(refused.report(""));
    }
    let Some(report) =
        live::round(&args.repo.repo, args.repo.path.as_deref(), args.repo.rev.as_deref(), &args.round, args.dry_run)?
    else {
        return Ok(ExitCode::from(1));
    };
    match args.output {
        RoundFormat::Json => output::out(&report.render_json()),
        RoundFormat::Text => output::out_plan(&report.render_text()),
    }
    Ok(ExitCode::from(match (report.failed(), args.dry_run && report.has_changes()) {
        (true, _) => 1,
        (false, true) => 2,
        (false, false) => 0,
    }))
}
