//! Leader election (src/daemon/lease.rs) against the in-memory Kubernetes
//! API, reached through real kube::Clients. Most tests run on tokio's paused
//! clock, so the order of renewals, expiries and takeovers is exact and the
//! write times the API server records can be compared; the test that
//! several electors never lead at once runs on the real clock, on several
//! threads.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::apiserver::{ApiServer, Write};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;
use winfleet::daemon::leadership::lease::{self, DEFAULT_NAME, LeaseConfig};

const NS: &str = "winfleet";
const COORDINATION: &str = "coordination.k8s.io/v1";
const LEASE_DURATION: Duration = Duration::from_secs(1);
const PATIENCE: Duration = Duration::from_secs(10);

/// One elector with short periods: lease 1 s, renew 200 ms, retry 100 ms.
struct Elector {
    rx: watch::Receiver<bool>,
    task: JoinHandle<()>,
    shutdown: CancellationToken,
}

impl Elector {
    fn start(server: &ApiServer, identity: &str) -> Self {
        let config = LeaseConfig {
            lease_duration: LEASE_DURATION,
            renew_every: Duration::from_millis(200),
            retry_every: Duration::from_millis(100),
            ..LeaseConfig::new(NS, identity)
        };
        let shutdown = CancellationToken::new();
        let elected = lease::spawn(server.client(), config, shutdown.clone());
        let (rx, task) = (elected.leading, elected.task);
        Elector { rx, task, shutdown }
    }

    fn leads(&self) -> bool {
        *self.rx.borrow()
    }

    /// Waits (generously) until the receiver says `leading`.
    async fn until(&mut self, leading: bool) {
        timeout(PATIENCE, self.rx.wait_for(|l| *l == leading))
            .await
            .unwrap_or_else(|_| panic!("the elector never reported leading={leading}"))
            .expect("the elector's task ended");
    }

    /// Cancels and waits for the task (which releases the Lease).
    async fn stop(self) {
        self.shutdown.cancel();
        timeout(PATIENCE, self.task).await.expect("the elector did not stop").expect("the elector panicked");
    }

    /// Kills the task without letting it release anything.
    async fn crash(self) {
        self.task.abort();
        assert!(self.task.await.unwrap_err().is_cancelled());
    }
}

fn lease(server: &ApiServer) -> Value {
    server.get(COORDINATION, "Lease", Some(NS), DEFAULT_NAME).expect("the Lease exists")
}

fn holder(lease: &Value) -> Option<&str> {
    lease.pointer("/spec/holderIdentity").and_then(Value::as_str)
}

fn transitions(lease: &Value) -> i64 {
    lease.pointer("/spec/leaseTransitions").and_then(Value::as_i64).expect("leaseTransitions")
}

/// Every persisted write to the Lease, in order.
fn writes(server: &ApiServer) -> Vec<Write> {
    server.history().into_iter().filter(|w| w.resource == "leases").collect()
}

/// The first write that made `identity` the holder, of the writes after
/// the first `skip`.
fn acquired_by(server: &ApiServer, identity: &str, skip: usize) -> Write {
    writes(server)
        .into_iter()
        .skip(skip)
        .find(|w| holder(&w.object) == Some(identity))
        .unwrap_or_else(|| panic!("no write made {identity} the holder"))
}

