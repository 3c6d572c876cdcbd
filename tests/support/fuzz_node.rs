//! The node-side half of the loader fuzz pass (issue 35): the values the
//! renderers and the plan reach are mutated inside documents that stay
//! well-formed (the services manifest's fields, the payload's file names,
//! MachineSet fields), and whatever the loader accepts is rendered (every
//! node's observe, prepare and apply scripts, the lifecycle plan) and
//! planned (the offline dry-run plan against the unmutated revision, in
//! text, Markdown and JSON). None of it may panic. Used by
//! tests/fuzz_loader.rs (the CI's daily pass) and benches/fuzz.rs.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use winfleet::desired::{Desired, LoadOptions, load};
use winfleet::dialect::{self, ObserveList};
use winfleet::lifecycle::Mode;
use winfleet::lifecycle::facts::LifecycleFacts;
use winfleet::lifecycle::plan::{Context, plan_lifecycle};
use winfleet::node::facts::NodeFacts;
use winfleet::node::plan::plan_node;
use winfleet::plan::{json, markdown, offline, text};
use winfleet::source::{Snapshot, SourceFile};

/// The node-side mutation kinds.
pub const NODE_KINDS: [&str; 3] = ["services manifest field", "payload file name", "MachineSet field"];

/// Values a field is given: structure characters of every renderer,
/// invisible characters, numbers where strings are, and the huge.
const VALUES: &[&str] = &[
    "",
    " ",
    "kubelet\nExecStartPost=/bin/sh -c id",
    "x\r\n[Service]\nExecStartPre=/bin/evil",
    "50% %n %h %%",
    "$HOME ${PATH} $$ `id` $(id)",
    "'); Remove-Item C:\\ -Recurse #",
    "\"+$(Stop-Computer)+\"",
    "nul\0x",
    "rtl\u{202e}exe.txt",
    "..\\..\\Windows\\System32",
    "../../etc/passwd",
    "C:\\",
    "/",
    "{.metadata.name}",
    "{.metadata.annotations.a\\.b/c}",
    "{range .items[*]}{end}",
    "NODE_NAME NODE_NAME",
    "-oProxyCommand=x",
    "tail\\",
    "é ünï 中文",
    "0",
    "-1",
    "18446744073709551616",
];

/// Documents of a YAML file, or None when it does not parse.
fn documents(file: &SourceFile) -> Option<Vec<Value>> {
    let text = std::str::from_utf8(&file.bytes).ok()?;
    winfleet::desired::yaml::parse_documents(&file.path, text).ok()
}

/// Every string or number leaf of `value` (JSON pointers), skipping keys
/// the loader needs to recognise the document.
fn leaves(value: &Value, at: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if at.is_empty() && (k == "apiVersion" || k == "kind") {
                    continue;
                }
                leaves(v, &format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| leaves(v, &format!("{at}/{i}"), out)),
        Value::String(_) | Value::Number(_) | Value::Bool(_) => out.push(at.to_owned()),
        Value::Null => {}
    }
}

/// A random replacement for a leaf: one of [`VALUES`], the old value with
/// one of them appended, a number, or a 100,000-character string.
fn replacement(rng: &mut fastrand::Rng, old: &Value) -> Value {
    let pick = VALUES[rng.usize(0..VALUES.len())];
    match rng.usize(0..6) {
        0 => Value::from(rng.i64(..)),
        1 => Value::String(format!("{}{pick}", old.as_str().unwrap_or_default())),
        2 => Value::String("w".repeat(100_000)),
        _ => Value::String(pick.to_owned()),
    }
}

/// Replaces one random leaf of `doc` under `under`; false when it has none.
fn mutate_leaf(rng: &mut fastrand::Rng, doc: &mut Value, under: &str) -> bool {
    let mut found = Vec::new();
    if let Some(root) = doc.pointer(under) {
        leaves(root, under, &mut found);
    }
    let Some(at) = found.get(rng.usize(0..found.len().max(1))).cloned() else { return false };
    let old = doc.pointer(&at).cloned().unwrap_or_default();
    if let Some(slot) = doc.pointer_mut(&at) {
        *slot = replacement(rng, &old);
    }
    true
}

/// Mutates a JSON text held in a ConfigMap's data (`services`, `files`).
fn mutate_embedded(rng: &mut fastrand::Rng, doc: &mut Value, key: &str) -> bool {
    let Some(text) = doc.pointer(&format!("/data/{key}")).and_then(Value::as_str) else { return false };
    let Ok(mut inner) = serde_json::from_str::<Value>(text) else { return false };
    if inner.as_array().is_some_and(Vec::is_empty) {
        // WMCO lists the payload's files; give the fuzzer one to work on.
        inner = serde_json::json!([{ "path": "kubelet.exe", "checksum": "0".repeat(64) }]);
    }
    if !mutate_leaf(rng, &mut inner, "") {
        return false;
    }
    doc["data"][key] = Value::String(inner.to_string());
    true
}

