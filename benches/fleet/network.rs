//! The fleet bench over a modelled network (issue 30, tests/support/netem.rs):
//! winfleet, WMCO's strategy and the floor reach every node through a relay
//! that adds the model's delay and shares its rate between all nodes. The
//! model is measured first and printed with the figures.
//!
//! `NET=wan cargo bench --bench fleet` (or `RTT_MS=` / `BANDWIDTH_MBIT=`);
//! 50 nodes unless NODES says otherwise. WMCO's strategy goes a node at a
//! time, a few round trips per command (two minutes a round for 50 nodes
//! at `wan`), so `WMCO_NODES=k` runs it on the first k nodes and gives the
//! fleet's time as theirs times nodes/k (its time is a sum over nodes).
//! Then the PowerShell dialect's exchange pattern, through a stand-in
//! (benches/fleet/powershell.rs).

use std::net::SocketAddr;
use std::time::Instant;

use super::fleet::TestFleet;
use super::powershell::{Pattern, measure};
use super::{ansible, floor, ms, netem, parallel_floor, pool_via, repo, winfleet_round, wmco_round};
use winfleet::vocab::Shell;

pub(super) fn run(model: &netem::Model) {
    let nodes: usize = std::env::var("NODES").ok().and_then(|n| n.parse().ok()).unwrap_or(50);
    let wmco_nodes: usize =
        std::env::var("WMCO_NODES").ok().and_then(|n| n.parse().ok()).unwrap_or(nodes).clamp(1, nodes);
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
        let mut traffic = Vec::new();
        let mut counted = pool.activity.traffic();
        let mut count = |name: &str, pool: &winfleet::ssh::Pool| {
            let now = pool.activity.traffic();
            traffic.push((name.to_owned(), now - counted));
            counted = now;
        };
        let (a, a_counts, a_failed) = winfleet_round(&pool, &base).await;
        count("(a)", &pool);
        let (b, b_counts, b_failed) = winfleet_round(&pool, &changed).await;
        count("(b)", &pool);
        let (c, c_counts, c_failed) = winfleet_round(&pool, &changed).await;
        count("(c)", &pool);
        let floor = parallel_floor(&pool, &changed).await;
        count("floor (5 rounds)", &pool);
        let (c2, _, c2_failed) = winfleet_round(&pool, &changed).await;
        pool.close().await;
        assert_eq!(a_failed + b_failed + c_failed + c2_failed, 0, "a node failed");
        assert_eq!(c_counts.applied, 0, "the drift check wrote");
        let per_node = traffic
            .iter()
            .map(|(name, t)| {
                let n = nodes as f64;
                format!(
                    "{name} {:.1}/{:.1}/{:.1}",
                    t.connections as f64 / n,
                    t.channels as f64 / n,
                    t.scripts as f64 / n
                )
            })
            .collect::<Vec<_>>();
        println!("SSH traffic per node (connections/channels/scripts): {}", per_node.join("; "));
        let wmco_started = Instant::now();
        let (wmco_b, wmco_writes) = wmco_round(&changed, &fleet, &known, wmco_nodes).await;
        let (wmco_c, _) = wmco_round(&changed, &fleet, &known, wmco_nodes).await;
        let scale = nodes as f64 / wmco_nodes as f64;
        let (wmco_b, wmco_c) = (wmco_b.mul_f64(scale), wmco_c.mul_f64(scale));
        let wmco_writes = (wmco_writes as f64 * scale).round() as usize;
        println!(
            "WMCO's strategy: two rounds on {wmco_nodes} of the {nodes} nodes in {}{}",
            ms(wmco_started.elapsed()),
            if wmco_nodes < nodes { format!(", times {scale:.1} for the fleet (WMCO_NODES)") } else { String::new() }
        );
        // Ansible where its runs fit (ANSIBLE_NODES, 20 by default), last:
        // its CPU-bound runs leave the machine busy for a while.
        let ansible_nodes = std::env::var("ANSIBLE_NODES").ok().and_then(|n| n.parse().ok()).unwrap_or(20);
        let ansible = if nodes <= ansible_nodes {
            ansible::column(&fleet, &base, &changed, Some((net.port, &known))).await
        } else {
            Err(format!("{nodes} nodes, more than ANSIBLE_NODES={ansible_nodes}"))
        };
        match &ansible {
            Ok(runs) => println!(
                "Ansible over {}, {nodes} nodes: (a) {} / (b) {} / (c) {}; over winfleet's: {:.0}x / {:.0}x / {:.0}x",
                model.name,
                ms(runs[0].time),
                ms(runs[1].time),
                ms(runs[2].time),
                runs[0].time.as_secs_f64() / a.as_secs_f64(),
                runs[1].time.as_secs_f64() / b.as_secs_f64(),
                runs[2].time.as_secs_f64() / c.as_secs_f64()
            ),
            Err(why) => println!("Ansible: skipped ({why})"),
        }
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
        println!();
        println!(
            "the PowerShell dialect's exchange pattern: a stand-in powershell.exe on each node runs the posix \
             observation sent in the PowerShell wrapping (benches/fleet/powershell.rs); {parallelism} at once"
        );
        for node in &fleet.nodes {
            super::powershell_standin::install(node);
        }
        println!("{:<44} {:>9} {:>9}  per node, warm: connections / channels / scripts", "pattern", "cold", "warm");
        for (name, pattern) in [
            ("posix: /bin/sh -s kept", Pattern::Kept(Shell::Posix)),
            ("PowerShell: -Command - session kept", Pattern::Kept(Shell::Powershell)),
            ("PowerShell before: a channel per script", Pattern::ChannelPerScript),
        ] {
            let (cold, warm, [connections, channels, scripts]) =
                measure(pool_via(&fleet, &known), &changed, pattern).await;
            println!("{name:<44} {:>9} {:>9}  {connections:.1} / {channels:.1} / {scripts:.1}", ms(cold), ms(warm));
        }
    });
    drop(net);
}
