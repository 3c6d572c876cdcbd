//! The lifecycle plan of one node: [`plan_lifecycle`] compares the
//! [`LifecycleSpec`] with the [`LifecycleFacts`] observed this round and
//! keeps only what differs. Pure.
//!
//! Order, and why: services that must stop (dependents first: a binary in
//! use cannot be replaced on Windows), then directories, payload uploads,
//! generated files, service definitions, and the starts in priority order
//! (bootstrap services first). A service is started when it should run and
//! does not, and restarted when its definition or a file its command line
//! names changed; the services that depend on a stopped one are stopped
//! and started with it (the service manager stops them anyway).

use std::collections::BTreeSet;

use serde_json::Value;

use super::facts::{Definition, LifecycleFacts};
use super::resolve::{self, same_definition};
use super::{GeneratedFile, LifecycleSpec, Mode, NodeFile, ServiceSpec};
use crate::desired::kinds::instances::Shell;
use crate::node::facts::ServiceState;
use crate::plan::Operation;

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

/// One lifecycle change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LifecycleChange<'a> {
    /// Stop a running service before its files or definition change.
    Stop {
        /// The service.
        service: &'a ServiceSpec,
    },
    /// Create a directory (recorded as winfleet's).
    CreateDir {
        /// Node path.
        path: &'a str,
    },
    /// Upload a payload file (temporary file, SHA-256 checked, renamed).
    Upload {
        /// The file.
        file: &'a NodeFile,
        /// SHA-256 on the node; `None` when absent.
        observed: Option<&'a str>,
    },
    /// Write a file rendered from cluster material.
    WriteGenerated {
        /// The file.
        file: &'a GeneratedFile,
        /// SHA-256 on the node; `None` when absent.
        observed: Option<&'a str>,
    },
    /// Create or update a service's definition.
    Define {
        /// The service.
        service: &'a ServiceSpec,
        /// The definition it gets.
        definition: Definition,
        /// posix: the unit file.
        unit: Option<String>,
        /// The resolved command line.
        command: String,
        /// Whether the service is new.
        created: bool,
    },
    /// Stop and delete a service an older version installed that the
    /// manifest no longer has (from the install record).
    RemoveService {
        /// Its name.
        name: &'a str,
    },
    /// Remove a file an older version wrote that is no longer desired.
    RemoveFile {
        /// Node path.
        path: &'a str,
    },
    /// Deconfigure: remove the kubelet's certificates (`kubelet-*.pem`)
    /// from a directory recorded as a service's certificate directory.
    RemoveCerts {
        /// Node path.
        dir: &'a str,
    },
    /// Deconfigure: remove a directory winfleet created, when empty (what
    /// someone else put there stays, and so does the directory).
    RemoveDir {
        /// Node path.
        path: &'a str,
    },
    /// Deconfigure: remove the install record itself, last, and only when
    /// every removal before it in the same script succeeded.
    ForgetRecord,
    /// Start a service (after its side-effect pre-scripts).
    Start {
        /// The service.
        service: &'a ServiceSpec,
        /// Pre-scripts without a variable, node arguments in place.
        pre_scripts: Vec<String>,
        /// Why it (re)starts.
        why: String,
    },
}

impl LifecycleChange<'_> {
    /// The change as plans and reports show it (secrets redacted).
    pub fn operation(&self) -> Operation {
        match self {
            LifecycleChange::Stop { service } => Operation::StopService { name: service.name.clone() },
            LifecycleChange::CreateDir { path } => Operation::CreateDirectory { path: (*path).to_owned() },
            LifecycleChange::Upload { file, observed } => Operation::UploadFile {
                path: file.path.clone(),
                source: file.rel.clone(),
                size: file.size,
                created: observed.is_none(),
            },
            LifecycleChange::WriteGenerated { file, observed } => Operation::WriteSecret {
                path: file.path.clone(),
                created: observed.is_none(),
                content: file.file.display().to_owned(),
            },
            LifecycleChange::Define { service, command, created, .. } => {
                Operation::DefineService { name: service.name.clone(), created: *created, command: command.clone() }
            }
            LifecycleChange::Start { service, why, .. } => {
                Operation::StartService { name: service.name.clone(), why: why.clone() }
            }
            LifecycleChange::RemoveService { name } => Operation::RemoveService { name: (*name).to_owned() },
            LifecycleChange::RemoveFile { path } => Operation::RemoveFile { path: (*path).to_owned() },
            LifecycleChange::RemoveCerts { dir } => Operation::RemoveCertificates { dir: (*dir).to_owned() },
            LifecycleChange::RemoveDir { path } => Operation::RemoveDirectory { path: (*path).to_owned() },
            LifecycleChange::ForgetRecord => Operation::ForgetRecord,
        }
    }

    /// Whether the change runs in the preparation script.
    pub fn is_preparation(&self) -> bool {
        matches!(self, LifecycleChange::CreateDir { .. })
    }
}

