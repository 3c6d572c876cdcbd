//! Issue 24, item 6: two `winfleet run` processes elect a leader through a
//! coordination.k8s.io Lease, against either API server ([`Backend`]):
//! kube-apiserver v1.37.2 or the in-memory one. The leader is killed
//! (SIGKILL: nothing is released) and the follower takes over once the Lease
//! has expired, then applies a round; a leader stopped by SIGTERM releases
//! the Lease, so the follower takes it at its next try. The Lease itself:
//! MicroTime written as RFC 3339 with microseconds, a stale resourceVersion
//! refused with 409 Conflict, `leaseTransitions` counting each new holder.
//!
//! The binary runs with its built-in periods (client-go's: lease 15 s, renew
//! every 5 s, retry every 2 s); the takeover time is printed, not asserted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use support::controlplane::{Backend, TestApi};
use support::daemon::{daemon_command, hosts_toml, mirrors, remote, stderr_lines};
use support::fleet::TestFleet;
use support::port::free_port;
use support::remote::Remote;

const NS: &str = "winfleet";
const LEASE: &str = "winfleet-leader";
/// The binary's lease duration (LeaseConfig::new).
const LEASE_SECONDS: i64 = 15;
/// Generous: a loaded 2-core machine, and a takeover waits for the expiry.
const PATIENCE: Duration = Duration::from_secs(120);

/// One `winfleet run --leader-elect` process; killed when dropped.
struct Daemon {
    child: Child,
    log: Receiver<String>,
}

impl Daemon {
    /// `name` is its identity's prefix (`HOSTNAME`; the daemon appends a random suffix).
    fn start(api: &TestApi, remote: &Remote, fleet: &TestFleet, name: &str) -> Daemon {
        let cache: PathBuf = remote.scratch(&format!("cache-{name}"));
        let mut cmd = daemon_command(remote, fleet, &cache, free_port());
        cmd.args(["--leader-elect", "--leader-elect-namespace", NS, "--kubeconfig"])
            .arg(api.kubeconfig())
            .env_remove("POD_NAME")
            .env("HOSTNAME", name);
        let mut child = cmd.spawn().unwrap();
        let log = stderr_lines(&mut child);
        Daemon { child, log }
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args([signal, &pid]).status().unwrap().success());
    }

    /// Waits for the process to end; its exit status and the lines it logged.
    async fn ended(mut self) -> (std::process::ExitStatus, Vec<String>) {
        let (status, child) = tokio::task::spawn_blocking(move || {
            let status = self.child.wait().unwrap();
            (status, self)
        })
        .await
        .unwrap();
        let lines = child.log.try_iter().collect();
        (status, lines)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Lease's namespace (the in-memory API has no Namespaces).
async fn namespace(api: &TestApi) {
    if api.backend() == Backend::Real {
        api.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).await;
    }
}

async fn lease(api: &TestApi) -> Option<Value> {
    api.get("coordination.k8s.io/v1", "Lease", Some(NS), LEASE).await
}

fn holder(lease: &Value) -> &str {
    lease.pointer("/spec/holderIdentity").and_then(Value::as_str).unwrap_or_default()
}

fn transitions(lease: &Value) -> i64 {
    lease.pointer("/spec/leaseTransitions").and_then(Value::as_i64).unwrap_or(-1)
}

/// A MicroTime as the API writes it: RFC 3339, UTC, exactly six fractional digits.
fn is_micro_time(value: &Value) -> bool {
    let Some(text) = value.as_str() else { return false };
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| bytes.get(range).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    bytes.len() == 27
        && digits(0..4)
        && digits(5..7)
        && digits(8..10)
        && bytes[10] == b'T'
        && digits(11..13)
        && digits(14..16)
        && digits(17..19)
        && bytes[19] == b'.'
        && digits(20..26)
        && bytes[26] == b'Z'
}

fn micro_time(lease: &Value, field: &str) -> jiff::Timestamp {
    let value = &lease["spec"][field];
    assert!(is_micro_time(value), "{field} is not RFC 3339 with microseconds: {value}");
    value.as_str().unwrap().parse().unwrap()
}

