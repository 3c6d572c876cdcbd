//! A Machine API provider of the tests' own, beside the test API server:
//! it plays the Machine API and the cloud for Windows MachineSets.
//!
//! A real cloud boots a Windows VM with the `windows-user-data` Secret as
//! its user data, and the script authorizes the fleet's key. The posix
//! test nodes cannot run PowerShell, so the provider reads the key out of
//! the script text as cloud-init reads its input: the one base64 string
//! literal decoded ([`authorized_key`]). A Secret that does not authorize
//! the fleet's key gives a VM the fleet cannot reach, as on a cloud.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::controlplane::resource;
use super::fleet::TestFleet;

/// The authorized_keys line the user data script installs: the decoded
/// content of its `FromBase64String('…')` literal. `None` when the script
/// carries none (the VM boots with no key authorized).
pub fn authorized_key(user_data: &str) -> Option<String> {
    let start = user_data.find("FromBase64String('")? + "FromBase64String('".len();
    let end = start + user_data[start..].find('\'')?;
    let line = String::from_utf8(STANDARD.decode(&user_data[start..end]).ok()?).ok()?;
    Some(line.trim().to_owned())
}

const NS: &str = "openshift-machine-api";
const SET_LABEL: &str = "machine.openshift.io/cluster-api-machineset";

/// What the cloud did, for assertions.
#[derive(Clone, Debug, Default)]
pub struct CloudLog {
    /// Machines whose VM was created, in order, with the key it authorized.
    pub booted: Vec<(String, Option<String>)>,
    /// Machines whose VM was deleted, in order.
    pub deleted: Vec<String>,
    /// The provider's failed passes (an API error; it tries again).
    pub errors: Vec<String>,
}

#[derive(Default)]
struct State {
    /// Machine → VM slot.
    vms: BTreeMap<String, usize>,
    next_slot: usize,
    next_name: u64,
    boot_delay: Duration,
    ignore_user_data: bool,
    /// How many of the fleet's nodes are VMs (the rest are BYOH hosts).
    vm_count: usize,
    log: CloudLog,
}

/// The Machine API and the cloud, running beside a test API server until
/// dropped. Its VMs are a pool of sshd nodes, each used once: created
/// stopped, started (after the boot delay) when a Machine gets it, with
/// the key its user data authorizes.
pub struct Cloud {
    fleet: Arc<Mutex<TestFleet>>,
    state: Arc<Mutex<State>>,
    stop: CancellationToken,
    /// The fleet's private key.
    pub key: PathBuf,
    /// The known_hosts pinning every VM's host key.
    pub known_hosts: PathBuf,
    /// The fleet document's user and port (a Fleet document).
    pub fleet_yaml: String,
    /// The fleet's scratch directory (payload sources live there).
    pub dir: PathBuf,
}

impl Drop for Cloud {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Cloud {
    /// A pool of `vms` VMs (sshd nodes named `win-machine-<i>`, stopped),
    /// and the provider running against `client`.
    pub fn start(client: Client, vms: usize) -> Self {
        Self::start_with_hosts(client, vms, 0)
    }

    /// The same with `hosts` BYOH hosts beside the VMs (sshd nodes named
    /// `win-byoh-<i>`, running, the fleet's user and key authorized: see
    /// [`Cloud::hosts`]); the cloud never gives them to a Machine.
    pub fn start_with_hosts(client: Client, vms: usize, hosts: usize) -> Self {
        let hosts: Vec<String> = (0..hosts).map(|i| format!("win-byoh-{i}")).collect();
        Self::start_with_named_hosts(client, vms, &hosts)
    }

    /// The same with one BYOH host per name in `hosts` (the demo names
    /// its own).
    pub fn start_with_named_hosts(client: Client, vms: usize, hosts: &[String]) -> Self {
        let mut names: Vec<String> = (0..vms).map(|i| format!("win-machine-{i}")).collect();
        names.extend(hosts.iter().cloned());
        let fleet = TestFleet::start_named(&names.iter().map(String::as_str).collect::<Vec<_>>());
        for node in &fleet.nodes {
            node.install_systemctl("units");
        }
        let mut fleet = fleet;
        windows_user(&fleet.user);
        for node in fleet.nodes.iter_mut().take(vms) {
            // A Machine's user is Windows' Administrator (WMCO-SPEC 6).
            let config = node.dir.join("sshd_config");
            let text = std::fs::read_to_string(&config).unwrap();
            std::fs::write(
                &config,
                text.replace(&format!("AllowUsers {}\n", fleet.user), "AllowUsers Administrator\n"),
            )
            .unwrap();
            let keys = node.dir.join("cloud_authorized_keys");
            std::fs::write(&keys, "").unwrap();
            node.use_authorized_keys(&keys);
            node.stop();
        }
        let (key, known_hosts, fleet_yaml, dir) =
            (fleet.key.clone(), fleet.known_hosts.clone(), fleet.fleet_yaml(), fleet.dir().to_owned());
        let cloud = Cloud {
            fleet: Arc::new(Mutex::new(fleet)),
            state: Arc::new(Mutex::new(State { vm_count: vms, ..State::default() })),
            stop: CancellationToken::new(),
            key,
            known_hosts,
            fleet_yaml,
            dir,
        };
        let (fleet, state, stop) = (Arc::clone(&cloud.fleet), Arc::clone(&cloud.state), cloud.stop.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                if let Err(e) = pass(&client, &fleet, &state).await {
                    state.lock().unwrap().log.errors.push(e);
                }
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        });
        cloud
    }

