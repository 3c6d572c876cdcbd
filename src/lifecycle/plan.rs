//! The lifecycle plan of one node: [`plan_lifecycle`] compares the
//! [`LifecycleSpec`] with the [`LifecycleFacts`] observed this round and
//! keeps only what differs. Pure.
//!
//! Order, and why: services that must stop (dependents first: a binary in
//! use cannot be replaced on Windows), what a crash left of winfleet's own
//! ([`super::leftover`]), then directories, payload uploads,
//! generated files, service definitions, and the starts in priority order
//! (bootstrap services first). A service is started when it should run and
//! does not, and restarted when its definition or a file its command line
//! names changed (or a file named only in such a file:
//! [`super::GeneratedFile::named_in`]); the services that depend on a stopped one are stopped
//! and started with it (the service manager stops them anyway).

use std::collections::BTreeSet;

use serde_json::Value;

use super::change::{LifecycleChange, LifecyclePlan};
use super::containers::FeatureState;
use super::facts::LifecycleFacts;
use super::leftover::removals;
use super::manifest::ServiceDef;
use super::removal::{deconfigure, stale};
use super::resolve::{self, same_definition};
use super::{LifecycleSpec, Mode, NodeFile};
use crate::vocab::Shell;
use crate::vocab::report::ServiceState;

/// What the plan knows about the node besides its facts.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// What the round may do.
    pub mode: Mode,
    /// The Node object, when one is associated (node variables).
    pub node: Option<&'a Value>,
    /// Whether running services may be stopped (the node is cordoned by
    /// winfleet, or already at the desired version).
    pub disrupt: bool,
}

/// Plans the lifecycle of one node.
pub fn plan_lifecycle<'a>(spec: &'a LifecycleSpec, facts: &'a LifecycleFacts, ctx: Context<'_>) -> LifecyclePlan<'a> {
    let mut plan = LifecyclePlan::default();
    if let Some(reason) = &spec.blocked {
        plan.error = Some(reason.clone());
        return plan;
    }
    if ctx.mode == Mode::Deconfigure {
        return deconfigure(spec, facts);
    }
    if ctx.mode == Mode::UpgradePending {
        plan.waiting.push(format!("the Node runs an older winfleet version; {} waits for its upgrade", spec.version));
        return plan;
    }
    // The Containers feature comes first, with its reboot (WMCO's order).
    if matches!(ctx.mode, Mode::Prepare | Mode::Join)
        && let Some((change, why)) = containers_step(facts.containers.as_ref())
    {
        plan.changes.extend(change);
        plan.waiting.push(why);
        plan.reboot = true;
        return plan;
    }
    let mut body = Vec::new();
    for dir in &spec.directories {
        if facts.dirs.contains(dir) {
            plan.in_sync += 1;
        } else {
            body.push(LifecycleChange::CreateDir { path: dir });
        }
    }
    // Each changed path, with the file that names it when only a file does
    // (the exporter's certificate, named in its web config).
    let mut changed_paths: Vec<(&str, Option<String>)> = Vec::new();
    for file in &spec.files {
        let observed = facts.files.get(&file.path).and_then(|f| f.sha256());
        if observed == Some(file.sha256.as_str()) {
            plan.in_sync += 1;
        } else {
            changed_paths.push((file.path.as_str(), None));
            body.push(LifecycleChange::Upload { file, observed });
        }
    }
    if ctx.mode != Mode::Prepare {
        for generated in &spec.generated {
            let observed = facts.files.get(&generated.path).and_then(|f| f.sha256());
            if observed == Some(generated.file.sha256()) {
                plan.in_sync += 1;
            } else {
                changed_paths.push((generated.path.as_str(), generated.named_in.clone()));
                body.push(LifecycleChange::WriteGenerated { file: generated, observed });
            }
        }
    }
    let services = services(spec, facts, ctx, &changed_paths, &mut plan);
    // A file in use by a running service that may not be stopped now waits
    // for the cordon (Windows cannot replace a binary in use).
    let blocked: Vec<&str> = services.blocked.iter().map(String::as_str).collect();
    body.retain(|c| match c {
        LifecycleChange::Upload { file, .. } => !blocked.contains(&file.path.as_str()),
        LifecycleChange::WriteGenerated { file, .. } => !blocked.contains(&file.path.as_str()),
        _ => true,
    });
    let uploads: Vec<&NodeFile> = body
        .iter()
        .filter_map(|c| match c {
            LifecycleChange::Upload { file, .. } => Some(*file),
            _ => None,
        })
        .collect();
    let leftovers = removals(spec, facts, &uploads);
    let (stale_services, stale_files) = stale(spec, facts, ctx.mode);
    plan.changes = stale_services;
    plan.changes.extend(services.stops);
    plan.changes.extend(leftovers);
    plan.changes.extend(body);
    plan.changes.extend(stale_files);
    plan.changes.extend(services.defines);
    plan.changes.extend(services.starts);
    plan
}

