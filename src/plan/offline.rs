//! The offline plan between two revisions: what merging head over base
//! would change, without a cluster or SSH (for pull-request review).
//!
//! Nodes are compared through their shared [`NodeSpec`]s: each distinct
//! (base spec, head spec) pair is diffed once, and nodes with identical
//! operations form one group.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::guard::removal_guard;
use super::{
    InstanceChanges, InstanceSummary, InstanceUpdate, MachineSetAction, MachineSetChange, NodeGroup, Plan,
    SettingChange, fields,
};
use crate::desired::{Desired, Instance};
use crate::lifecycle::LifecycleSpec;
use crate::node::{HOSTS_TOML, MANAGED_ENVIRONMENT, NodeSpec, display_env_value};
use crate::vocab::file::node_path;
use crate::vocab::operation::{Operation, unified_diff};
use crate::vocab::order;

/// Plans the change from `base` to `head`. A missing base (an invalid or
/// empty revision) plans everything in head as new.
pub fn plan(base: Option<&Desired>, head: &Desired) -> Plan {
    let empty = BTreeMap::new();
    let base_instances = base.map_or(&empty, |b| &b.instances);
    let mut plan = Plan {
        instances: instance_changes(base_instances, &head.instances),
        nodes: node_groups(base_instances, &head.instances),
        machine_sets: machine_set_changes(base, head),
        ..Plan::default()
    };
    if base.is_some() {
        // The head's limit is the one winfleet applies: a commit may raise
        // it together with the removal.
        let leaving = plan.instances.deconfigure.len();
        plan.deconfigure_refused = removal_guard(head.instances.len(), leaving, head.fleet.max_removal_percent);
    }
    plan.warnings = warnings(base, head, &plan).into_iter().map(super::Warning::plan).collect();
    plan.warnings.extend(super::sources::note(head).map(super::Warning::plan));
    plan
}

fn summary(i: &Instance) -> InstanceSummary {
    InstanceSummary {
        address: i.address.clone(),
        username: i.username.clone(),
        port: i.port,
        shell: i.shell.as_str().to_owned(),
        origin: i.origin.clone(),
    }
}

fn instance_changes(base: &BTreeMap<String, Instance>, head: &BTreeMap<String, Instance>) -> InstanceChanges {
    let mut changes = InstanceChanges::default();
    for (address, b, h) in joined(base, head) {
        match (b, h) {
            (None, Some(h)) => changes.configure.push(summary(h)),
            (Some(b), Some(h)) => {
                let settings = setting_changes(b, h);
                if !settings.is_empty() {
                    changes.update.push(InstanceUpdate { address: address.clone(), changes: settings });
                }
            }
            (Some(b), None) => changes.deconfigure.push(summary(b)),
            (None, None) => {}
        }
    }
    order::sort_by_address(&mut changes.configure, |i| &i.address);
    order::sort_by_address(&mut changes.update, |i| &i.address);
    order::sort_by_address(&mut changes.deconfigure, |i| &i.address);
    changes
}

/// Every address of either map once, in order, with its instance in each:
/// the two maps walked side by side (both are sorted by address).
fn joined<'m>(
    base: &'m BTreeMap<String, Instance>,
    head: &'m BTreeMap<String, Instance>,
) -> impl Iterator<Item = (&'m String, Option<&'m Instance>, Option<&'m Instance>)> {
    let (mut b, mut h) = (base.iter().peekable(), head.iter().peekable());
    std::iter::from_fn(move || match (b.peek(), h.peek()) {
        (Some((ba, _)), Some((ha, _))) if ba == ha => {
            b.next().zip(h.next()).map(|((a, bi), (_, hi))| (a, Some(bi), Some(hi)))
        }
        (Some((ba, _)), Some((ha, _))) if ba > ha => h.next().map(|(a, hi)| (a, None, Some(hi))),
        (Some(_), _) => b.next().map(|(a, bi)| (a, Some(bi), None)),
        (None, _) => h.next().map(|(a, hi)| (a, None, Some(hi))),
    })
}

fn setting_changes(b: &Instance, h: &Instance) -> Vec<SettingChange> {
    let mut out = Vec::new();
    // Most instances a change leaves alone: compared whole, without building
    // the strings of each setting (equal taint lists give equal taint maps).
    let same = (&b.username, b.port, b.shell, &b.labels, &b.annotations, &b.taints)
        == (&h.username, h.port, h.shell, &h.labels, &h.annotations, &h.taints);
    if same {
        return out;
    }
    let mut push = |setting: String, from: Option<String>, to: Option<String>| {
        if from != to {
            out.push(SettingChange { setting, from, to });
        }
    };
    push("username".into(), Some(b.username.clone()), Some(h.username.clone()));
    push("port".into(), Some(b.port.to_string()), Some(h.port.to_string()));
    push("shell".into(), Some(b.shell.as_str().into()), Some(h.shell.as_str().into()));
    let keys: BTreeSet<&String> = b.labels.keys().chain(h.labels.keys()).collect();
    for key in keys {
        push(format!("labels/{key}"), b.labels.get(key).cloned(), h.labels.get(key).cloned());
    }
    let keys: BTreeSet<&String> = b.annotations.keys().chain(h.annotations.keys()).collect();
    for key in keys {
        push(format!("annotations/{key}"), b.annotations.get(key).cloned(), h.annotations.get(key).cloned());
    }
    let taint_map = |i: &Instance| -> BTreeMap<String, String> {
        i.taints.iter().map(|t| (format!("{}:{:?}", t.key, t.effect), t.value.clone())).collect()
    };
    let (bt, ht) = (taint_map(b), taint_map(h));
    let keys: BTreeSet<&String> = bt.keys().chain(ht.keys()).collect();
    for key in keys {
        push(format!("taints/{key}"), bt.get(key).cloned(), ht.get(key).cloned());
    }
    out
}

