//! The demo's nodes: as root they live in the Machine API's cloud (its
//! fleet holds the VMs, then the instances' nodes), else in a fleet of the
//! demo's own.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::cluster::DemoCluster;
use crate::fleet::TestFleet;

/// What the demo keeps of its fleet (which lives in the cloud as root).
pub struct Demo {
    pub dir: PathBuf,
    pub user: String,
    pub port: u16,
    pub key: PathBuf,
    pub known_hosts: PathBuf,
    /// The instances' addresses (the last `hosts` nodes: the VMs come first).
    pub hosts: Vec<String>,
}

/// Runs `f` on the demo's fleet: the cloud's as root, else its own.
pub fn with_fleet<R>(cluster: Option<&DemoCluster>, own: Option<&TestFleet>, f: impl FnOnce(&TestFleet) -> R) -> R {
    match (cluster, own) {
        (Some(c), _) => c.with_fleet(f),
        (None, Some(fleet)) => f(fleet),
        (None, None) => unreachable!("the demo starts one or the other"),
    }
}

impl Demo {
    pub fn of(fleet: &TestFleet, hosts: usize) -> Self {
        let skip = fleet.nodes.len().saturating_sub(hosts);
        Demo {
            dir: fleet.dir().to_owned(),
            user: fleet.user.clone(),
            port: fleet.port,
            key: fleet.key.clone(),
            known_hosts: fleet.known_hosts.clone(),
            hosts: fleet.nodes.iter().skip(skip).map(|n| n.address.clone()).collect(),
        }
    }
}

/// The files winfleet wrote on the node at `address`, as the demo shows them.
pub fn files(fleet: &TestFleet, address: &str) -> String {
    let node = fleet.nodes.iter().find(|n| n.address == address).unwrap();
    let mut out = format!("\n== files on {address} (its home directory)\n");
    for (path, _) in node.files() {
        if !path.ends_with("session.pids") {
            let _ = writeln!(out, "  {path}");
        }
    }
    let hosts = "certs.d/mcr.microsoft.com/hosts.toml";
    let _ = writeln!(out, "-- {hosts}:\n{}", node.read(hosts).unwrap_or_default());
    let drop_in = "systemd/90-winfleet-environment.conf";
    if let Some(text) = node.read(drop_in) {
        let _ = writeln!(
            out,
            "-- {drop_in} (the proxy variables; they take effect at the next boot, hence the reboot):\n{text}"
        );
    }
    out
}
