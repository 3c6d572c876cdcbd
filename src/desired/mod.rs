//! The desired state: load every document of a revision, validate it in four
//! stages, and render what each node and the cluster should look like.
//!
//! Stages: YAML syntax → JSON Schema → typed parse →
//! semantic rules across documents. Every diagnostic is collected, located
//! (`path:line:column: /pointer`), and reported at once; a revision with any
//! error yields no [`Desired`] at all, so nothing of it can be applied. This
//! module does no IO: it reads a [`Snapshot`] that `source` produced.

mod checked;
pub mod keys;
pub mod kinds;
pub mod model;
mod parse;
pub mod rules;
pub mod schema;
pub mod string_map;
pub mod typed;
pub mod yaml;
mod yaml_scalar;
mod yaml_value;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

pub use model::{Desired, FleetSettings, Instance, MachineSetDesired};
pub use parse::MAX_FILE_BYTES;

use crate::diagnostic::{self, Diagnostic};
use crate::render::pull_secret::PullSecret;
use crate::source::Snapshot;
use kinds::Kind;

/// The status directory when no Fleet names another.
pub const DEFAULT_STATUS_PATH: &str = "status";

/// Inputs to rendering that do not come from the repository.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadOptions<'a> {
    /// Registry credentials for the `authorization` headers (decision 6).
    pub pull_secret: Option<&'a PullSecret>,
}

/// The result of loading a revision: the desired state when it is valid,
/// and every diagnostic (errors and warnings), sorted and located.
#[derive(Debug)]
pub struct Loaded {
    /// `Some` only when there is no error.
    pub desired: Option<Desired>,
    /// All findings, errors and warnings.
    pub diagnostics: Vec<Diagnostic>,
    /// The status directory skipped as winfleet's own output (the single
    /// Fleet's `spec.status.path`, else the default), valid or not: what
    /// a commit may touch without changing what is applied.
    pub status_path: String,
}

impl Loaded {
    /// A load that could not finish (an internal error, never bad input).
    fn failed() -> Self {
        let message = "internal error: loading this revision failed; please report it as a winfleet bug";
        let diagnostics = vec![Diagnostic::at("", 1, 1, message)];
        Loaded { desired: None, diagnostics, status_path: DEFAULT_STATUS_PATH.to_owned() }
    }

    /// Number of errors.
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }
}

/// A document that passed schema and typed parse.
#[derive(Clone, Debug)]
pub struct Doc<T> {
    /// Repository path of its file.
    pub path: String,
    /// Index of the document in the file.
    pub index: usize,
    /// The typed document.
    pub value: T,
    /// The document as written (shared with the parse cache and with any
    /// other revision that holds the same file).
    pub raw: Arc<Value>,
}

impl<T> Doc<T> {
    /// An error about a field of this document.
    pub fn error(&self, pointer: impl Into<String>, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(&self.path, self.index, pointer, message)
    }

    /// A warning about a field of this document.
    pub fn warning(&self, pointer: impl Into<String>, message: impl Into<String>) -> Diagnostic {
        Diagnostic::warning(&self.path, self.index, pointer, message)
    }
}

/// Every typed document of a revision, by kind, in path then document order.
#[derive(Debug, Default)]
pub struct Documents {
    /// `windows-instances` ConfigMaps.
    pub configmaps: Vec<Doc<kinds::configmap::InstancesConfigMap>>,
    /// `windows-services-*` ConfigMaps.
    pub services: Vec<Doc<kinds::services::ServicesConfigMap>>,
    /// WindowsInstanceLists.
    pub instance_lists: Vec<Doc<kinds::instances::WindowsInstanceList>>,
    /// MachineSets.
    pub machine_sets: Vec<Doc<kinds::machineset::MachineSet>>,
    /// ImageDigestMirrorSets.
    pub digest_mirrors: Vec<Doc<kinds::mirrors::ImageDigestMirrorSet>>,
    /// ImageTagMirrorSets.
    pub tag_mirrors: Vec<Doc<kinds::mirrors::ImageTagMirrorSet>>,
    /// Proxies.
    pub proxies: Vec<Doc<kinds::proxy::Proxy>>,
    /// Fleets.
    pub fleets: Vec<Doc<kinds::fleet::Fleet>>,
}

