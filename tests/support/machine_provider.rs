//! The cloud of the Machine tests: a pool of VMs (sshd nodes) that
//! Machines get, and the Machine API that drives it. The Machine API is
//! either the project's own model of it (tests/support/machine_model.rs:
//! [`Cloud::start_with_hosts`]) or OpenShift's real controllers, built from
//! machine-api-operator by tests/machineapi, whose actuator asks this cloud
//! for VMs over HTTP (tests/support/machine_api_real.rs: [`Cloud::start_real`]).
//!
//! A real cloud boots a Windows VM with the `windows-user-data` Secret as
//! its user data, and the script authorizes the fleet's key. The posix
//! test nodes cannot run PowerShell, so the cloud reads the key out of
//! the script text as cloud-init reads its input: the one base64 string
//! literal decoded ([`authorized_key`]). A Secret that does not authorize
//! the fleet's key gives a VM the fleet cannot reach, as on a cloud.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

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

/// What the cloud did, for assertions.
#[derive(Clone, Debug, Default)]
pub struct CloudLog {
    /// Machines whose VM was created, in order, with the key it authorized.
    pub booted: Vec<(String, Option<String>)>,
    /// Machines whose VM was deleted, in order.
    pub deleted: Vec<String>,
    /// The provider's failed passes (an API error; it tries again).
    pub errors: Vec<String>,
    /// Creates the cloud refused (a failure a test set), with the answer.
    pub refused: Vec<(String, String)>,
}

/// The cloud's answer to a create it refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// It may succeed later (capacity, a quota, an API hiccup).
    Transient(String),
    /// It never will (the Machine's configuration): the Machine fails.
    Permanent(String),
}

/// A Machine's VM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vm {
    /// Its InternalIP (the sshd node's loopback address).
    pub address: String,
    /// Its host name (the name its kubelet registers its Node under).
    pub hostname: String,
}

#[derive(Default)]
struct State {
    /// Machine → VM slot.
    vms: BTreeMap<String, usize>,
    next_slot: usize,
    boot_delay: Duration,
    ignore_user_data: bool,
    /// Refusals for the next creates, in order.
    refusals: VecDeque<Refusal>,
    /// How many more VMs are provisioned before the rest wait for
    /// [`Cloud::release`] (`None`: no limit).
    provisioning: Option<usize>,
    /// How many of the fleet's nodes are VMs (the rest are BYOH hosts).
    vm_count: usize,
    log: CloudLog,
}

/// The VMs: a pool of sshd nodes, each used once: created stopped,
/// started (after the boot delay) when a Machine gets it, with the key its
/// user data authorizes. Cheap to clone (shared).
#[derive(Clone)]
pub struct Vms {
    fleet: Arc<Mutex<TestFleet>>,
    state: Arc<Mutex<State>>,
}

impl Vms {
    /// The VM of `machine`, created when it has none: the next of the
    /// pool, authorizing the key `user_data` carries, its sshd started
    /// after the boot delay. Idempotent: a create retried gets the same VM.
    pub fn create(&self, machine: &str, user_data: Option<&str>) -> Result<Vm, Refusal> {
        if let Some(vm) = self.get(machine) {
            return Ok(vm);
        }
        let (slot, delay, key) = {
            let mut s = self.state.lock().unwrap();
            if let Some(refusal) = s.refusals.pop_front() {
                let (Refusal::Transient(m) | Refusal::Permanent(m)) = &refusal;
                s.log.refused.push((machine.to_owned(), m.clone()));
                return Err(refusal);
            }
            if s.provisioning == Some(0) {
                return Err(Refusal::Transient(format!("the cloud is still provisioning {machine}")));
            }
            s.provisioning = s.provisioning.map(|n| n - 1);
            if s.next_slot >= s.vm_count {
                return Err(Refusal::Transient(format!("the cloud has no VM left for {machine}")));
            }
            let key = user_data.and_then(authorized_key).filter(|_| !s.ignore_user_data);
            let slot = s.next_slot;
            s.next_slot += 1;
            s.vms.insert(machine.to_owned(), slot);
            s.log.booted.push((machine.to_owned(), key.clone()));
            (slot, s.boot_delay, key)
        };
        let vm = {
            let fleet = self.fleet.lock().unwrap();
            let node = &fleet.nodes[slot];
            std::fs::write(node.dir.join("cloud_authorized_keys"), key.map(|k| format!("{k}\n")).unwrap_or_default())
                .unwrap();
            Vm { address: node.address.clone(), hostname: node.hostname.clone() }
        };
        let boot = Arc::clone(&self.fleet);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = tokio::task::spawn_blocking(move || boot.lock().unwrap().nodes[slot].start()).await;
        });
        Ok(vm)
    }

    /// The VM of `machine`, if it has one.
    pub fn get(&self, machine: &str) -> Option<Vm> {
        let slot = *self.state.lock().unwrap().vms.get(machine)?;
        let fleet = self.fleet.lock().unwrap();
        let node = &fleet.nodes[slot];
        Some(Vm { address: node.address.clone(), hostname: node.hostname.clone() })
    }

    /// Deletes the VM of `machine` (its sshd stopped, with every service
    /// it ran); its address, `None` when it had none. Blocks while sshd
    /// stops: call it off the async threads. The log records it once
    /// [`Vms::deleted`] is called (after what goes with the VM).
    pub fn delete(&self, machine: &str) -> Option<String> {
        let slot = *self.state.lock().unwrap().vms.get(machine)?;
        let address = {
            let mut fleet = self.fleet.lock().unwrap();
            fleet.nodes[slot].stop();
            fleet.nodes[slot].address.clone()
        };
        self.state.lock().unwrap().vms.remove(machine);
        Some(address)
    }

    /// Records that the VM of `machine` is gone, with what went with it.
    pub fn deleted(&self, machine: &str) {
        self.state.lock().unwrap().log.deleted.push(machine.to_owned());
    }

    /// The Machines that have a VM.
    pub fn machines(&self) -> Vec<String> {
        self.state.lock().unwrap().vms.keys().cloned().collect()
    }

    /// Records a failed pass of the Machine API's model.
    pub fn record_error(&self, error: String) {
        self.state.lock().unwrap().log.errors.push(error);
    }
}

