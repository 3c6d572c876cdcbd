//! `winfleet plan`: the offline plan between two revisions.

use std::process::ExitCode;

use anyhow::Context;
use winfleet::plan::{json, markdown, offline, text};

use super::{Format, PlanArgs, load, output};

pub fn run(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    // Both revisions are read and validated side by side.
    let (base, head) = std::thread::scope(|s| {
        let base = s.spawn(|| load::load(&args.repo, Some(&args.base), None));
        let head = load::load(&args.repo, Some(&args.head), None);
        (base.join(), head)
    });
    let head = head.with_context(|| format!("head revision {}", args.head))?;
    let base = base.map_err(|_| anyhow::anyhow!("reading the base revision failed"))?;
    let base = base.with_context(|| format!("base revision {}", args.base))?;
    let Some(head_desired) = &head.desired else {
        output::diagnostics(&head.diagnostics);
        output::error(&format!("head revision {} is invalid: {} error(s)", args.head, head.errors()));
        return Ok(ExitCode::from(1));
    };
    let mut warnings: Vec<String> = head.diagnostics.iter().map(ToString::to_string).collect();
    if base.desired.is_none() {
        warnings.insert(
            0,
            format!("base revision {} is invalid ({} error(s)): everything in head is shown as new", args.base, base.errors()),
        );
    }
    let mut plan = offline::plan(base.desired.as_ref(), head_desired);
    plan.base = Some(winfleet::source::resolve_revision(&args.repo, &args.base)?);
    plan.head = Some(winfleet::source::resolve_revision(&args.repo, &args.head)?);
    plan.warnings.splice(0..0, warnings);
    output::out(&match args.output {
        Format::Text => text::render(&plan),
        Format::Markdown => markdown::render(&plan),
        Format::Json => json::render(&plan),
    });
    Ok(ExitCode::from(if plan.has_changes() { 2 } else { 0 }))
}
