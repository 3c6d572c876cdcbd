//! SSH-only removals are not forgotten (issue 27, item 7): with no cluster,
//! an instance removed from the repository is not deconfigured and
//! winfleet's files stay on the host; status keeps it, Waiting with the
//! reason, across rounds and a restart (the status branch is the memory),
//! until it is listed again or nothing winfleet installed is left on the
//! host; the mass-removal guard counts it. Real sshd nodes, a real bare Git
//! remote, the daemon in process.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::daemon::*;
use support::fleet::TestFleet;
use winfleet::daemon::round::RoundKind;

const REASON: &str = "left configured: no cluster to drain it; deconfigure it with a cluster, or remove it by hand";

fn listing(fleet: &TestFleet, nodes: &[usize]) -> String {
    let mut list = String::from(
        "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: t\nspec:\n  instances:\n",
    );
    for i in nodes {
        list.push_str(&format!("  - address: {}\n", fleet.nodes[*i].address));
    }
    if nodes.is_empty() {
        list = list.replace("  instances:\n", "  instances: []\n");
    }
    list
}

fn instance_file(remote: &support::remote::Remote, fleet: &TestFleet, i: usize) -> Option<String> {
    remote.show("winfleet/status", &format!("status/instances/{}.yaml", fleet.nodes[i].address))
}

fn summary(remote: &support::remote::Remote) -> String {
    remote.show("winfleet/status", "status/summary.yaml").unwrap()
}

/// The reason is written folded by the YAML writer: compare words.
fn says(text: &str, what: &str) -> bool {
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    words(text).contains(&words(what))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_instance_stays_in_status_until_listed_again_or_cleaned_by_hand() {
    let fleet = TestFleet::start(3);
    let remote = remote(&fleet, "");
    let mut handle = start(&fleet, config(&remote)).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);
    assert!(hosts_toml(&fleet, 2).is_some());

    // Node 2 leaves the repository: nothing is deconfigured without a cluster.
    let removed = remote.push(&[("instances.yaml", &listing(&fleet, &[0, 1]))], &[], "node 2 leaves");
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!((record.kind, record.revision.as_str(), record.failed), (RoundKind::Commit, removed.as_str(), 0));
    assert!(hosts_toml(&fleet, 2).is_some(), "winfleet's files stay on the host");
    let file = instance_file(&remote, &fleet, 2).expect("the removed instance stays in status");
    assert!(file.contains("phase: Waiting") && file.contains("reason: LeftConfigured"), "{file}");
    assert!(says(&file, REASON), "{file}");
    assert!(file.contains("quay.io"), "what a deconfigure would remove is named: {file}");
    let text = summary(&remote);
    assert!(text.contains("waiting: 1") && text.contains("ready: 2"), "{text}");
    assert!(!text.contains("deconfigureRefused"), "one of three is within the guard: {text}");

    // A restart: the status branch remembers it; a new commit is applied to
    // the listed nodes only.
    stop(handle).await;
    let mut handle = start(&fleet, config(&remote)).await;
    let change = remote.push(&[("mirrors.yaml", &mirrors("mirror2.corp.example/quay"))], &[], "new mirror");
    assert_eq!(push_hook(&handle).await, 202);
    let record = loop {
        let record = next(&mut handle.records).await;
        if record.revision == change {
            break record;
        }
    };
    assert_eq!(record.failed, 0, "{record:?}");
    assert!(hosts_toml(&fleet, 0).unwrap().contains("mirror2.corp.example"));
    assert!(hosts_toml(&fleet, 2).unwrap().contains("mirror.corp.example/v2/quay"), "the removed host is not touched");
    let file = instance_file(&remote, &fleet, 2).expect("still left configured after a restart");
    assert!(says(&file, REASON), "{file}");

    // Listed again: an instance like the others.
    let back = remote.push(&[("instances.yaml", &listing(&fleet, &[0, 1, 2]))], &[], "node 2 back");
    assert_eq!(push_hook(&handle).await, 202);
    let record = next(&mut handle.records).await;
    assert_eq!(record.revision, back);
    let file = instance_file(&remote, &fleet, 2).unwrap();
    assert!(file.contains("phase: Ready") && !file.contains("LeftConfigured"), "{file}");
    assert!(hosts_toml(&fleet, 2).unwrap().contains("mirror2.corp.example"));

    // Removed again, then its files removed by hand: status lets it go.
    let again = remote.push(&[("instances.yaml", &listing(&fleet, &[0, 1]))], &[], "node 2 leaves again");
    assert_eq!(push_hook(&handle).await, 202);
    assert_eq!(next(&mut handle.records).await.revision, again);
    assert!(instance_file(&remote, &fleet, 2).is_some_and(|f| says(&f, REASON)));
    std::fs::remove_dir_all(fleet.nodes[2].path("certs.d/quay.io")).unwrap();
    let touch = remote.push(&[("mirrors.yaml", &mirrors("mirror3.corp.example/quay"))], &[], "touch");
    assert_eq!(push_hook(&handle).await, 202);
    assert_eq!(next(&mut handle.records).await.revision, touch);
    assert_eq!(instance_file(&remote, &fleet, 2), None, "nothing of winfleet's is left on it");
    let text = summary(&remote);
    assert!(text.contains("waiting: 0") && text.contains("ready: 2"), "{text}");
    stop(handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mass_removal_guard_counts_hosts_left_configured() {
    let fleet = TestFleet::start(3);
    let remote = remote(&fleet, "");
    let mut handle = start(&fleet, config(&remote)).await;
    assert_eq!(next(&mut handle.records).await.kind, RoundKind::Commit);

    let emptied = remote.push(&[("instances.yaml", &listing(&fleet, &[0]))], &[], "two of three leave");
    assert_eq!(push_hook(&handle).await, 202);
    assert_eq!(next(&mut handle.records).await.revision, emptied);
    let text = summary(&remote);
    assert!(says(&text, "2 of 3 instances (66%), more than prune.maxRemovalPercent (50%)"), "{text}");
    assert!(says(&text, "left the repository with no cluster to deconfigure them"), "{text}");
    for i in [1, 2] {
        assert!(hosts_toml(&fleet, i).is_some());
        assert!(instance_file(&remote, &fleet, i).is_some_and(|f| says(&f, REASON)));
    }

    // Restored: the guard has nothing to say any more.
    let restored = remote.push(&[("instances.yaml", &listing(&fleet, &[0, 1, 2]))], &[], "restored");
    assert_eq!(push_hook(&handle).await, 202);
    assert_eq!(next(&mut handle.records).await.revision, restored);
    let text = summary(&remote);
    assert!(!text.contains("deconfigureRefused") && text.contains("ready: 3"), "{text}");
    stop(handle).await;
}
