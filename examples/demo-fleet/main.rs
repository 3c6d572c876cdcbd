//! A local demo fleet for the README: N simulated nodes (real OpenSSH
//! servers on loopback, the test harness of tests/support/fleet.rs), a bare
//! Git remote holding a config repository for them (examples-repo's mirror
//! sets and MachineSets, with instances pointing at the demo nodes), and
//! the winfleet daemon run against it: the first round, then a merged
//! change announced by a signed webhook, the files on a node, and the
//! status commits (`git log winfleet/status`).
//!
//! As root, the daemon also works against a cluster ([`cluster`]): a real
//! control plane (kube-apiserver, kube-controller-manager, etcd) where Go is
//! installed, else a simulated one, and the demo says which, with the
//! Machine API the tests use (the model, tests/support/machine_model.rs,
//! over the cloud of tests/support/machine_provider.rs). The instances
//! join as Nodes (their kubelet is the tests' fake kubelet), winfleet
//! sets their metadata and creates the MachineSets (one replica each
//! here), the Machine API creates their Machines and boots their VMs,
//! winfleet configures those into Nodes too, and the merged change adds a
//! proxy, which takes a safe reboot of each node in turn. The demo ends
//! with every instance and MachineSet Ready (`winfleet status` exits 0).
//! As anyone else the nodes cannot have their own host names and boot ids:
//! the daemon runs SSH-only, and the repository has no MachineSets.
//!
//! `cargo run --example demo-fleet -- <path to winfleet> [NODES]`
//! (scripts/demo.sh runs it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, missing_docs)]

#[path = "../../tests/support/apiserver/mod.rs"]
#[allow(dead_code)]
mod apiserver;
mod cluster;
#[path = "../../tests/support/controlplane.rs"]
#[allow(unused_imports)]
mod controlplane;
#[path = "../../tests/support/fleet.rs"]
mod fleet;
#[path = "../../tests/support/join_payload.rs"]
mod join_payload;
#[path = "../../tests/support/kubelet.rs"]
mod kubelet;
#[path = "../../tests/support/machine_api_real.rs"]
mod machine_api_real;
#[path = "../../tests/support/machine_model.rs"]
mod machine_model;
#[path = "../../tests/support/machine_provider.rs"]
mod machine_provider;
mod nodes;
#[path = "../../tests/support/port.rs"]
mod port;
// The test CA of the Machine API webhooks' serving certificate.
#[path = "../../tests/support/registry.rs"]
mod registry;

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hmac::{KeyInit, Mac};

const SECRET: &str = "demo-webhook-secret";

/// examples-repo's MachineSets; the demo runs each at one replica (a VM
/// each), so the Machine path takes a minute, not five.
const MACHINE_SETS: [&str; 2] = ["machinesets/winworker-aws.yaml", "machinesets/winworker-vsphere.yaml"];

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

/// Waits until the status branch of `bare` says the head of main is applied.
fn wait_applied(bare: &Path, daemon: &mut Child) {
    let head = git(bare, &["rev-parse", "main"]);
    let applied = format!("lastAppliedRevision: {}", head.trim());
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let out = Command::new("git").current_dir(bare).args(["show", "winfleet/status:status/summary.yaml"]).output();
        if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l == applied)) {
            return;
        }
        assert!(daemon.try_wait().unwrap().is_none(), "the daemon exited");
        assert!(Instant::now() < deadline, "{} not applied within 180 s", &head[..7]);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until `winfleet status` on `bare` says all Ready (exit code 0):
