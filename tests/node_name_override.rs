//! Issue 36: on AWS, GCP and vSphere WMCO's services manifest starts the
//! kubelet with `--hostname-override=HOSTNAME_OVERRIDE`, a pre-script's
//! output (AWS: the instance metadata's `local-hostname`), so the Node and
//! its CSRs carry a name other than the host's short name. winfleet reads
//! that name in its observation (the pre-script runs there), names it in
//! the plan, approves the kubelet's CSRs for exactly that name, and leaves
//! a CSR for the short host name (a near miss) pending. Real sshd nodes
//! whose posix pre-script stands in for the metadata call, and the fake
//! kubelet, which registers under its `--hostname-override`; on the
//! in-memory API server and on the real control plane.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, ListParams};
use support::controlplane::Backend;
use support::join::{assert_joined, bench, logs};
use support::join_payload::services_manifest_overriding_the_host_name;
use winfleet::cluster::approve::CsrOutcome;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

/// The AWS pre-script's stand-in: `local-hostname` is `ip-<address>.<region>.compute.internal`;
/// here the host name with a suffix, in mixed case (the kubelet lowers it).
const PRE_SCRIPT: &str = "printf 'IP-%s.EC2.Internal\\n' \"$(cat /proc/sys/kernel/hostname)\"";

async fn overridden_name_joins(backend: Backend) {
    let mut bench = bench(backend, &["win-0"]).await;
    std::fs::write(bench.repo.path().join("services.yaml"), services_manifest_overriding_the_host_name(PRE_SCRIPT))
        .unwrap();
    bench.reload();
    let expected = "ip-win-0.ec2.internal";

    // The plan names the node the kubelet will register, before any CSR.
    let plan = bench.plan().await;
    let text = plan.render_text();
    assert!(text.contains(&format!("approve the kubelet's client CSR for node {expected}")), "{text}");
    assert!(text.contains(&format!("node name {expected}")), "{text}");

    // A CSR for the short host name: a near miss now, never approved.
    bench.submit_client_csr("csr-short-name", "win-0").await;
    let report = bench.round().await;
    let text = report.render_text();
    assert!(!report.failed(), "{text}\n{}", logs(&bench.fleet));
    let node = bench.node(expected).await;
    assert_joined(&node, expected, &bench.version(), &bench.pool.public_key_hash());
    let cluster = report.cluster.as_ref().unwrap();
    let approved: Vec<&str> = cluster
        .csrs
        .iter()
        .filter(|c| matches!(c.outcome, CsrOutcome::Approved { .. }))
        .map(|c| c.node.as_str())
        .collect();
    assert!(!approved.is_empty() && approved.iter().all(|n| *n == expected), "{approved:?}\n{text}");

    let api: Api<CertificateSigningRequest> = Api::all(bench.api.client());
    let short = api.list(&ListParams::default()).await.unwrap().items;
    let short = short.iter().find(|c| c.metadata.name.as_deref() == Some("csr-short-name")).unwrap();
    let conditions = short.status.as_ref().and_then(|s| s.conditions.as_ref());
    assert!(conditions.is_none_or(Vec::is_empty), "the short host name's CSR stays pending: {short:#?}");
    assert!(bench.api.get("v1", "Node", None, "win-0").await.is_none(), "no Node under the short name");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_whose_host_name_is_overridden_joins_under_that_name_on_the_in_memory_server() {
    overridden_name_joins(Backend::InMemory).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kubelet_whose_host_name_is_overridden_joins_under_that_name_on_the_real_control_plane() {
    overridden_name_joins(Backend::Real).await;
}
