//! Issue 36: one scenario per platform WMCO serves (AWS, Azure, GCP,
//! vSphere, Nutanix, None). The cluster is seeded as that platform's
//! installer leaves it (Infrastructure `status.platformStatus.type`, the
//! worker MachineConfigPool and its rendered MachineConfig,
//! tests/support/platform_cluster.rs); the repository holds WMCO's services
//! manifest for the platform with posix paths (its kubelet flags, the
//! host-name pre-script as a posix stand-in, Azure's cloud-node-manager);
//! a BYOH host and a Machine's VM (real sshd nodes, the fake kubelet) join.
//! On each node the platform's files are there with WMCO's content and no
//! other platform's; the kubelet registers under the name the platform's
//! pre-script gives and its CSRs are approved for exactly that name; a
//! near miss stays pending.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::bench_checks::on_node;
use support::controlplane::Backend;
use support::join::submit_client_csr;
use support::join_payload::{cloud_node_manager_service, executable, services_manifest_with};
use support::machine_bench::{MachineBench, machine_set_ready};
use support::platform_cluster::{seed_platform, wmco_ecr_posix};
use winfleet::cluster::approve::CsrOutcome;
use winfleet::reconcile::report::RoundReport;
use winfleet::vocab::platform::Platform;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

/// The posix node's files where WMCO writes `C:\k\credential-provider-config.yaml`
/// and `C:\k\wicd-kubeconfig` (the kube directory is the payload directory).
const CREDENTIAL_PROVIDER: &str = "payload/credential-provider-config.yaml";
const NODE_MANAGER_KUBECONFIG: &str = "payload/wicd-kubeconfig";

/// What WMCO's services manifest does on a platform (WMCO's
/// `pkg/services/services.go`, docs/platforms-research.md §2), with posix
/// paths and posix stand-ins for the host-name pre-scripts.
struct Case {
    platform: Platform,
    /// The kubelet's platform flags after WMCO's common ones.
    kubelet: &'static str,
    /// The `HOSTNAME_OVERRIDE` pre-script's stand-in, if the platform has one.
    host_name: Option<&'static str>,
}

/// `HOSTNAME` in a stand-in is the node's host name.
const HOST: &str = "\"$(cat /proc/sys/kernel/hostname)\"";

fn case(platform: Platform) -> Case {
    match platform {
        // IMDS `local-hostname`: `ip-<address>.<region>.compute.internal`.
        Platform::Aws => Case {
            platform,
            kubelet: " --cloud-provider=external --hostname-override=HOSTNAME_OVERRIDE \
                      --image-credential-provider-bin-dir=payload \
                      --image-credential-provider-config=payload/credential-provider-config.yaml",
            host_name: Some("printf 'IP-%s.EC2.Internal\\n' HOST"),
        },
        // gcp-get-hostname.ps1: the metadata host name, kept whole when it
        // has at most 63 characters.
        Platform::Gcp => Case {
            platform,
            kubelet: " --cloud-provider=external --hostname-override=HOSTNAME_OVERRIDE",
            host_name: Some("printf '%s.c.winfleet-test.internal\\n' HOST"),
        },
        // `ipconfig /all`: Host Name + '.' + Primary Dns Suffix.
        Platform::VSphere => Case {
            platform,
            kubelet: " --cloud-provider=external --hostname-override=HOSTNAME_OVERRIDE",
            host_name: Some("printf '%s.%s\\n' HOST vsphere.example.lan"),
        },
        Platform::Azure | Platform::Nutanix => {
            Case { platform, kubelet: " --cloud-provider=external", host_name: None }
        }
        _ => Case { platform, kubelet: " --cloud-provider=", host_name: None },
    }
}

/// The name the kubelet of the host `host` registers under on `case`'s
/// platform (lower-cased, as the kubelet does).
fn node_name(case: &Case, host: &str) -> String {
    match case.platform {
        Platform::Aws => format!("ip-{host}.ec2.internal"),
        Platform::Gcp => format!("{host}.c.winfleet-test.internal"),
        Platform::VSphere => format!("{host}.vsphere.example.lan"),
        _ => host.to_owned(),
    }
}

/// A CSR's name a listed host could be mistaken for: the short host name
/// where the platform overrides it, a longer name containing it elsewhere
/// (WMCO accepts a name contained in the host's FQDN).
fn near_miss(case: &Case, host: &str) -> String {
    if case.host_name.is_some() { host.to_owned() } else { format!("{host}.near.miss") }
}

fn manifest(case: &Case) -> String {
    let pre_scripts: Vec<Value> = case
        .host_name
        .map(|s| json!({ "variableName": "HOSTNAME_OVERRIDE", "path": s.replace("HOST", HOST), "NodeArgs": null }))
        .into_iter()
        .collect();
    let extra = if case.platform == Platform::Azure { vec![cloud_node_manager_service()] } else { Vec::new() };
    services_manifest_with(case.kubelet, pre_scripts, extra)
}

fn approved(reports: &[RoundReport]) -> Vec<String> {
    let csrs = reports.iter().filter_map(|r| r.cluster.as_ref()).flat_map(|c| &c.csrs);
    csrs.filter(|c| matches!(c.outcome, CsrOutcome::Approved { .. })).map(|c| c.node.clone()).collect()
}

