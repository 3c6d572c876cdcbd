//! Ansible doing what winfleet's round does, on the same nodes, for the
//! fleet bench's third column (bench only, never CI).
//!
//! ansible-core comes from PyPI into a virtualenv the bench creates once
//! under `target/bench-ansible/`. The inventory lists the same nodes with
//! `forks = 32` (winfleet's default parallelism), pipelining on and
//! ControlPersist (warm connections from the second run on, as winfleet's
//! pool keeps them). The playbook is what an admin would write for the same
//! job: the registry directories, each `hosts.toml` copied with its content
//! (Ansible compares checksums and writes only what differs), stale registry
//! directories removed, and the proxy variables in the same systemd drop-in.
//! Its values come from winfleet's own `NodeSpec`s, so both write the same
//! bytes; the fleet bench checks that by running winfleet's drift check
//! after Ansible's rollout.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use winfleet::desired::model::Desired;
use winfleet::node::{ENVIRONMENT_DROP_IN, HOSTS_TOML};
use winfleet::vocab::systemd::render_drop_in;

use super::fleet::TestFleet;
use super::{clean, pool_via, winfleet_round};

const PLAYBOOK: &str = r#"- hosts: all
  gather_facts: false
  tasks:
    - name: registry directories
      ansible.builtin.file: {path: "{{ node_dir }}/{{ registries_dir }}/{{ item.key }}", state: directory, mode: "0755"}
      loop: "{{ registries | dict2items }}"
    - name: hosts.toml
      ansible.builtin.copy: {content: "{{ item.value }}", dest: "{{ node_dir }}/{{ registries_dir }}/{{ item.key }}/HOSTS_TOML", mode: "0644"}
      loop: "{{ registries | dict2items }}"
    - name: registry directories on the node
      ansible.builtin.find: {paths: "{{ node_dir }}/{{ registries_dir }}", file_type: directory}
      register: present
    - name: stale registry directories
      ansible.builtin.file: {path: "{{ item.path }}", state: absent}
      loop: "{{ present.files }}"
      when: item.path | basename not in registries
    - name: environment directory
      ansible.builtin.file: {path: "{{ node_dir }}/{{ environment_dir }}", state: directory, mode: "0755"}
    - name: proxy variables
      ansible.builtin.copy: {content: "{{ drop_in }}", dest: "{{ node_dir }}/{{ environment_dir }}/DROP_IN", mode: "0644"}
"#;

/// Ansible, installed and configured for one fleet.
pub struct Ansible {
    playbook: PathBuf,
    dir: tempfile::TempDir,
    version: String,
}

/// One `ansible-playbook` run: its time and how many tasks changed something.
pub struct Run {
    pub time: Duration,
    pub changed: usize,
}

impl Ansible {
    /// Installs ansible-core (once) and writes the configuration, trusting
    /// `known_hosts` (the fleet's, or the relays' copy); `Err` says why the
    /// column is skipped.
    pub fn set_up(known_hosts: &Path) -> Result<Self, String> {
        let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-ansible/venv");
        let playbook = venv.join("bin/ansible-playbook");
        if !playbook.exists() {
            run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
            run(Command::new(venv.join("bin/pip")).args(["install", "--quiet", "ansible-core"]))?;
        }
        let version = run(Command::new(venv.join("bin/ansible")).arg("--version"))?;
        let version = version.lines().next().unwrap_or_default().to_owned();
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let config = format!(
            "[defaults]\nforks = 32\ngathering = explicit\nhost_key_checking = True\ninterpreter_python = /usr/bin/python3\n\
             retry_files_enabled = False\nlocal_tmp = {tmp}/local\n\
             [ssh_connection]\npipelining = True\ncontrol_path = {tmp}/cp-%%C\n\
             ssh_args = -o ControlMaster=auto -o ControlPersist=600s -o UserKnownHostsFile={known} -o IdentitiesOnly=yes\n",
            tmp = dir.path().display(),
            known = known_hosts.display(),
        );
        std::fs::write(dir.path().join("ansible.cfg"), config).map_err(|e| e.to_string())?;
        let book = PLAYBOOK.replace("HOSTS_TOML", HOSTS_TOML).replace("DROP_IN", ENVIRONMENT_DROP_IN);
        std::fs::write(dir.path().join("playbook.yml"), book).map_err(|e| e.to_string())?;
        Ok(Self { playbook, dir, version })
    }

    /// Ends the ControlPersist connections (their masters would outlive the
    /// bench's measurements otherwise).
    pub fn close(&self) {
        let pattern = format!("ssh: {}/cp-", self.dir.path().display());
        let _ = Command::new("pkill").arg("-f").arg(pattern).status();
    }