/// What the Containers feature asks of a host being configured
/// ([`super::containers`]): nothing (`None`: on, or not reported), or the
/// change to make now (`None` when only the reboot is owed) and why the
/// rest of the configuration waits.
fn containers_step(state: Option<&FeatureState>) -> Option<(Option<LifecycleChange<'static>>, String)> {
    match state? {
        FeatureState::Enabled => None,
        FeatureState::EnablePending => Some((
            None,
            "the Containers feature is enabled and takes effect at the host's next boot; the host reboots before \
             it is configured"
                .to_owned(),
        )),
        FeatureState::Disabled(state) => Some((
            Some(LifecycleChange::EnableContainers),
            format!(
                "the Containers feature is not enabled ({state}): it is enabled and the host reboots before it is \
                 configured"
            ),
        )),
    }
}

struct ServicePlan<'a> {
    stops: Vec<LifecycleChange<'a>>,
    defines: Vec<LifecycleChange<'a>>,
    starts: Vec<LifecycleChange<'a>>,
    /// Paths whose change waits because a running service uses them.
    blocked: Vec<String>,
}

fn mentions(shell: Shell, text: &str, path: &str) -> bool {
    match shell {
        Shell::Powershell => text.to_lowercase().contains(&path.to_lowercase()),
        Shell::Posix => text.contains(path),
    }
}

