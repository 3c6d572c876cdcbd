//! What goes from a node: in an upgrade, what an older version installed
//! and this one does not; when the node leaves, everything winfleet (or
//! WMCO, on a host without winfleet's record) installed. Pure.

use std::collections::BTreeSet;

use super::change::{LifecycleChange, LifecyclePlan};
use super::facts::{FileFact, LifecycleFacts};
use super::leftover::removals;
use super::manifest::ServiceDef;
use super::{LifecycleSpec, Mode};
use crate::vocab::Shell;
use crate::vocab::report::ServiceState;

/// In an upgrade: the services and files the install record holds that
/// this version does not have (WMCO leaves an older version's leftovers;
/// winfleet removes exactly what it installed).
pub(super) fn stale<'a>(
    spec: &LifecycleSpec,
    facts: &'a LifecycleFacts,
    mode: Mode,
) -> (Vec<LifecycleChange<'a>>, Vec<LifecycleChange<'a>>) {
    let (Mode::Upgrade, Some(record)) = (mode, facts.record.as_ref()) else { return (Vec::new(), Vec::new()) };
    let fold = |p: &str| match spec.shell {
        Shell::Powershell => p.to_lowercase(),
        Shell::Posix => p.to_owned(),
    };
    let services = record
        .services
        .iter()
        .filter(|name| !spec.services.iter().any(|s| &s.name == *name))
        .map(|name| LifecycleChange::RemoveService { name: name.as_str() })
        .collect();
    let wanted: BTreeSet<String> =
        spec.files.iter().map(|f| fold(&f.path)).chain(spec.generated.iter().map(|g| fold(&g.path))).collect();
    let unit_dir = spec.units_dir.as_deref().map(|d| format!("{}/", d.trim_end_matches('/')));
    let files = record
        .files
        .keys()
        .filter(|path| !wanted.contains(&fold(path)))
        .filter(|path| unit_dir.as_deref().is_none_or(|d| !path.starts_with(d)))
        .map(|path| LifecycleChange::RemoveFile { path: path.as_str() })
        .collect();
    (services, files)
}

/// Deconfigure: exactly what the install record holds, services first (stopped
/// and deleted), then files and the services' own state, a crash's leftovers,
/// then directories innermost first, then the record. A node without a record
/// (a host WMCO configured) loses what its manifest and payload say it has, as
/// observed ([`unrecorded`]).
pub(super) fn deconfigure<'a>(spec: &'a LifecycleSpec, facts: &'a LifecycleFacts) -> LifecyclePlan<'a> {
    let mut plan = LifecyclePlan::default();
    let Some(record) = facts.record.as_ref() else {
        plan.changes = removals(spec, facts, &[]);
        plan.changes.extend(unrecorded(spec, facts));
        return plan;
    };
    plan.changes.extend(record.services.iter().map(|name| LifecycleChange::RemoveService { name }));
    let units = spec.units_dir.as_deref().map(|d| format!("{}/", d.trim_end_matches('/')));
    let unit_of_service = |path: &str| {
        units
            .as_deref()
            .and_then(|d| path.strip_prefix(d))
            .and_then(|f| f.strip_suffix(".service"))
            .is_some_and(|name| record.services.contains(name))
    };
    let files = record.files.keys().filter(|p| !unit_of_service(p)).chain(&record.state);
    plan.changes.extend(files.map(|path| LifecycleChange::RemoveFile { path }));
    plan.changes.extend(record.cert_dirs.iter().map(|dir| LifecycleChange::RemoveCerts { dir }));
    // A crash's leftovers first, or the directories holding them would stay.
    plan.changes.extend(removals(spec, facts, &[]));
    plan.changes.extend(record.dirs.iter().rev().map(|path| LifecycleChange::RemoveDir { path }));
    plan.changes.push(LifecycleChange::ForgetRecord);
    plan
}

/// A host without winfleet's record: WMCO configured it. What WMCO's
/// cleanup removes, as far as it is there: the manifest's services
/// (dependents first), the payload and generated files, the kubelet's
/// credentials, and the directories inside WMCO's own (`C:\k`, or the
/// posix payload directory) when empty; never the shared ones (decision
/// 10). Nothing when none of the manifest's services is there.
fn unrecorded<'a>(spec: &'a LifecycleSpec, facts: &'a LifecycleFacts) -> Vec<LifecycleChange<'a>> {
    let present = |name: &str| facts.services.get(name).is_some_and(|s| s.state != ServiceState::Absent);
    let services: Vec<&ServiceDef> = spec.services.iter().rev().filter(|s| present(&s.name)).collect();
    if services.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<LifecycleChange<'a>> =
        services.iter().map(|s| LifecycleChange::RemoveService { name: s.name.as_str() }).collect();
    let there = |path: &str| matches!(facts.files.get(path), Some(FileFact::Present { .. }));
    let paths = spec.files.iter().map(|f| f.path.as_str()).chain(spec.generated.iter().map(|g| g.path.as_str()));
    out.extend(paths.filter(|p| there(p)).map(|path| LifecycleChange::RemoveFile { path }));
    for service in &spec.services {
        let (state, certs) = service.state();
        out.extend(state.into_iter().map(|path| LifecycleChange::RemoveFile { path }));
        out.extend(certs.into_iter().map(|dir| LifecycleChange::RemoveCerts { dir }));
    }
    // Only WMCO's own directory and what is inside it: the others (the
    // registries directory, `C:\var\log`, `C:\Temp`) may have been there
    // before, and a directory winfleet cannot prove was created for the
    // node stays.
    let fold = |p: &str| match spec.shell {
        Shell::Powershell => p.to_lowercase().replace('/', "\\"),
        Shell::Posix => p.to_owned(),
    };
    let own = fold(spec.kube_dir.trim_end_matches(['/', '\\']));
    let inside = |d: &str| {
        let d = fold(d);
        d == own || d.strip_prefix(&own).is_some_and(|rest| rest.starts_with(['/', '\\']))
    };
    let dirs = spec.directories.iter().rev().filter(|d| facts.dirs.contains(*d) && inside(d));
    out.extend(dirs.map(|path| LifecycleChange::RemoveDir { path }));
    out
}