/// Loads, validates and renders one revision.
pub fn load(snapshot: &Snapshot, options: LoadOptions<'_>) -> Loaded {
    load_many(&[snapshot], options).pop().unwrap_or_else(Loaded::failed)
}

/// Loads several revisions (such as a plan's base and head) at once. A file
/// that is the same in several revisions is parsed and checked (kind,
/// schema, typed parse) once, and files and revisions are worked on in
/// parallel: the cost follows what differs between the revisions. The
/// rules across documents run on each revision whole.
pub fn load_many(snapshots: &[&Snapshot], options: LoadOptions<'_>) -> Vec<Loaded> {
    load_sharing(snapshots, options, true)
}

/// [`load_many`] with each revision checking (stages two and three) every
/// file itself, as before the checks were shared: the same result, for the
/// test that holds the two to it and the bench that compares them.
#[doc(hidden)]
pub fn load_many_checking_each(snapshots: &[&Snapshot], options: LoadOptions<'_>) -> Vec<Loaded> {
    load_sharing(snapshots, options, false)
}

fn load_sharing(snapshots: &[&Snapshot], options: LoadOptions<'_>, checks: bool) -> Vec<Loaded> {
    let parsed = parse::parse_distinct(snapshots, checks).into_snapshots(snapshots);
    std::thread::scope(|scope| {
        let handles: Vec<_> = snapshots
            .iter()
            .zip(parsed)
            .map(|(snapshot, parsed)| scope.spawn(move || load_parsed(snapshot, parsed, options)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Loaded::failed())).collect()
    })
}

fn load_parsed(snapshot: &Snapshot, parsed: parse::Parsed<'_>, options: LoadOptions<'_>) -> Loaded {
    let mut diagnostics = keys::scan(snapshot);
    for file in &snapshot.files {
        if let Some(tool) = other_tool(&file.path) {
            let note = format!("{tool}'s file, not winfleet's: skipped");
            diagnostics.push(Diagnostic::warning(&file.path, 0, "", note));
        }
    }
    let status_path = status_path(&parsed);
    fleets_in_status(&parsed, &status_path, &mut diagnostics);
    for link in snapshot.links.iter().filter(|l| is_config_path(l) && !is_under(l, &status_path)) {
        diagnostics.push(Diagnostic::at(link, 1, 1, LINK_REFUSED));
    }
    let mut documents = Documents::default();
    for (path, docs, shared) in parsed {
        // The status directory is winfleet's own output, never configuration.
        if is_under(path, &status_path) {
            continue;
        }
        match docs {
            Ok(docs) => shared
                .take()
                .unwrap_or_else(|| checked::check_file(path, text_of(snapshot, path), &docs))
                .into_iter()
                .for_each(|c| c.add(&mut documents, &mut diagnostics)),
            Err(syntax) => diagnostics.push(syntax),
        }
    }
    let desired = rules::check(documents, options, &mut diagnostics);
    locate_all(snapshot, &mut diagnostics);
    diagnostic::sort(&mut diagnostics);
    let valid = !diagnostics.iter().any(Diagnostic::is_error);
    Loaded { desired: desired.filter(|_| valid), diagnostics, status_path }
}

/// Why a symbolic link where configuration would be read is an error, not
/// a note: winfleet never follows a link (its target may lie outside the
/// repository, or differ between a checkout and the commit), so the
/// configuration its author meant would silently be missing, and missing
/// instances are removed from the fleet.
pub const LINK_REFUSED: &str = "this YAML file is a symbolic link, which winfleet does not follow (a link may point \
                                outside the repository): commit the file itself, or rename the link so it does not \
                                end in .yaml or .yml";

