//! The architecture test: every `use crate::…` (and every inline
//! `crate::`/`super::` path) in src/ follows the stage order that
//! docs/ARCHITECTURE.md declares, and no two modules import each other,
//! directly or round a loop, at any level of the module tree.
//!
//! - A top-level module may import only modules of its own stage or of a
//!   lower one (the order is the fenced `stages` block of ARCHITECTURE.md,
//!   lowest first, one stage a line).
//! - Between the children of one module (the top-level modules of the
//!   crate, the files of `lifecycle/`, …) the imports form no cycle.
//!
//! A child importing its parent (`use super::X`) or the other way round is
//! how Rust modules are built and is not an edge. Unit-test modules
//! (`#[cfg(test)]` to the end of a file) are left out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Module = Vec<String>;

/// One import edge between two sibling modules: (from, to, file, path).
type Edge = (Module, Module, String, String);

/// Every file of the library crate (`binary` false) or of the binary crate
/// (`main.rs` and `cli/`): (path relative to src/, content).
fn read_tree(src: &Path, binary: bool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/");
                // The binary crate (main.rs, cli/) sits on top and uses the
                // library as `winfleet::`; its `crate::` is its own.
                if (rel == "main.rs" || rel.starts_with("cli/")) != binary {
                    continue;
                }
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The module a file defines: `lifecycle/plan.rs` → [lifecycle, plan],
/// `lifecycle/mod.rs` → [lifecycle], `lib.rs` → [].
fn module_of(file: &str) -> Module {
    let mut parts: Module = file.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// A use tree (`a::{b, c::{d, e}}`) expanded to its paths.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else { return vec![tree.split(" as ").next().unwrap_or("").trim().to_owned()] };
    let prefix = tree[..open].trim_end_matches("::").trim();
    let Some(inner) = tree.rfind('}').filter(|&close| close > open).map(|close| &tree[open + 1..close]) else {
        return Vec::new();
    };
    let (mut parts, mut depth, mut current) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
        .iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand(p))
        .map(|p| if prefix.is_empty() { p } else { format!("{prefix}::{p}") })
        .collect()
}

/// The crate paths a file names: its `use` declarations and inline
/// `crate::`/`super::` paths, outside comments and unit tests.
fn paths_in(content: &str) -> Vec<String> {
    let code: String = content
        .split("#[cfg(test)]")
        .next()
        .unwrap_or("")
        .lines()
        .map(|l| {
            let t = l.trim_start();
            if t.starts_with("//") { "" } else { l }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest.find(';').unwrap_or(rest.len());
        out.extend(expand(&rest[..end]));
        rest = &rest[end..];
    }
    for start in ["crate::", "super::"] {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(start) {
            let before = rest[..at].chars().last();
            let tail = &rest[at..];
            let len = tail.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(tail.len());
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                out.push(tail[..len].trim_end_matches(':').to_owned());
            }
            rest = &tail[len.max(1)..];
        }
    }
    out
}

/// Sibling edges of a crate: for each path a file names, the children of
/// the lowest common module of the file and its target.
fn edges(files: &[(String, String)]) -> Vec<Edge> {
    let modules: BTreeSet<Module> =
        files.iter().flat_map(|(f, _)| module_prefixes(&module_of(f))).collect::<BTreeSet<_>>();
    let mut out = Vec::new();
    for (file, content) in files {
        let me = module_of(file);
        for path in paths_in(content) {
            let mut segments = path.split("::").map(str::to_owned);
            let target: Module = match segments.next().as_deref() {
                Some("crate") => segments.collect(),
                Some("super") => {
                    let mut base = me.clone();
                    base.pop();
                    let mut rest: Module = segments.collect();
                    while rest.first().is_some_and(|s| s == "super") {
                        base.pop();
                        rest.remove(0);
                    }
                    base.into_iter().chain(rest).collect()
                }
                Some("self") => me.iter().cloned().chain(segments).collect(),
                _ => continue,
            };
            // The longest prefix of the path that is a module.
            let Some(target) = (1..=target.len()).rev().map(|n| target[..n].to_vec()).find(|m| modules.contains(m))
            else {
                continue;
            };
            let common = me.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == me.len() || common == target.len() {
                continue;
            }
            out.push((me[..=common].to_vec(), target[..=common].to_vec(), file.clone(), path));
        }
    }
    out.sort();
    out.dedup();
    out
}

fn module_prefixes(m: &Module) -> Vec<Module> {
    (1..=m.len()).map(|n| m[..n].to_vec()).collect()
}

