//! Issue 27, item 3: in cluster mode the pull secret comes from Secret
//! `openshift-config/pull-secret`, read every round. A real sshd node and
//! either API server ([`Backend`]): the Secret is rotated between two rounds of
//! the same process, with the same loaded revision (nothing restarted or
//! reloaded), and the node's hosts.toml `authorization` header follows.
//! The credentials appear in no report (text, JSON, a dry run's plan) and
//! in no status file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::apiserver::ApiServer;
use support::controlplane::{Backend, TestApi};
use support::fleet::TestFleet;
use winfleet::cluster::connect::Cluster;
use winfleet::desired::kinds::fleet::DriftMode;
use winfleet::desired::model::{Desired, Instance};
use winfleet::engine::host::SshHost;
use winfleet::reconcile::{self, Options, report::RoundReport};
use winfleet::ssh::{KnownHosts, Pool, Settings, load_key};
use winfleet::status::{RoundInput, Status};

const MIRROR: &str = "mirror.corp.example:5000";

fn pull_secret(password: &str) -> Value {
    let config = json!({"auths": {MIRROR: {"auth": STANDARD.encode(format!("robot:{password}"))}}});
    let data = STANDARD.encode(config.to_string());
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "pull-secret", "namespace": "openshift-config"},
        "data": {".dockerconfigjson": data},
    })
}

fn repository(fleet: &TestFleet) -> Desired {
    let dir = tempfile::tempdir().unwrap();
    let instances: String = fleet.nodes.iter().map(|n| format!("  - address: {}\n", n.address)).collect();
    let files = BTreeMap::from([
        ("fleet.yaml", fleet.fleet_yaml()),
        (
            "instances.yaml",
            format!(
                "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: t\nspec:\n  instances:\n{instances}"
            ),
        ),
        ("mirrors.yaml", support::daemon::mirrors(&format!("{MIRROR}/quay"))),
    ]);
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let loaded = winfleet::desired::load(&winfleet::source::read_worktree(dir.path()).unwrap(), Default::default());
    loaded.desired.unwrap_or_else(|| panic!("{:#?}", loaded.diagnostics))
}

async fn round(cluster: &Cluster, pool: &Pool, desired: &Desired, dry_run: bool) -> RoundReport {
    let instances: Vec<&Instance> = desired.instances.values().collect();
    let options = Options { dry_run, max_parallel: 2, whole_fleet: true, ..Options::default() };
    let host = SshHost { pool };
    reconcile::round(Some(cluster), pool, &host, desired, &instances, &options, |_| {}).await
}

/// The credential in every form it could leak in.
fn forms(password: &str) -> [String; 3] {
    let pair = format!("robot:{password}");
    [password.to_owned(), STANDARD.encode(&pair), pair]
}

/// The report's text and JSON, and the status files rendered from it with
/// no redaction list at all (the credential must not get there in the
/// first place), hold no form of the credential.
fn assert_hidden(report: &RoundReport, desired: &Desired, password: &str) {
    let instances: Vec<String> = desired.instances.keys().cloned().collect();
    let input = RoundInput {
        now: jiff::Timestamp::UNIX_EPOCH,
        attempted: "0123456789abcdef0123456789abcdef01234567",
        applied: Some("0123456789abcdef0123456789abcdef01234567"),
        invalid: &[],
        instances: &instances,
        machine_sets: &[],
        report: Some(report),
        drift_check: false,
        drift_mode: DriftMode::Correct,
        secrets: &[],
        suspended_by: None,
    };
    let files = winfleet::status::to_files(&winfleet::status::render(&Status::default(), &input));
    let status: String = files.values().map(|bytes| String::from_utf8_lossy(bytes).into_owned()).collect();
    for text in [report.render_text(), report.render_json(), status] {
        for form in forms(password) {
            assert!(!text.contains(&form), "the credential ({form}) is in the report:\n{text}");
        }
    }
}

async fn a_rotated_secret_reaches_hosts_toml(api: TestApi) {
    let fleet = TestFleet::start(1);
    api.seed(pull_secret("first-s3cret")).await;
    let cluster = Cluster { client: api.client(), url: api.url().to_owned() };
    let pool = Pool::new(
        load_key(&fleet.key).unwrap(),
        KnownHosts::load(&fleet.known_hosts, false).unwrap(),
        Settings::default(),
    );
    let desired = repository(&fleet);
    let node = &fleet.nodes[0];
    let hosts_toml = "certs.d/quay.io/hosts.toml";

    let report = round(&cluster, &pool, &desired, false).await;
    assert!(!report.failed(), "{}", report.render_text());
    let first = node.read(hosts_toml).expect("hosts.toml written");
    let header = |password: &str| format!("authorization = \"Basic {}\"", STANDARD.encode(format!("robot:{password}")));
    assert!(first.contains(&header("first-s3cret")), "{first}");
    assert_hidden(&report, &desired, "first-s3cret");

    // Rotated in the cluster; the same process and the same loaded revision.
    let secrets: Api<Secret> = Api::namespaced(api.client(), "openshift-config");
    let rotated = json!({"data": pull_secret("second-s3cret")["data"].clone()});
    secrets.patch("pull-secret", &PatchParams::default(), &Patch::Merge(&rotated)).await.unwrap();
    let report = round(&cluster, &pool, &desired, false).await;
    assert!(!report.failed(), "{}", report.render_text());
    let second = node.read(hosts_toml).unwrap();
    assert!(second.contains(&header("second-s3cret")), "{second}");
    assert!(!second.contains(&header("first-s3cret")), "{second}");
    assert!(report.render_text().contains("hosts.toml"), "the rotation is a file change: {}", report.render_text());
    assert_hidden(&report, &desired, "second-s3cret");

    // Nothing new: nothing written.
    let report = round(&cluster, &pool, &desired, false).await;
    let quiet = report.nodes.iter().all(|n| !n.has_changes());
    assert!(quiet, "{}", report.render_text());

    // A further rotation in a dry run (plan --live): the change is shown,
    // the credential is not, and the node keeps its file.
    let third = json!({"data": pull_secret("third-s3cret")["data"].clone()});
    secrets.patch("pull-secret", &PatchParams::default(), &Patch::Merge(&third)).await.unwrap();
    let plan = round(&cluster, &pool, &desired, true).await;
    assert!(plan.has_changes() && plan.render_text().contains("hosts.toml"), "{}", plan.render_text());
    assert_hidden(&plan, &desired, "third-s3cret");
    assert_eq!(node.read(hosts_toml).unwrap(), second, "a dry run writes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_cluster_pull_secret_reaches_hosts_toml_in_the_next_round_on_the_in_memory_server() {
    a_rotated_secret_reaches_hosts_toml(TestApi::start(Backend::InMemory).await).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_cluster_pull_secret_reaches_hosts_toml_in_the_next_round_on_the_real_control_plane() {
    let api = TestApi::start(Backend::Real).await;
    a_rotated_secret_reaches_hosts_toml(api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_secret_in_the_cluster_no_authorization_is_written() {
    let fleet = TestFleet::start(1);
    let api = ApiServer::new();
    let cluster = Cluster { client: api.client(), url: "in-memory".into() };
    let pool = Pool::new(
        load_key(&fleet.key).unwrap(),
        KnownHosts::load(&fleet.known_hosts, false).unwrap(),
        Settings::default(),
    );
    let desired = repository(&fleet);
    let report = round(&cluster, &pool, &desired, false).await;
    assert!(!report.failed(), "{}", report.render_text());
    let file = fleet.nodes[0].read("certs.d/quay.io/hosts.toml").unwrap();
    assert!(!file.contains("authorization"), "{file}");
}