/// The lifecycle plan of one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LifecyclePlan<'a> {
    /// What changes, in order.
    pub changes: Vec<LifecycleChange<'a>>,
    /// What cannot be done in this round, and why.
    pub waiting: Vec<String>,
    /// Why nothing of the lifecycle can be done (a payload that is not
    /// the pinned one, unreadable cluster material): an error.
    pub error: Option<String>,
    /// Items already as desired.
    pub in_sync: usize,
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
    let mut body = Vec::new();
    for dir in &spec.directories {
        if facts.dirs.contains(dir) {
            plan.in_sync += 1;
        } else {
            body.push(LifecycleChange::CreateDir { path: dir });
        }
    }
    let mut changed_paths = Vec::new();
    for file in &spec.files {
        let observed = facts.files.get(&file.path).and_then(|f| f.sha256());
        if observed == Some(file.sha256.as_str()) {
            plan.in_sync += 1;
        } else {
            changed_paths.push(file.path.as_str());
            body.push(LifecycleChange::Upload { file, observed });
        }
    }
    if ctx.mode != Mode::Prepare {
        for generated in &spec.generated {
            let observed = facts.files.get(&generated.path).and_then(|f| f.sha256());
            if observed == Some(generated.file.sha256()) {
                plan.in_sync += 1;
            } else {
                changed_paths.push(generated.path.as_str());
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
    let (stale_services, stale_files) = stale(spec, facts, ctx.mode);
    plan.changes = stale_services;
    plan.changes.extend(services.stops);
    plan.changes.extend(body);
    plan.changes.extend(stale_files);
    plan.changes.extend(services.defines);
    plan.changes.extend(services.starts);
    plan
}

/// In an upgrade: the services and files the install record holds that
/// this version does not have (WMCO leaves an older version's leftovers;
/// winfleet removes exactly what it installed).
fn stale<'a>(
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

/// Deconfigure: exactly what the install record holds, services first
/// (stopped and deleted), then files and the services' own state, then
/// directories innermost first, then the record. A node without a record
/// (a host WMCO configured) loses what its manifest and payload say it
/// has, as observed ([`unrecorded`]).
fn deconfigure<'a>(spec: &'a LifecycleSpec, facts: &'a LifecycleFacts) -> LifecyclePlan<'a> {
    let mut plan = LifecyclePlan::default();
    let Some(record) = facts.record.as_ref() else {
        plan.changes = unrecorded(spec, facts);
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
    let services: Vec<&ServiceSpec> = spec.services.iter().rev().filter(|s| present(&s.name)).collect();
    if services.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<LifecycleChange<'a>> =
        services.iter().map(|s| LifecycleChange::RemoveService { name: s.name.as_str() }).collect();
    let there = |path: &str| matches!(facts.files.get(path), Some(super::facts::FileFact::Present { .. }));
    let paths = spec.files.iter().map(|f| f.path.as_str()).chain(spec.generated.iter().map(|g| g.path.as_str()));
    out.extend(paths.filter(|p| there(p)).map(|path| LifecycleChange::RemoveFile { path }));
    for service in &spec.services {
        let (state, certs) = service.state_refs();
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
    changed_paths: &[&str],
    plan: &mut LifecyclePlan<'a>,
) -> ServicePlan<'a> {
    let mut out = ServicePlan { stops: Vec::new(), defines: Vec::new(), starts: Vec::new(), blocked: Vec::new() };
    let in_scope = spec.services_in_scope(ctx.mode, ctx.node.is_some());
    for skipped in spec.services.iter().filter(|s| !in_scope.iter().any(|i| i.name == s.name)) {
        plan.waiting.push(format!("service {} waits for its Node", skipped.name));
    }
    let home = facts.home.as_deref().unwrap_or_default();
    let mut stopped: BTreeSet<&str> = BTreeSet::new();
    let mut reasons: Vec<(&ServiceSpec, String)> = Vec::new();
    let mut pre: Vec<(&ServiceSpec, Vec<String>)> = Vec::new();
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
        let (definition, unit) = resolve::definition(spec.shell, service, &command, home);
        let observed = facts.services.get(&service.name);
        let state = observed.map_or(ServiceState::Absent, |o| o.state.clone());
        let defined = observed.and_then(|o| o.definition.as_ref()).is_some_and(|d| same_definition(d, &definition));
        let running = state == ServiceState::Running;
        let uses: Vec<&&str> = changed_paths
            .iter()
            .filter(|p| mentions(spec.shell, &command, p) || scripts.iter().any(|s| mentions(spec.shell, s, p)))
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
        let more: Vec<&ServiceSpec> = in_scope
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
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::lifecycle::facts::{FileFact, ServiceFact};
    use crate::lifecycle::material::{ClusterMaterial, render};
    use crate::lifecycle::tests_support::posix_spec;

    fn spec() -> LifecycleSpec {
        let mut spec = posix_spec();
        spec.files = vec![
            NodeFile {
                path: "payload/kube-node/kubelet".into(),
                rel: "kube-node/kubelet".into(),
                sha256: "11".repeat(32),
                size: 3,
                mode: 0o755,
                source: PathBuf::new(),
            },
            NodeFile {
                path: "payload/hon".into(),
                rel: "hon".into(),
                sha256: "22".repeat(32),
                size: 3,
                mode: 0o755,
                source: PathBuf::new(),
            },
        ];
        let material = ClusterMaterial {
            api_server_url: "http://127.0.0.1:1".into(),
            bootstrap_token: "t".into(),
            bootstrap_ca: "ca".into(),
            kubelet_ca: "kca".into(),
            cluster_dns: "172.30.0.10".into(),
        };
        let generated = render(&spec, &material);
        spec.with_generated(generated)
    }

    fn fresh() -> LifecycleFacts {
        let mut facts = LifecycleFacts { home: Some("/home/n".into()), ..LifecycleFacts::default() };
        facts.variables.insert(("kubelet".into(), "NODE_IP".into()), Ok("127.0.0.7".into()));
        facts
    }

    /// The facts of a node that got everything `changes` says.
    fn after(spec: &LifecycleSpec, facts: &LifecycleFacts, changes: &[LifecycleChange<'_>]) -> LifecycleFacts {
        let mut facts = facts.clone();
        for change in changes {
            match change {
                LifecycleChange::CreateDir { path } => {
                    facts.dirs.insert((*path).to_owned());
                }
                LifecycleChange::Upload { file, .. } => {
                    facts.files.insert(
                        file.path.clone(),
                        FileFact::Present { key: "k".into(), sha256: Some(file.sha256.clone()) },
                    );
                }
                LifecycleChange::WriteGenerated { file, .. } => {
                    let sha = Some(file.file.sha256().to_owned());
                    facts.files.insert(file.path.clone(), FileFact::Present { key: "k".into(), sha256: sha });
                }
                LifecycleChange::Define { service, definition, .. } => {
                    let state = facts.services.get(&service.name).map_or(ServiceState::Stopped, |s| s.state.clone());
                    let state = if state == ServiceState::Absent { ServiceState::Stopped } else { state };
                    facts
                        .services
                        .insert(service.name.clone(), ServiceFact { state, definition: Some(definition.clone()) });
                }
                LifecycleChange::Stop { service } => {
                    if let Some(s) = facts.services.get_mut(&service.name) {
                        s.state = ServiceState::Stopped;
                    }
                }
                LifecycleChange::Start { service, .. } => {
                    if let Some(s) = facts.services.get_mut(&service.name) {
                        s.state = ServiceState::Running;
                    }
                }
                LifecycleChange::RemoveService { name } => {
                    facts.services.remove(*name);
                }
                LifecycleChange::RemoveFile { path } => {
                    facts.files.remove(*path);
                }
                LifecycleChange::RemoveDir { path } => {
                    facts.dirs.remove(*path);
                }
                LifecycleChange::RemoveCerts { .. } => {}
                LifecycleChange::ForgetRecord => facts.record = None,
            }
        }
        let _ = spec;
        facts
    }

    fn names(changes: &[LifecycleChange<'_>]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                LifecycleChange::Stop { service } => format!("stop {}", service.name),
                LifecycleChange::CreateDir { path } => format!("mkdir {path}"),
                LifecycleChange::Upload { file, .. } => format!("upload {}", file.path),
                LifecycleChange::WriteGenerated { file, .. } => format!("write {}", file.path),
                LifecycleChange::Define { service, created, .. } => {
                    format!("{} {}", if *created { "create" } else { "update" }, service.name)
                }
                LifecycleChange::Start { service, .. } => format!("start {}", service.name),
                LifecycleChange::RemoveService { name } => format!("remove service {name}"),
                LifecycleChange::RemoveFile { path } => format!("remove {path}"),
                LifecycleChange::RemoveCerts { dir } => format!("remove certificates in {dir}"),
                LifecycleChange::RemoveDir { path } => format!("rmdir {path}"),
                LifecycleChange::ForgetRecord => "forget the record".to_owned(),
            })
            .collect()
    }

    const JOIN: Context<'static> = Context { mode: Mode::Join, node: None, disrupt: false };

    #[test]
    fn deconfigure_removes_exactly_the_record_then_forgets_it_and_is_then_done() {
        let spec = spec();
        let facts = LifecycleFacts {
            record: Some(crate::lifecycle::record::parse(
                "dir payload\ndir payload/kube-node\nfile aa payload/kube-node/kubelet\nfile bb units/kubelet.service\n\
                 service kubelet\nstate payload/kubeconfig\ncerts payload/pki\n",
            )),
            ..LifecycleFacts::default()
        };
        let deconfigure = Context { mode: Mode::Deconfigure, node: None, disrupt: true };
        let plan = plan_lifecycle(&spec, &facts, deconfigure);
        assert_eq!(
            names(&plan.changes),
            [
                "remove service kubelet",
                "remove payload/kube-node/kubelet",
                "remove payload/kubeconfig",
                "remove certificates in payload/pki",
                "rmdir payload/kube-node",
                "rmdir payload",
                "forget the record",
            ],
            "the unit file goes with its service; innermost directories first"
        );
        let done = after(&spec, &facts, &plan.changes);
        assert!(plan_lifecycle(&spec, &done, deconfigure).changes.is_empty(), "nothing without a record");
    }

    #[test]
    fn a_fresh_host_gets_everything_and_starts_its_bootstrap_services() {
        let spec = spec();
        let facts = fresh();
        let plan = plan_lifecycle(&spec, &facts, JOIN);
        let names = names(&plan.changes);
        assert_eq!(&names[..3], ["mkdir payload", "mkdir units", "mkdir certs.d"], "{names:?}");
        assert!(names.contains(&"upload payload/kube-node/kubelet".to_owned()));
        assert!(names.contains(&"write payload/kubelet.conf".to_owned()));
        assert_eq!(&names[names.len() - 2..], ["create kubelet", "start kubelet"]);
        assert!(
            plan.waiting.iter().any(|w| w.contains("hybrid-overlay-node waits for its Node")),
            "{:?}",
            plan.waiting
        );
    }

    #[test]
    fn once_the_node_exists_the_rest_starts_and_then_nothing_is_left() {
        let spec = spec();
        let start = fresh();
        let first = plan_lifecycle(&spec, &start, JOIN);
        let facts = after(&spec, &start, &first.changes);
        let node = serde_json::json!({"metadata": {"name": "win-1"}});
        let ctx = Context { mode: Mode::Join, node: Some(&node), disrupt: false };
        let second = plan_lifecycle(&spec, &facts, ctx);
        assert_eq!(names(&second.changes), ["create hybrid-overlay-node", "start hybrid-overlay-node"]);
        let facts = after(&spec, &facts, &second.changes);
        let third = plan_lifecycle(&spec, &facts, Context { mode: Mode::Maintain, ..ctx });
        assert_eq!(third.changes, Vec::new(), "{:?}", names(&third.changes));
        assert!(third.waiting.is_empty(), "{:?}", third.waiting);
    }

    #[test]
    fn a_corrupted_binary_is_replaced_with_its_service_and_dependents_restarted() {
        let spec = spec();
        let node = serde_json::json!({"metadata": {"name": "win-1"}});
        let maintain = Context { mode: Mode::Maintain, node: Some(&node), disrupt: true };
        let mut facts = fresh();
        for _ in 0..3 {
            let plan = plan_lifecycle(&spec, &facts, maintain);
            let next = after(&spec, &facts, &plan.changes);
            drop(plan);
            facts = next;
        }
        facts.files.insert(
            "payload/kube-node/kubelet".into(),
            FileFact::Present { key: "k2".into(), sha256: Some("ee".repeat(32)) },
        );
        let plan = plan_lifecycle(&spec, &facts, maintain);
        assert_eq!(
            names(&plan.changes),
            [
                "stop hybrid-overlay-node",
                "stop kubelet",
                "upload payload/kube-node/kubelet",
                "start kubelet",
                "start hybrid-overlay-node"
            ]
        );
    }

    #[test]
    fn a_running_service_is_not_restarted_before_the_cordon() {
        let spec = spec();
        let node = serde_json::json!({"metadata": {"name": "win-1"}});
        let maintain = Context { mode: Mode::Maintain, node: Some(&node), disrupt: true };
        let mut facts = fresh();
        for _ in 0..3 {
            let plan = plan_lifecycle(&spec, &facts, maintain);
            let next = after(&spec, &facts, &plan.changes);
            drop(plan);
            facts = next;
        }
        facts.files.insert(
            "payload/kube-node/kubelet".into(),
            FileFact::Present { key: "k2".into(), sha256: Some("ee".repeat(32)) },
        );
        let plan = plan_lifecycle(&spec, &facts, Context { mode: Mode::Join, node: Some(&node), disrupt: false });
        assert_eq!(plan.changes, Vec::new(), "{:?}", names(&plan.changes));
        assert!(plan.waiting.iter().any(|w| w.contains("kubelet runs and would restart")), "{:?}", plan.waiting);
    }

    #[test]
    fn ssh_only_mode_prepares_files_and_definitions_and_starts_nothing() {
        let spec = spec();
        let facts = fresh();
        let plan = plan_lifecycle(&spec, &facts, Context { mode: Mode::Prepare, node: None, disrupt: false });
        let names = names(&plan.changes);
        assert!(names.contains(&"create kubelet".to_owned()));
        assert!(!names.iter().any(|n| n.starts_with("start") || n.starts_with("write")), "{names:?}");
    }

    #[test]
    fn an_older_winfleet_version_waits_for_the_upgrade() {
        let spec = spec();
        let facts = fresh();
        let plan = plan_lifecycle(&spec, &facts, Context { mode: Mode::UpgradePending, node: None, disrupt: false });
        assert!(plan.changes.is_empty());
        assert_eq!(plan.waiting.len(), 1);
    }

    #[test]
    fn an_unresolved_variable_holds_only_its_service() {
        let spec = spec();
        let mut facts = fresh();
        facts.variables.insert(("kubelet".into(), "NODE_IP".into()), Err("no route".into()));
        let plan = plan_lifecycle(&spec, &facts, JOIN);
        assert!(!names(&plan.changes).iter().any(|n| n.contains("kubelet") && !n.contains('/')));
        assert!(plan.waiting.iter().any(|w| w.contains("NODE_IP failed on the node: no route")), "{:?}", plan.waiting);
    }
}
