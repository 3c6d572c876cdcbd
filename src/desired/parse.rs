//! The first stage over many revisions: every distinct config file (same
//! path, same bytes) is parsed once, and its documents checked once
//! (stages two and three, [`checked`]), on as many threads as there are cores.

use std::sync::Arc;

use serde_json::Value;

use super::checked::{self, Shared};
use super::{DEFAULT_STATUS_PATH, is_config_path, is_under, yaml};
use crate::diagnostic::Diagnostic;
use crate::source::{Snapshot, SourceFile};

/// One revision's config files: path, documents (or the syntax error), and
/// the documents checked ahead.
pub type Parsed<'s> = Vec<(&'s str, FileDocuments, Arc<Shared>)>;

/// A file's documents, or its syntax error. Documents are shared, never
/// copied, between the revisions that hold the same file: each revision's
/// rules read them (the model copies out only what it keeps as written:
/// MachineSets, mirror sets), and a document is freed when no revision
/// holds it any more.
pub type FileDocuments = Result<Vec<Arc<Value>>, Diagnostic>;

/// A distinct file: its path and contents.
type Key<'s> = (&'s str, &'s [u8]);

/// Maps keyed by whole files: hashed with foldhash, since SipHash over both
/// revisions' contents (twice: counting, then looking up) cost a 10,000-instance
/// plan about 1% of its CPU time, on the main thread.
type HashMap<K, V> = foldhash::HashMap<K, V>;

/// Parse results by (path, content).
pub struct Distinct<'s> {
    results: HashMap<Key<'s>, (FileDocuments, Arc<Shared>)>,
}