/// The cycles among sibling modules (strongly connected components of
/// more than one module), each with the imports that close it.
fn cycles(edges: &[Edge]) -> Vec<String> {
    let mut graph: BTreeMap<&Module, BTreeSet<&Module>> = BTreeMap::new();
    for (from, to, _, _) in edges {
        graph.entry(from).or_default().insert(to);
        graph.entry(to).or_default();
    }
    // Tarjan, iteratively small enough to be recursive here.
    struct State<'a> {
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        found: Vec<Vec<&'a Module>>,
    }
    fn visit<'a>(v: &'a Module, graph: &BTreeMap<&'a Module, BTreeSet<&'a Module>>, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for &w in &graph[v] {
            if !s.index.contains_key(w) {
                visit(w, graph, s);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v) {
            visit(v, &graph, &mut state);
        }
    }
    state
        .found
        .iter()
        .map(|component| {
            let members: BTreeSet<&Module> = component.iter().copied().collect();
            let mut lines: Vec<String> = edges
                .iter()
                .filter(|(f, t, _, _)| members.contains(f) && members.contains(t))
                .map(|(_, _, file, path)| format!("    src/{file} uses {path}"))
                .collect();
            lines.sort();
            lines.dedup();
            let names: Vec<String> = members.iter().map(|m| m.join("::")).collect();
            format!("cycle between {}:\n{}", names.join(", "), lines.join("\n"))
        })
        .collect()
}

/// The declared stages: the fenced `stages` block of ARCHITECTURE.md, a
/// stage a line (lowest first), modules separated by blanks.
fn stages(doc: &str) -> BTreeMap<String, usize> {
    let block = doc.split("```stages\n").nth(1).and_then(|b| b.split("```").next()).expect("a ```stages block");
    let mut out = BTreeMap::new();
    for (rank, line) in block.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        for module in line.split_whitespace().take_while(|w| !w.starts_with('#')) {
            out.insert(module.to_owned(), rank);
        }
    }
    out
}

/// Imports between top-level modules that run against the stage order,
/// and top-level modules the order does not name.
fn against_order(files: &[(String, String)], edges: &[Edge], order: &BTreeMap<String, usize>) -> Vec<String> {
    let mut out: Vec<String> = files
        .iter()
        .filter_map(|(f, _)| module_of(f).first().cloned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|m| !order.contains_key(m))
        .map(|m| format!("src/{m} is in no stage of docs/ARCHITECTURE.md"))
        .collect();
    for (from, to, file, path) in edges.iter().filter(|(f, _, _, _)| f.len() == 1) {
        if let (Some(a), Some(b)) = (order.get(&from[0]), order.get(&to[0]))
            && b > a
        {
            out.push(format!("src/{file} uses {path}: {} is a lower stage than {}", from[0], to[0]));
        }
    }
    out
}

fn check(files: &[(String, String)], doc: &str) -> Vec<String> {
    let edges = edges(files);
    let mut problems = against_order(files, &edges, &stages(doc));
    problems.extend(cycles(&edges));
    problems
}

#[test]
fn imports_follow_the_declared_stages_and_close_no_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let problems = check(&read_tree(&root.join("src"), false), &doc);
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
}

/// The binary crate has no stages (it is the top one), but its modules
/// close no cycle either.
#[test]
fn the_binary_crates_modules_close_no_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = read_tree(&root.join("src"), true);
    assert!(files.iter().any(|(f, _)| f == "cli/output.rs"), "the binary crate's files are read");
    let problems = cycles(&edges(&files));
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn the_checker_finds_a_cycle_and_an_import_against_the_order() {
    let doc = "```stages\nvocab\nnode lifecycle\ndaemon\n```\n";
    let files = [
        ("lib.rs", "pub mod node; pub mod lifecycle; pub mod daemon; pub mod vocab;"),
        ("vocab.rs", "pub struct Shell;"),
        ("node/mod.rs", "use crate::lifecycle::LifecycleSpec;\npub mod facts;"),
        ("node/facts.rs", "use super::NodeSpec;\nuse crate::vocab::Shell;\nuse crate::daemon::Config;"),
        (
            "lifecycle/mod.rs",
            "use crate::node::{ManagedFile, facts::{self, NodeFacts}};\npub mod plan; pub mod removal;",
        ),
        ("lifecycle/plan.rs", "use super::removal::stale;"),
        ("lifecycle/removal.rs", "pub fn stale() { super::plan::LifecyclePlan::default(); }"),
        ("daemon/mod.rs", "pub mod round; pub mod report;\n#[cfg(test)]\nmod tests { use crate::node::x; }"),
        ("daemon/round.rs", "// use super::report::StatusWriter;\npub const GIT_TIMEOUT: u64 = 1;"),
        ("daemon/report.rs", "use super::round::GIT_TIMEOUT;"),
    ]
    .map(|(f, c)| (f.to_owned(), c.to_owned()));
    let problems = check(&files, doc);
    let all = problems.join("\n");
    assert!(all.contains("src/node/facts.rs uses crate::daemon::Config: node is a lower stage than daemon"), "{all}");
    assert!(all.contains("cycle between lifecycle, node"), "{all}");
    assert!(all.contains("src/lifecycle/mod.rs uses crate::node::ManagedFile"), "{all}");
    assert!(all.contains("cycle between lifecycle::plan, lifecycle::removal"), "{all}");
    assert!(!all.contains("daemon::report"), "a commented import is no edge: {all}");
    assert_eq!(problems.len(), 3, "{all}");
}