fn node_groups(base: &BTreeMap<String, Instance>, head: &BTreeMap<String, Instance>) -> Vec<NodeGroup> {
    type Key = (Option<*const NodeSpec>, Option<*const NodeSpec>);
    type Pair = (Option<Arc<NodeSpec>>, Option<Arc<NodeSpec>>, Vec<String>);
    let mut pairs: HashMap<Key, Pair> = HashMap::new();
    for (address, b, h) in joined(base, head) {
        let (b, h) = (b.map(|i| &i.spec), h.map(|i| &i.spec));
        let key = (b.map(Arc::as_ptr), h.map(Arc::as_ptr));
        pairs.entry(key).or_insert_with(|| (b.cloned(), h.cloned(), Vec::new())).2.push(address.clone());
    }
    let mut groups: Vec<NodeGroup> = Vec::new();
    for (b, h, nodes) in pairs.into_values() {
        let operations = operations(b.as_deref(), h.as_deref());
        if operations.is_empty() {
            continue;
        }
        let deconfigure = h.is_none();
        match groups.iter_mut().find(|g| g.operations == operations && g.deconfigure == deconfigure) {
            Some(group) => group.nodes.extend(nodes),
            None => {
                let reboot_required = operations.iter().any(Operation::is_disruptive);
                groups.push(NodeGroup { nodes, operations, reboot_required, deconfigure });
            }
        }
    }
    for group in &mut groups {
        order::sort_by_address(&mut group.nodes, String::as_str);
    }
    groups.sort_by(|a, b| {
        order::address(a.nodes.first().map_or("", String::as_str), b.nodes.first().map_or("", String::as_str))
    });
    groups
}

/// The operations that turn a node from `base` into `head`.
pub fn operations(base: Option<&NodeSpec>, head: Option<&NodeSpec>) -> Vec<Operation> {
    let mut ops = Vec::new();
    let no_files = BTreeMap::new();
    let base_files = base.map_or(&no_files, |b| &b.registries);
    if let Some(h) = head {
        let moved = base.is_some_and(|b| b.registries_dir != h.registries_dir || b.shell != h.shell);
        for (dir, file) in naturally(&h.registries) {
            let old = base_files.get(dir).filter(|_| !moved);
            if old.is_some_and(|o| o.content() == file.content()) {
                continue;
            }
            let path = node_path(h.shell, &h.registries_dir, &[dir, HOSTS_TOML]);
            let before = old.map_or("", |o| o.display());
            ops.push(Operation::WriteFile {
                path: path.clone(),
                created: old.is_none(),
                diff: unified(&path, before, file.display()),
            });
        }
    }
    if let Some(b) = base {
        let stays = |dir: &str| {
            head.is_some_and(|h| {
                h.registries_dir == b.registries_dir && h.shell == b.shell && h.registries.contains_key(dir)
            })
        };
        for (dir, _) in naturally(&b.registries).filter(|(d, _)| !stays(d)) {
            ops.push(Operation::RemoveRegistry {
                path: node_path(b.shell, &b.registries_dir, &[dir]),
                refused: None,
                kept: Vec::new(),
            });
        }
    }
    ops.extend(lifecycle_operations(
        base.and_then(|b| b.lifecycle.as_deref()),
        head.and_then(|h| h.lifecycle.as_deref()),
    ));
    for name in MANAGED_ENVIRONMENT {
        let from = base.and_then(|b| b.environment.get(name));
        let to = head.and_then(|h| h.environment.get(name));
        match (from, to) {
            (f, Some(t)) if f != Some(t) => ops.push(Operation::SetEnv {
                name: name.to_owned(),
                from: f.map(|v| display_env_value(v)),
                to: display_env_value(t),
            }),
            (Some(f), None) => ops.push(Operation::UnsetEnv { name: name.to_owned(), from: display_env_value(f) }),
            _ => {}
        }
    }
    ops
}

/// A map's entries with their keys in natural order (`registry2` before
/// `registry10`).
fn naturally<V>(map: &BTreeMap<String, V>) -> impl Iterator<Item = (&String, &V)> {
    let mut entries: Vec<(&String, &V)> = map.iter().collect();
    entries.sort_by(|a, b| order::natural(a.0, b.0));
    entries.into_iter()
}

