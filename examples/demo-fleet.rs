//! A local demo fleet for the README: N simulated nodes (real OpenSSH
//! servers on loopback, the test harness of tests/support/fleet.rs), a bare
//! Git remote holding a config repository for them (examples-repo's mirror
//! sets and MachineSets, with instances pointing at the demo nodes),
//! and the winfleet daemon run against it: the first round, then a merged
//! mirror change announced by a signed webhook, the files on a node, and
//! the status commits (`git log winfleet/status`).
//!
//! `cargo run --example demo-fleet -- <path to winfleet> [NODES]`
//! (scripts/demo.sh runs it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, missing_docs)]

#[path = "../tests/support/fleet.rs"]
mod fleet;

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hmac::{KeyInit, Mac};

const SECRET: &str = "demo-webhook-secret";

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=Cluster Admin", "-c", "user.email=admin@corp.example"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A signed GitHub push notification; the HTTP status line.
fn notify(port: u16) -> String {
    let body = br#"{"ref":"refs/heads/main"}"#;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(body);
    let sig: String = mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "POST /webhook HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-GitHub-Event: push\r\nX-Hub-Signature-256: sha256={sig}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.lines().next().unwrap_or_default().to_owned()
}

/// Waits until the status branch of `bare` has `count` commits.
fn wait_status(bare: &Path, count: usize, daemon: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let out = Command::new("git").current_dir(bare).args(["rev-list", "--count", "winfleet/status"]).output();
        let n: usize = out.ok().and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok()).unwrap_or(0);
        if n >= count {
            return;
        }
        assert!(daemon.try_wait().unwrap().is_none(), "the daemon exited");
        assert!(Instant::now() < deadline, "no status commit within 120 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let winfleet = args.next().expect("usage: demo-fleet <winfleet binary> [NODES]");
    let nodes: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(3);
    let fleet = fleet::TestFleet::start(nodes);
    println!("demo fleet: {nodes} sshd nodes on {}..., port {}", fleet.nodes[0].address, fleet.port);

    // The config repository: examples-repo, with instances for the demo nodes.
    let dir = fleet.dir();
    let (bare, work) = (dir.join("fleet.git"), dir.join("work"));
    git(dir, &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples-repo");
    for sub in ["mirrors", "machinesets", "instances"] {
        std::fs::create_dir_all(work.join(sub)).unwrap();
    }
    for file in [
        "mirrors/idms.yaml",
        "mirrors/itms.yaml",
        "mirrors/pause-idms.yaml",
        "machinesets/winworker-aws.yaml",
        "machinesets/winworker-vsphere.yaml",
    ] {
        std::fs::copy(examples.join(file), work.join(file)).unwrap();
    }
    std::fs::write(
        work.join("fleet.yaml"),
        format!("{}  drift:\n    interval: 10m\n", fleet_yaml(&fleet.user, fleet.port)),
    )
    .unwrap();
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: demo\nspec:\n  instances:\n",
    );
    for node in &fleet.nodes {
        let _ = writeln!(list, "  - address: {}", node.address);
    }
    std::fs::write(work.join("instances/demo.yaml"), list).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-qm", "The demo fleet"]);
    git(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
    println!("config repository: file://{} (main)", bare.display());

    // The daemon.
    let secret = dir.join("webhook-secret");
    std::fs::write(&secret, SECRET).unwrap();
    let (webhook, metrics) = (free_port(), free_port());
    println!("\n== winfleet run --repo-url file://…/fleet.git --webhook-addr 127.0.0.1:{webhook} …");
    let mut daemon = Command::new(&winfleet)
        .args(["run", "--repo-url", &format!("file://{}", bare.display()), "--branch", "main"])
        .args(["--cache-dir", dir.join("cache").to_str().unwrap()])
        .args(["--ssh-key", fleet.key.to_str().unwrap(), "--known-hosts", fleet.known_hosts.to_str().unwrap()])
        .args(["--webhook-addr", &format!("127.0.0.1:{webhook}"), "--webhook-secret-file", secret.to_str().unwrap()])
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics}"), "--status-author", "winfleet <winfleet@demo.local>"])
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", dir)
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    wait_status(&bare, 1, &mut daemon);

    println!("\n== a merged pull request: the pause mirror moves; GitHub notifies the webhook");
    let pause = work.join("mirrors/pause-idms.yaml");
    let text = std::fs::read_to_string(&pause).unwrap();
    std::fs::write(&pause, text.replace("- mirror.corp.example:5000/oss", "- mirror2.corp.example:5000/oss")).unwrap();
    git(&work, &["commit", "-qam", "Move the pause mirror to mirror2"]);
    git(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
    let merged = Instant::now();
    println!("webhook answered: {}", notify(webhook));
    wait_status(&bare, 2, &mut daemon);
    println!("(applied and status committed {:.1} s after the merge)", merged.elapsed().as_secs_f64());

    let _ = Command::new("kill").args(["-TERM", &daemon.id().to_string()]).status();
    let status = daemon.wait().unwrap();
    println!("(daemon stopped on SIGTERM: {status})");

    let node = &fleet.nodes[0];
    println!("\n== files on {} (its home directory)", node.address);
    for (path, _) in node.files() {
        if !path.ends_with("session.pids") {
            println!("  {path}");
        }
    }
    let hosts = "certs.d/mcr.microsoft.com/hosts.toml";
    println!("-- {hosts}:\n{}", node.read(hosts).unwrap_or_default());
    println!("== git log winfleet/status");
    print!("{}", git(&bare, &["log", "--format=%h %an%n    %s%n    %(trailers:only,unfold)", "winfleet/status"]));
    println!("== git show winfleet/status:status/summary.yaml");
    print!("{}", git(&bare, &["show", "winfleet/status:status/summary.yaml"]));
    println!("\n== winfleet status --repo-url file://…/fleet.git");
    let status =
        Command::new(&winfleet).args(["status", "--repo-url", &format!("file://{}", bare.display())]).status().unwrap();
    println!(
        "(exit code {}: 0 = all Ready, 3 = something is not; here the MachineSets are Unknown, as there is no cluster)",
        status.code().unwrap_or(-1)
    );
}

fn fleet_yaml(user: &str, port: u16) -> String {
    format!(
        "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: demo\nspec:\n  defaults:\n    username: {user}\n    port: {port}\n    shell: posix\n  registries:\n    posixDir: certs.d\n  environment:\n    posixDir: systemd\n"
    )
}