/// the Machines take a few rounds after the revision is applied.
fn wait_ready(winfleet: &str, bare: &Path, daemon: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let status = Command::new(winfleet)
            .args(["status", "--repo-url", &format!("file://{}", bare.display())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        if status.success() {
            return;
        }
        assert!(daemon.try_wait().unwrap().is_none(), "the daemon exited");
        assert!(Instant::now() < deadline, "not all Ready within 300 s");
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The repository root (tests/support/controlplane.rs finds its Go sources
/// and binary from it).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn main() {
    // The payload's kubelet runs this binary as the fake kubelet.
    if std::env::var_os(kubelet::ARGS_VAR).is_some() {
        kubelet::main_from_env();
        return;
    }
    // `winfleet status`'s exit code, once the demo's fleet, cluster and
    // files are gone: scripts/demo.sh fails unless all is Ready.
    let code = run();
    std::process::exit(code);
}

/// The demo; `winfleet status`'s exit code at the end.
fn run() -> i32 {
    let mut args = std::env::args().skip(1);
    let winfleet = args.next().expect("usage: demo-fleet <winfleet binary> [NODES]");
    let nodes: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(3);
    let names: Vec<String> = (0..nodes).map(|i| format!("win-demo-{i}")).collect();
    // As root, the fleet is the cloud's (the VMs first, then the nodes).
    let cluster = is_root().then(|| cluster::DemoCluster::start(&names, MACHINE_SETS.len()));
    let own = cluster.is_none().then(|| fleet::TestFleet::start(nodes));
    let fleet = nodes::with_fleet(cluster.as_ref(), own.as_ref(), |f| nodes::Demo::of(f, names.len()));
    match &cluster {
        Some(c) => {
            println!(
                "demo fleet: {nodes} sshd nodes on {}..., and {} stopped ones for the Machine API's VMs, port {}",
                fleet.hosts[0],
                MACHINE_SETS.len(),
                fleet.port
            );
            println!("{}", c.describe());
            println!(
                "Machine API: the tests' model (tests/support/machine_model.rs): a Machine per replica of \
                 each Windows MachineSet, a VM booted for it with the key the windows-user-data Secret authorizes"
            );
        }
        None => {
            println!("demo fleet: {nodes} sshd nodes on {}..., port {}", fleet.hosts[0], fleet.port);
            println!(
                "not root: no cluster (the nodes need their own host names); the daemon runs SSH-only, and the \
                 repository has no MachineSets (they need the Machine API)"
            );
        }
    }

    // The config repository: examples-repo, with instances for the demo nodes.
    let dir = fleet.dir.as_path();
    let (bare, work) = (dir.join("fleet.git"), dir.join("work"));
    git(dir, &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()]);
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples-repo");
    for sub in ["mirrors", "machinesets", "instances", "services"] {
        std::fs::create_dir_all(work.join(sub)).unwrap();
    }
    for file in ["mirrors/idms.yaml", "mirrors/itms.yaml", "mirrors/pause-idms.yaml"] {
        std::fs::copy(examples.join(file), work.join(file)).unwrap();
    }
    if cluster.is_some() {
        for file in MACHINE_SETS {
            let text = std::fs::read_to_string(examples.join(file)).unwrap();
            let one = text.lines().map(|l| if l.starts_with("  replicas: ") { "  replicas: 1" } else { l });
            std::fs::write(work.join(file), one.collect::<Vec<_>>().join("\n") + "\n").unwrap();
        }
    }
    let payload = cluster.as_ref().map(cluster::DemoCluster::fleet_yaml).unwrap_or_default();
    std::fs::write(
        work.join("fleet.yaml"),
        format!("{}  drift:\n    interval: 10m\n{payload}", fleet_yaml(&fleet.user, fleet.port)),
    )
    .unwrap();
    if cluster.is_some() {
        std::fs::write(work.join("services/demo-services.yaml"), join_payload::services_manifest()).unwrap();
    }
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: demo\nspec:\n  instances:\n",
    );
    for address in &fleet.hosts {
        let _ = writeln!(list, "  - address: {address}\n    labels: {{example.com/team: payments}}");
    }
    std::fs::write(work.join("instances/demo.yaml"), list).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-qm", "The demo fleet"]);
    git(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
    println!("config repository: file://{} (main)", bare.display());
    if cluster.is_some() {
        println!("(examples-repo's mirror sets and MachineSets, the MachineSets at one replica each)");
    }

    // The daemon.
    let secret = dir.join("webhook-secret");
    std::fs::write(&secret, SECRET).unwrap();
    let (webhook, metrics) = (free_port(), free_port());
    println!("\n== winfleet run --repo-url file://…/fleet.git --webhook-addr 127.0.0.1:{webhook} …");
    let mut command = Command::new(&winfleet);
    command.args(["run", "--repo-url", &format!("file://{}", bare.display()), "--branch", "main"]);
    if let Some(c) = &cluster {
        command.arg("--kubeconfig").arg(c.kubeconfig()).arg("--payload-dir").arg(&c.payload);
    }
    let mut daemon = command
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
    let started = Instant::now();
    wait_applied(&bare, &mut daemon);
    wait_ready(&winfleet, &bare, &mut daemon);
    if let Some(c) = &cluster {
        println!(
            "\n== the {} {:.0} s later, all Ready: the instances joined; the Machine API made a Machine per \
             replica, winfleet configured each into a Node",
            c.label(),
            started.elapsed().as_secs_f64()
        );
        println!("-- Nodes\n{}", c.nodes());
        println!(
            "-- CertificateSigningRequests (the fake kubelets asked; winfleet approved what it could match)\n{}",
            c.csrs()
        );
        println!("-- MachineSets (created from machinesets/)\n{}", c.machinesets());
        println!("-- Machines (the Machine API's)\n{}", c.machines());
    }

    println!("\n== a merged pull request: the pause mirror moves, an egress proxy; GitHub notifies the webhook");
    let pause = work.join("mirrors/pause-idms.yaml");
    let text = std::fs::read_to_string(&pause).unwrap();
    std::fs::write(&pause, text.replace("- mirror.corp.example:5000/oss", "- mirror2.corp.example:5000/oss")).unwrap();
    if cluster.is_some() {
        std::fs::write(work.join("proxy.yaml"), PROXY).unwrap();
        git(&work, &["add", "proxy.yaml"]);
    }
    git(&work, &["commit", "-qam", "Move the pause mirror to mirror2, send egress through proxy.corp.example"]);
    git(&work, &["push", "-q", bare.to_str().unwrap(), "main"]);
    let merged = Instant::now();
    println!("webhook answered: {}", notify(webhook));
    wait_applied(&bare, &mut daemon);
    println!("(applied and status committed {:.1} s after the merge)", merged.elapsed().as_secs_f64());
    wait_ready(&winfleet, &bare, &mut daemon);
    if let Some(c) = &cluster {
        println!("\n== the {} after the change: a safe reboot of each node, one at a time", c.label());
        println!(
            "(a demo node cannot reboot: its systemctl shim stops its services, gives it a new boot id and starts them)"
        );
        println!("{}", c.events(&["Cordoned", "Rebooting", "Rebooted", "RebootFailed", "DrainFailed"]));
        println!("-- Nodes\n{}", c.nodes());
        println!("-- Machines\n{}", c.machines());
    }

    let _ = Command::new("kill").args(["-TERM", &daemon.id().to_string()]).status();
    let status = daemon.wait().unwrap();
    println!("(daemon stopped on SIGTERM: {status})");

    let first = fleet.hosts[0].clone();
    print!("{}", nodes::with_fleet(cluster.as_ref(), own.as_ref(), |f| nodes::files(f, &first)));
    println!("== git log winfleet/status");
    print!("{}", git(&bare, &["log", "--format=%h %an%n    %s%n    %(trailers:only,unfold)", "winfleet/status"]));
    println!("== git show winfleet/status:status/summary.yaml");
    print!("{}", git(&bare, &["show", "winfleet/status:status/summary.yaml"]));
    if let Some(c) = &cluster {
        println!("\n== the MachineSets' Machines and their Nodes (the status below lists the MachineSets)");
        print!("{}", c.machines());
    }
    println!("\n== winfleet status --repo-url file://…/fleet.git");
    let status =
        Command::new(&winfleet).args(["status", "--repo-url", &format!("file://{}", bare.display())]).status().unwrap();
    println!("(exit code {}: 0 = all Ready, 3 = something is not)", status.code().unwrap_or(-1));
    status.code().unwrap_or(1)
}

const PROXY: &str = "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: http://proxy.corp.example:3128\n  httpsProxy: http://proxy.corp.example:3128\n";

fn fleet_yaml(user: &str, port: u16) -> String {
    format!(
        "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: demo\nspec:\n  lab:\n    allowLoopbackAddresses: true\n  defaults:\n    username: {user}\n    port: {port}\n    shell: posix\n  registries:\n    posixDir: certs.d\n  environment:\n    posixDir: systemd\n"
    )
}
