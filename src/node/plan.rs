//! The live plan of one node: [`plan_node`] compares a [`NodeSpec`] with the
//! [`NodeFacts`] observed this round and keeps only what differs. Pure.

use std::collections::{BTreeMap, BTreeSet};

use crate::node::facts::NodeFacts;
use crate::node::{HOSTS_TOML, MANAGED_ENVIRONMENT, NodeSpec, REGISTRY_MARKER, display_env_value};
use crate::vocab::Shell;
use crate::vocab::file::{ManagedFile, node_path};
use crate::vocab::operation::Operation;

/// One change to make on a node, borrowing the desired values from the spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change<'a> {
    /// Write `<registries>/<registry>/hosts.toml`.
    WriteFile {
        /// Registry directory name.
        registry: &'a str,
        /// Desired content.
        file: &'a ManagedFile,
        /// SHA-256 on the node; `None` when the file is absent.
        observed: Option<&'a str>,
        /// Whether the directory already holds winfleet's marker (a
        /// directory winfleet did not create is adopted: marked first).
        marked: bool,
    },
    /// Remove what winfleet wrote in a registry directory it marked and
    /// that is no longer desired (its hosts.toml, its marker), then the
    /// directory if nothing else is in it.
    RemoveRegistry {
        /// Registry directory name, as the node listed it.
        registry: &'a str,
        /// Why the removal is held back (the mass-removal guard): the
        /// apply reports it failed with this reason and removes nothing.
        refused: Option<String>,
        /// The directory's entries winfleet did not write: they stay, and
        /// so does the directory.
        kept: Vec<&'a str>,
    },
    /// A desired registry whose directory on the node is a symbolic link
    /// (a reparse point on Windows): winfleet writes nothing into it (the
    /// link's target is someone else's) and the apply reports it failed.
    LinkedRegistry {
        /// Registry directory name, as the node listed it.
        registry: &'a str,
    },
    /// Set a managed environment variable.
    SetEnv {
        /// Variable name.
        name: &'static str,
        /// Desired value.
        value: &'a str,
        /// Value on the node, if set.
        from: Option<&'a str>,
    },
    /// Remove a managed environment variable.
    UnsetEnv {
        /// Variable name.
        name: &'static str,
        /// Value on the node.
        from: &'a str,
    },
}

impl Change<'_> {
    /// Whether the change only takes effect after a safe reboot.
    pub fn needs_reboot(&self) -> bool {
        matches!(self, Change::SetEnv { .. } | Change::UnsetEnv { .. })
    }

    /// The change as displayed in plans and reports (secrets redacted).
    pub fn operation(&self, spec: &NodeSpec) -> Operation {
        match self {
            Change::WriteFile { registry, file, observed, marked } => {
                let path = node_path(spec.shell, &spec.registries_dir, &[registry, HOSTS_TOML]);
                let diff = match observed {
                    None => crate::vocab::operation::unified_diff(
                        "node: absent",
                        &format!("desired: {path}"),
                        "",
                        file.display(),
                    ),
                    Some(sum) if *sum == file.sha256() && !marked => format!(
                        "sha256 {} as desired; the directory gets winfleet's marker ({REGISTRY_MARKER}): winfleet did \
                         not create it, and adopts it\n",
                        short(sum)
                    ),
                    Some(sum) => format!("sha256 {} on the node, {} desired\n", short(sum), short(file.sha256())),
                };
                Operation::WriteFile { path, created: observed.is_none(), diff }
            }
            Change::RemoveRegistry { registry, refused, kept } => Operation::RemoveRegistry {
                path: node_path(spec.shell, &spec.registries_dir, &[registry]),
                refused: refused.clone(),
                kept: kept.iter().map(|k| (*k).to_owned()).collect(),
            },
            Change::LinkedRegistry { registry } => Operation::KeepRegistry {
                path: node_path(spec.shell, &spec.registries_dir, &[registry]),
                reason: linked_reason(spec.shell).to_owned(),
            },
            Change::SetEnv { name, value, from } => Operation::SetEnv {
                name: (*name).to_owned(),
                from: from.map(display_env_value),
                to: display_env_value(value),
            },
            Change::UnsetEnv { name, from } => {
                Operation::UnsetEnv { name: (*name).to_owned(), from: display_env_value(from) }
            }
        }
    }
}

/// Why a registry directory that is a link is not written into.
pub fn linked_reason(shell: Shell) -> &'static str {
    match shell {
        Shell::Posix => "it is a symbolic link; winfleet writes only into a directory of its own",
        Shell::Powershell => {
            "it is a reparse point (a symbolic link or junction); winfleet writes only into a directory of its own"
        }
    }
}

