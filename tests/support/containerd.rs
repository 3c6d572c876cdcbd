//! A real containerd for tests/real_containerd.rs: Debian's containerd 1.6
//! daemon started by the test (as root, root/state/socket in a temporary
//! directory, the CRI plugin disabled, the native snapshotter), and its
//! `ctr` client pulling with `--hosts-dir`.
//!
//! Registry trust: winfleet writes no `ca` key (WMCO-SPEC 1.8: the CA goes
//! into the node's trust store), so the test gives `ctr` the throwaway CA
//! the way a node's store would: `SSL_CERT_FILE`, which Go's crypto/x509
//! reads on Linux as the system roots. The fetches are made by `ctr`
//! itself (the resolver runs in the client), so that is where it is set.
//!
//! Content sharing is `isolated` and every pull gets a namespace of its
//! own, so a second pull of the same blobs fetches them again rather than
//! finding them in the store.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The programs these tests run.
pub const PROGRAMS: [&str; 5] = ["containerd", "ctr", "docker-registry", "htpasswd", "curl"];

/// Why real containerd tests cannot run here, if they cannot: not root,
/// or a program missing. (A daemon that does not start is reported by
/// [`Containerd::start`].)
pub fn unavailable() -> Option<String> {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().nth(1));
    if uid != Some("0") {
        return Some("containerd's daemon needs root (its content store, snapshots and mounts)".into());
    }
    let missing: Vec<&str> = PROGRAMS.iter().copied().filter(|p| !on_path(p)).collect();
    if !missing.is_empty() {
        return Some(format!(
            "missing {} (Debian: apt-get install containerd docker-registry apache2-utils curl)",
            missing.join(", ")
        ));
    }
    None
}

/// A real-peer test that cannot run here fails, saying why: such tests are
/// #[ignore]d (a plain `cargo test` lists them as ignored, never as
/// passed), so one that runs was asked for (`scripts/test.sh`).
pub fn cannot_run(test: &str, reason: &str) {
    panic!("{test}: cannot run here: {reason}");
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// A containerd daemon of the test's own.
pub struct Containerd {
    dir: PathBuf,
    socket: PathBuf,
    child: Child,
    namespaces: AtomicUsize,
}

/// The outcome of one `ctr images pull`.
pub struct Pull {
    pub reference: String,
    pub success: bool,
    /// ctr's standard output and error.
    pub output: String,
}

impl Containerd {
    /// Starts a daemon under `dir`; an error says why it could not.
    pub fn start(dir: &Path) -> Result<Self, String> {
        fs::create_dir_all(dir).unwrap();
        let socket = dir.join("containerd.sock");
        let config = dir.join("config.toml");
        fs::write(
            &config,
            format!(
                "version = 2\nroot = \"{root}\"\nstate = \"{state}\"\n\
                 disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\n\
                 [grpc]\n  address = \"{socket}\"\n\n\
                 [plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"{opt}\"\n\n\
                 [plugins.\"io.containerd.metadata.v1.bolt\"]\n  content_sharing_policy = \"isolated\"\n",
                root = dir.join("root").display(),
                state = dir.join("state").display(),
                socket = socket.display(),
                opt = dir.join("opt").display(),
            ),
        )
        .unwrap();
        let log = dir.join("containerd.log");
        let file = fs::File::create(&log).unwrap();
        let mut child = Command::new("containerd")
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("containerd: {e}"))?;
        // Bounded: 100 tries, 100 ms apart.
        for _ in 0..100 {
            if let Some(status) = child.try_wait().unwrap() {
                return Err(format!(
                    "containerd exited at start ({status}): {}",
                    fs::read_to_string(&log).unwrap_or_default()
                ));
            }
            let version = Command::new("ctr").arg("--address").arg(&socket).arg("version").output().unwrap();
            if version.status.success() {
                return Ok(Self { dir: dir.to_owned(), socket, child, namespaces: AtomicUsize::new(0) });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
        let _ = child.wait();
        Err(format!("containerd did not answer on {} within 10 s", socket.display()))
    }

    /// `ctr images pull --hosts-dir HOSTS REFERENCE` in a fresh namespace,
    /// trusting `ca` as the system roots.
    pub fn pull(&self, hosts: &Path, ca: &Path, reference: &str) -> Pull {
        let namespace = format!("test{}", self.namespaces.fetch_add(1, Ordering::SeqCst));
        let out: Output = Command::new("ctr")
            .arg("--address")
            .arg(&self.socket)
            .args(["--namespace", &namespace, "images", "pull", "--snapshotter", "native", "--hosts-dir"])
            .arg(hosts)
            .arg(reference)
            .env("SSL_CERT_FILE", ca)
            .env_remove("SSL_CERT_DIR")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        Pull {
            reference: reference.to_owned(),
            success: out.status.success(),
            output: format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
        }
    }

    /// The daemon's log (for failure messages).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}
