//! The first stage over many revisions: every distinct config file (same
//! path, same bytes) is parsed once, on as many threads as there are cores.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::{is_config_path, yaml};
use crate::diagnostic::Diagnostic;
use crate::source::{Snapshot, SourceFile};

/// One revision's config files: path and documents (or the syntax error).
pub type Parsed<'s> = Vec<(&'s str, FileDocuments)>;

/// A file's documents, or its syntax error. Documents are shared, never
/// copied, between the revisions that hold the same file: each revision's
/// rules read them (the model copies out only what it keeps as written:
/// MachineSets, mirror sets), and a document is freed when no revision
/// holds it any more.
pub type FileDocuments = Result<Vec<Arc<Value>>, Diagnostic>;

/// Parse results by (path, content).
pub struct Distinct<'s> {
    results: HashMap<(&'s str, &'s [u8]), FileDocuments>,
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
                        let result = result.unwrap_or_else(|| {
                            Err(Diagnostic::at(&f.path, 1, 1, "internal error: this file could not be parsed"))
                        });
                        (f.path.as_str(), result)
                    })
                    .collect()
            })
            .collect()
    }
}

fn config_files(snapshot: &Snapshot) -> impl Iterator<Item = &SourceFile> {
    snapshot.files.iter().filter(|f| is_config_path(&f.path))
}

/// Parses every distinct config file of the snapshots.
pub fn parse_distinct<'s>(snapshots: &[&'s Snapshot]) -> Distinct<'s> {
    let mut files: Vec<&'s SourceFile> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for snapshot in snapshots {
        for file in config_files(snapshot) {
            if seen.insert((file.path.as_str(), file.bytes.as_slice())) {
                files.push(file);
            }
        }
    }
    // Largest first, dealt round-robin: a cheap balance of the threads.
    files.sort_by_key(|f| std::cmp::Reverse(f.bytes.len()));
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len().max(1));
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let mine: Vec<&SourceFile> = files.iter().skip(w).step_by(workers).copied().collect();
                scope.spawn(move || {
                    mine.into_iter().map(|f| ((f.path.as_str(), f.bytes.as_slice()), parse_file(f))).collect::<Vec<_>>()
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