fn short(sum: &str) -> &str {
    sum.get(..12).unwrap_or(sum)
}

/// Files and variables winfleet manages on a node.
fn managed_items(spec: &NodeSpec) -> usize {
    spec.registries.len() + MANAGED_ENVIRONMENT.len()
}

/// Managed files and variables that already have their desired value.
pub fn in_sync(spec: &NodeSpec, changes: &[Change<'_>]) -> usize {
    let touched = changes.iter().filter(|c| !matches!(c, Change::RemoveRegistry { .. })).count();
    managed_items(spec).saturating_sub(touched)
}

/// Whether the node needs a safe reboot: a change it gets now, or one it
/// got earlier and has not rebooted for.
pub fn reboot_required(facts: &NodeFacts, changes: &[Change<'_>]) -> bool {
    facts.reboot_pending || changes.iter().any(Change::needs_reboot)
}

/// Whether `name` is one plain directory entry (never `..` or a path).
pub fn is_entry_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// The mass-removal guard over one node's registry directories: removing
/// more than `max_percent` of them (and more than two) in one round is
/// held back, as a deconfigure of too many instances is. A directory count
/// that falls at once usually means a mirror set file went missing.
pub fn registry_guard(removing: usize, keeping: usize, max_percent: u32) -> Option<String> {
    let total = removing + keeping;
    if removing <= 2 || removing * 100 <= max_percent as usize * total {
        return None;
    }
    Some(format!(
        "this revision would remove {removing} of the node's {total} registry directories ({}%), more than \
         prune.maxRemovalPercent ({max_percent}%): none is removed until a commit restores the mirrors or raises the limit",
        removing * 100 / total
    ))
}

/// What must change on a node: files whose SHA-256 differs (or whose
/// directory lacks winfleet's marker; never in a directory that is a
/// link), registry directories winfleet marked that are not desired (its
/// own files in them; never a directory it merely finds), and
/// environment variables whose value differs. Files first (by registry),
/// then removals, then variables.
pub fn plan_node<'a>(spec: &'a NodeSpec, facts: &'a NodeFacts) -> Vec<Change<'a>> {
    // NTFS ignores case: on PowerShell nodes `Quay.io` and `quay.io` are
    // one directory, which must be neither removed nor written twice.
    let fold = |name: &str| match spec.shell {
        Shell::Powershell => name.to_lowercase(),
        Shell::Posix => name.to_owned(),
    };
    let observed: BTreeMap<String, Option<&str>> =
        facts.registries.iter().map(|(name, sum)| (fold(name), sum.as_deref())).collect();
    let desired: BTreeSet<String> = spec.registries.keys().map(|name| fold(name)).collect();
    // A link is never winfleet's, whatever its target holds.
    let links: BTreeSet<String> = facts.links.iter().map(|name| fold(name)).collect();
    let marked: BTreeSet<String> =
        facts.marked.iter().map(|name| fold(name)).filter(|name| !links.contains(name)).collect();
    let mut changes = Vec::new();
    for (registry, file) in &spec.registries {
        if links.contains(&fold(registry)) {
            changes.push(Change::LinkedRegistry { registry });
            continue;
        }
        let observed = observed.get(&fold(registry)).copied().flatten();
        let marked = marked.contains(&fold(registry));
        if observed != Some(file.sha256()) || !marked {
            changes.push(Change::WriteFile { registry, file, observed, marked });
        }
    }
    // A name that was not valid UTF-8 cannot be addressed again; leave it.
    let removals: Vec<&str> = facts
        .registries
        .keys()
        .filter(|name| is_entry_name(name) && !name.contains(char::REPLACEMENT_CHARACTER))
        .filter(|name| !desired.contains(&fold(name)) && marked.contains(&fold(name)))
        .map(String::as_str)
        .collect();
    let refused = match spec.leaving {
        true => None,
        false => registry_guard(removals.len(), spec.registries.len(), spec.max_removal_percent),
    };
    changes.extend(removals.into_iter().map(|registry| Change::RemoveRegistry {
        registry,
        refused: refused.clone(),
        kept: facts.unmanaged.get(registry).map(|k| k.iter().map(String::as_str).collect()).unwrap_or_default(),
    }));
    for name in MANAGED_ENVIRONMENT {
        let desired = spec.environment.get(name).map(String::as_str);
        let observed = facts.environment.get(name).map(String::as_str);
        match (desired, observed) {
            (Some(value), from) if from != Some(value) => changes.push(Change::SetEnv { name, value, from }),
            (None, Some(from)) => changes.push(Change::UnsetEnv { name, from }),
            _ => {}
        }
    }
    changes
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
