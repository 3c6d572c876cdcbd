//! Identical changes, shown once: a mirror moved for 300 registries
//! changes 300 hosts.toml files the same way on every node, and a plan
//! that prints 300 copies of one diff hides everything else. Files whose
//! diffs differ only in the path their header names form one [`Shown`]
//! entry with every path; other operations stay as they are. The JSON plan
//! keeps every operation; text and markdown show these. Pure.

use std::collections::HashMap;

use crate::vocab::operation::Operation;

/// What a plan shows for a group's operations, in their order (each entry
/// at its first member's place).
#[derive(Debug, PartialEq, Eq)]
pub enum Shown<'a> {
    /// Files written with one and the same change (one or more).
    Files(Files<'a>),
    /// Any other operation.
    Other(&'a Operation),
}

impl Shown<'_> {
    /// The operations the entry stands for.
    pub fn members(&self) -> usize {
        match self {
            Shown::Files(files) => files.paths.len(),
            Shown::Other(_) => 1,
        }
    }
}

/// Files written with one and the same change.
#[derive(Debug, PartialEq, Eq)]
pub struct Files<'a> {
    /// Whether the files are new.
    pub created: bool,
    /// Their paths on the node, in the plan's order.
    pub paths: Vec<&'a str>,
    /// The first file's whole diff (its header names its path).
    pub diff: &'a str,
    /// The change every file has: the diff without its two header lines.
    pub body: &'a str,
}

/// Groups `operations` so that files with the same change are one entry.
pub fn shown(operations: &[Operation]) -> Vec<Shown<'_>> {
    let mut out: Vec<Shown<'_>> = Vec::new();
    let mut index: HashMap<(bool, &str), usize> = HashMap::new();
    for op in operations {
        let Operation::WriteFile { path, created, diff } = op else {
            out.push(Shown::Other(op));
            continue;
        };
        let body = body(diff);
        match index.get(&(*created, body)).and_then(|&i| out.get_mut(i)) {
            Some(Shown::Files(files)) => files.paths.push(path),
            _ => {
                index.insert((*created, body), out.len());
                out.push(Shown::Files(Files { created: *created, paths: vec![path], diff, body }));
            }
        }
    }
    out
}

/// A unified diff without its `---` and `+++` lines (which name the file).
fn body(diff: &str) -> &str {
    let mut rest = diff;
    for prefix in ["--- ", "+++ "] {
        if rest.starts_with(prefix) {
            rest = rest.find('\n').map_or("", |end| &rest[end + 1..]);
        }
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::operation::unified_diff;

    fn write(path: &str, before: &str, after: &str) -> Operation {
        let diff = unified_diff(&format!("base: {path}"), &format!("head: {path}"), before, after);
        Operation::WriteFile { path: path.to_owned(), created: before.is_empty(), diff }
    }

    #[test]
    fn files_changed_the_same_way_are_one_entry_naming_every_path() {
        let ops = vec![
            write("r1/hosts.toml", "a\nmirror-a\n", "a\nmirror-b\n"),
            write("r2/hosts.toml", "a\nmirror-a\n", "a\nmirror-b\n"),
            Operation::UnsetEnv { name: "HTTP_PROXY".into(), from: "x".into() },
            write("r3/hosts.toml", "a\nmirror-a\n", "a\nmirror-c\n"),
            write("r10/hosts.toml", "a\nmirror-a\n", "a\nmirror-b\n"),
        ];
        let shown = shown(&ops);
        assert_eq!(shown.len(), 3, "{shown:#?}");
        let Shown::Files(first) = &shown[0] else { panic!("{shown:#?}") };
        assert_eq!(first.paths, ["r1/hosts.toml", "r2/hosts.toml", "r10/hosts.toml"]);
        assert!(first.diff.starts_with("--- base: r1/hosts.toml\n+++ head: r1/hosts.toml\n@@"), "{}", first.diff);
        assert!(first.body.starts_with("@@") && first.body.contains("+mirror-b"), "{}", first.body);
        assert!(matches!(shown[1], Shown::Other(Operation::UnsetEnv { .. })));
        let Shown::Files(other) = &shown[2] else { panic!("{shown:#?}") };
        assert_eq!(other.paths, ["r3/hosts.toml"]);
    }

    #[test]
    fn a_new_file_and_a_changed_one_are_never_one_entry() {
        let ops = vec![write("r1/hosts.toml", "", "a\n"), write("r2/hosts.toml", "", "a\n")];
        assert_eq!(shown(&ops).len(), 1);
        let changed = Operation::WriteFile {
            path: "r3/hosts.toml".into(),
            created: false,
            diff: unified_diff("base: r3/hosts.toml", "head: r3/hosts.toml", "", "a\n"),
        };
        assert_eq!(shown(&[ops[0].clone(), changed]).len(), 2);
    }
}