/// Waits until the Lease has been written `n` times.
async fn until_written(server: &ApiServer, n: usize) {
    timeout(PATIENCE, async {
        while writes(server).len() < n {
            sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the Lease was not written often enough");
}

#[tokio::test(start_paused = true)]
async fn a_single_elector_becomes_leader_keeps_renewing_and_releases_on_shutdown() {
    let server = ApiServer::new();
    let mut a = Elector::start(&server, "winfleet-0-aaaaa");
    a.until(true).await;

    let held = lease(&server);
    assert_eq!(holder(&held), Some("winfleet-0-aaaaa"));
    assert_eq!(held["spec"]["leaseDurationSeconds"], json!(1));
    assert_eq!(transitions(&held), 0);
    let acquired = held["spec"]["acquireTime"].clone();
    assert!(acquired.is_string() && held["spec"]["renewTime"].is_string());
    assert_eq!(writes(&server)[0].verb, "create");

    // It renews: more writes, same holder, same acquireTime.
    until_written(&server, 4).await;
    for w in &writes(&server)[1..] {
        assert_eq!(w.verb, "update");
        assert_eq!(holder(&w.object), Some("winfleet-0-aaaaa"));
        assert_eq!(w.object["spec"]["acquireTime"], acquired);
    }
    assert!(a.leads());

    let rx = a.rx.clone();
    a.stop().await;
    assert!(!*rx.borrow());
    let released = lease(&server);
    assert_eq!(holder(&released), None);
    assert_eq!(released["spec"]["leaseDurationSeconds"], json!(1));
    assert_eq!(transitions(&released), 0);
}

/// On the real clock and several threads: three electors started together,
/// sampled continuously for three seconds (many renewals and retries).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_several_electors_exactly_one_leads() {
    let server = ApiServer::new();
    let ids = ["winfleet-0-aaaaa", "winfleet-1-bbbbb", "winfleet-2-ccccc"];
    let electors: Vec<Elector> = ids.iter().map(|id| Elector::start(&server, id)).collect();
    let leaders = || electors.iter().filter(|e| e.leads()).count();

    timeout(PATIENCE, async {
        while leaders() == 0 {
            sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("nobody became leader");
    let watching = std::time::Instant::now();
    let mut samples = 0;
    while watching.elapsed() < Duration::from_secs(3) {
        assert!(leaders() <= 1, "two electors lead at once");
        samples += 1;
        sleep(Duration::from_millis(2)).await;
    }
    assert!(samples > 100);

    // Undisturbed, the first leader stays leader; the others only read.
    assert_eq!(leaders(), 1);
    let leader = ids[electors.iter().position(Elector::leads).unwrap()];
    assert_eq!(holder(&lease(&server)), Some(leader));
    assert_eq!(transitions(&lease(&server)), 0);
    assert!(writes(&server).iter().all(|w| holder(&w.object) == Some(leader)));
    for e in electors {
        e.stop().await;
    }
}

#[tokio::test(start_paused = true)]
async fn on_shutdown_the_leader_releases_and_the_follower_takes_over_at_once() {
    let server = ApiServer::new();
    let mut a = Elector::start(&server, "winfleet-0-aaaaa");
    a.until(true).await;
    let mut b = Elector::start(&server, "winfleet-1-bbbbb");
    sleep(Duration::from_secs(3)).await;
    assert!(a.leads() && !b.leads());

    let before = writes(&server).len();
    a.stop().await;
    b.until(true).await;

    let held = lease(&server);
    assert_eq!(holder(&held), Some("winfleet-1-bbbbb"));
    assert_eq!(transitions(&held), 1);
    let after = &writes(&server)[before..];
    assert_eq!(holder(&after[0].object), None, "the first write after shutdown is the release");
    assert_eq!(after[0].object["spec"]["leaseDurationSeconds"], json!(1));
    let taken = acquired_by(&server, "winfleet-1-bbbbb", before);
    // b did not wait for the lease to expire: it saw the empty holder.
    assert!(taken.at - after[0].at < LEASE_DURATION);
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn when_the_leader_crashes_the_follower_takes_over_after_the_lease_expires() {
    let server = ApiServer::new();
    let mut a = Elector::start(&server, "winfleet-0-aaaaa");
    a.until(true).await;
    let mut b = Elector::start(&server, "winfleet-1-bbbbb");
    sleep(Duration::from_secs(3)).await;

    a.crash().await;
    let before = writes(&server).len();
    let last_renewal = writes(&server)[before - 1].clone();
    assert_eq!(holder(&last_renewal.object), Some("winfleet-0-aaaaa"));
    b.until(true).await;

    let held = lease(&server);
    assert_eq!(holder(&held), Some("winfleet-1-bbbbb"));
    assert_eq!(transitions(&held), 1);
    assert!(writes(&server).iter().all(|w| holder(&w.object).is_some()), "nothing was released");
    let taken = acquired_by(&server, "winfleet-1-bbbbb", before);
    assert!(taken.at >= last_renewal.at + LEASE_DURATION, "b took a lease that had not expired");
    b.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_expired_lease_of_a_dead_identity_is_taken_over() {
    let server = ApiServer::new();
    server.seed(json!({
        "apiVersion": COORDINATION,
        "kind": "Lease",
        "metadata": { "name": DEFAULT_NAME, "namespace": NS },
        "spec": {
            "holderIdentity": "winfleet-7-dead0",
            "leaseDurationSeconds": 1,
            "acquireTime": "2020-01-01T00:00:00.000000Z",
            "renewTime": "2020-01-01T00:00:10.000000Z",
            "leaseTransitions": 3,
        },
    }));
    let started = Instant::now();
    let mut a = Elector::start(&server, "winfleet-0-aaaaa");
    a.until(true).await;

    let held = lease(&server);
    assert_eq!(holder(&held), Some("winfleet-0-aaaaa"));
    assert_eq!(transitions(&held), 4);
    assert_ne!(held["spec"]["acquireTime"], json!("2020-01-01T00:00:00.000000Z"));
    // Expiry is judged on a's own clock from when it first saw the record,
    // not from the (years old) renewTime another pod's clock wrote.
    assert!(acquired_by(&server, "winfleet-0-aaaaa", 0).at >= started + LEASE_DURATION);
    a.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_finds_another_holder_steps_down_at_once() {
    let server = ApiServer::new();
    let mut a = Elector::start(&server, "winfleet-0-aaaaa");
    a.until(true).await;

    // Someone else took the Lease (e.g. while a was cut off from the API).
    server.update(COORDINATION, "Lease", Some(NS), DEFAULT_NAME, |l| {
        l["spec"]["holderIdentity"] = json!("winfleet-9-other");
        l["spec"]["leaseTransitions"] = json!(1);
    });
    let intrusion = writes(&server).pop().unwrap();
    assert_eq!(holder(&intrusion.object), Some("winfleet-9-other"));
    let before = writes(&server).len();
    a.until(false).await;
    assert_eq!(holder(&lease(&server)), Some("winfleet-9-other"));

    // The intruder never renews: a takes the Lease back once it expires.
    a.until(true).await;
    assert!(acquired_by(&server, "winfleet-0-aaaaa", before).at >= intrusion.at + LEASE_DURATION);
    assert_eq!(transitions(&lease(&server)), 2);
    a.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_renewals_fail_steps_down_before_the_lease_can_expire() {
    let server = ApiServer::new();
    let mut a = Elector::start(&server, "winfleet-0-aaaaa");
    a.until(true).await;
    let mut b = Elector::start(&server, "winfleet-1-bbbbb");
    sleep(Duration::from_secs(2)).await;

    // From now on every write naming a is refused (422).
    server.reject(|w| {
        let a_writes = w.resource == "leases" && holder(&w.object) == Some("winfleet-0-aaaaa");
        a_writes.then(|| "renewals refused by the test".to_string())
    });
    a.until(false).await;
    let stepped_down = Instant::now();
    let before = writes(&server).len();
    let last_renewal = writes(&server)[before - 1].clone();
    assert_eq!(holder(&last_renewal.object), Some("winfleet-0-aaaaa"));
    // Nobody may take the Lease before its last renewal + the lease
    // duration; a must have stopped leading before that.
    assert!(stepped_down < last_renewal.at + LEASE_DURATION, "a led after its lease could expire");

    b.until(true).await;
    assert!(acquired_by(&server, "winfleet-1-bbbbb", before).at >= last_renewal.at + LEASE_DURATION);
    assert_eq!(holder(&lease(&server)), Some("winfleet-1-bbbbb"));
    assert_eq!(transitions(&lease(&server)), 1);

    // a survived the errors and keeps following.
    sleep(Duration::from_secs(2)).await;
    assert!(!a.task.is_finished());
    assert!(!a.leads() && b.leads());
    a.stop().await;
    b.stop().await;
}
