//! A local demo fleet for the README: N simulated nodes (real OpenSSH
//! servers on loopback, the test harness of tests/support/fleet.rs), a
//! config repository for them carrying examples-repo's mirror sets and
//! proxy, and the winfleet binary run against them: a dry run, an apply,
//! an immediate second apply (nothing to do), and one node's files.
//!
//! `cargo run --example demo-fleet -- <path to winfleet> [NODES]`
//! (scripts/demo.sh runs it).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout, missing_docs)]

#[path = "../tests/support/fleet.rs"]
mod fleet;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

fn main() {
    let mut args = std::env::args().skip(1);
    let winfleet = args.next().expect("usage: demo-fleet <winfleet binary> [NODES]");
    let nodes: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(3);
    let fleet = fleet::TestFleet::start(nodes);
    let repo = fleet.dir().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples-repo");
    for file in ["mirrors/idms.yaml", "mirrors/itms.yaml", "mirrors/pause-idms.yaml", "proxy.yaml"] {
        std::fs::copy(examples.join(file), repo.join(file.replace('/', "-"))).unwrap();
    }
    std::fs::write(
        repo.join("fleet.yaml"),
        format!(
            "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: demo\nspec:\n  defaults:\n    username: {}\n    port: {}\n    shell: posix\n  registries:\n    posixDir: certs.d\n  environment:\n    posixDir: systemd\n",
            fleet.user, fleet.port
        ),
    )
    .unwrap();
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: demo\nspec:\n  instances:\n",
    );
    for node in &fleet.nodes {
        let _ = writeln!(list, "  - address: {}", node.address);
    }
    std::fs::write(repo.join("instances.yaml"), list).unwrap();
    println!("demo fleet: {nodes} sshd nodes on {}..., port {}", fleet.nodes[0].address, fleet.port);
    let run = |title: &str, extra: &[&str]| {
        println!("\n== winfleet apply --once {title}");
        let status = Command::new(&winfleet)
            .args(["apply", "--once", "--repo"])
            .arg(&repo)
            .arg("--ssh-key")
            .arg(&fleet.key)
            .arg("--known-hosts")
            .arg(&fleet.known_hosts)
            .args(extra)
            .status()
            .unwrap();
        println!("(exit code {})", status.code().unwrap_or(-1));
    };
    run("--dry-run", &["--dry-run", "--nodes", &fleet.nodes[0].address]);
    run("", &[]);
    run("(again: nothing to do)", &[]);
    let node = &fleet.nodes[0];
    println!("\n== files on {} (its home directory)", node.address);
    for (path, _) in node.files() {
        if !path.ends_with("session.pids") {
            println!("  {path}");
        }
    }
    let hosts = "certs.d/registry.redhat.io/hosts.toml";
    println!("-- {hosts}:\n{}", node.read(hosts).unwrap_or_default());
}
