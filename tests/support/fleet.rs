//! A test fleet: N simulated nodes, each a real OpenSSH sshd on its own
//! loopback address, with its own host key and its own state directory.
//!
//! Recipe (verified on Debian's openssh-server 9.2):
//! - sshd is started by absolute path, one per node, in the foreground
//!   (`-D -e`), with a generated config: `ListenAddress 127.A.B.N:PORT` (port
//!   0 is rejected, so one free port is picked and shared: the addresses
//!   differ), `StrictModes no` (keys live under /tmp), `UsePAM no`,
//!   `MaxStartups 1000` (parallel dials), `MaxSessions 50`, `AllowUsers`.
//! - Logins go to one unprivileged user whose shell is /bin/sh (root's
//!   bashrc would cost ~200 ms per command): as root the harness creates
//!   `winfleet-node` (password `*`, not locked, so `UsePAM no` admits it) and
//!   runs sshd as root (which needs /run/sshd); as anyone else, sshd runs as
//!   that user and only that user can log in.
//! - `ForceCommand` runs the node's wrapper: it enters the node's home (so
//!   relative directories in the Fleet land there), puts the node's `bin/`
//!   first on PATH (test shims), records the session's pids (to cut a
//!   connection), hands `internal-sftp` to sftp-server, and runs the
//!   requested command with /bin/sh.
//! - Drop kills every sshd; a node's live sessions end with their client.

#![allow(dead_code)]

#[path = "systemctl.rs"]
mod systemctl;

use std::fmt::Write as _;
use std::fs;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";
const SFTP_SERVER: &str = "/usr/lib/openssh/sftp-server";
const TEST_USER: &str = "winfleet-node";

static FLEETS: AtomicU32 = AtomicU32::new(0);

/// A running test fleet.
pub struct TestFleet {
    dir: tempfile::TempDir,
    /// The login user of every node.
    pub user: String,
    /// The client's Ed25519 private key (OpenSSH format).
    pub key: PathBuf,
    /// The client's RSA key in PEM (`BEGIN RSA PRIVATE KEY`, like WMCO's secret).
    pub rsa_key: PathBuf,
    /// A known_hosts file pinning every node's host key.
    pub known_hosts: PathBuf,
    /// The shared SSH port.
    pub port: u16,
    /// The nodes.
    pub nodes: Vec<TestNode>,
}

/// One simulated node.
pub struct TestNode {
    /// Its loopback address.
    pub address: String,
    /// Its kernel host name (its own UTS namespace when the harness runs
    /// as root; the machine's otherwise).
    pub hostname: String,
    /// Its SSH port.
    pub port: u16,
    /// Its state directory; `home/` is the login directory.
    pub dir: PathBuf,
    config: PathBuf,
    child: Option<Child>,
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn keygen(path: &Path, kind: &[&str]) {
    run(Command::new("ssh-keygen").args(["-q", "-N", "", "-C", "", "-f"]).arg(path).args(kind));
}

fn is_root() -> bool {
    run(Command::new("id").arg("-u")).trim() == "0"
}

/// As root: the unprivileged login user (created once, shell /bin/sh).
fn ensure_user() -> (String, Option<(u32, u32)>) {
    if !is_root() {
        return (run(Command::new("id").arg("-un")).trim().to_owned(), None);
    }
    let exists = Command::new("id").arg(TEST_USER).output().map(|o| o.status.success()).unwrap_or(false);
    if !exists {
        // Racing test binaries may both try; the loser's failure is fine.
        let _ = Command::new("useradd").args(["-M", "-d", "/nonexistent", "-s", "/bin/sh", TEST_USER]).output();
    }
    let _ = Command::new("usermod").args(["-p", "*", TEST_USER]).output();
    let uid = run(Command::new("id").args(["-u", TEST_USER])).trim().parse().expect("uid");
    let gid = run(Command::new("id").args(["-g", TEST_USER])).trim().parse().expect("gid");
    fs::create_dir_all("/run/sshd").expect("/run/sshd");
    (TEST_USER.to_owned(), Some((uid, gid)))
}

fn chown_tree(path: &Path, owner: Option<(u32, u32)>) {
    let Some((uid, gid)) = owner else { return };
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("chown");
    if path.is_dir() {
        for entry in fs::read_dir(path).expect("read_dir") {
            chown_tree(&entry.expect("entry").path(), owner);
        }
    }
}

impl TestFleet {
    /// Starts `n` nodes named `win-node-<i>` and waits until each accepts
    /// connections.
    pub fn start(n: usize) -> Self {
        let names: Vec<String> = (0..n).map(|i| format!("win-node-{i}")).collect();
        Self::start_with(&names.iter().map(String::as_str).collect::<Vec<_>>(), false)
    }

