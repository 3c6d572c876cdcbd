//! The lifecycle bench over a modelled network (issue 30,
//! tests/support/netem.rs): the configure of fresh nodes and the upgrade
//! after 10 files changed, winfleet beside WMCO's strategy, `scp -r` with
//! SSH compression off and on, and the wire limit (the bytes that must
//! cross divided by the uplink), every connection through the relays that
//! add the model's delay and share its rate between all nodes. The model
//! is measured first and printed with the figures.
//!
//! `NET=wan cargo bench --bench lifecycle` (or `RTT_MS=` /
//! `BANDWIDTH_MBIT=`); NODES=10 by default over a modelled network (at
//! `edge`, 20 Mbit/s, ten nodes' 25 MiB already take 100 s at the wire),
//! WMCO's strategy on WMCO_NODES=1 of them (a node at a time: the fleet's
//! time is that node's times the nodes).

use std::net::SocketAddr;
use std::time::Duration;

use super::wmco_transfer::settings;
use super::{
    Bundle, Route, bundle, change_files, env, instances_via, mib, netem, scp_via, secs, start_fleet, winfleet_round,
    winfleet_upgrade, wmco_round_via,
};
use winfleet::payload::Payload;
use winfleet::ssh::{KnownHosts, Pool, load_key};

pub(super) fn run(model: &netem::Model) {
    let (nodes, files, size) = (env("NODES", 10), env("FILES", 200), env("MIB", 50));
    let wmco_nodes = env("WMCO_NODES", 1).clamp(1, nodes);
    println!(
        "network model {}: half the round trip each way; one token bucket per direction shared by all nodes; \
         {nodes} nodes (NODES=, 10 by default over a modelled network)",
        model.describe()
    );
    let fleet = start_fleet(nodes);
    let upstreams: Vec<SocketAddr> =
        fleet.nodes.iter().map(|n| format!("{}:{}", n.address, n.port).parse().unwrap()).collect();
    let net = netem::Netem::start(model, &upstreams);
    let scratch = tempfile::tempdir().unwrap();
    let known = scratch.path().join("known_hosts");
    net.known_hosts(&fleet.known_hosts, fleet.port, &known);
    println!("{}", net.probe(((model.mbit * 2.0 / 8.0) as usize).clamp(2, 64)).describe());
    let Bundle { dir, payload, archives: wmco_archives, archived } = bundle(scratch.path(), files, size);
    let route = Route { port: Some(net.port), known_hosts: &known };
    let instances = instances_via(&fleet, &payload, route.port);
    // The uplink in bytes per second, and how long `bytes` take at it.
    let rate = model.mbit * 1e6 / 8.0;
    let wire = |bytes: u64| Duration::from_secs_f64(bytes as f64 / rate);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let pool = Pool::new(load_key(&fleet.key).unwrap(), KnownHosts::load(&known, false).unwrap(), settings());
        let (configure, sent, _) = winfleet_round(&pool, &instances).await;
        let (noop, noop_sent, _) = winfleet_round(&pool, &instances).await;
        // SCP=0 skips scp (each run costs about twice winfleet's at wan).
        let with_scp = env("SCP", 1) != 0;
        let scp = if with_scp { scp_via(&fleet, &dir, route, false) } else { Duration::ZERO };
        let scp_compressed = if with_scp { scp_via(&fleet, &dir, route, true) } else { Duration::ZERO };
        let (wmco, wmco_sent) = wmco_round_via(&instances[..wmco_nodes], &wmco_archives, &fleet, false, &known).await;
        let wmco_fleet = wmco / wmco_nodes as u32 * nodes as u32;
        let limit = wire(sent);
        println!();
        println!("configure {nodes} fresh nodes ({} each) at {}:", mib(payload.size()), model.name);
        println!(
            "  winfleet              {:>10}  sent {:>8}  {:.2}x its wire limit ({} for its {} at {} Mbit/s)",
            secs(configure),
            mib(sent),
            configure.as_secs_f64() / limit.as_secs_f64(),
            secs(limit),
            mib(sent),
            model.mbit
        );
        println!(
            "  wire limit of WMCO's .tar.gz bytes ({} for {nodes} nodes): {}",
            mib(archived * nodes as u64),
            secs(wire(archived * nodes as u64))
        );
        println!(
            "  WMCO's strategy       {:>10}  sent {:>8}  per node, measured on {wmco_nodes}; {nodes} nodes one at a time: \
             {} = {:.1}x winfleet",
            secs(wmco / wmco_nodes as u32),
            mib(wmco_sent / wmco_nodes as u64),
            secs(wmco_fleet),
            wmco_fleet.as_secs_f64() / configure.as_secs_f64()
        );
        if with_scp {
            println!(
                "  scp -r, no compression {:>9}  {:.2}x winfleet's time",
                secs(scp),
                scp.as_secs_f64() / configure.as_secs_f64()
            );
            println!(
                "  scp -r, compression   {:>10}  {:.2}x winfleet's time",
                secs(scp_compressed),
                scp_compressed.as_secs_f64() / configure.as_secs_f64()
            );
        } else {
            println!("  scp -r: skipped (SCP=0)");
        }
        println!("  winfleet's following no-op round: {} ({} sent)", secs(noop), mib(noop_sent));

        let changed = env("CHANGED", 10);
        let before = Payload::load(&dir).unwrap();
        let after = change_files(&dir, changed, 12);
        let delta: u64 = after
            .files
            .iter()
            .filter(|f| before.files.iter().any(|b| b.rel == f.rel && b.sha256 != f.sha256))
            .map(|f| f.size)
            .sum();
        let upgraded = instances_via(&fleet, &after, route.port);
        let (took, up_sent) = winfleet_upgrade(&pool, &upgraded, 5).await;
        println!();
        println!(
            "upgrade after {changed} of {files} files changed ({} per node), 5 nodes at a time: winfleet {} for {nodes} \
             nodes, sent {}; the wire limit of those bytes {}",
            winfleet::vocab::operation::bytes(delta),
            secs(took),
            mib(up_sent),
            secs(wire(up_sent))
        );
        pool.close().await;
    });
    drop(net);
}
