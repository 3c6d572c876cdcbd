//! Every PowerShell script winfleet generates, as the tests see them: the
//! dialects' goldens (observe, apply, lifecycle, trust store, Containers),
//! network-conf.ps1, the Machines' user data (the fixtures and a fresh
//! render per platform) and the kept session's two framing lines
//! (`dialect::powershell::wrap` and the end line). Read by the loop check
//! (tests/script_loops.rs) and the reference check
//! (tests/powershell_reference.rs).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use winfleet::dialect::powershell;
use winfleet::render::user_data::{Platform, render};

const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

/// Every fixture file under `dir` (recursively), as (path, text).
pub fn files(dir: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files(&path, out);
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            out.push((path.display().to_string(), text));
        }
    }
}

/// The script inside tagged user data (`<powershell>…</powershell>`).
fn untagged(text: &str) -> &str {
    text.strip_prefix("<powershell>\n").and_then(|s| s.split_once("</powershell>")).map_or(text, |(s, _)| s)
}

/// The apply scripts' prelude: the lifecycle apply golden up to its
/// outcomes header.
fn prelude(scripts: &[(String, String)]) -> String {
    let (_, apply) = scripts.iter().find(|(p, _)| p.ends_with("dialect/lifecycle/powershell-apply.ps1")).unwrap();
    let end = apply.find("Write-WfToken 'winfleet-outcomes' '1'\n").unwrap()
        + "Write-WfToken 'winfleet-outcomes' '1'\n".len();
    apply[..end].to_owned()
}

/// Every generated PowerShell script, as (name, text); the fixtures are
/// named by their path.
pub fn all() -> Vec<(String, String)> {
    let mut all = Vec::new();
    files(&super::fixture(""), &mut all);
    let mut scripts: Vec<(String, String)> = all
        .into_iter()
        .filter(|(path, text)| {
            path.ends_with(".ps1")
                || path.ends_with(".psm1")
                || text.starts_with("<powershell>")
                || text.starts_with("# winfleet user data")
        })
        .map(|(path, text)| (path, untagged(&text).to_owned()))
        .collect();
    // The trust store's goldens are the lifecycle part of an apply script
    // (`powershell_lifecycle::apply`): they run behind the apply prelude.
    let prelude = prelude(&scripts);
    for (path, text) in scripts.iter_mut().filter(|(p, _)| p.contains("trusted-ca/powershell")) {
        *path = format!("{path} (behind the {}-line apply prelude: subtract it)", prelude.lines().count());
        *text = format!("{prelude}{text}");
    }
    for platform in [Platform::None, Platform::Gcp, Platform::Aws] {
        let text = render(KEY, platform).unwrap();
        scripts.push((format!("user data ({platform:?})"), untagged(&text).to_owned()));
    }
    scripts.push(("session framing: a script's line".into(), powershell::wrap("Write-Output 'x'\n")));
    scripts.push(("session framing: the end line".into(), (powershell::INTERPRETER.end_line)(b"winfleet-end")));
    scripts
}