    /// VMs created from now on start their sshd `delay` after the Machine
    /// is Provisioned (a slow boot).
    pub fn set_boot_delay(&self, delay: Duration) {
        self.state.lock().unwrap().boot_delay = delay;
    }

    /// VMs created from now on boot from an image that ignores the user
    /// data: no key authorized, so winfleet cannot reach them.
    pub fn ignore_user_data(&self) {
        self.state.lock().unwrap().ignore_user_data = true;
    }

    /// What the cloud did so far.
    pub fn log(&self) -> CloudLog {
        self.state.lock().unwrap().log.clone()
    }

    /// The VM addresses of the Machines that have one.
    pub fn addresses(&self) -> BTreeMap<String, String> {
        let state = self.state.lock().unwrap();
        let fleet = self.fleet.lock().unwrap();
        state.vms.iter().map(|(m, slot)| (m.clone(), fleet.nodes[*slot].address.clone())).collect()
    }

    /// The BYOH hosts' addresses (the nodes after the VMs).
    pub fn hosts(&self) -> Vec<String> {
        let vms = self.state.lock().unwrap().vm_count;
        self.fleet.lock().unwrap().nodes.iter().skip(vms).map(|n| n.address.clone()).collect()
    }

    /// The fleet of VMs (logs, files).
    pub fn fleet(&self) -> std::sync::MutexGuard<'_, TestFleet> {
        self.fleet.lock().unwrap()
    }
}

