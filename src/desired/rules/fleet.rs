//! Fleet rules: at most one Fleet, and sane settings; defaults filled in.

use std::time::Duration;

use super::dirs::check_node_dir;
use super::names::check_username;
use crate::desired::Doc;
use crate::desired::kinds::fleet::Fleet;
use crate::desired::model::FleetSettings;
use crate::desired::normalize_dir;
use crate::diagnostic::{Diagnostic, shown};
use crate::vocab::Shell;

/// Checks the Fleet (if any) and returns the settings in force.
pub fn settings(docs: &[Doc<Fleet>], diagnostics: &mut Vec<Diagnostic>) -> FleetSettings {
    let mut settings = FleetSettings::default();
    let Some(doc) = docs.first() else { return settings };
    for extra in &docs[1..] {
        diagnostics.push(extra.error(
            "/metadata/name",
            format!("only one Fleet is allowed: {} already defines {}", doc.path, shown(&doc.value.metadata.name)),
        ));
    }
    let spec = &doc.value.spec;
    let mut error = |pointer: &str, message: String| diagnostics.push(doc.error(pointer, message));
    if let Some(username) = &spec.defaults.username {
        match check_username(username, spec.defaults.shell.unwrap_or(settings.default_shell)) {
            Ok(()) => settings.default_username = Some(username.clone()),
            Err(reason) => error("/spec/defaults/username", reason),
        }
    }
    match spec.defaults.port {
        Some(0) => error("/spec/defaults/port", "port must be from 1 to 65535".into()),
        Some(port) => settings.default_port = port,
        None => {}
    }
    if let Some(shell) = spec.defaults.shell {
        settings.default_shell = shell;
    }
    for (i, dir) in spec.allowed_directories.iter().enumerate() {
        if dir.is_empty() || dir.chars().any(char::is_control) {
            error(
                &format!("/spec/allowedDirectories/{i}"),
                "must be a non-empty path without control characters".into(),
            );
        }
    }
    for (pointer, shell, value, slot) in [
        (
            "/spec/registries/powershellDir",
            Shell::Powershell,
            &spec.registries.powershell_dir,
            &mut settings.powershell_registries_dir,
        ),
        ("/spec/registries/posixDir", Shell::Posix, &spec.registries.posix_dir, &mut settings.posix_registries_dir),
        ("/spec/environment/posixDir", Shell::Posix, &spec.environment.posix_dir, &mut settings.posix_environment_dir),
        ("/spec/payload/posixDir", Shell::Posix, &spec.payload.posix_dir, &mut settings.payload_posix_dir),
        ("/spec/services/posixDir", Shell::Posix, &spec.services.posix_dir, &mut settings.services_posix_dir),
    ] {
        let Some(dir) = value else { continue };
        match check_node_dir(shell, dir, &spec.allowed_directories) {
            Ok(()) => *slot = dir.clone(),
            Err(reason) => error(pointer, reason),
        }
    }
    settings.allow_loopback = spec.lab.allow_loopback_addresses;
    settings.proxy_source = spec.sources.proxy.unwrap_or_default();
    settings.mirrors_source = spec.sources.mirrors.unwrap_or_default();
    for (pointer, value, slot) in [
        ("/spec/rollout/maxParallel", spec.rollout.max_parallel, &mut settings.max_parallel),
        ("/spec/rollout/maxUnavailable", spec.rollout.max_unavailable, &mut settings.max_unavailable),
    ] {
        match value {
            Some(0) => error(pointer, "must be at least 1".into()),
            Some(n) => *slot = n,
            None => {}
        }
    }
    match spec.prune.max_removal_percent {
        Some(p) if p > 100 => error("/spec/prune/maxRemovalPercent", format!("{p} is not a percentage from 0 to 100")),
        Some(p) => settings.max_removal_percent = p,
        None => {}
    }
    if let Some(interval) = &spec.drift.interval {
        match crate::duration::parse(interval) {
            Some(d) if d >= Duration::from_secs(1) => settings.drift_interval = d,
            _ => error(
                "/spec/drift/interval",
                format!("{} is not a duration of at least 1s (such as 30s, 10m or 1h30m)", shown(interval)),
            ),
        }
    }
    if let Some(version) = &spec.payload.kubelet_version {
        if crate::vocab::kube_version::major_minor(version).is_some() {
            settings.payload_kubelet_version = Some(version.clone());
        } else {
            error(
                "/spec/payload/kubeletVersion",
                format!("{} is not a Kubernetes version (such as v1.37.2)", shown(version)),
            );
        }
    }
    if let Some(digest) = &spec.payload.digest {
        if crate::payload::manifest::is_digest(digest) {
            settings.payload_digest = Some(digest.clone());
        } else {
            error(
                "/spec/payload/digest",
                format!(
                    "{} is not a payload digest: sha256: and 64 lower-case hex digits (winfleet payload digest DIR prints it)",
                    shown(digest)
                ),
            );
        }
    }
    if let Some(name) = &spec.services.config_map_name {
        if name.starts_with(crate::desired::kinds::services::SERVICES_CONFIGMAP_PREFIX) {
            settings.services_config_map = Some(name.clone());
        } else {
            error(
                "/spec/services/configMapName",
                format!("{} is not a windows-services-<version> ConfigMap name", shown(name)),
            );
        }
    }
    if let Some(mode) = spec.drift.mode {
        settings.drift_mode = mode;
    }
    settings.suspend = spec.suspend;
    if let Some(branch) = &spec.status.branch {
        if branch.starts_with('-') {
            error(
                "/spec/status/branch",
                format!("{} starts with '-': Git refuses such a branch name (it reads as an option)", shown(branch)),
            );
        } else if branch == "HEAD" || branch.starts_with("refs/") {
            error(
                "/spec/status/branch",
                format!(
                    "{} is not a branch name: name the branch status is committed to, such as winfleet/status",
                    shown(branch)
                ),
            );
        } else if git2::Reference::is_valid_name(&format!("refs/heads/{branch}")) {
            settings.status_branch = branch.clone();
        } else {
            error("/spec/status/branch", format!("{} is not a valid Git branch name", shown(branch)));
        }
    }
    if let Some(path) = &spec.status.path {
        match check_status_path(path) {
            Ok(dir) => settings.status_path = dir,
            Err(reason) => error("/spec/status/path", reason),
        }
    }
    settings
}

/// The longest status directory accepted, in characters.
pub const MAX_STATUS_PATH: usize = 255;

/// `spec.status.path`: a relative directory of the repository that is
/// read back as winfleet's own. A component starting with `.` is refused:
/// `.git` is Git's own directory (a status commit there is never written),
/// and every dot-path is skipped when the repository is read.
fn check_status_path(path: &str) -> Result<String, String> {
    let dir = normalize_dir(path);
    let shown = shown(path);
    if dir.is_empty() || dir.starts_with('/') || dir.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(format!("{shown} must be a relative directory inside the repository"));
    }
    if dir.split('/').any(|c| c.starts_with('.')) {
        return Err(format!(
            "{shown} has a component starting with '.': Git keeps its own files in .git and winfleet skips \
             dot-paths, so status would never be written there; name a plain directory such as status"
        ));
    }
    if let Some(c) = dir.chars().find(|c| crate::diagnostic::is_unseen(*c) || matches!(c, '\\' | ':')) {
        return Err(format!(
            "{shown} contains {}, which a portable directory name cannot hold",
            crate::diagnostic::shown(&c.to_string())
        ));
    }
    if dir.chars().count() > MAX_STATUS_PATH {
        return Err(format!("{shown} is longer than {MAX_STATUS_PATH} characters"));
    }
    Ok(dir)
}