/// Waits until the Lease satisfies `done`; the Lease then.
async fn until_lease(api: &TestApi, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(lease) = lease(api).await.filter(|l| done(l)) {
            return lease;
        }
        assert!(Instant::now() < deadline, "{what}: never happened; the Lease: {:?}", lease(api).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until node 0's hosts.toml names `mirror`.
async fn until_applied(fleet: &TestFleet, mirror: &str) {
    let deadline = Instant::now() + PATIENCE;
    while !hosts_toml(fleet, 0).is_some_and(|t| t.contains(mirror)) {
        assert!(Instant::now() < deadline, "{mirror} was never applied: {:?}", hosts_toml(fleet, 0));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A fleet of one sshd node, its repository, the API server with the
/// Lease's namespace, and two daemons: `a` leading (its first round
/// applied), `b` following (it has read the Lease).
async fn two_daemons(backend: Backend) -> (TestApi, TestFleet, Remote, Daemon, Daemon) {
    let api = TestApi::start(backend).await;
    namespace(&api).await;
    let fleet = TestFleet::start(1);
    let remote = remote(&fleet, "");
    let a = Daemon::start(&api, &remote, &fleet, "winfleet-a");
    let held = until_lease(&api, "a leads", |l| holder(l).starts_with("winfleet-a-")).await;
    assert_eq!(transitions(&held), 0, "a created the Lease: {held}");
    until_applied(&fleet, "mirror.corp.example/v2/quay").await;
    let b = Daemon::start(&api, &remote, &fleet, "winfleet-b");
    // b follows while a renews (a follower logs nothing at info level; b's
    // expiry clock starts at its first read, so how soon it reads does not
    // matter to what the tests assert).
    let renewed = micro_time(&held, "renewTime");
    until_lease(&api, "a renews while b runs", |l| holder(l) == holder(&held) && micro_time(l, "renewTime") > renewed)
        .await;
    (api, fleet, remote, a, b)
}

async fn killed_leader(backend: Backend) {
    let (api, fleet, remote, a, b) = two_daemons(backend).await;
    let before = lease(&api).await.unwrap();
    let a_identity = holder(&before).to_owned();
    assert_eq!(before["spec"]["leaseDurationSeconds"], json!(LEASE_SECONDS));

    a.signal("-KILL");
    let killed = Instant::now();
    let (status, a_lines) = a.ended().await;
    assert!(!status.success(), "a was killed");
    assert!(!a_lines.iter().any(|l| l.contains("released")), "a SIGKILLed releases nothing: {a_lines:#?}");
    let last = lease(&api).await.unwrap();
    assert_eq!(holder(&last), a_identity, "nobody released the Lease");
    // The next commit can only be applied by a new leader (nobody polls for an hour).
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");

    let taken = until_lease(&api, "b takes over", |l| holder(l).starts_with("winfleet-b-")).await;
    let takeover = killed.elapsed();
    eprintln!(
        "figure ({backend:?}): SIGKILLed leader to the follower holding the Lease: {:.1} s (lease {LEASE_SECONDS} s, renew 5 s, retry 2 s)",
        takeover.as_secs_f64()
    );
    assert_eq!(transitions(&taken), transitions(&last) + 1, "one new holder: {taken}");
    assert_eq!(taken["spec"]["leaseDurationSeconds"], json!(LEASE_SECONDS));
    // b judged expiry on its own clock from when it saw a's last renewal:
    // it never took a Lease that could still be valid.
    let (acquired, last_renewal) = (micro_time(&taken, "acquireTime"), micro_time(&last, "renewTime"));
    assert!(
        acquired >= last_renewal + jiff::SignedDuration::from_secs(LEASE_SECONDS),
        "b acquired at {acquired}, a renewed last at {last_renewal}"
    );
    assert!(micro_time(&taken, "renewTime") >= acquired, "{taken}");
    until_applied(&fleet, "mirror2.corp.example/v2/quay").await;
    eprintln!("b applied {change} as the new leader");
    let (status, lines) = stop(b).await;
    assert!(status.success(), "{lines:#?}");
    assert!(lines.iter().any(|l| l.contains("released")), "{lines:#?}");
}

async fn stop(daemon: Daemon) -> (std::process::ExitStatus, Vec<String>) {
    daemon.signal("-TERM");
    daemon.ended().await
}

async fn clean_shutdown(backend: Backend) {
    let (api, fleet, remote, a, b) = two_daemons(backend).await;
    let before = lease(&api).await.unwrap();
    let a_identity = holder(&before).to_owned();
    // Pushed before the stop (a polls hourly: it never sees it), so the
    // round b runs on taking over, which may come at once, applies it.
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");
    let stopping = Instant::now();
    let (status, a_lines) = stop(a).await;
    assert!(status.success(), "a stopped cleanly: {a_lines:#?}");
    assert!(a_lines.iter().any(|l| l.contains("released")), "a says it released the Lease: {a_lines:#?}");
    let after = lease(&api).await.unwrap();
    assert_ne!(holder(&after), a_identity, "a released the Lease: {after}");
    if holder(&after).is_empty() {
        // Released as client-go's ReleaseOnCancel does: no holder, one second left.
        assert_eq!(after["spec"]["leaseDurationSeconds"], json!(1), "{after}");
        assert_eq!(transitions(&after), transitions(&before), "a release is no transition");
    }
    let taken = until_lease(&api, "b takes over", |l| holder(l).starts_with("winfleet-b-")).await;
    eprintln!(
        "figure ({backend:?}): leader stopped by SIGTERM to the follower holding the Lease: {:.1} s",
        stopping.elapsed().as_secs_f64()
    );
    assert_eq!(transitions(&taken), transitions(&before) + 1, "{taken}");
    assert_eq!(taken["spec"]["leaseDurationSeconds"], json!(LEASE_SECONDS));
    until_applied(&fleet, "mirror2.corp.example/v2/quay").await;
    eprintln!("b applied {change} as the new leader");
    let (status, lines) = stop(b).await;
    assert!(status.success(), "{lines:#?}");
}

/// The Lease API itself, as the elector uses it: MicroTime normalized to
/// microseconds, a write carrying a stale resourceVersion refused with 409.
async fn lease_api(backend: Backend) {
    let api = TestApi::start(backend).await;
    namespace(&api).await;
    let leases: Api<Lease> = Api::namespaced(api.client(), NS);
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "probe", "namespace": NS},
        "spec": {"holderIdentity": "x", "leaseDurationSeconds": 15, "leaseTransitions": 0,
                 "acquireTime": "2026-11-26T01:02:03.123456Z", "renewTime": "2026-11-26T01:02:03.123456Z"},
    }))
    .unwrap();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let stored = api.get("coordination.k8s.io/v1", "Lease", Some(NS), "probe").await.unwrap();
    assert_eq!(stored["spec"]["renewTime"], "2026-11-26T01:02:03.123456Z");
    assert_eq!(stored["spec"]["acquireTime"], "2026-11-26T01:02:03.123456Z");

    // Two writers read the same version; the second write is refused.
    let mut first = created.clone();
    first.spec.as_mut().unwrap().holder_identity = Some("first".into());
    let written = leases.replace("probe", &PostParams::default(), &first).await.unwrap();
    let mut second = created.clone();
    second.spec.as_mut().unwrap().holder_identity = Some("second".into());
    match leases.replace("probe", &PostParams::default(), &second).await {
        Err(kube::Error::Api(status)) => assert_eq!((status.code, status.reason.as_str()), (409, "Conflict")),
        other => panic!("a stale write was not refused: {other:?}"),
    }
    let now = api.get("coordination.k8s.io/v1", "Lease", Some(NS), "probe").await.unwrap();
    assert_eq!(holder(&now), "first");
    assert_eq!(now["metadata"]["resourceVersion"], json!(written.metadata.resource_version));

    // A MicroTime is Go's RFC3339Micro: exactly six fractional digits;
    // another precision is refused (400), an offset is stored in UTC.
    let dynamic: Api<DynamicObject> = Api::namespaced_with(api.client(), NS, &ApiResource::erase::<Lease>(&()));
    let write = |name: &str, time: &str| {
        let raw = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"holderIdentity": "y", "leaseDurationSeconds": 15, "acquireTime": time, "renewTime": time},
        });
        let dynamic = dynamic.clone();
        async move { dynamic.create(&PostParams::default(), &serde_json::from_value(raw).unwrap()).await }
    };
    for (i, time) in
        ["2026-11-26T01:02:03Z", "2026-11-26T01:02:03.123456789Z", "2026-11-26T01:02:03.123Z"].iter().enumerate()
    {
        match write(&format!("precision-{i}"), time).await {
            Err(kube::Error::Api(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"), "{time}: {s:?}");
                assert!(s.message.contains("cannot be handled as a Lease"), "{time}: {}", s.message);
            }
            other => panic!("{backend:?}: {time} was accepted: {other:?}"),
        }
    }
    write("offset", "2026-11-26T01:02:03.123456+01:00").await.unwrap();
    let stored = api.get("coordination.k8s.io/v1", "Lease", Some(NS), "offset").await.unwrap();
    assert_eq!(stored["spec"]["renewTime"], "2026-11-26T00:02:03.123456Z", "{stored}");
    assert_eq!(stored["spec"]["acquireTime"], "2026-11-26T00:02:03.123456Z", "{stored}");
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_after_its_lease_expires_real() {
    killed_leader(Backend::Real).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_after_its_lease_expires_in_memory() {
    killed_leader(Backend::InMemory).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_cleanly_releases_the_lease_real() {
    clean_shutdown(Backend::Real).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_cleanly_releases_the_lease_in_memory() {
    clean_shutdown(Backend::InMemory).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_api_keeps_micro_times_and_refuses_a_stale_write_real() {
    lease_api(Backend::Real).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_api_keeps_micro_times_and_refuses_a_stale_write_in_memory() {
    lease_api(Backend::InMemory).await;
}
