//! The fleet bench over a modelled network (issue 30, tests/support/netem.rs):
//! winfleet, WMCO's strategy and the floor reach every node through a relay
//! that adds the model's delay and shares its rate between all nodes. The
//! model is measured first and printed with the figures.
//!
//! `NET=wan cargo bench --bench fleet` (or `RTT_MS=` / `BANDWIDTH_MBIT=`);
//! 50 nodes unless NODES says otherwise, so that WMCO's strategy (a node
//! at a time, a round trip per command) fits in minutes.

use std::net::SocketAddr;
use std::time::Instant;

use super::fleet::TestFleet;
use super::{floor, ms, netem, parallel_floor, pool_via, repo, winfleet_round, wmco_round};

pub(super) fn run(model: &netem::Model) {
    let nodes: usize = std::env::var("NODES").ok().and_then(|n| n.parse().ok()).unwrap_or(50);
    println!(
        "network model {}: half the round trip each way (bytes held in order, no loss); the rate is one \
         token bucket per direction shared by all nodes (a full-duplex uplink); {nodes} nodes (NODES=, 50 by default \
         over a modelled network)",
        model.describe()
    );
    let start = Instant::now();
    let fleet = TestFleet::start(nodes);
    println!("fleet: {nodes} sshd nodes up in {}", ms(start.elapsed()));
    let upstreams: Vec<SocketAddr> =
        fleet.nodes.iter().map(|n| format!("{}:{}", n.address, n.port).parse().unwrap()).collect();
    let net = netem::Netem::start(model, &upstreams);
    let (dir, trust) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let known = trust.path().join("known_hosts");
    net.known_hosts(&fleet.known_hosts, fleet.port, &known);
    let base = repo(&fleet, dir.path(), "mirror0.example.com", net.port);
    let changed = repo(&fleet, dir.path(), "elsewhere.example.com", net.port);
    let mib = ((model.mbit * 2.0 / 8.0) as usize).clamp(2, 64);
    println!("{}", net.probe(mib).describe());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let (handshake, round_trip) = floor(&fleet, net.port, &known).await;
        println!(
            "over SSH through the relay: one handshake (connect + key exchange + auth) {:.1} ms; one empty command \
             round trip on a warm connection {:.1} ms (medians)",
            handshake.as_secs_f64() * 1000.0,
            round_trip.as_secs_f64() * 1000.0
        );
        let pool = pool_via(&fleet, &known);
        let (a, a_counts, a_failed) = winfleet_round(&pool, &base).await;
        let (b, b_counts, b_failed) = winfleet_round(&pool, &changed).await;
        let (c, c_counts, c_failed) = winfleet_round(&pool, &changed).await;
        let floor = parallel_floor(&pool, &changed).await;
        let (c2, _, c2_failed) = winfleet_round(&pool, &changed).await;
        pool.close().await;
        assert_eq!(a_failed + b_failed + c_failed + c2_failed, 0, "a node failed");
        assert_eq!(c_counts.applied, 0, "the drift check wrote");
        let wmco_started = Instant::now();
        let (wmco_b, wmco_writes) = wmco_round(&changed, &fleet, &known).await;
        let (wmco_c, _) = wmco_round(&changed, &fleet, &known).await;
        println!("WMCO's strategy: two rounds in {}", ms(wmco_started.elapsed()));
        let parallelism = changed.fleet.max_parallel;
        let ratio = |theirs: std::time::Duration, ours: std::time::Duration| {
            format!("{:.1}x", theirs.as_secs_f64() / ours.as_secs_f64().max(1e-9))
        };
        println!();
        println!("{:<34} {:>10} {:>11} {:>9}", format!("figure ({nodes} nodes, {})", model.name), "winfleet", "WMCO-like", "ratio");
        println!("{:<34} {:>10} {:>11} {:>9}  {} ops applied, cold connections", "(a) initial rollout", ms(a), "-", "-", a_counts.applied);
        println!(
            "{:<34} {:>10} {:>11} {:>9}  winfleet {} writes; WMCO {wmco_writes} files",
            "(b) one mirror changed",
            ms(b),
            ms(wmco_b),
            ratio(wmco_b, b),
            b_counts.applied
        );
        println!("{:<34} {:>10} {:>11} {:>9}  winfleet 0 writes; WMCO rewrites all", "(c) no-op drift check", ms(c), ms(wmco_c), ratio(wmco_c, c));
        println!(
            "floor: one empty command on each of the {nodes} nodes, warm, {parallelism} at once: {}; (c) {:.2}x the floor \
             (again right after it: {} = {:.2}x)",
            ms(floor),
            c.as_secs_f64() / floor.as_secs_f64(),
            ms(c2),
            c2.as_secs_f64() / floor.as_secs_f64()
        );
    });
    drop(net);
}