/// One pass of the Machine API and the cloud.
async fn pass(client: &Client, fleet: &Arc<Mutex<TestFleet>>, state: &Arc<Mutex<State>>) -> Result<(), String> {
    let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &machine_sets());
    let machines: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &machine_api());
    let nodes: Api<Node> = Api::all(client.clone());
    fn err(what: &'static str) -> impl Fn(kube::Error) -> String {
        move |e| format!("{what}: {e}")
    }
    let sets = sets.list(&ListParams::default()).await.map_err(err("list MachineSets"))?.items;
    let mut all = machines.list(&ListParams::default()).await.map_err(err("list Machines"))?.items;
    let node_list = nodes.list(&ListParams::default()).await.map_err(err("list Nodes"))?.items;
    // The MachineSet controller: as many Machines as replicas, the newest
    // deleted first on a scale-down.
    for set in &sets {
        let name = set.name_any();
        let template = &set.data["spec"]["template"];
        if template.pointer("/metadata/labels/machine.openshift.io~1os-id").and_then(Value::as_str) != Some("Windows") {
            continue;
        }
        let want = set.data.pointer("/spec/replicas").and_then(Value::as_u64).unwrap_or(1) as usize;
        let mut mine: Vec<&DynamicObject> = all.iter().filter(|m| m.labels().get(SET_LABEL) == Some(&name)).collect();
        mine.sort_by_key(|m| m.name_any());
        for _ in mine.len()..want {
            let seq = {
                let mut s = state.lock().unwrap();
                s.next_name += 1;
                s.next_name
            };
            let machine = json!({
                "apiVersion": "machine.openshift.io/v1beta1",
                "kind": "Machine",
                "metadata": { "name": format!("{name}-{seq:03}"), "namespace": NS, "labels": template["metadata"]["labels"] },
                "spec": template["spec"],
            });
            let object: DynamicObject = serde_json::from_value(machine).map_err(|e| e.to_string())?;
            machines.create(&PostParams::default(), &object).await.map_err(err("create Machine"))?;
        }
        for extra in mine.iter().rev().take(mine.len().saturating_sub(want)) {
            let _ = machines.delete(&extra.name_any(), &DeleteParams::default()).await;
        }
        let ready = mine
            .iter()
            .take(want)
            .filter(|m| {
                let node = m.data.pointer("/status/nodeRef/name").and_then(Value::as_str);
                node.and_then(|n| node_list.iter().find(|x| x.name_any() == n)).is_some_and(node_ready)
            })
            .count();
        let status = json!({ "status": { "replicas": mine.len().min(want), "readyReplicas": ready, "availableReplicas": ready } });
        let sets_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &machine_sets());
        sets_api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(err("MachineSet status"))?;
    }
    all = machines.list(&ListParams::default()).await.map_err(err("list Machines"))?.items;
    // The cloud: a VM per new Machine, its key from the user data.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    for machine in &all {
        let name = machine.name_any();
        let phase = machine.data.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default().to_owned();
        let has_vm = state.lock().unwrap().vms.contains_key(&name);
        if !has_vm {
            // A real Machine controller waits for the user data Secret.
            let Some(secret) = secrets.get_opt("windows-user-data").await.map_err(err("get user data"))? else {
                continue;
            };
            let script = secret
                .data
                .as_ref()
                .and_then(|d| d.get("userData"))
                .map(|b| String::from_utf8_lossy(&b.0).into_owned());
            let ignore = state.lock().unwrap().ignore_user_data;
            let key = script.as_deref().and_then(authorized_key).filter(|_| !ignore);
            let (slot, delay) = {
                let mut s = state.lock().unwrap();
                if s.next_slot >= s.vm_count {
                    return Err(format!("the cloud has no VM left for {name}"));
                }
                let slot = s.next_slot;
                s.next_slot += 1;
                s.vms.insert(name.clone(), slot);
                s.log.booted.push((name.clone(), key.clone()));
                (slot, s.boot_delay)
            };
            let (address, hostname) = {
                let fleet = fleet.lock().unwrap();
                let node = fleet.nodes.get(slot).ok_or_else(|| format!("the cloud has no VM left for {name}"))?;
                std::fs::write(
                    node.dir.join("cloud_authorized_keys"),
                    key.map(|k| format!("{k}\n")).unwrap_or_default(),
                )
                .unwrap();
                (node.address.clone(), node.hostname.clone())
            };
            let boot = Arc::clone(fleet);
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = tokio::task::spawn_blocking(move || boot.lock().unwrap().nodes[slot].start()).await;
            });
            let status = json!({ "status": {
                "phase": "Provisioned",
                "addresses": [{ "type": "InternalIP", "address": address }, { "type": "Hostname", "address": hostname }],
            }});
            machines
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .map_err(err("Machine status"))?;
            continue;
        }
        if phase == "Provisioned" {
            let address =
                machine.data.pointer("/status/addresses/0/address").and_then(Value::as_str).unwrap_or_default();
            let registered = node_list.iter().find(|n| node_addresses(n).iter().any(|a| a == address));
            if let Some(node) = registered {
                let status =
                    json!({ "status": { "phase": "Running", "nodeRef": { "kind": "Node", "name": node.name_any() } } });
                machines
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                    .await
                    .map_err(err("Machine status"))?;
            }
        }
    }
    // Machines gone: their VM deleted, their Node removed (the Machine API's job).
    let gone: Vec<(String, usize)> = {
        let s = state.lock().unwrap();
        s.vms.iter().filter(|(m, _)| !all.iter().any(|x| &&x.name_any() == m)).map(|(m, s)| (m.clone(), *s)).collect()
    };
    for (machine, slot) in gone {
        let address = {
            let stopper = Arc::clone(fleet);
            tokio::task::spawn_blocking(move || {
                let mut fleet = stopper.lock().unwrap();
                fleet.nodes[slot].stop();
                fleet.nodes[slot].address.clone()
            })
            .await
            .map_err(|e| e.to_string())?
        };
        for node in node_list.iter().filter(|n| node_addresses(n).contains(&address)) {
            let _ = nodes.delete(&node.name_any(), &DeleteParams::default()).await;
        }
        let mut s = state.lock().unwrap();
        s.vms.remove(&machine);
        s.log.deleted.push(machine);
    }
    Ok(())
}

/// `Administrator`, the user winfleet logs in to a Machine as: an alias of
/// the test fleet's login user (same uid, so the node's files are its).
fn windows_user(user: &str) {
    let run = |args: &[&str]| std::process::Command::new(args[0]).args(&args[1..]).output().unwrap();
    if run(&["id", "Administrator"]).status.success() {
        return;
    }
    let uid = String::from_utf8(run(&["id", "-u", user]).stdout).unwrap();
    let gid = String::from_utf8(run(&["id", "-g", user]).stdout).unwrap();
    // Racing test binaries may both try; the loser's failure is fine.
    let _ = run(&[
        "useradd",
        "--badname",
        "-o",
        "-u",
        uid.trim(),
        "-g",
        gid.trim(),
        "-M",
        "-d",
        "/nonexistent",
        "-s",
        "/bin/sh",
        "Administrator",
    ]);
    let _ = run(&["usermod", "-p", "*", "Administrator"]);
}

fn node_ready(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn node_addresses(node: &Node) -> Vec<String> {
    let addresses = node.status.as_ref().and_then(|s| s.addresses.as_ref());
    addresses.into_iter().flatten().map(|a| a.address.clone()).collect()
}

fn machine_sets() -> kube::api::ApiResource {
    resource("machine.openshift.io", "v1beta1", "MachineSet", "machinesets")
}

fn machine_api() -> kube::api::ApiResource {
    resource("machine.openshift.io", "v1beta1", "Machine", "machines")
}
