//! `winfleet status`: the status files of the status branch, as a summary
//! and two tables, or as versioned JSON.

use std::fmt::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use clap::ValueEnum;
use serde::Serialize;
use winfleet::source::transport::{fetch, redact_url};
use winfleet::status::model::{
    ConditionType, InstancePhase, InstanceStatus, MachineSetPhase, MachineSetStatus, RoundResult, Status, Summary,
};
use winfleet::status::read::{Published, read_branch};
use winfleet::status::summary::{instance_counts, machine_set_counts};
use winfleet::status::{from_files, redact};

use super::{StatusArgs, output};

/// How the status is printed.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StatusFormat {
    /// A summary and a table per kind.
    Table,
    /// Versioned JSON (`formatVersion`, `summary`, `instances`, `machineSets`).
    Json,
}

/// Exit code when something is not Ready or the newest revision is invalid.
const NOT_READY: u8 = 3;

pub fn run(args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let published = match &args.repo_url {
        Some(url) => from_remote(url, args)?,
        None => read_branch(&args.repo, &args.branch, &args.path)?,
    };
    let status = from_files(&published.files);
    match args.output {
        StatusFormat::Table => output::out_status(&table(&status)),
        StatusFormat::Json => output::out(&json(&status, &published.refname, &published.commit)),
    }
    Ok(if all_ready(&status) { ExitCode::SUCCESS } else { ExitCode::from(NOT_READY) })
}

