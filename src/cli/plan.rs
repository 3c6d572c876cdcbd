//! `winfleet plan`: the offline plan between two revisions.

use std::process::ExitCode;

use anyhow::Context;
use winfleet::desired::{self, LoadOptions};
use winfleet::plan::{Warning, json, markdown, offline, text};

use super::{Format, PlanArgs, live, load, output, post};

pub fn run(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    if let Err(refused) = args.verify.check(&args.repo, args.path.as_deref(), Some(&args.head))? {
        return Ok(refused.report(&format!("head revision {}: ", args.head)));
    }
    if args.live {
        return run_live(args);
    }
    let Some(base_name) = &args.base else { anyhow::bail!("--base is needed (or --live)") };
    // Both revisions are read together: a file they share is read once.
    let head_context = || format!("head revision {}", args.head);
    let read =
        load::snapshots(&args.repo, args.path.as_deref(), &[base_name, &args.head]).with_context(head_context)?;
    let [base_snapshot, head_snapshot]: [anyhow::Result<_>; 2] =
        read.try_into().map_err(|_| anyhow::anyhow!("reading the revisions failed"))?;
    let head_snapshot = head_snapshot.with_context(head_context)?;
    let base_snapshot = base_snapshot.with_context(|| format!("base revision {base_name}"))?;
    // Both revisions are validated together: unchanged files are parsed once.
    let mut loaded = desired::load_many(&[&base_snapshot, &head_snapshot], LoadOptions::default());
    let (Some(head), Some(base)) = (loaded.pop(), loaded.pop()) else {
        anyhow::bail!("loading the revisions failed");
    };
    let Some(head_desired) = &head.desired else {
        output::diagnostics(&head.diagnostics);
        output::error(&format!("head revision {} is invalid: {} error(s)", args.head, head.errors()));
        return Ok(ExitCode::from(1));
    };
    // What the base revision says too is not this change's doing: folded away.
    let before: std::collections::BTreeSet<String> = base.diagnostics.iter().map(ToString::to_string).collect();
    let (warnings_before, mut warnings): (Vec<Warning>, Vec<Warning>) =
        head.diagnostics.iter().map(Warning::validation).partition(|w| before.contains(&w.to_string()));
    if base.desired.is_none() {
        warnings.insert(
            0,
            Warning::plan(format!(
                "base revision {} is invalid ({} error(s)): everything in head is shown as new",
                base_name,
                base.errors()
            )),
        );
    }
    let mut plan = offline::plan(base.desired.as_ref(), head_desired);
    plan.base = base_snapshot.revision;
    plan.head = head_snapshot.revision;
    plan.warnings.splice(0..0, warnings);
    plan.warnings_before = warnings_before;
    match args.output {
        Format::Text => output::out_plan(&text::render(&plan)),
        Format::Markdown => output::out(&markdown::render_within(&plan, args.max_bytes)),
        Format::Json => output::out(&json::render(&plan)),
    }
    if !posted(args, || markdown::render_within(&plan, args.max_bytes)) {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::from(if plan.has_changes() { 2 } else { 0 }))
}

/// With `--post`: posts the comment `markdown` renders; whether that went
/// well (a refusal is reported on stderr).
fn posted(args: &PlanArgs, markdown: impl FnOnce() -> String) -> bool {
    let Some(forge) = args.post else { return true };
    match post::post(forge, &markdown(), &|name| std::env::var(name).ok()) {
        Ok(done) => {
            output::info(&format!("--post: {done}"));
            true
        }
        Err(e) => {
            output::error(&format!("{e:#}"));
            false
        }
    }
}

/// `plan --live`: the round as a dry run against the live fleet.
fn run_live(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    let Some(report) = live::round(&args.repo, args.path.as_deref(), Some(&args.head), &args.round, true)? else {
        return Ok(ExitCode::from(1));
    };
    match args.output {
        Format::Text => output::out_plan(&report.render_text()),
        Format::Markdown => output::out(&report.render_markdown(args.max_bytes)),
        Format::Json => output::out(&report.render_json()),
    }
    if !posted(args, || report.render_markdown(args.max_bytes)) {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::from(match (report.failed(), report.has_changes()) {
        (true, _) => 1,
        (false, true) => 2,
        (false, false) => 0,
    }))
}
