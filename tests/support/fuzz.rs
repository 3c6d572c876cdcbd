//! A seeded mutation harness for the repository loader (stable toolchain):
//! every valid fixture and examples-repo, one file mutated per case, driven
//! through the entry point `winfleet validate` uses, with the loader's
//! invariants checked. Used by tests/fuzz_loader.rs (a short pass in CI)
//! and benches/fuzz.rs (a long one).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use winfleet::source::{Snapshot, SourceFile};

/// The corpus: every valid fixture repository and examples-repo.
pub fn corpus() -> Vec<(String, Snapshot)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("tests/fixtures/valid"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("repo"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.push(root.join("examples-repo"));
    dirs.into_iter()
        .map(|d| {
            let name = d.strip_prefix(root).unwrap().display().to_string();
            (name, winfleet::source::read_worktree(&d).unwrap())
        })
        .collect()
}

/// The mutation kinds.
pub const KINDS: [&str; 14] = [
    "byte flip",
    "truncation",
    "duplicated line",
    "reordered lines",
    "deep nesting",
    "alias bomb",
    "huge scalar",
    "NUL",
    "BOM",
    "CRLF",
    "tab indentation",
    "non-UTF-8",
    "many documents",
    "duplicated key",
];

/// Applies mutation `kind` to `bytes`.
pub fn mutate(rng: &mut fastrand::Rng, kind: usize, bytes: &[u8], heavy: bool) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let at = |rng: &mut fastrand::Rng, len: usize| if len == 0 { 0 } else { rng.usize(0..len) };
    let text = String::from_utf8_lossy(bytes).into_owned();
    let mut lines: Vec<&str> = text.lines().collect();
    match kind {
        0 => {
            let n = rng.usize(1..8);
            for _ in 0..n {
                let i = at(rng, out.len());
                if let Some(b) = out.get_mut(i) {
                    *b = rng.u8(..);
                }
            }
        }
        1 => out.truncate(at(rng, out.len())),
        2 if !lines.is_empty() => {
            let i = at(rng, lines.len());
            lines.insert(i, lines[i]);
            out = lines.join("\n").into_bytes();
        }
        13 => {
            // A mapping entry written twice, right after itself.
            let keyed: Vec<usize> = (0..lines.len()).filter(|i| lines[*i].contains(": ")).collect();
            if let Some(&i) = keyed.get(at(rng, keyed.len())) {
                lines.insert(i, lines[i]);
                out = lines.join("\n").into_bytes();
            }
        }
        3 if lines.len() > 1 => {
            let (i, j) = (at(rng, lines.len()), at(rng, lines.len()));
            lines.swap(i, j);
            out = lines.join("\n").into_bytes();
        }
        4 => {
            let depth = rng.usize(60..if heavy { 5000 } else { 600 });
            let nested = format!("\nspec:\n  deep: {}{}\n", "[".repeat(depth), "]".repeat(depth));
            out.extend_from_slice(nested.as_bytes());
        }
        5 => {
            let mut bomb = String::from("---\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
            for i in 1..10 {
                bomb.push_str(&format!("a{i}: &a{i} [{}]\n", vec![format!("*a{}", i - 1); 10].join(", ")));
            }
            out.extend_from_slice(bomb.as_bytes());
        }
        6 => {
            let size = if heavy { 50 << 20 } else { 2 << 20 };
            out.extend_from_slice(format!("\n---\nkind: Fleet\nx: {}\n", "y".repeat(size)).as_bytes());
        }
        7 => out.insert(at(rng, out.len()), 0),
        8 => out.splice(0..0, [0xEF, 0xBB, 0xBF]).for_each(drop),
        9 => out = text.replace('\n', "\r\n").into_bytes(),
        10 if !lines.is_empty() => {
            let i = at(rng, lines.len());
            let tabbed = format!("\t{}", lines[i].trim_start());
            lines[i] = &tabbed;
            out = lines.join("\n").into_bytes();
        }
        11 => out.insert(at(rng, out.len()), 0xFF),
        12 => {
            let n = if heavy { 100_000 } else { 5_000 };
            out.extend_from_slice("---\na: 1\n".repeat(n).as_bytes());
        }
        _ => {}
    }
    out
}

/// What one case found wrong (empty: every invariant held).
pub fn check(snapshot: &Snapshot, file: &str, limit: Duration) -> Result<Duration, String> {
    let (tx, rx) = mpsc::channel();
    let owned = snapshot.clone();
    let started = Instant::now();
    std::thread::spawn(move || {
        let loaded = std::panic::catch_unwind(|| winfleet::desired::load(&owned, Default::default()));
        let _ = tx.send(loaded.map_err(|p| {
            p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        }));
    });
    let loaded = match rx.recv_timeout(limit) {
        Ok(Ok(loaded)) => loaded,
        Ok(Err(panic)) => return Err(format!("panicked: {}", panic.unwrap_or_default())),
        Err(_) => return Err(format!("no answer within {}s (a hang)", limit.as_secs())),
    };
    let took = started.elapsed();
    for d in &loaded.diagnostics {
        if d.path.is_empty() || d.line == 0 {
            return Err(format!("a diagnostic without a file and a position: {d:?}"));
        }
    }
    let mutated = snapshot.files.iter().find(|f| f.path == file).unwrap();
    let yaml = file.ends_with(".yaml") || file.ends_with(".yml");
    if yaml && loaded.desired.is_some() {
        let rejected = std::str::from_utf8(&mutated.bytes)
            .map_or(true, |text| winfleet::desired::yaml::parse_documents(file, text).is_err());
        if rejected {
            return Err("reported valid although its YAML is rejected".into());
        }
    }
    Ok(took)
}

/// A snapshot with one file replaced.
pub fn with_file(snapshot: &Snapshot, path: &str, bytes: Vec<u8>) -> Snapshot {
    let mut out = snapshot.clone();
    if let Some(f) = out.files.iter_mut().find(|f| f.path == path) {
        *f = SourceFile { path: path.to_owned(), bytes };
    }
    out
}

/// Runs `cases` seeded cases; returns (cases run, findings).
pub fn run(seed: u64, cases: usize, heavy: bool, limit: Duration) -> (usize, Vec<String>) {
    let corpus = corpus();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut findings = Vec::new();
    for case in 0..cases {
        let (name, snapshot) = &corpus[rng.usize(0..corpus.len())];
        let yaml: Vec<&SourceFile> =
            snapshot.files.iter().filter(|f| f.path.ends_with(".yaml") || f.path.ends_with(".yml")).collect();
        if yaml.is_empty() {
            continue;
        }
        let file = yaml[rng.usize(0..yaml.len())];
        let kind = case % KINDS.len();
        let bytes = mutate(&mut rng, kind, &file.bytes, heavy);
        let mutated = with_file(snapshot, &file.path, bytes);
        if let Err(e) = check(&mutated, &file.path, limit) {
            findings.push(format!("case {case} ({}, {name}/{}): {e}", KINDS[kind], file.path));
        }
    }
    (cases, findings)
}
