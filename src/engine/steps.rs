//! The IO steps of one node's apply: the preparation script (lifecycle
//! directories, upload staging), the SFTP uploads, then the apply script
//! (registries, environment and the rest of the lifecycle), each change's
//! outcome read back from the script that ran it.

use super::report::Stage;
use super::{NodeContext, explain};
use crate::dialect::{self, ObserveList, posix_lifecycle::staged};
use crate::lifecycle::change::LifecycleChange;
use crate::lifecycle::facts::HashCache;
use crate::lifecycle::{LifecycleSpec, Mode, resolve};
use crate::node::NodeSpec;
use crate::node::facts::NodeFacts;
use crate::node::outcome::{ApplyReport, Outcome, parse_report};
use crate::node::plan::Change;
use crate::ssh::sftp::{Packed, Upload, wire};
use crate::ssh::{Conversation, Pool, Target};

/// What the observation asks about the lifecycle: every payload and
/// generated file with the stat key of its known hash, and the pre-scripts
/// that give variables (their node arguments resolved when the Node is
/// known; a pre-script that cannot be resolved yet is not run).
pub fn observe_list(spec: &LifecycleSpec, known: &HashCache, context: &NodeContext) -> ObserveList {
    let paths = spec.files.iter().map(|f| &f.path).chain(spec.generated.iter().map(|g| &g.path));
    let files = paths.map(|p| (p.clone(), known.get(p).map(|(key, _)| key.clone()).unwrap_or_default())).collect();
    // A leaving node runs no pre-script.
    let leaving = context.mode == Some(Mode::Deconfigure);
    let variables = spec
        .services
        .iter()
        .filter(|_| !leaving)
        .flat_map(|s| s.pre_scripts.iter().map(move |p| (s, p)))
        .filter_map(|(s, p)| {
            let variable = p.variable.clone()?;
            let script = resolve::pre_script(p, context.node.as_ref()).ok()?;
            Some((s.name.clone(), variable, script))
        })
        .collect();
    let record = matches!(context.mode, Some(Mode::Upgrade | Mode::Deconfigure));
    let containers = matches!(context.mode(), Mode::Prepare | Mode::Join);
    ObserveList { files, variables, record, containers }
}

/// One node's apply.
pub struct Work<'a> {
    /// The pool.
    pub pool: &'a Pool,
    /// The node's shell, which its scripts share.
    pub conversation: &'a tokio::sync::Mutex<Conversation>,
    /// The node.
    pub target: &'a Target,
    /// Its spec.
    pub spec: &'a NodeSpec,
    /// What was observed.
    pub facts: &'a NodeFacts,
    /// Registry and environment changes (indexes first).
    pub changes: &'a [Change<'a>],
    /// Lifecycle changes (indexes after the others).
    pub lifecycle: &'a [LifecycleChange<'a>],
}

/// What an apply did.
#[derive(Debug)]
pub struct Applied {
    /// One outcome per change, registry changes first.
    pub outcomes: Vec<Outcome>,
    /// Bytes sent over SFTP (a compressed file's encoded bytes).
    pub uploaded: u64,
}

/// Runs the steps; an `Err` is a node failure at a stage.
pub async fn apply(work: &Work<'_>) -> Result<Applied, (Stage, String)> {
    let base = work.changes.len();
    let total = base + work.lifecycle.len();
    let indexed: Vec<(usize, &LifecycleChange<'_>)> =
        work.lifecycle.iter().enumerate().map(|(j, c)| (base + j, c)).collect();
    let mut outcomes: Vec<Option<Outcome>> = vec![None; total];
    if let Some(script) = dialect::prepare(work.spec, &indexed) {
        let prepared = run(work, &script, total).await?.outcomes;
        for (i, change) in &indexed {
            if change.is_preparation() {
                outcomes[*i] = Some(prepared[*i].clone());
            }
        }
    }
    let shell = work.spec.shell;
    // Each file's encoding at once: the first node of a round to need a new
    // payload compresses it on every core, not file after file on one
    // (the others wait for the same encodings).
    let packing = work.lifecycle.iter().filter_map(|change| match change {
        LifecycleChange::Upload { file, .. } => Some(async move {
            let upload = Upload { source: file.source.clone(), remote: staged(&file.path, shell), mode: file.mode };
            Packed { upload, gzip: wire::packed(&file.source, &file.sha256).await }
        }),
        _ => None,
    });
    let uploads: Vec<Packed> = futures::future::join_all(packing).await;
    let mut uploaded = 0;
    if !uploads.is_empty() {
        uploaded =
            work.pool.upload(work.target, &uploads).await.map_err(|e| {
                (Stage::Upload, format!("{e}; the next round re-observes and uploads what did not arrive"))
            })?;
    }
    let rest: Vec<(usize, &LifecycleChange<'_>)> =
        indexed.iter().filter(|(_, c)| !c.is_preparation()).copied().collect();
    if base > 0 || !rest.is_empty() {
        let script = dialect::apply(work.spec, work.facts, work.changes, &rest);
        let report = run(work, &script, total).await?;
        remember_uploads(work, &report.keys);
        for (i, outcome) in report.outcomes.into_iter().enumerate() {
            let from_main = i < base || rest.iter().any(|(j, _)| *j == i);
            if from_main {
                outcomes[i] = Some(outcome);
            }
        }
    }
    let outcomes =
        outcomes.into_iter().map(|o| o.unwrap_or_else(|| Outcome::Failed("no outcome reported".into()))).collect();
    Ok(Applied { outcomes, uploaded })
}

/// The uploaded files are known by their new stat keys: the next
/// observation need not hash them.
fn remember_uploads(work: &Work<'_>, keys: &[(String, String)]) {
    let mut cache = work.pool.known_hashes(work.target);
    for (path, key) in keys {
        let uploaded = work.lifecycle.iter().find_map(|c| match c {
            LifecycleChange::Upload { file, .. } if &file.path == path => Some(file.sha256.clone()),
            _ => None,
        });
        if let Some(sha) = uploaded {
            cache.insert(path.clone(), (key.clone(), sha));
        }
    }
    work.pool.remember_hashes(work.target, cache);
}

async fn run(work: &Work<'_>, script: &dialect::Script, total: usize) -> Result<ApplyReport, (Stage, String)> {
    let output = work.pool.exchange(&mut *work.conversation.lock().await, script, false).await;
    match output {
        Ok(output) => parse_report(&output.stdout, total).map_err(|e| (Stage::Apply, explain(&e.to_string(), &output))),
        Err(e) => Err((Stage::Apply, format!("{e}; the next round re-observes and converges"))),
    }
}