fn services<'a>(
    spec: &'a LifecycleSpec,
    facts: &LifecycleFacts,
    ctx: Context<'_>,
    changed_paths: &[(&str, Option<String>)],
    plan: &mut LifecyclePlan<'a>,
) -> ServicePlan<'a> {
    let mut out = ServicePlan { stops: Vec::new(), defines: Vec::new(), starts: Vec::new(), blocked: Vec::new() };
    let in_scope = spec.services_in_scope(ctx.mode, ctx.node.is_some());
    for skipped in spec.services.iter().filter(|s| !in_scope.iter().any(|i| i.name == s.name)) {
        plan.waiting.push(format!("service {} waits for its Node", skipped.name));
    }
    let home = facts.home.as_deref().unwrap_or_default();
    let mut stopped: BTreeSet<&str> = BTreeSet::new();
    let mut reasons: Vec<(&ServiceDef, String)> = Vec::new();
    let mut pre: Vec<(&ServiceDef, Vec<String>)> = Vec::new();
    for service in &in_scope {
        let resolved = resolve::command(service, ctx.node, facts).and_then(|command| {
            let scripts: Result<Vec<String>, String> = service
                .pre_scripts
                .iter()
                .filter(|p| p.variable.is_none())
                .map(|p| resolve::pre_script(p, ctx.node))
                .collect();
            Ok((command, scripts?))
        });
        let (command, scripts) = match resolved {
            Ok(r) => r,
            Err(e) => {
                plan.waiting.push(format!("service {}: {e}", service.name));
                continue;
            }
        };
        if spec.shell == Shell::Posix && home.is_empty() {
            plan.waiting.push(format!("service {}: the node did not report its home directory", service.name));
            continue;
        }
        let (definition, unit) = match resolve::definition(spec.shell, service, &command, home) {
            Ok(d) => d,
            Err(e) => {
                plan.waiting.push(format!("service {}: {e}", service.name));
                continue;
            }
        };
        let observed = facts.services.get(&service.name);
        let state = observed.map_or(ServiceState::Absent, |o| o.state.clone());
        let defined = observed.and_then(|o| o.definition.as_ref()).is_some_and(|d| same_definition(d, &definition));
        let running = state == ServiceState::Running;
        let named = |p: &str| mentions(spec.shell, &command, p) || scripts.iter().any(|s| mentions(spec.shell, s, p));
        let uses: Vec<&&str> = changed_paths
            .iter()
            .filter(|(p, named_in)| named(p) || named_in.as_deref().is_some_and(named))
            .map(|(p, _)| p)
            .collect();
        let mut why = Vec::new();
        if !defined {
            why.push(if state == ServiceState::Absent {
                "new".to_owned()
            } else {
                "its definition changed".to_owned()
            });
            out.defines.push(LifecycleChange::Define {
                service,
                definition,
                unit,
                command: command.clone(),
                created: observed.and_then(|o| o.definition.as_ref()).is_none(),
            });
        } else {
            plan.in_sync += 1;
        }
        if !uses.is_empty() {
            why.push(format!("{} changed", uses.iter().map(|p| **p).collect::<Vec<_>>().join(", ")));
        }
        let change_while_running = running && (!defined || !uses.is_empty());
        if change_while_running && !ctx.disrupt {
            plan.waiting.push(format!(
                "service {} runs and would restart ({}): waits until winfleet has cordoned the node",
                service.name,
                why.join("; ")
            ));
            out.defines.retain(|d| !matches!(d, LifecycleChange::Define { service: s, .. } if s.name == service.name));
            out.blocked.extend(uses.iter().map(|p| (**p).to_owned()));
            continue;
        }
        if change_while_running {
            stopped.insert(service.name.as_str());
        }
        if ctx.mode != Mode::Prepare && (!running || change_while_running) {
            let reason = if running {
                format!("restart: {}", why.join("; "))
            } else if state == ServiceState::Absent || !defined {
                "start".to_owned()
            } else {
                format!("start: it is {state}")
            };
            reasons.push((service, reason));
        }
        pre.push((service, scripts));
    }
    // Dependents of a stopped service stop with it; they start again too.
    loop {
        let more: Vec<&ServiceDef> = in_scope
            .iter()
            .copied()
            .filter(|s| !stopped.contains(s.name.as_str()))
            .filter(|s| facts.services.get(&s.name).is_some_and(|o| o.state == ServiceState::Running))
            .filter(|s| s.dependencies.iter().any(|d| stopped.contains(d.as_str())))
            .collect();
        if more.is_empty() || !ctx.disrupt {
            break;
        }
        for s in more {
            stopped.insert(s.name.as_str());
            if !reasons.iter().any(|(r, _)| r.name == s.name) {
                reasons.push((s, "restart: a service it depends on restarts".to_owned()));
            }
        }
    }
    for service in in_scope.iter().rev().filter(|s| stopped.contains(s.name.as_str())) {
        out.stops.push(LifecycleChange::Stop { service });
    }
    for service in &in_scope {
        if let Some((_, why)) = reasons.iter().find(|(r, _)| r.name == service.name) {
            let pre_scripts =
                pre.iter().find(|(s, _)| s.name == service.name).map(|(_, p)| p.clone()).unwrap_or_default();
            out.starts.push(LifecycleChange::Start { service, pre_scripts, why: why.clone() });
        }
    }
    out
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