    /// Starts one node per host name, each in its own UTS namespace so that
    /// it has that kernel host name (needs root: panics otherwise).
    pub fn start_named(names: &[&str]) -> Self {
        Self::start_with(names, true)
    }

    fn start_with(names: &[&str], need_names: bool) -> Self {
        assert!(!need_names || is_root(), "nodes with their own host names need root (unshare --uts)");
        assert!(Path::new(SSHD).exists(), "{SSHD} is missing: apt-get install -y openssh-server (.ci/run does)");
        let (user, owner) = ensure_user();
        let dir = tempfile::Builder::new().prefix("winfleet-fleet-").tempdir().expect("tempdir");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
        let root = dir.path().to_owned();
        let key = root.join("client_ed25519");
        let rsa_key = root.join("client_rsa.pem");
        keygen(&key, &["-t", "ed25519"]);
        keygen(&rsa_key, &["-t", "rsa", "-b", "3072", "-m", "PEM"]);
        let authorized = format!(
            "{}{}",
            fs::read_to_string(format!("{}.pub", key.display())).expect("pub"),
            fs::read_to_string(format!("{}.pub", rsa_key.display())).expect("rsa pub"),
        );
        fs::write(root.join("authorized_keys"), authorized).expect("authorized_keys");
        let seq = FLEETS.fetch_add(1, Ordering::Relaxed);
        let a = 100 + std::process::id() % 100;
        let b = seq % 250;
        let port = super::port::free_port();
        let mut fleet =
            TestFleet { dir, user, key, rsa_key, known_hosts: root.join("known_hosts"), port, nodes: Vec::new() };
        let mut known = String::new();
        for (i, name) in names.iter().enumerate() {
            let address = format!("127.{a}.{}.{}", b + (i / 250) as u32, 1 + i % 250);
            let mut node = TestNode::create(&root, i, &address, port, &fleet.user, owner);
            node.hostname = (*name).to_owned();
            let host_pub = fs::read_to_string(node.dir.join("host_ed25519.pub")).expect("host pub");
            let _ = writeln!(known, "[{address}]:{port} {}", host_pub.trim());
            fleet.nodes.push(node);
        }
        fs::write(&fleet.known_hosts, known).expect("known_hosts");
        for node in &mut fleet.nodes {
            node.spawn();
        }
        for node in &fleet.nodes {
            node.wait_ready();
        }
        fleet
    }

    /// The fleet's scratch directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A Fleet document for this fleet: posix shell, its user and port,
    /// registries and environment directories relative to each node's home.
    pub fn fleet_yaml(&self) -> String {
        format!(
            "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: test\nspec:\n  lab:\n    allowLoopbackAddresses: true\n  defaults:\n    username: {}\n    port: {}\n    shell: posix\n  registries:\n    posixDir: certs.d\n  environment:\n    posixDir: systemd\n",
            self.user, self.port
        )
    }

