//! Two replicas of the daemon in process, electing a leader through a
//! Lease in the in-memory API server: only the leader reconciles, a webhook
//! sent to either replica starts a round on the leader, and the follower
//! takes over when the leader stops.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use support::apiserver::ApiServer;
use support::daemon::*;
use support::fleet::TestFleet;
use support::port::free_port;
use support::remote::Remote;
use winfleet::cluster::connect::Cluster;
use winfleet::daemon::leadership::lease::{LeaseConfig, WEBHOOK_ANNOTATION};
use winfleet::daemon::round::{RoundKind, RoundRecord};
use winfleet::daemon::{self, Config, Handle};

fn elect(identity: &str) -> Option<LeaseConfig> {
    let mut lease = LeaseConfig::new("winfleet", identity);
    lease.lease_duration = Duration::from_secs(3);
    lease.renew_every = Duration::from_millis(500);
    lease.retry_every = Duration::from_millis(200);
    Some(lease)
}

async fn replica(api: &ApiServer, fleet: &TestFleet, remote: &Remote, identity: &str) -> Handle {
    let cluster = Some(Cluster { client: api.client(), url: "in-memory".into() });
    daemon::start(Config { leader_election: elect(identity), ..config(remote) }, cluster, pool(fleet)).await.unwrap()
}

fn lease(api: &ApiServer) -> serde_json::Value {
    api.get("coordination.k8s.io/v1", "Lease", Some("winfleet"), "winfleet-leader").unwrap()
}

/// The next commit round, skipping drift and retry rounds.
async fn next_commit(handle: &mut Handle) -> RoundRecord {
    loop {
        let record = next(&mut handle.records).await;
        if record.kind == RoundKind::Commit {
            return record;
        }
    }
}