/// Whether a repository path is read as configuration: YAML, not under a
/// dot-directory or a dot-file, and not another tool's file ([`other_tool`]).
pub fn is_config_path(path: &str) -> bool {
    (path.ends_with(".yaml") || path.ends_with(".yml"))
        && !path.split('/').any(|c| c.starts_with('.'))
        && other_tool(path).is_none()
}

/// The tool a YAML file beside the configuration belongs to, so that the
/// same repository can also be applied by kustomize or Argo CD and carry CI
/// files: such files are skipped with a note.
pub fn other_tool(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name {
        "kustomization.yaml" | "kustomization.yml" | "Kustomization" => Some("kustomize"),
        "azure-pipelines.yml" | "azure-pipelines.yaml" => Some("Azure Pipelines"),
        "bitbucket-pipelines.yml" => Some("Bitbucket Pipelines"),
        "cloudbuild.yaml" | "cloudbuild.yml" => Some("Google Cloud Build"),
        _ => None,
    }
}

fn is_under(path: &str, dir: &str) -> bool {
    !dir.is_empty() && path.strip_prefix(dir).is_some_and(|rest| rest.starts_with('/'))
}

/// The status directory: the single Fleet's `spec.status.path`, or the default.
fn status_path(parsed: &parse::Parsed<'_>) -> String {
    let fleets: Vec<&Value> = parsed
        .iter()
        .filter_map(|(_, docs, _)| docs.as_ref().ok())
        .flatten()
        .map(|d| &**d)
        .filter(|d| kinds::identify(d) == Ok(Kind::Fleet))
        .collect();
    let path = match fleets.as_slice() {
        [fleet] => fleet.pointer("/spec/status/path").and_then(Value::as_str),
        _ => None,
    };
    normalize_dir(path.unwrap_or(DEFAULT_STATUS_PATH))
}

/// A Fleet inside the status directory would be skipped as winfleet's
/// output while deciding which directory that is: a commit touching only
/// that directory (which needs no signature when it is winfleet's, see
/// `source::signed::status_commits`) could then move it. An error.
fn fleets_in_status(parsed: &parse::Parsed<'_>, status_path: &str, diagnostics: &mut Vec<Diagnostic>) {
    for (path, docs, _) in parsed.iter().filter(|(path, _, _)| is_under(path, status_path)) {
        let docs = docs.as_ref().map(Vec::as_slice).unwrap_or_default();
        for (i, _) in docs.iter().enumerate().filter(|(_, d)| kinds::identify(d) == Ok(Kind::Fleet)) {
            let message = format!(
                "a Fleet in the status directory {status_path}/, which is winfleet's own output and never read as \
                 configuration: move it out of spec.status.path"
            );
            diagnostics.push(Diagnostic::error(path, i, "", message));
        }
    }
}

/// `./status/` → `status`.
pub fn normalize_dir(path: &str) -> String {
    path.trim_start_matches("./").trim_end_matches('/').to_owned()
}

/// The contents of the file at `path`, when they are UTF-8.
fn text_of<'s>(snapshot: &'s Snapshot, path: &str) -> Option<&'s str> {
    snapshot.files.iter().find(|f| f.path == path).and_then(|f| std::str::from_utf8(&f.bytes).ok())
}

fn locate_all(snapshot: &Snapshot, diagnostics: &mut [Diagnostic]) {
    let mut by_file: BTreeMap<String, Vec<&mut Diagnostic>> = BTreeMap::new();
    for d in diagnostics.iter_mut().filter(|d| d.document.is_some() && d.line == 0) {
        by_file.entry(d.path.clone()).or_default().push(d);
    }
    for (path, mut found) in by_file {
        let text = snapshot.files.iter().find(|f| f.path == path).and_then(|f| std::str::from_utf8(&f.bytes).ok());
        match text {
            Some(text) => yaml::locate(text, &mut found),
            None => found.iter_mut().for_each(|d| (d.line, d.column) = (1, 1)),
        }
    }
}
