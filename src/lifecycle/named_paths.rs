//! The node files a services manifest names, and whether something
//! provides each (issue 36). Pure.
//!
//! A named path is a word of a service's command, of a pre-script, or a
//! plain-text node argument (WMCO passes `C:\k\kubeconfig` so) that lies
//! under the kube directory or `C:\Temp` (Windows, case-insensitively,
//! `\` or `/`), or under the Fleet's payload directory (posix); a
//! `--flag=PATH` or `-flag=PATH` word names its value, `-flag PATH` its
//! second word. Variables (`NODE_IP`) and paths elsewhere (`C:\var\log\…`,
//! the services' own logs and state) are not checked.
//!
//! A named path is provided when it is a payload file or a directory the
//! lifecycle creates (the payload's, WMCO's layout's), or when the
//! catalogue ([`super::provided`]) lists it as generated everywhere, as a
//! runtime file, or as generated on the cluster's platform (any platform
//! when no cluster says which). Everything else is a finding at the
//! manifest's `data.services`, naming the service, the path, and which
//! platform's material would provide it.

use std::collections::BTreeSet;

use super::LifecycleSpec;
use super::leftover::fold;
use super::provided::{self, Source, platforms_text};
use crate::diagnostic::{Diagnostic, shown};
use crate::payload::layout::WINDOWS_TEMP_DIR;
use crate::vocab::Shell;
use crate::vocab::platform::Platform;

/// One path a service names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedPath {
    /// The service.
    pub service: String,
    /// The path as written (a directory may end in a separator).
    pub path: String,
}

/// Every path `spec`'s services name under its dialect's roots, in
/// manifest order, each (service, path) once.
pub fn named_paths(spec: &LifecycleSpec) -> Vec<NamedPath> {
    let mut out: Vec<NamedPath> = Vec::new();
    for s in &spec.services {
        let node_args = s.pre_scripts.iter().flat_map(|p| &p.node_args).chain(&s.node_variables);
        // A template with a field path is the Node's value, not a path.
        let plain = node_args.map(|v| v.path.as_str()).filter(|t| !t.contains('{'));
        let texts =
            std::iter::once(s.command.as_str()).chain(s.pre_scripts.iter().map(|p| p.path.as_str())).chain(plain);
        for text in texts {
            for path in words(text).filter(|w| under_roots(spec, w)) {
                let named = NamedPath { service: s.name.clone(), path: path.to_owned() };
                if !out.contains(&named) {
                    out.push(named);
                }
            }
        }
    }
    out
}

/// The words of a command that may be paths: each word without quotes,
/// and a flag's value after its `=`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split_whitespace().map(|word| {
        let word = word.trim_matches(['\'', '"']);
        let value = match word.split_once('=') {
            Some((flag, value)) if flag.starts_with('-') => value,
            _ => word,
        };
        value.trim_matches(['\'', '"']).trim_end_matches([',', ';'])
    })
}

/// Whether `word` lies under the kube directory or `C:\Temp` (Windows) or
/// the payload directory (posix).
fn under_roots(spec: &LifecycleSpec, word: &str) -> bool {
    let word = key(spec.shell, word);
    let under = |root: &str| {
        let root = key(spec.shell, root);
        word == root || word.starts_with(&format!("{root}{}", separator(spec.shell)))
    };
    match spec.shell {
        Shell::Powershell => under(&spec.kube_dir) || under(WINDOWS_TEMP_DIR),
        Shell::Posix => under(&spec.kube_dir),
    }
}

fn separator(shell: Shell) -> char {
    match shell {
        Shell::Powershell => '\\',
        Shell::Posix => '/',
    }
}

/// How paths compare: folded on Windows, without a trailing separator.
fn key(shell: Shell, path: &str) -> String {
    let folded = fold(shell, path);
    let trimmed = folded.trim_end_matches(separator(shell));
    if trimmed.is_empty() { folded } else { trimmed.to_owned() }
}

/// Every path `spec`'s services name that nothing provides, as errors at
/// the manifest's `data.services`. `platform`: the cluster's, `None`
/// without a cluster (then a per-platform file counts as provided).
pub fn unprovided(spec: &LifecycleSpec, platform: Option<Platform>) -> Vec<Diagnostic> {
    let shell = spec.shell;
    let present: BTreeSet<String> = spec
        .files
        .iter()
        .map(|f| &f.path)
        .chain(spec.generated.iter().map(|g| &g.path))
        .chain(&spec.directories)
        .map(|p| key(shell, p))
        .collect();
    let catalogue = provided::catalogue(spec);
    let mut out = Vec::new();
    for named in named_paths(spec) {
        let key = key(shell, &named.path);
        if present.contains(&key) {
            continue;
        }
        let says = |why: String| format!("service {} names {}, {why}", named.service, shown(&named.path));
        let message = match catalogue.iter().find(|p| self::key(shell, &p.path) == key) {
            Some(p) => match (p.source, platform) {
                (Source::Generated | Source::Runtime, _) => continue,
                (Source::Platform(_), None) => continue,
                (Source::Platform(on), Some(platform)) if on.contains(&platform) => continue,
                (Source::Platform(on), Some(platform)) => says(format!(
                    "which winfleet writes only on {} clusters ({}); this cluster's platform is {platform}",
                    platforms_text(on),
                    p.what
                )),
                (Source::PlatformPayload(on), _) => says(format!(
                    "which is not in the payload: it is {}, which WMCO copies to {} nodes only; add it to the payload directory",
                    p.what,
                    platforms_text(on)
                )),
            },
            None => says(
                "which is not in the payload, not a file winfleet generates, and not one the node's services write \
                 themselves (docs/lifecycle.md, \"Files a services manifest names\")"
                    .to_owned(),
            ),
        };
        out.push(spec.manifest_at.error(message));
    }
    out
}

/// A blocked lifecycle's reason from `findings`.
pub fn reason(findings: &[Diagnostic]) -> String {
    let all: Vec<String> = findings.iter().map(ToString::to_string).collect();
    format!("the services manifest names a file nothing provides: {}", all.join("; "))
}

#[cfg(test)]
#[path = "named_paths_tests.rs"]
mod tests;