/// Applies node-side mutation `kind` to one fitting file of `snapshot`;
/// returns the file's path and the mutated snapshot, or None when the
/// snapshot has nothing that kind mutates.
pub fn mutate(rng: &mut fastrand::Rng, kind: usize, snapshot: &Snapshot) -> Option<(String, Snapshot)> {
    let wanted = |doc: &Value| {
        let name = doc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        match kind {
            0 | 1 => doc["kind"] == "ConfigMap" && name.starts_with("windows-services-"),
            _ => doc["kind"] == "MachineSet",
        }
    };
    let candidates: Vec<(&SourceFile, Vec<Value>)> = snapshot
        .files
        .iter()
        .filter(|f| winfleet::desired::is_config_path(&f.path))
        .filter_map(|f| documents(f).map(|docs| (f, docs)))
        .filter(|(_, docs)| docs.iter().any(wanted))
        .collect();
    let (file, mut docs) = candidates.into_iter().next()?;
    let index = docs.iter().position(wanted)?;
    let doc = &mut docs[index];
    let changed = match kind {
        0 => mutate_embedded(rng, doc, "services"),
        1 => mutate_embedded(rng, doc, "files"),
        _ => mutate_leaf(rng, doc, ""),
    };
    if !changed {
        return None;
    }
    // JSON is YAML: every value travels escaped.
    let text: Vec<String> = docs.iter().map(Value::to_string).collect();
    let mut out = snapshot.clone();
    let path = file.path.clone();
    if let Some(f) = out.files.iter_mut().find(|f| f.path == path) {
        f.bytes = text.join("\n---\n").into_bytes();
    }
    Some((path, out))
}

/// Renders and plans what `head` wants (against `base`); panics are the
/// caller's to catch.
pub fn render_and_plan(base: Option<&Desired>, head: &Desired) {
    let plan = offline::plan(base, head);
    let _ = (text::render(&plan), markdown::render(&plan), json::render(&plan));
    let facts = NodeFacts::default();
    let lifecycle_facts = LifecycleFacts::default();
    for spec in head.specs.values() {
        let changes = plan_node(spec, &facts);
        let lifecycle = spec
            .lifecycle
            .as_ref()
            .map(|l| plan_lifecycle(l, &lifecycle_facts, Context { mode: Mode::Join, node: None, disrupt: true }));
        let lifecycle_changes: Vec<_> =
            lifecycle.as_ref().map(|p| p.changes.iter().enumerate().collect()).unwrap_or_default();
        let list = ObserveList { files: vec![], variables: vec![], record: true, containers: true };
        let _ = dialect::observe(spec, Some(&list));
        let _ = dialect::prepare(spec, &lifecycle_changes);
        let _ = dialect::apply(spec, &facts, &changes, &lifecycle_changes);
    }
}

/// One node-side case: load the mutated revision and, when it is valid,
/// render and plan it (from `base`, from itself and from nothing): Ok(true)
/// when it was valid and rendered. Err with the panic's message.
pub fn check(base: Option<&Desired>, mutated: &Snapshot) -> Result<bool, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let Some(head) = load(mutated, LoadOptions::default()).desired else { return false };
        render_and_plan(base, &head);
        render_and_plan(Some(&head), &head);
        render_and_plan(None, &head);
        true
    }))
    .map_err(|p| {
        let message = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()));
        format!("panicked: {}", message.unwrap_or_default())
    })
}

/// Runs `cases` seeded node-side cases over the corpus of
/// [`super::fuzz::corpus`]; returns (cases run, cases valid and rendered,
/// findings).
pub fn run(seed: u64, cases: usize) -> (usize, usize, Vec<String>) {
    let corpus: Vec<(String, Snapshot, Option<Desired>)> = super::fuzz::corpus()
        .into_iter()
        .map(|(name, snapshot)| {
            let desired = load(&snapshot, LoadOptions::default()).desired;
            (name, snapshot, desired)
        })
        .collect();
    let mut rng = fastrand::Rng::with_seed(seed);
    let (mut run, mut rendered, mut findings) = (0, 0, Vec::new());
    for case in 0..cases {
        let kind = case % NODE_KINDS.len();
        let (name, snapshot, base) = &corpus[rng.usize(0..corpus.len())];
        let Some((path, mutated)) = mutate(&mut rng, kind, snapshot) else { continue };
        run += 1;
        match check(base.as_ref(), &mutated) {
            Ok(valid) => rendered += usize::from(valid),
            Err(e) => findings.push(format!("case {case} ({}, {name}/{path}): {e}", NODE_KINDS[kind])),
        }
    }
    (run, rendered, findings)
}