    /// An empty known_hosts path (for trust-on-first-use tests).
    pub fn empty_known_hosts(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for TestFleet {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.stop();
        }
    }
}

impl TestNode {
    fn create(root: &Path, i: usize, address: &str, port: u16, user: &str, owner: Option<(u32, u32)>) -> Self {
        let dir = root.join(format!("node-{i}"));
        fs::create_dir_all(dir.join("home")).expect("home");
        fs::create_dir_all(dir.join("bin")).expect("bin");
        keygen(&dir.join("host_ed25519"), &["-t", "ed25519"]);
        let d = dir.display();
        let wrapper = format!(
            r#"#!/bin/sh
# Simulated node {i}: its own home and PATH; see tests/support/fleet.rs.
cd '{d}/home' || exit 97
HOME='{d}/home'; export HOME
PATH='{d}/bin':/usr/bin:/bin; export PATH
# The session (sshd's setsid) and the sshd process serving it, from /proc
# with builtins only: `cut_session` kills both.
read -r stat < /proc/$$/stat; set -- $stat; sid=$6
read -r stat < /proc/$sid/stat; set -- $stat
echo "$4 $sid" > '{d}/session.pids'
case "$SSH_ORIGINAL_COMMAND" in internal-sftp) exec {SFTP_SERVER} ;; esac
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
"#
        );
        fs::write(dir.join("wrapper.sh"), wrapper).expect("wrapper");
        fs::set_permissions(dir.join("wrapper.sh"), fs::Permissions::from_mode(0o755)).expect("chmod");
        let config = dir.join("sshd_config");
        fs::write(
            &config,
            format!(
                "ListenAddress {address}:{port}\nHostKey {d}/host_ed25519\nPidFile {d}/sshd.pid\n\
                 AuthorizedKeysFile {}/authorized_keys\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nSubsystem sftp internal-sftp\nForceCommand {d}/wrapper.sh\n\
                 MaxStartups 1000\nMaxSessions 50\nAllowUsers {user}\nLogLevel ERROR\n",
                root.display()
            ),
        )
        .expect("sshd_config");
        // The node's boot id: as root, bind-mounted over the kernel's in the
        // node's mount namespace, so a simulated reboot can change it.
        let boot = fs::read_to_string("/proc/sys/kernel/random/uuid").expect("a uuid");
        fs::write(dir.join("boot_id"), boot).expect("boot_id");
        chown_tree(&dir.join("boot_id"), owner);
        // The Containers feature's posix stand-in (src/lifecycle/containers.rs):
        // the node's /sys/module and /etc/modules-load.d, bind-mounted as
        // root; its kernel modules loaded unless a test takes them away.
        for module in winfleet::lifecycle::containers::POSIX_MODULES {
            fs::create_dir_all(dir.join("sysmodule").join(module)).expect("sysmodule");
        }
        fs::create_dir_all(dir.join("modules-load.d")).expect("modules-load.d");
        chown_tree(&dir.join("sysmodule"), owner);
        chown_tree(&dir.join("modules-load.d"), owner);
        chown_tree(&dir.join("home"), owner);
        chown_tree(&dir.join("bin"), owner);
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).expect("chown node dir");
        }
        TestNode { address: address.to_owned(), hostname: String::new(), port, dir, config, child: None }
    }

    fn spawn(&mut self) {
        let log = fs::File::create(self.dir.join("sshd.log")).expect("log");
        // As root, sshd runs in UTS and mount namespaces of its own with the
        // node's host name and boot id: unshare and sh exec, so the child's
        // pid is sshd's.
        let mut command = if is_root() {
            let mut c = Command::new("unshare");
            c.args([
                "--uts",
                "--mount",
                "--",
                "/bin/sh",
                "-c",
                "hostname \"$1\" && mount --bind \"$4\" /proc/sys/kernel/random/boot_id && mount --bind \"$5\" /sys/module \
                 && mkdir -p /etc/modules-load.d && mount --bind \"$6\" /etc/modules-load.d && exec \"$2\" -D -e -f \"$3\"",
                "sh",
            ]);
            c.arg(&self.hostname).arg(SSHD).arg(&self.config).arg(self.dir.join("boot_id"));
            c.arg(self.dir.join("sysmodule")).arg(self.dir.join("modules-load.d"));
            c
        } else {
            let mut c = Command::new(SSHD);
            c.args(["-D", "-e", "-f"]).arg(&self.config);
            c
        };
        let child = command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log).spawn().expect("start sshd");
        self.child = Some(child);
    }

    fn wait_ready(&self) {
        let addr: SocketAddr = format!("{}:{}", self.address, self.port).parse().expect("addr");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            assert!(
                Instant::now() < deadline,
                "sshd for {addr} did not start: {}",
                fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the node's sshd again.
    pub fn start(&mut self) {
        if self.child.is_none() {
            self.spawn();
            self.wait_ready();
        }
    }

    /// Stops the node's sshd (the node becomes unreachable), every
    /// service the systemctl shim started there and a simulated reboot
    /// under way.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        for pid in self.service_pids().into_values() {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).output();
        }
        // A simulated reboot under way would start the enabled services
        // again once "back": a stopped node (a deleted VM) runs nothing.
        let rebooting = self.dir.join("services/reboot.pgid");
        if let Ok(pgid) = fs::read_to_string(&rebooting) {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", pgid.trim())]).output();
            let _ = fs::remove_file(rebooting);
        }
    }

    /// The services the systemctl shim started, by name, with their pids.
    pub fn service_pids(&self) -> std::collections::BTreeMap<String, u32> {
        let Ok(entries) = fs::read_dir(self.dir.join("services")) else { return Default::default() };
        entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().strip_suffix(".pid")?.to_owned();
                let pid = fs::read_to_string(e.path()).ok()?.trim().parse().ok()?;
                Some((name, pid))
            })
            .collect()
    }

    /// Kills a service the shim started, as a crash would (its pid file
    /// stays: `systemctl is-active` then says inactive).
    pub fn kill_service(&self, name: &str) {
        if let Some(pid) = self.service_pids().get(name) {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{pid}")]).output();
        }
    }

    /// Gives the node a new host key (a re-installed or impostor host).
    pub fn replace_host_key(&mut self) {
        self.stop();
        let key = self.dir.join("host_ed25519");
        let _ = fs::remove_file(&key);
        let _ = fs::remove_file(self.dir.join("host_ed25519.pub"));
        keygen(&key, &["-t", "ed25519"]);
        self.start();
    }

    /// Makes this node's sshd read its authorized keys from `path` (only
    /// this node: the fleet shares one file otherwise). sshd re-reads its
    /// configuration on SIGHUP; the node's services keep running.
    pub fn use_authorized_keys(&self, path: &Path) {
        let config = fs::read_to_string(&self.config).expect("config");
        let config: String = config
            .lines()
            .map(|l| {
                if l.starts_with("AuthorizedKeysFile ") {
                    format!("AuthorizedKeysFile {}\n", path.display())
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        fs::write(&self.config, config).expect("config");
        let pid = fs::read_to_string(self.dir.join("sshd.pid")).expect("sshd.pid");
        let _ = Command::new("kill").args(["-HUP", pid.trim()]).output();
        std::thread::sleep(std::time::Duration::from_millis(300));
        self.wait_ready();
    }

    /// Adds an RSA host key next to the Ed25519 one and restarts; returns
    /// the known_hosts line that records only the RSA key.
    pub fn add_rsa_host_key(&mut self) -> String {
        self.stop();
        let key = self.dir.join("host_rsa");
        keygen(&key, &["-t", "rsa", "-b", "2048"]);
        let config = fs::read_to_string(&self.config).expect("config");
        fs::write(&self.config, format!("{config}HostKey {}\n", key.display())).expect("config");
        self.start();
        let public = fs::read_to_string(self.dir.join("host_rsa.pub")).expect("rsa pub");
        format!("[{}]:{} {}\n", self.address, self.port, public.trim())
    }

    /// A path in the node's home.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join("home").join(rel)
    }

    /// A file in the node's home, if present.
    pub fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.path(rel)).ok()
    }

    /// Every file under the node's home (relative path, content), sorted.
    pub fn files(&self) -> Vec<(String, String)> {
        let home = self.dir.join("home");
        let mut files = Vec::new();
        collect(&home, &home, &mut files);
        files.sort();
        files
    }

    /// Installs an executable shim in the node's `bin/` (first on PATH).
    pub fn shim(&self, name: &str, script: &str) {
        let path = self.dir.join("bin").join(name);
        fs::write(&path, script).expect("shim");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// How many SSH connections the node's sshd serves now (its children).
    pub fn connections(&self) -> usize {
        let Some(child) = &self.child else { return 0 };
        let pid = child.id();
        fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default().split_whitespace().count()
    }

    /// Stops (SIGSTOP) the sshd process serving the node's current
    /// connection: it stays open and answers nothing until thawed.
    pub fn freeze_session(&self) -> Frozen {
        let pids = fs::read_to_string(self.dir.join("session.pids")).unwrap_or_default();
        let Some(sshd) = pids.split_whitespace().next() else { panic!("no session recorded") };
        assert!(Command::new("kill").args(["-STOP", sshd]).status().expect("kill").success());
        Frozen { pid: sshd.to_owned() }
    }

    /// The sshd process and the session (process group) of the last
    /// command the node's sshd started.
    pub fn last_session(&self) -> String {
        fs::read_to_string(self.dir.join("session.pids")).unwrap_or_default()
    }

    /// Kills what the node's last SSH command runs (the shell and its
    /// children), not its sshd: the channel ends, the connection stays.
    pub fn kill_session_processes(&self) {
        let pids = self.last_session();
        let Some(session) = pids.split_whitespace().nth(1) else { panic!("no session recorded") };
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{session}")]).output();
    }

    /// Kills the node's current SSH session (the connection drops) and the
    /// script it runs with its children.
    pub fn cut_session(&self) {
        let pids = fs::read_to_string(self.dir.join("session.pids")).unwrap_or_default();
        let mut pids = pids.split_whitespace();
        let (Some(sshd), Some(session)) = (pids.next(), pids.next()) else { panic!("no session recorded") };
        let _ = Command::new("kill").args(["-KILL", "--", &format!("-{session}"), sshd]).output();
    }
}

/// A stopped sshd (see [`TestNode::freeze_session`]); continued on drop.
pub struct Frozen {
    pid: String,
}

impl Frozen {
    /// Lets it answer again.
    pub fn thaw(self) {}
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-CONT", &self.pid]).status();
    }
}

fn collect(base: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(base, &path, out);
        } else {
            let rel = path.strip_prefix(base).expect("prefix").display().to_string();
            out.push((rel, fs::read_to_string(&path).unwrap_or_else(|_| "<binary>".into())));
        }
    }
}
