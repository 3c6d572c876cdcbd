//! Real registries on loopback for tests/real_containerd.rs: Debian's
//! `docker-registry` (the CNCF distribution registry 2.8) behind TLS from a
//! throwaway CA, optionally with htpasswd (bcrypt) authentication, and a
//! tiny OCI image built here to put in it.
//!
//! A registry is seeded by a first instance (on a port of its own, without
//! authentication), which is stopped before the instance the test pulls
//! from starts on the same storage: that instance's access log then holds
//! the test's requests and nothing else. [`Registry::requests`] stops it
//! first (SIGTERM; `http.draintimeout` lets in-flight requests finish and
//! log), so reading the log never races a request.
//!
//! [`Tripwire`] is a registry that is down: it accepts TCP connections and
//! closes them at once, counting them, so a test can prove that an address
//! was never contacted (a refused connection leaves no trace).
//!
//! Every process runs in a process group of its own and is killed with its
//! group on drop. Every address is 127.0.0.1.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};

/// `sha256:<hex>` of some bytes, as registries and OCI name blobs.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", winfleet::vocab::file::sha256_hex(bytes))
}

use super::port::free_port;

/// A throwaway CA and one server certificate for 127.0.0.1, as PEM files.
pub struct Ca {
    /// The CA certificate: what a client must trust.
    pub cert: PathBuf,
    /// The server certificate (IP SAN 127.0.0.1), signed by the CA.
    pub server_cert: PathBuf,
    /// The server certificate's key.
    pub server_key: PathBuf,
}

impl Ca {
    /// Generates the CA and the server certificate into `dir`.
    pub fn new(dir: &Path) -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, "winfleet real-containerd test CA");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let issuer = CertifiedIssuer::self_signed(params, ca_key).unwrap();

        let server_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, "127.0.0.1");
        params.subject_alt_names = vec![SanType::IpAddress("127.0.0.1".parse().unwrap())];
        let server = params.signed_by(&server_key, &issuer).unwrap();

        let ca = Self {
            cert: dir.join("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server-key.pem"),
        };
        fs::write(&ca.cert, issuer.pem()).unwrap();
        fs::write(&ca.server_cert, server.pem()).unwrap();
        fs::write(&ca.server_key, server_key.serialize_pem()).unwrap();
        ca
    }
}

/// A one-layer OCI image for the machine's platform (containerd unpacks
/// only a manifest whose config names its platform).
pub struct Image {
    pub layer: Vec<u8>,
    pub config: Vec<u8>,
    pub manifest: Vec<u8>,
}

impl Image {
    /// An image whose only file, `hello.txt`, holds `text` (so two images
    /// made with different texts have different digests).
    pub fn tiny(text: &str) -> Self {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_ustar();
        header.set_size(text.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(1_700_000_000);
        header.set_cksum();
        builder.append_data(&mut header, "hello.txt", text.as_bytes()).unwrap();
        let layer = builder.into_inner().unwrap();
        let architecture = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            other => other,
        };
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": architecture,
            "os": "linux",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": [digest(&layer)]},
        }))
        .unwrap();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.oci.image.config.v1+json",
                "digest": digest(&config),
                "size": config.len(),
            },
            "layers": [{
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": digest(&layer),
                "size": layer.len(),
            }],
        }))
        .unwrap();
        Self { layer, config, manifest }
    }

    /// The manifest's digest: what a digest pull names.
    pub fn digest(&self) -> String {
        digest(&self.manifest)
    }

    /// The digests of the blobs a pull fetches (layer, config).
    pub fn blobs(&self) -> [String; 2] {
        [digest(&self.layer), digest(&self.config)]
    }
}

/// One line of a registry's access log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path, without the query (containerd adds `?ns=<source>`).
    pub path: String,
    pub status: u16,
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.method, self.path, self.status)
    }
}

/// Parses gorilla's combined log format, which the registry writes to its
/// standard output: `IP - user [time] "METHOD URI PROTO" STATUS SIZE "referer" "agent"`.
pub fn parse_access_log(text: &str) -> Vec<Request> {
    text.lines()
        .filter_map(|line| {
            let mut quoted = line.split('"');
            let request = quoted.nth(1)?;
            let status = quoted.next()?.split_whitespace().next()?.parse().ok()?;
            let mut parts = request.split(' ');
            let method = parts.next()?.to_owned();
            let uri = parts.next()?;
            let path = uri.split('?').next().unwrap_or(uri).to_owned();
            Some(Request { method, path, status })
        })
        .collect()
}

/// A user name and password.
#[derive(Clone, Debug)]
pub struct Login {
    pub user: String,
    pub password: String,
}

/// One distribution registry: its storage, its port, and the instance
/// currently running (a seeder, then the one a test pulls from).
pub struct Registry {
    name: String,
    dir: PathBuf,
    port: u16,
    tls: (PathBuf, PathBuf),
    ca: PathBuf,
    login: Option<Login>,
    seeder: Option<Instance>,
    serving: Option<Instance>,
}

struct Instance {
    child: Child,
    port: u16,
    access_log: PathBuf,
}