/// Fetches only the status branch into a scratch bare repository and reads it.
fn from_remote(url: &str, args: &StatusArgs) -> anyhow::Result<Published> {
    let scratch = std::env::temp_dir().join(format!("winfleet-status-{}-{}", std::process::id(), fastrand::u64(..)));
    let result = (|| {
        let repo = git2::Repository::init_bare(&scratch)
            .with_context(|| format!("cannot create a scratch repository in {}", scratch.display()))?;
        let auth = args.git.auth();
        let refspec = format!("+refs/heads/{0}:refs/heads/{0}", args.branch);
        fetch(&repo, url, &[&refspec], &auth)
            .with_context(|| format!("cannot fetch {} from {}", args.branch, redact_url(url)))?;
        Ok(read_branch(&scratch, &args.branch, &args.path)?)
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

/// Everything Ready, the last round not failed (in whole or in part) and no
/// deconfigure held back by the mass-removal guard.
fn all_ready(status: &Status) -> bool {
    status.summary.invalid.is_none()
        && !matches!(status.summary.last_round, RoundResult::Failed | RoundResult::PartiallyFailed)
        && status.summary.deconfigure_refused.is_none()
        && status.instances.values().all(|i| i.phase == InstancePhase::Ready)
        && status.machine_sets.values().all(|m| m.phase == MachineSetPhase::Ready)
}

fn table(status: &Status) -> String {
    let s = &status.summary;
    let i = instance_counts(&status.instances);
    let m = machine_set_counts(&status.machine_sets);
    let mut out = String::new();
    let _ = writeln!(out, "Applied revision:   {}", s.last_applied_revision.as_deref().unwrap_or("(none)"));
    let _ = writeln!(out, "Attempted revision: {}", s.last_attempted_revision.as_deref().unwrap_or("(none)"));
    let _ = writeln!(out, "Last round:         {:?}", s.last_round);
    if let Some(suspended) = &s.suspended {
        let since = short(Some(&suspended.since_revision));
        let _ = writeln!(out, "Suspended:          since {since}, by {}; nothing is changed", one_line(&suspended.by));
    }
    let _ = writeln!(
        out,
        "Instances:          {} ready, {} progressing, {} drifted, {} waiting, {} failed, {} unknown",
        i.ready, i.progressing, i.drifted, i.waiting, i.failed, i.unknown
    );
    let _ = writeln!(
        out,
        "MachineSets:        {} ready, {} progressing, {} drifted, {} conflict, {} failed, {} unknown",
        m.ready, m.progressing, m.drifted, m.conflict, m.failed, m.unknown
    );
    if let Some(invalid) = &s.invalid {
        let _ = writeln!(
            out,
            "Invalid revision {}: {} error(s); nothing of it was applied",
            short(Some(&invalid.revision)),
            invalid.errors.len()
        );
        for error in &invalid.errors {
            let _ = writeln!(out, "  {}", one_line(error));
        }
    }
    if let Some(reason) = &s.deconfigure_refused {
        let _ = writeln!(out, "Deconfigure refused: {}", one_line(reason));
    }
    for c in s.conditions.iter().filter(|c| c.status) {
        let _ = writeln!(out, "{:?}:   {}", c.kind, one_line(&c.message));
    }
    for leaving in &s.leaving {
        let why = leaving.reason.as_deref().map(|r| format!(": {}", one_line(r))).unwrap_or_default();
        let _ = writeln!(out, "Leaving:            {} ({}) {}{why}", leaving.node, leaving.address, leaving.state);
    }
    let instances: Vec<[String; 5]> = status
        .instances
        .values()
        .map(|i| {
            let node = i.node.clone().unwrap_or_else(|| "-".to_owned());
            [
                i.address.clone(),
                format!("{:?}", i.phase),
                node,
                short(i.applied_revision.as_deref()),
                instance_message(i),
            ]
        })
        .collect();
    out.push('\n');
    out.push_str(&columns(["ADDRESS", "PHASE", "NODE", "REVISION", "MESSAGE"], &instances));
    let machine_sets: Vec<[String; 4]> = status
        .machine_sets
        .values()
        .map(|m| {
            [m.name.clone(), format!("{:?}", m.phase), short(m.applied_revision.as_deref()), machine_set_message(m)]
        })
        .collect();
    if !machine_sets.is_empty() {
        out.push('\n');
        out.push_str(&columns(["MACHINESET", "PHASE", "REVISION", "MESSAGE"], &machine_sets));
    }
    out
}

fn instance_message(i: &InstanceStatus) -> String {
    let ready = i.condition(ConditionType::Ready).map(|c| c.message.as_str()).unwrap_or_default();
    message(i.last_error.as_deref(), ready, &i.drift)
}

fn machine_set_message(m: &MachineSetStatus) -> String {
    let ready = m.condition(ConditionType::Ready).map(|c| c.message.as_str()).unwrap_or_default();
    message(m.last_error.as_deref(), ready, &m.drift)
}

/// The last error, else the Ready condition's message, then the drift.
fn message(error: Option<&str>, ready: &str, drift: &[String]) -> String {
    let mut text = one_line(error.unwrap_or(ready));
    if !drift.is_empty() && error.is_none() {
        let lines: Vec<String> = drift.iter().map(|d| one_line(d)).collect();
        text = if text.is_empty() { lines.join("; ") } else { format!("{text}: {}", lines.join("; ")) };
    }
    text
}

/// The first line, control characters shown as `?`: the files may have
/// been edited by hand, and a terminal must not run what they carry.
/// Generic credential shapes are redacted again for the same reason.
fn one_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    redact(first, &[]).chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

fn short(revision: Option<&str>) -> String {
    revision.map_or_else(|| "-".to_owned(), |r| r.chars().take(7).collect())
}

/// Left-aligned columns two spaces apart; the last column is not padded.
fn columns<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header = header.map(str::to_owned);
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (k, cell) in row.iter().enumerate() {
            if k + 1 == N {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ", width = widths[k]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    format_version: u32,
    /// The reference read and its commit.
    source: Source<'a>,
    summary: &'a Summary,
    instances: Vec<&'a InstanceStatus>,
    machine_sets: Vec<&'a MachineSetStatus>,
}

#[derive(Serialize)]
struct Source<'a> {
    #[serde(rename = "ref")]
    refname: &'a str,
    commit: &'a str,
}

fn json(status: &Status, refname: &str, commit: &str) -> String {
    let document = Document {
        format_version: STATUS_FORMAT_VERSION,
        source: Source { refname, commit },
        summary: &status.summary,
        instances: status.instances.values().collect(),
        machine_sets: status.machine_sets.values().collect(),
    };
    let mut text = serde_json::to_string_pretty(&document).unwrap_or_default();
    text.push('\n');
    text
}

/// The version of `winfleet status --output json`, apart from the plan's.
const STATUS_FORMAT_VERSION: u32 = 1;