/// The lifecycle part of a node's change: the payload pin and the services
/// (commands with their variable names: the values are the node's). A new
/// instance gets every service, created and started; an instance whose
/// version changes is upgraded (the plan's warnings say so); a leaving
/// one loses every service, dependents first.
fn lifecycle_operations(base: Option<&LifecycleSpec>, head: Option<&LifecycleSpec>) -> Vec<Operation> {
    let Some(head) = head else {
        let services = base.map_or(&[][..], |b| &b.services[..]);
        return services.iter().rev().map(|s| Operation::RemoveService { name: s.name.clone() }).collect();
    };
    let mut ops = Vec::new();
    let from = base.map(|b| b.payload_digest.clone());
    if from.as_deref() != Some(head.payload_digest.as_str()) {
        ops.push(Operation::PinPayload { from, to: head.payload_digest.clone() });
    }
    for service in &head.services {
        let old = base.and_then(|b| b.services.iter().find(|s| s.name == service.name));
        if old == Some(service) {
            continue;
        }
        ops.push(Operation::DefineService {
            name: service.name.clone(),
            created: old.is_none(),
            command: service.command.clone(),
        });
    }
    ops
}

fn unified(path: &str, before: &str, after: &str) -> String {
    unified_diff(&format!("base: {path}"), &format!("head: {path}"), before, after)
}

fn machine_set_changes(base: Option<&Desired>, head: &Desired) -> Vec<MachineSetChange> {
    let empty = BTreeMap::new();
    let base_sets = base.map_or(&empty, |b| &b.machine_sets);
    let names: BTreeSet<&String> = base_sets.keys().chain(head.machine_sets.keys()).collect();
    names
        .into_iter()
        .filter_map(|name| {
            let (b, h) = (base_sets.get(name), head.machine_sets.get(name));
            let action = match (b, h) {
                (None, Some(_)) => MachineSetAction::Create,
                (Some(_), None) => MachineSetAction::Delete,
                (Some(b), Some(h)) if b.object != h.object => MachineSetAction::Update,
                _ => return None,
            };
            let (from, to) = (b.and_then(|m| m.replicas), h.and_then(|m| m.replicas));
            Some(MachineSetChange {
                name: name.clone(),
                action,
                replicas: (from != to || action != MachineSetAction::Update).then_some((from, to)),
                fields: fields::diff(b.map(|m| &m.object), h.map(|m| &m.object)),
            })
        })
        .collect()
}

/// The instances that stay and whose desired version changes: each is
/// upgraded (cordon, drain, services stopped, files replaced, restarted).
fn upgrades(base: Option<&Desired>, head: &Desired) -> Option<String> {
    let base = base?;
    let version = |i: &Instance| i.spec.lifecycle.as_ref().map(|l| l.version.clone());
    let nodes: Vec<&str> = head
        .instances
        .iter()
        .filter(|(a, h)| base.instances.get(*a).is_some_and(|b| version(b).is_some() && version(b) != version(h)))
        .map(|(a, _)| a.as_str())
        .collect();
    (!nodes.is_empty()).then(|| {
        format!(
            "{} node(s) move to a new payload or services manifest and are upgraded, each drained first, at most {} at a time: {}",
            nodes.len(),
            head.fleet.max_unavailable,
            nodes.join(", ")
        )
    })
}

fn warnings(base: Option<&Desired>, head: &Desired, plan: &Plan) -> Vec<String> {
    let mut out = Vec::new();
    let empty = BTreeMap::new();
    let base_sets = base.map_or(&empty, |b| &b.mirror_sets);
    let mut mco = Vec::new();
    for (key, spec) in &head.mirror_sets {
        match base_sets.get(key) {
            None if key.starts_with("ImageTagMirrorSet/") => mco.push(format!("{key} created")),
            Some(old) if old != spec => mco.push(format!("{key} changed")),
            _ => {}
        }
    }
    mco.extend(base_sets.keys().filter(|k| !head.mirror_sets.contains_key(*k)).map(|k| format!("{k} deleted")));
    if !mco.is_empty() {
        out.push(format!(
            "the Machine Config Operator drains and reboots every Linux node, one pool at a time, when it sees this on the cluster: {}",
            mco.join(", ")
        ));
    }
    for m in plan.machine_sets.iter().filter(|m| m.action == MachineSetAction::Delete) {
        out.push(format!(
            "MachineSet {} is deleted: the Machine API deletes its Machines, and their Windows nodes leave the cluster",
            m.name
        ));
    }
    if let Some(refused) = &plan.deconfigure_refused {
        out.push(format!("{refused}; everything else in this change is applied"));
    }
    if let Some(upgrade) = upgrades(base, head) {
        out.push(upgrade);
    }
    if plan.reboots() > 0 {
        out.push(format!(
            "proxy environment changes take effect after a safe reboot (cordon, drain, reboot, uncordon) of each affected node, \
             at most {} at a time",
            head.fleet.max_unavailable
        ));
    }
    out
}