impl Instance {
    /// SIGTERM, then wait: with `draintimeout` the registry finishes (and
    /// logs) the requests in flight before it exits.
    fn stop(&mut self) {
        if self.child.try_wait().unwrap().is_none() {
            let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
            self.child.wait().unwrap();
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Registry {
    /// A registry named `name` (its directory under `root`); with `login`,
    /// the serving instance requires it (htpasswd, bcrypt).
    pub fn new(name: &str, root: &Path, ca: &Ca, login: Option<Login>) -> Self {
        let dir = root.join(name);
        fs::create_dir_all(dir.join("storage")).unwrap();
        Self {
            name: name.to_owned(),
            dir,
            port: free_port(),
            tls: (ca.server_cert.clone(), ca.server_key.clone()),
            ca: ca.cert.clone(),
            login,
            seeder: None,
            serving: None,
        }
    }

    /// `127.0.0.1:<port>`: the registry host the test's mirror sets name.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Pushes `image` to `repo` through the registry API (blobs, then the
    /// manifest under `tag`, or under its digest alone), on a seeding
    /// instance whose requests stay out of the serving instance's log.
    pub fn seed(&mut self, repo: &str, image: &Image, tag: Option<&str>) {
        assert!(self.serving.is_none(), "{}: seed before start", self.name);
        if self.seeder.is_none() {
            self.seeder = Some(self.spawn("seed", free_port(), false));
        }
        let base = format!("https://127.0.0.1:{}/v2/{repo}", self.seeder.as_ref().unwrap().port);
        for blob in [&image.layer, &image.config] {
            let started =
                self.curl(&["-X", "POST", "-D", "-", "-o", "/dev/null", &format!("{base}/blobs/uploads/")], &[]);
            let location = String::from_utf8_lossy(&started)
                .lines()
                .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("location")).map(|(_, v)| v))
                .unwrap_or_else(|| panic!("{}: no upload location", self.name))
                .trim()
                .to_owned();
            let separator = if location.contains('?') { '&' } else { '?' };
            let url = format!("{location}{separator}digest={}", digest(blob));
            self.curl(
                &["-X", "PUT", "-H", "Content-Type: application/octet-stream", "--data-binary", "@-", &url],
                blob,
            );
        }
        let reference = tag.map_or_else(|| image.digest(), str::to_owned);
        self.curl(
            &[
                "-X",
                "PUT",
                "-H",
                "Content-Type: application/vnd.oci.image.manifest.v1+json",
                "--data-binary",
                "@-",
                &format!("{base}/manifests/{reference}"),
            ],
            &image.manifest,
        );
    }

    /// Stops the seeder and starts the instance the test pulls from.
    pub fn start(&mut self) {
        if let Some(mut seeder) = self.seeder.take() {
            seeder.stop();
        }
        let login = self.login.is_some();
        self.serving = Some(self.spawn("serve", self.port, login));
    }

    /// Stops the serving instance and returns every request it logged.
    pub fn requests(&mut self) -> Vec<Request> {
        let serving = self.serving.as_mut().unwrap_or_else(|| panic!("{} was not started", self.name));
        serving.stop();
        parse_access_log(&fs::read_to_string(&serving.access_log).unwrap())
    }

    /// What the serving instance wrote on its standard error (for failure
    /// messages).
    pub fn stderr(&self) -> String {
        fs::read_to_string(self.dir.join("serve.stderr")).unwrap_or_default()
    }

    fn curl(&self, args: &[&str], body: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut child = Command::new("curl")
            .args(["-sS", "--fail", "--cacert"])
            .arg(&self.ca)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("curl: {e}"));
        child.stdin.take().unwrap().write_all(body).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}: curl {args:?}: {}", self.name, String::from_utf8_lossy(&out.stderr));
        out.stdout
    }

    fn spawn(&self, role: &str, port: u16, login: bool) -> Instance {
        let auth = if login {
            let login = self.login.as_ref().unwrap();
            let htpasswd = self.dir.join("htpasswd");
            let out = Command::new("htpasswd").args(["-Bbn", &login.user, &login.password]).output().unwrap();
            assert!(out.status.success(), "htpasswd: {}", String::from_utf8_lossy(&out.stderr));
            fs::write(&htpasswd, out.stdout).unwrap();
            format!("auth:\n  htpasswd:\n    realm: winfleet-test\n    path: {}\n", htpasswd.display())
        } else {
            String::new()
        };
        let config = self.dir.join(format!("{role}.yml"));
        fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\n\
                 storage:\n  filesystem:\n    rootdirectory: {storage}\n\
                 http:\n  addr: 127.0.0.1:{port}\n  draintimeout: 10s\n  tls:\n    certificate: {cert}\n    key: {key}\n{auth}",
                storage = self.dir.join("storage").display(),
                cert = self.tls.0.display(),
                key = self.tls.1.display(),
            ),
        )
        .unwrap();
        let access_log = self.dir.join(format!("{role}.access.log"));
        let mut child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&access_log).unwrap())
            .stderr(fs::File::create(self.dir.join(format!("{role}.stderr"))).unwrap())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("docker-registry: {e}"));
        // Bounded: 200 tries, 25 ms apart.
        for _ in 0..200 {
            if let Some(status) = child.try_wait().unwrap() {
                let stderr = fs::read_to_string(self.dir.join(format!("{role}.stderr"))).unwrap_or_default();
                panic!("{} ({role}) exited at start ({status}): {stderr}", self.name);
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Instance { child, port, access_log };
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
        let _ = child.wait();
        panic!("{} ({role}) did not listen on 127.0.0.1:{port} within 5 s", self.name);
    }
}

/// A registry that is down: every TCP connection is accepted, counted and
/// closed before a byte is read.
pub struct Tripwire {
    port: u16,
    count: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Tripwire {
    pub fn new() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let count = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (count, stop) = (count.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    // Counted before it is closed: a client that saw the
                    // close has been counted.
                    count.fetch_add(1, Ordering::SeqCst);
                    drop(stream);
                }
            })
        };
        Self { port, count, stop, thread: Some(thread) }
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// How many connections it has had.
    pub fn connections(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

impl Drop for Tripwire {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