    /// The `ansible --version` line.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Runs the playbook for `desired` on every node, on its own port or on
    /// `port` (the relays').
    pub fn run(&self, fleet: &TestFleet, desired: &Desired, port: Option<u16>) -> Result<Run, String> {
        let inventory = self.dir.path().join("inventory.json");
        std::fs::write(&inventory, inventory_json(fleet, desired, port)).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let output = Command::new(&self.playbook)
            .current_dir(self.dir.path())
            .env("ANSIBLE_CONFIG", self.dir.path().join("ansible.cfg"))
            .arg("-i")
            .arg(&inventory)
            .arg("playbook.yml")
            .output()
            .map_err(|e| e.to_string())?;
        let time = start.elapsed();
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            let first = stdout.lines().find(|l| l.starts_with("fatal") || l.starts_with("failed")).unwrap_or_default();
            return Err(format!("ansible-playbook failed: {}", first.chars().take(600).collect::<String>()));
        }
        Ok(Run { time, changed: recap_changed(&stdout) })
    }
}

/// The inventory: every node with its connection and winfleet's values.
fn inventory_json(fleet: &TestFleet, desired: &Desired, port: Option<u16>) -> String {
    let mut hosts = serde_json::Map::new();
    for node in &fleet.nodes {
        let spec = &desired.instances[&node.address].spec;
        let registries: serde_json::Map<String, serde_json::Value> =
            spec.registries.iter().map(|(name, file)| (name.clone(), file.content().into())).collect();
        hosts.insert(
            node.address.clone(),
            serde_json::json!({
                "ansible_host": node.address,
                "ansible_port": port.unwrap_or(node.port),
                "ansible_user": fleet.user,
                "ansible_ssh_private_key_file": fleet.key,
                "node_dir": node.path(""),
                // The test user's home is /nonexistent.
                "ansible_remote_tmp": node.path(".ansible/tmp"),
                "registries_dir": spec.registries_dir,
                "registries": registries,
                "environment_dir": spec.environment_dir,
                "drop_in": render_drop_in(&spec.environment, None),
            }),
        );
    }
    serde_json::json!({ "all": { "hosts": hosts } }).to_string()
}

/// The sum of `changed=N` over the play recap.
fn recap_changed(stdout: &str) -> usize {
    let mut total = 0;
    for line in stdout.lines() {
        if let Some(rest) = line.split("changed=").nth(1) {
            total += rest.split_whitespace().next().and_then(|n| n.parse::<usize>().ok()).unwrap_or(0);
        }
    }
    total
}

fn run(command: &mut Command) -> Result<String, String> {
    let output = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let mut message = format!("{command:?} exited with {}", output.status);
        let _ = write!(message, ": {}", String::from_utf8_lossy(&output.stderr).trim());
        Err(message)
    }
}

/// Ansible's (a), (b) and (c) on a clean fleet, then winfleet's drift check
/// on what it left: no write means both wrote the same bytes. `via`: the
/// relays' port and known_hosts, over a modelled network.
pub async fn column(
    fleet: &TestFleet,
    base: &Desired,
    changed: &Desired,
    via: Option<(u16, &std::path::Path)>,
) -> Result<Vec<Run>, String> {
    if std::env::var("ANSIBLE").is_ok_and(|v| v == "0") {
        return Err("ANSIBLE=0".into());
    }
    clean(fleet);
    let known_hosts = via.map_or(fleet.known_hosts.as_path(), |(_, known)| known);
    let ansible = Ansible::set_up(known_hosts)?;
    println!("Ansible: {}", ansible.version());
    let port = via.map(|(port, _)| port);
    let runs: Result<Vec<Run>, String> =
        [base, changed, changed].into_iter().map(|desired| ansible.run(fleet, desired, port)).collect();
    ansible.close();
    let runs = runs?;
    let (mut files, mut differing) = (0, 0);
    for node in &fleet.nodes {
        let spec = &changed.instances[&node.address].spec;
        for (name, file) in &spec.registries {
            let path = node.path(&format!("{}/{name}/{HOSTS_TOML}", spec.registries_dir));
            files += 1;
            differing += usize::from(std::fs::read(path).ok().as_deref() != Some(file.content().as_bytes()));
        }
    }
    let pool = pool_via(fleet, known_hosts);
    let (_, counts, failed) = winfleet_round(&pool, changed).await;
    pool.close().await;
    println!(
        "Ansible's hosts.toml files: {differing} of {files} differ from winfleet's (0 = the same bytes); winfleet's \
         drift check after them: {} writes (it adopts the directories it did not create: marker, same bytes), \
         {failed} failed",
        counts.applied
    );
    Ok(runs)
}