async fn scenario(backend: Backend, platform: Platform) {
    let case = case(platform);
    let mut bench = MachineBench::start_with_hosts(backend, 1, 1, Some(1)).await;
    let client = bench.api.client();
    let rendered = seed_platform(&client, platform).await;
    if platform == Platform::Azure {
        // What deploy/ installs beside winfleet: cloud-node-manager's ServiceAccount.
        if bench.api.get("v1", "Namespace", None, "winfleet").await.is_none() {
            bench.api.seed(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "winfleet"}})).await;
        }
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "winfleet-cloud-node-manager", "namespace": "winfleet"}});
        bench.api.seed(account).await;
        bench.repin(|dir| executable(&dir.join("cloud-node-manager"), "#!/bin/sh\nexec sleep 3600\n"));
    }
    std::fs::write(bench.repo.path().join("services.yaml"), manifest(&case)).unwrap();
    bench.reload();
    let hosts: Vec<(String, String)> = {
        let fleet = bench.cloud.fleet();
        fleet.nodes.iter().map(|n| (n.address.clone(), n.hostname.clone())).collect()
    };
    let byoh = hosts.last().unwrap().1.clone();
    let expected: Vec<String> = hosts.iter().map(|(_, h)| node_name(&case, h)).collect();

    // The plan names the platform and, for the listed host, its node name.
    let plan = bench.plan().await.render_text();
    assert!(plan.contains(&format!("(platform {})", platform.as_str())), "{plan}");
    let byoh_name = node_name(&case, &byoh);
    assert!(plan.contains(&format!("approve the kubelet's client CSR for node {byoh_name}")), "{plan}");
    if platform == Platform::Aws {
        assert!(plan.contains(&format!("+ {CREDENTIAL_PROVIDER} (from MachineConfig {rendered}")), "{plan}");
    }

    let miss = near_miss(&case, &byoh);
    submit_client_csr(&bench.api, "csr-near-miss", &miss).await;
    let mut reports = bench.rounds_until(40, machine_set_ready).await;
    for _ in 0..20 {
        if bench.api.get("v1", "Node", None, &byoh_name).await.is_some() {
            break;
        }
        reports.push(bench.round().await);
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let last = reports.last().unwrap().render_text();
    let version = bench.version();
    for name in &expected {
        let node = bench.node(name).await;
        assert_eq!(node["metadata"]["annotations"]["windowsmachineconfig.openshift.io/version"], version.as_str());
    }
    let approved = approved(&reports);
    assert!(!approved.is_empty(), "{last}");
    assert!(approved.iter().all(|n| expected.contains(n)), "approved only {expected:?}: {approved:?}\n{last}");
    assert!(expected.iter().all(|n| approved.contains(n)), "approved each of {expected:?}: {approved:?}\n{last}");

    // The near miss stays pending, and no Node carries its name.
    let csrs = Api::<CertificateSigningRequest>::all(client.clone()).list(&ListParams::default()).await.unwrap();
    let csr = csrs.items.iter().find(|c| c.metadata.name.as_deref() == Some("csr-near-miss")).unwrap();
    let conditions = csr.status.as_ref().and_then(|s| s.conditions.as_ref());
    assert!(conditions.is_none_or(Vec::is_empty), "{miss}'s CSR stays pending: {csr:#?}");
    assert!(bench.api.get("v1", "Node", None, &miss).await.is_none());

    // The platform's files, with WMCO's content, and no other platform's.
    let fleet = bench.cloud.fleet();
    for node in &fleet.nodes {
        let read = |path: &str| std::fs::read_to_string(on_node(node, path)).ok();
        let provider = read(CREDENTIAL_PROVIDER);
        let kubeconfig = read(NODE_MANAGER_KUBECONFIG);
        match platform {
            Platform::Aws => assert_eq!(provider, Some(wmco_ecr_posix()), "{}", node.address),
            _ => assert_eq!(provider, None, "only AWS gets a credential provider config ({})", node.address),
        }
        if platform == Platform::Azure {
            let kubeconfig: Value = serde_json::from_str(&kubeconfig.unwrap()).unwrap();
            let server = kubeconfig["clusters"][0]["cluster"]["server"].as_str().unwrap_or_default();
            assert!(server.starts_with("http"), "the API server: {server}");
            let token = kubeconfig["users"][0]["user"]["token"].as_str().unwrap_or_default();
            assert!(!token.is_empty() && !last.contains(token), "a token, never shown: {last}");
        } else {
            assert_eq!(kubeconfig, None, "only Azure gets cloud-node-manager's kubeconfig ({})", node.address);
        }
    }
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_aws_nodes_get_wmcos_credential_provider_config_and_join_as_their_instance_metadata_names_them_on_the_real_control_plane()
 {
    scenario(Backend::Real, Platform::Aws).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_azure_nodes_get_cloud_node_managers_kubeconfig_and_join_under_their_host_names_on_the_real_control_plane() {
    scenario(Backend::Real, Platform::Azure).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_gcp_nodes_join_under_their_metadata_host_names_and_get_no_credential_provider_on_the_real_control_plane() {
    scenario(Backend::Real, Platform::Gcp).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_vsphere_nodes_join_under_their_fqdns_on_the_real_control_plane() {
    scenario(Backend::Real, Platform::VSphere).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_nutanix_nodes_join_under_their_host_names_on_the_real_control_plane() {
    scenario(Backend::Real, Platform::Nutanix).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_platform_none_nodes_join_with_an_empty_cloud_provider_on_the_real_control_plane() {
    scenario(Backend::Real, Platform::None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_aws_on_the_in_memory_server() {
    scenario(Backend::InMemory, Platform::Aws).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_azure_on_the_in_memory_server() {
    scenario(Backend::InMemory, Platform::Azure).await;
}