impl<'s> Distinct<'s> {
    /// Each snapshot's parsed config files, in the order of `snapshots`.
    /// The cache itself is dropped here, so a document is freed as soon as
    /// the last revision that holds it has done with it.
    pub fn into_snapshots(self, snapshots: &[&'s Snapshot]) -> Vec<Parsed<'s>> {
        snapshots
            .iter()
            .map(|snapshot| {
                config_files(snapshot)
                    .map(|f| {
                        let result = self.results.get(&(f.path.as_str(), f.bytes.as_slice())).cloned();
                        // A parser thread that died must not make a file silently vanish.
                        let (result, shared) = result.unwrap_or_else(|| {
                            let error = Diagnostic::at(&f.path, 1, 1, "internal error: this file could not be parsed");
                            (Err(error), Arc::default())
                        });
                        (f.path.as_str(), result, shared)
                    })
                    .collect()
            })
            .collect()
    }
}

fn config_files(snapshot: &Snapshot) -> impl Iterator<Item = &SourceFile> {
    snapshot.files.iter().filter(|f| is_config_path(&f.path))
}

/// Parses every distinct config file of the snapshots, and checks its
/// documents too when `ahead` (else each revision checks its own files).
pub fn parse_distinct<'s>(snapshots: &[&'s Snapshot], ahead: bool) -> Distinct<'s> {
    let mut files: Vec<&'s SourceFile> = Vec::new();
    let mut users: HashMap<Key<'s>, usize> = HashMap::default();
    for snapshot in snapshots {
        for file in config_files(snapshot) {
            let count = users.entry((file.path.as_str(), file.bytes.as_slice())).or_default();
            if *count == 0 {
                files.push(file);
            }
            *count += 1;
        }
    }
    // Largest first, dealt round-robin: a cheap balance of the threads.
    files.sort_by_key(|f| std::cmp::Reverse(f.bytes.len()));
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len().max(1));
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let mine: Vec<&SourceFile> = files.iter().skip(w).step_by(workers).copied().collect();
                let users = &users;
                scope.spawn(move || {
                    mine.into_iter()
                        .map(|f| {
                            let key = (f.path.as_str(), f.bytes.as_slice());
                            let parsed = parse_file(f);
                            let checked = if ahead { check(f, &parsed) } else { None };
                            let parsed = slimmed(parsed, checked.as_deref());
                            let shared = Shared::new(users.get(&key).copied().unwrap_or(1), checked);
                            (key, (parsed, Arc::new(shared)))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    Distinct { results }
}

/// The largest configuration file read, in bytes: a larger one is refused
/// before it is parsed. A parsed value takes several times its text in
/// memory (a 50 MB scalar once made `validate` peak at 378 MiB), and no
/// configuration needs that much: split such a file.
pub const MAX_FILE_BYTES: usize = 16 << 20;

/// The file's documents checked ahead; not for a file in the default
/// status directory, winfleet's own output (a revision whose Fleet names
/// another status directory checks such a file itself).
fn check(file: &SourceFile, parsed: &FileDocuments) -> Option<Vec<checked::Checked>> {
    let docs = parsed.as_ref().ok().filter(|_| !is_under(&file.path, DEFAULT_STATUS_PATH))?;
    Some(checked::check_file(&file.path, std::str::from_utf8(&file.bytes).ok(), docs))
}

/// The file's documents as their checks keep them: a document checked
/// ahead is read no further as written (its revision takes the checked
/// one), so it is kept as slim as its check keeps it (see
/// `checked::slim`), and a large instance list's tree is freed here.
fn slimmed(parsed: FileDocuments, checked: Option<&[checked::Checked]>) -> FileDocuments {
    match (parsed, checked) {
        (Ok(docs), Some(checked)) if docs.len() == checked.len() => {
            Ok(docs.iter().zip(checked).map(|(doc, c)| Arc::clone(c.raw().unwrap_or(doc))).collect())
        }
        (parsed, _) => parsed,
    }
}

fn parse_file(file: &SourceFile) -> FileDocuments {
    if file.bytes.len() > MAX_FILE_BYTES {
        let message = format!(
            "the file is {} bytes, more than the {} MiB winfleet reads in one configuration file; split it into \
             several files",
            file.bytes.len(),
            MAX_FILE_BYTES >> 20
        );
        return Err(Diagnostic::at(&file.path, 1, 1, message));
    }
    match std::str::from_utf8(&file.bytes) {
        Ok(text) => yaml::parse_documents(&file.path, text).map(|docs| docs.into_iter().map(Arc::new).collect()),
        Err(e) => {
            let good = &file.bytes[..e.valid_up_to()];
            let line = good.iter().filter(|b| **b == b'\n').count() + 1;
            let column = good.len() - good.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1) + 1;
            let bad = file.bytes.get(e.valid_up_to()).copied().unwrap_or_default();
            let message = format!(
                "not valid UTF-8: byte 0x{bad:02X} at offset {} starts no UTF-8 character; save the file as UTF-8",
                e.valid_up_to()
            );
            Err(Diagnostic::at(&file.path, line, column, message))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Snapshot;

    fn snapshot(files: &[(&str, &str)]) -> Snapshot {
        let files = files.iter().map(|(p, t)| SourceFile { path: (*p).to_owned(), bytes: t.as_bytes().to_vec() });
        Snapshot { files: files.collect(), ..Snapshot::default() }
    }

    /// An instance list checked ahead keeps, as written, only what says
    /// which document it is, in the parse cache and in its typed document
    /// alike: its tree is freed on the parser thread. Other kinds keep
    /// theirs (their rules read it).
    #[test]
    fn an_instance_list_checked_ahead_keeps_only_its_identity_as_written() {
        let list = "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: a\nspec:\n  \
                    instances:\n  - address: win-1.corp.example\n    username: Administrator\n";
        let proxy = "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  \
                     httpProxy: http://proxy.corp.example:3128\n";
        let snap = snapshot(&[("instances/a.yaml", list), ("proxy.yaml", proxy)]);
        let parsed = parse_distinct(&[&snap], true).into_snapshots(&[&snap]).remove(0);
        for (path, docs, shared) in parsed {
            let docs = docs.expect("parsed");
            let checked = shared.take().expect("checked ahead");
            let raw = checked[0].raw().expect("accepted");
            assert!(Arc::ptr_eq(raw, &docs[0]), "{path}: the cache holds the checked document's own value");
            let spec = raw.get("spec").is_some();
            assert_eq!(spec, path == "proxy.yaml", "{path}: {raw}");
            assert!(raw.pointer("/metadata/name").is_some(), "{path}");
        }
    }
}
