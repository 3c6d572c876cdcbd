//! How the daemon bench reaches its nodes: directly, or through the
//! relays of a network model (`NET=`, tests/support/netem.rs).

use std::path::{Path, PathBuf};

use super::fleet::TestFleet;
use super::netem;

/// How the daemon reaches the nodes: directly, or through relays.
pub struct Reach {
    pub port: u16,
    pub known_hosts: PathBuf,
}

impl Reach {
    pub fn direct(fleet: &TestFleet) -> Reach {
        Reach { port: fleet.port, known_hosts: fleet.known_hosts.clone() }
    }
}

/// The network model `NET=` names, if any, its relays in front of every
/// node (the model measured and printed), and how to reach the nodes;
/// the relays' known_hosts goes in `trust`.
pub fn from_env(fleet: &TestFleet, trust: &Path) -> (Option<netem::Model>, Option<netem::Netem>, Reach) {
    let Some(model) = netem::Model::from_env() else {
        return (None, None, Reach::direct(fleet));
    };
    let upstreams: Vec<std::net::SocketAddr> =
        fleet.nodes.iter().map(|n| format!("{}:{}", n.address, n.port).parse().unwrap()).collect();
    let net = netem::Netem::start(&model, &upstreams);
    println!("network model {} to the nodes", model.describe());
    println!("{}", net.probe(((model.mbit * 2.0 / 8.0) as usize).clamp(2, 64)).describe());
    let known_hosts = trust.join("known_hosts");
    net.known_hosts(&fleet.known_hosts, fleet.port, &known_hosts);
    let reach = Reach { port: net.port, known_hosts };
    (Some(model), Some(net), reach)
}