/// The Machine API and the cloud, running beside a test API server until
/// dropped.
pub struct Cloud {
    pub(crate) vms: Vms,
    pub(crate) stop: CancellationToken,
    /// The real Machine API controllers' process, when they drive the
    /// cloud (dropped, it is stopped).
    pub(crate) controllers: Option<super::machine_api_real::MachineApiProcess>,
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
    /// A pool of `vms` VMs (sshd nodes named `win-machine-<i>`, stopped)
    /// and `hosts` BYOH hosts beside them (sshd nodes named `win-byoh-<i>`,
    /// running, the fleet's user and key authorized: see [`Cloud::hosts`];
    /// the cloud never gives them to a Machine). No Machine API drives it
    /// yet.
    pub(crate) fn pool(vms: usize, hosts: usize) -> Self {
        let hosts: Vec<String> = (0..hosts).map(|i| format!("win-byoh-{i}")).collect();
        Self::pool_named(vms, &hosts)
    }

    /// The same with one BYOH host per name in `hosts` (the demo names
    /// its own).
    pub(crate) fn pool_named(vms: usize, hosts: &[String]) -> Self {
        Self::pool_of((0..vms).map(|i| format!("win-machine-{i}")).collect(), hosts)
    }

    /// The same with the VMs' host names given, in the order the cloud
    /// hands them out.
    pub(crate) fn pool_of(mut names: Vec<String>, hosts: &[String]) -> Self {
        let vms = names.len();
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
        let state = State { vm_count: vms, ..State::default() };
        Cloud {
            vms: Vms { fleet: Arc::new(Mutex::new(fleet)), state: Arc::new(Mutex::new(state)) },
            stop: CancellationToken::new(),
            controllers: None,
            key,
            known_hosts,
            fleet_yaml,
            dir,
        }
    }

    /// VMs created from now on start their sshd `delay` after the Machine
    /// is Provisioned (a slow boot).
    pub fn set_boot_delay(&self, delay: Duration) {
        self.vms.state.lock().unwrap().boot_delay = delay;
    }

    /// VMs created from now on boot from an image that ignores the user
    /// data: no key authorized, so winfleet cannot reach them.
    pub fn ignore_user_data(&self) {
        self.vms.state.lock().unwrap().ignore_user_data = true;
    }

    /// Only the next `count` VMs are provisioned; later creates wait
    /// (a transient "still provisioning") until [`Cloud::release`].
    pub fn provision_only(&self, count: usize) {
        self.vms.state.lock().unwrap().provisioning = Some(count);
    }

    /// The VMs held by [`Cloud::provision_only`] are provisioned at the
    /// Machine API's next pass.
    pub fn release(&self) {
        self.vms.state.lock().unwrap().provisioning = None;
    }

    /// The next creates are refused, one per refusal, in order (a cloud's
    /// capacity or quota error, an invalid configuration).
    pub fn refuse_creates(&self, refusals: impl IntoIterator<Item = Refusal>) {
        self.vms.state.lock().unwrap().refusals.extend(refusals);
    }

    /// What the cloud did so far.
    pub fn log(&self) -> CloudLog {
        self.vms.state.lock().unwrap().log.clone()
    }

    /// The VM addresses of the Machines that have one.
    pub fn addresses(&self) -> BTreeMap<String, String> {
        let machines = self.vms.machines();
        machines.into_iter().filter_map(|m| self.vms.get(&m).map(|vm| (m, vm.address))).collect()
    }

    /// The BYOH hosts' addresses (the nodes after the VMs).
    pub fn hosts(&self) -> Vec<String> {
        let vms = self.vms.state.lock().unwrap().vm_count;
        self.fleet().nodes.iter().skip(vms).map(|n| n.address.clone()).collect()
    }

    /// The fleet of VMs (logs, files).
    pub fn fleet(&self) -> std::sync::MutexGuard<'_, TestFleet> {
        self.vms.fleet.lock().unwrap()
    }

    /// The log of the real Machine API controllers (empty with the model).
    pub fn controllers_log(&self) -> String {
        self.controllers.as_ref().map(|c| c.log()).unwrap_or_default()
    }
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