/// Sends a push webhook to a follower until it answers that the leader has
/// it (the follower learns the leader's address at its first Lease read,
/// within one retry period of starting).
async fn hand_to_leader(follower: &Handle) {
    for _ in 0..100 {
        let (status, text) = push_hook_answer(follower).await;
        assert_eq!(status, 202, "{text}");
        if text.contains("handed to the leader") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the follower never handed a webhook to the leader");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_sent_to_either_replica_starts_a_round_on_the_leader() {
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "");
    let api = ApiServer::new();
    let mut a = replica(&api, &fleet, &remote, "a").await;
    assert_eq!(next(&mut a.records).await.kind, RoundKind::Commit, "the first replica leads and reconciles");
    let mut b = replica(&api, &fleet, &remote, "b").await;
    wait_ready(&b).await;
    let advertised = lease(&api)["metadata"]["annotations"][WEBHOOK_ANNOTATION].as_str().unwrap().to_owned();
    assert_eq!(advertised, format!("http://{}", a.webhook_addr.unwrap()), "the leader advertises its webhook");

    // Announced to the follower: the leader applies it at once, not at its next poll (an hour away).
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");
    hand_to_leader(&b).await;
    let record = next_commit(&mut a).await;
    assert_eq!(record.revision, change);
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example/v2/quay"));
    let metrics = b.metrics.encode();
    assert!(metrics.contains(r#"winfleet_webhook_requests_total{result="forwarded"} 1"#), "{metrics}");
    assert!(b.records.is_empty(), "the follower ran no round");

    // Announced to the leader: handled there, as by a single daemon.
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror3.corp.example/quay"))], &[], "third mirror");
    let (status, text) = push_hook_answer(&a).await;
    assert_eq!((status, text.as_str()), (202, "accepted"));
    assert_eq!(next_commit(&mut a).await.revision, change);
    assert!(b.records.is_empty(), "the follower ran no round");

    // The leader stops, releasing the Lease: b takes over, advertises
    // itself, and handles the next webhook itself.
    stop(a).await;
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror4.corp.example/quay"))], &[], "fourth mirror");
    assert_eq!(push_hook(&b).await, 202);
    // Taking over, b checks the source: its first round may come before the push.
    while next_commit(&mut b).await.revision != change {}
    let held = lease(&api);
    assert_eq!(held["spec"]["holderIdentity"], "b");
    assert_eq!(held["metadata"]["annotations"][WEBHOOK_ANNOTATION], format!("http://{}", b.webhook_addr.unwrap()));
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror5.corp.example/quay"))], &[], "fifth mirror");
    assert_eq!(push_hook_answer(&b).await, (202, "accepted".to_owned()));
    assert_eq!(next_commit(&mut b).await.revision, change);
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror5.corp.example/v2/quay"));
    stop(b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_cannot_reach_the_leader_still_accepts_and_the_leader_polls() {
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "");
    let api = ApiServer::new();
    // The leader advertises an address nobody answers at, and polls every second.
    let closed = format!("http://127.0.0.1:{}", free_port());
    let mut election = elect("a").unwrap();
    election.advertise = Some(closed.clone());
    let leader = Config { leader_election: Some(election), poll_interval: Duration::from_secs(1), ..config(&remote) };
    let cluster = Some(Cluster { client: api.client(), url: "in-memory".into() });
    let mut a = daemon::start(leader, cluster, pool(&fleet)).await.unwrap();
    assert_eq!(next(&mut a.records).await.kind, RoundKind::Commit);
    assert_eq!(lease(&api)["metadata"]["annotations"][WEBHOOK_ANNOTATION], closed.as_str());
    let b = replica(&api, &fleet, &remote, "b").await;
    wait_ready(&b).await;

    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");
    let (status, text) = push_hook_answer(&b).await;
    assert_eq!((status, text.as_str()), (202, "accepted"), "accepted, though not handed over");
    let metrics = b.metrics.encode();
    assert!(metrics.contains(r#"winfleet_webhook_requests_total{result="accepted"} 1"#), "{metrics}");
    assert!(metrics.contains(r#"winfleet_webhook_requests_total{result="forwarded"} 0"#), "{metrics}");
    assert_eq!(next_commit(&mut a).await.revision, change, "the leader's poll finds it");
    stop(b).await;
    stop(a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_sent_to_the_follower_holds_on_the_leader_and_survives_the_handover() {
    use winfleet::daemon::leadership::suspend::{ANNOTATION, ControlToken};
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "");
    let api = ApiServer::new();
    let with_token = |identity: &str| Config {
        leader_election: elect(identity),
        control_token: Some(ControlToken::new(b"control")),
        ..config(&remote)
    };
    let cluster = || Some(Cluster { client: api.client(), url: "in-memory".into() });
    let mut a = daemon::start(with_token("a"), cluster(), pool(&fleet)).await.unwrap();
    assert_eq!(next(&mut a.records).await.kind, RoundKind::Commit);
    let mut b = daemon::start(with_token("b"), cluster(), pool(&fleet)).await.unwrap();
    wait_ready(&b).await;

    let bearer = [("Authorization", "Bearer control".to_owned())];
    let control = |handle: &Handle, path: &'static str, body: &'static [u8]| {
        let addr = handle.webhook_addr.unwrap();
        let headers = bearer.clone();
        async move {
            let mut answer = (0, String::new());
            for _ in 0..100 {
                answer = post_to(addr, path, &headers, body).await;
                if answer.0 != 503 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            answer
        }
    };
    let (status, text) = control(&b, "/suspend", b"maintenance window").await;
    assert_eq!((status, text.as_str()), (200, "suspended: maintenance window"), "handed to the leader");
    // The leader writes it into the Lease at its next renewal.
    tokio::time::timeout(Duration::from_secs(30), async {
        while lease(&api)["metadata"]["annotations"][ANNOTATION] != "maintenance window" {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the suspension reaches the Lease");

    // The leader stops; b takes over, still suspended: a new commit is not applied.
    stop(a).await;
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");
    assert_eq!(push_hook(&b).await, 202);
    // b's first round may be of the head before the push (taking over, it checks the source).
    while next_commit(&mut b).await.revision != change {}
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror.corp.example/v2/quay"), "suspended after the handover");
    let (status, text) = control(&b, "/resume", b"").await;
    assert_eq!((status, text.as_str()), (200, "resumed"));
    let record = next_commit(&mut b).await;
    assert_eq!((record.revision.as_str(), record.changed), (change.as_str(), 1));
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example/v2/quay"));
    stop(b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_23_a_follower_never_acts_on_a_forwarded_request_and_names_the_leader() {
    use winfleet::daemon::leadership::forward::FORWARDED_HEADER;
    use winfleet::daemon::leadership::suspend::{ANNOTATION, ControlToken};
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "");
    let api = ApiServer::new();
    let with_token = |identity: &str| Config {
        leader_election: elect(identity),
        control_token: Some(ControlToken::new(b"control")),
        ..config(&remote)
    };
    let cluster = || Some(Cluster { client: api.client(), url: "in-memory".into() });
    let mut a = daemon::start(with_token("a"), cluster(), pool(&fleet)).await.unwrap();
    assert_eq!(next(&mut a.records).await.kind, RoundKind::Commit);
    let b = daemon::start(with_token("b"), cluster(), pool(&fleet)).await.unwrap();
    wait_ready(&b).await;
    hand_to_leader(&b).await;
    let leader = format!("http://{}", a.webhook_addr.unwrap());

    // A request that claims another replica forwarded it, with a valid
    // control token: the follower neither suspends itself nor forwards.
    let forged = [("Authorization", "Bearer control".to_owned()), (FORWARDED_HEADER, "a".to_owned())];
    let (status, text) = post_to(b.webhook_addr.unwrap(), "/suspend", &forged, b"forged").await;
    assert_eq!(status, 409, "{text}");
    assert!(text.contains(&leader), "the answer names the leader: {text}");
    let (status, text) = post_to(b.webhook_addr.unwrap(), "/resume", &forged, b"").await;
    assert_eq!(status, 409, "{text}");

    // A forwarded webhook is not handled by a follower either.
    let body = br#"{"ref":"refs/heads/main","after":"0000000000000000000000000000000000000000"}"#;
    let headers = [
        ("X-GitHub-Event", "push".to_owned()),
        ("X-Hub-Signature-256", github_signature(SECRET, body)),
        (FORWARDED_HEADER, "a".to_owned()),
    ];
    let (status, text) = post_answer(b.webhook_addr.unwrap(), &headers, body).await;
    assert_eq!(status, 409, "{text}");
    assert!(text.contains(&leader), "{text}");

    // The leader carries on, unsuspended.
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");
    assert_eq!(push_hook(&a).await, 202);
    while next_commit(&mut a).await.revision != change {}
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example/v2/quay"), "applied: not suspended");
    assert!(lease(&api)["metadata"]["annotations"][ANNOTATION].is_null(), "{}", lease(&api));
    stop(b).await;
    stop(a).await;
}
