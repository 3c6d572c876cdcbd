//! Issue 36, "what the worker ignition carries": on AWS the worker pool's
//! rendered MachineConfig carries the ECR credential provider's config, and
//! WMCO writes it, re-marshalled, to `C:\k\credential-provider-config.yaml`,
//! which its AWS services manifest's kubelet names
//! (`--image-credential-provider-config`). Two posix sshd nodes (fake
//! kubelets) join a cluster seeded as an AWS installer leaves it
//! (tests/support/platform_cluster.rs), on either API server; the kubelet
//! of the services manifest names the file as WMCO's does.
//!
//! - The plan shows the file with the MachineConfig it comes from; the
//!   join writes WMCO's text (written here as the fact research §1 gives);
//!   the next round writes nothing.
//! - MCO renders a new configuration (the cache duration changed) and the
//!   pool runs it: the next round rewrites the file and restarts the
//!   kubelet for it (and hybrid-overlay-node, its dependent, with it),
//!   not containerd.
//! - A node that leaves the repository loses the file at its deconfigure;
//!   the other keeps its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::bench_checks::{assert_all_joined, assert_quiet, on_node};
use support::controlplane::{Backend, ControlPlane};
use support::identity::{install_identity, service_account_token};
use support::join::{Bench, bench, logs};
use support::join_payload::services_manifest_with_kubelet_args;
use support::platform_cluster::{MCO_ECR, rotate_rendered_worker, seed_platform, wmco_ecr_posix};
use winfleet::lifecycle::platform_files::CREDENTIAL_PROVIDER_CONFIG;
use winfleet::vocab::Shell;
use winfleet::vocab::platform::Platform;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

const NAMES: [&str; 2] = ["win-ign1", "win-ign2"];
/// The file on a posix node: the kube directory is the payload directory.
const FILE: &str = "payload/credential-provider-config.yaml";

fn on_nodes(bench: &Bench) -> Vec<Option<String>> {
    bench.fleet.nodes.iter().map(|n| std::fs::read_to_string(on_node(n, FILE)).ok()).collect()
}

async fn an_aws_node_gets_wmcos_credential_provider_config(mut bench: Bench) {
    let client = bench.api.client();
    let first = seed_platform(&client, Platform::Aws).await;
    let args = format!("--image-credential-provider-config={FILE} --image-credential-provider-bin-dir=payload");
    std::fs::write(bench.repo.path().join("services.yaml"), services_manifest_with_kubelet_args(&args)).unwrap();
    bench.reload();
    let spec = bench.desired.specs[&Shell::Posix].lifecycle.clone().unwrap();
    assert_eq!(spec.kube_path(CREDENTIAL_PROVIDER_CONFIG), FILE);

    let plan = bench.plan().await.render_text();
    assert!(plan.contains(&format!("+ {FILE} (from MachineConfig {first}, sha256:")), "{plan}");
    let which = format!(
        "  - worker ignition: MachineConfig {first} (MachineConfigPool worker's status.configuration): {CREDENTIAL_PROVIDER_CONFIG}"
    );
    assert!(plan.contains(&which), "the plan says which MachineConfig: {plan}");
    assert_eq!(on_nodes(&bench), [None, None], "a plan writes nothing");
    let report = bench.round().await;
    assert_all_joined(&bench.fleet, &report);
    let expected = wmco_ecr_posix();
    assert_eq!(on_nodes(&bench), [Some(expected.clone()), Some(expected.clone())], "{}", logs(&bench.fleet));
    assert_quiet(&bench.round().await);
    let pids: Vec<_> = bench.fleet.nodes.iter().map(|n| n.service_pids()).collect();

    // MCO renders a new configuration; the pool runs it.
    let rotated = rotate_rendered_worker(&client, Platform::Aws, "b", &MCO_ECR.replace("\"12h\"", "\"6h\"")).await;
    let plan = bench.plan().await.render_text();
    assert!(plan.contains(&format!("~ {FILE} (from MachineConfig {rotated}, sha256:")), "{plan}");
    let report = bench.round().await;
    let text = report.render_text();
    assert!(!report.failed(), "{text}\n{}", logs(&bench.fleet));
    let expected = expected.replace("12h0m0s", "6h0m0s");
    assert_eq!(on_nodes(&bench), [Some(expected.clone()), Some(expected.clone())], "{text}");
    // The kubelet restarts for the file; hybrid-overlay-node, which depends
    // on it, is stopped and started with it (as every dependent is, WMCO's
    // order); containerd is not touched.
    assert!(text.contains(&format!("start service kubelet (restart: {FILE} changed)")), "{text}");
    assert!(text.contains("start service hybrid-overlay-node (restart: a service it depends on restarts)"), "{text}");
    for (node, before) in bench.fleet.nodes.iter().zip(&pids) {
        let now = node.service_pids();
        for (service, pid) in before {
            let restarted = now.get(service) != Some(pid);
            assert_eq!(
                restarted,
                service != "containerd",
                "{service} on {}: {before:?} -> {now:?}\n{text}",
                node.address
            );
        }
    }
    assert_quiet(&bench.round().await);

    // The first node leaves the repository: its deconfigure removes the file.
    bench.remove_first().await;
    assert_eq!(on_nodes(&bench), [None, Some(expected)], "removed from the node that left, kept on the other");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aws_node_gets_wmcos_credential_provider_config_on_the_in_memory_server() {
    an_aws_node_gets_wmcos_credential_provider_config(bench(Backend::InMemory, &NAMES).await).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aws_node_gets_wmcos_credential_provider_config_on_the_real_control_plane() {
    let bench = bench(Backend::Real, &NAMES).await;
    an_aws_node_gets_wmcos_credential_provider_config(bench).await;
}

/// deploy/'s RBAC is enough: the ServiceAccount `winfleet`, with the rules
/// of deploy/base/rbac.yaml applied as they are, reads the pool and the
/// MachineConfig it names, and lists MachineConfigs when no pool names
/// one (WMCO's rule), on a real kube-apiserver.
#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_service_account_reads_the_rendered_worker_on_the_real_control_plane() {
    let plane = ControlPlane::start().await;
    install_identity(&plane, None).await;
    let client = plane.client_with_token(&service_account_token(&plane).await).await;
    let none = winfleet::cluster::machine_config::read(&client).await.unwrap();
    assert_eq!(none, None, "no pool and no MachineConfig: no file");
    // No pool: WMCO's rule, the newest rendered-worker-* (a list).
    let alone = support::platform_cluster::rendered_worker("rendered-worker-alone", Platform::Aws, None);
    plane.seed(alone).await;
    let read = winfleet::cluster::machine_config::read(&client).await.unwrap().unwrap();
    assert_eq!(read.name, "rendered-worker-alone");
    assert_eq!(read.chosen_by, "the newest rendered-worker-* MachineConfig, as WMCO chooses");
    let name = seed_platform(&plane.client(), Platform::Aws).await;
    let read = winfleet::cluster::machine_config::read(&client).await.unwrap().unwrap();
    assert_eq!(read.name, name);
    assert_eq!(read.chosen_by, "MachineConfigPool worker's status.configuration");
    assert_eq!(read.kubelet.cloud_provider.as_deref(), Some("external"));
    assert_eq!(
        read.credential_provider.unwrap().node_text(Shell::Powershell),
        support::platform_cluster::WMCO_ECR_WINDOWS
    );
}
