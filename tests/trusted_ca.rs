//! Issue 27, item 2 (second half): the cluster-wide proxy's trusted CA
//! bundle reaches every node. Two posix sshd nodes join (fake kubelets) on
//! either API server ([`Backend`]); then the Proxy `cluster` is pointed at
//! a ConfigMap `openshift-config/user-ca-bundle` (key `ca-bundle.crt`), its
//! bundle changed, and the Proxy's `trustedCA` emptied again, each between
//! two rounds with the same loaded revision. After each: a `plan --live`
//! round (a dry run) shows the change by subject and SHA-256 fingerprint
//! and writes nothing; the next round leaves every node's `ca-bundle.crt`
//! holding the bundle and its trust store (the posix stand-in: one
//! `winfleet-<sha256>.crt` per certificate beside the import record)
//! holding exactly the bundle's certificates, a removed one deleted; the
//! round after writes nothing. The bundle's PEM text is never shown. Last,
//! with the bundle named again, one node leaves the repository: its
//! deconfigure removes the bundle, the record and what it imported.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;
use support::bench_checks::{assert_all_joined, assert_quiet, on_node};
use support::controlplane::{Backend, ControlPlane, resource};
use support::identity::{install_identity, service_account_token};
use support::join::{Bench, bench, logs};
use winfleet::cluster::deconfigure::DeconfigureResult;
use winfleet::dialect::{posix_lifecycle_apply, powershell_lifecycle};
use winfleet::lifecycle::change::LifecycleChange;
use winfleet::lifecycle::manifest::ServicesManifest;
use winfleet::lifecycle::trusted_ca::{self, BUNDLE, Certificate, TrustedCa, certificates};
use winfleet::lifecycle::{LifecycleDirs, LifecycleSpec};
use winfleet::reconcile::report::RoundReport;
use winfleet::vocab::Shell;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

const NAMES: [&str; 2] = ["win-tca1", "win-tca2"];
const CONFIG_MAP: &str = "user-ca-bundle";

/// A CA certificate (PEM) named `cn`.
fn ca(cn: &str) -> String {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&rcgen::KeyPair::generate().unwrap()).unwrap().pem()
}

/// What each node has: its ca-bundle.crt and the fingerprints in its store.
fn on_nodes(bench: &Bench) -> Vec<(String, BTreeSet<String>)> {
    let spec = bench.desired.specs[&Shell::Posix].lifecycle.clone().unwrap();
    let record = trusted_ca::record_path(&spec);
    let store = record.rsplit_once('/').unwrap().0.to_owned();
    bench
        .fleet
        .nodes
        .iter()
        .map(|n| {
            let bundle = std::fs::read_to_string(on_node(n, &spec.kube_path(BUNDLE))).unwrap();
            let mut imported = BTreeSet::new();
            for entry in std::fs::read_dir(on_node(n, &store)).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                let Some(fp) = name.strip_prefix("winfleet-").and_then(|f| f.strip_suffix(".crt")) else { continue };
                let pem = std::fs::read_to_string(on_node(n, &format!("{store}/{name}"))).unwrap();
                assert_eq!(certificates(&pem).unwrap()[0].sha256, fp, "{name} holds the certificate it names");
                imported.insert(fp.to_owned());
            }
            (bundle, imported)
        })
        .collect()
}

fn expect(bench: &Bench, bundle: &str, report: &RoundReport) {
    let fps: BTreeSet<String> = certificates(bundle).unwrap().into_iter().map(|c| c.sha256).collect();
    for (got, imported) in on_nodes(bench) {
        assert_eq!(got, bundle, "{}\n{}", report.render_text(), logs(&bench.fleet));
        assert_eq!(imported, fps, "the store holds exactly the bundle's certificates\n{}", report.render_text());
    }
}

/// A `plan --live` round: what it shows; it writes nothing.
async fn plan_live(bench: &Bench) -> String {
    let before = on_nodes(bench);
    let report = bench.plan().await;
    assert_eq!(on_nodes(bench), before, "a plan writes nothing");
    report.render_text()
}

fn shown(certs: &[Certificate]) -> String {
    trusted_ca::describe(certs)
}

async fn set_bundle(bench: &Bench, bundle: &str) {
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(bench.api.client(), "openshift-config");
    let map = json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": CONFIG_MAP, "namespace": "openshift-config"},
                     "data": {"ca-bundle.crt": bundle}});
    maps.patch(CONFIG_MAP, &PatchParams::apply("admin").force(), &Patch::Apply(&map)).await.unwrap();
}

async fn name_in_proxy(bench: &Bench, name: &str) {
    let proxies: Api<DynamicObject> =
        Api::all_with(bench.api.client(), &resource("config.openshift.io", "v1", "Proxy", "proxies"));
    let patch = json!({"spec": {"trustedCA": {"name": name}}});
    proxies.patch("cluster", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

async fn a_trusted_ca_is_added_changed_and_removed(bench: Bench) {
    let report = bench.round().await;
    assert_all_joined(&bench.fleet, &report);
    expect(&bench, "", &report);
    let pids: Vec<_> = bench.fleet.nodes.iter().map(|n| n.service_pids()).collect();

    // Added: the administrator's bundle, with a comment, named by the Proxy.
    let (a, b, c) = (ca("proxy-ca-a"), ca("corp-root-b"), ca("corp-root-c"));
    let first = format!("# the proxy's CA\n{a}");
    set_bundle(&bench, &first).await;
    name_in_proxy(&bench, CONFIG_MAP).await;
    let added = certificates(&first).unwrap();
    let plan = plan_live(&bench).await;
    let spec = bench.desired.specs[&Shell::Posix].lifecycle.clone().unwrap();
    let line = format!("~ {} ({})", spec.kube_path(BUNDLE), shown(&added));
    assert!(plan.contains(&line), "the plan shows {line}: {plan}");
    assert!(plan.contains(&format!("sha256:{}", added[0].sha256)) && plan.contains("CN=proxy-ca-a"), "{plan}");
    assert!(!plan.contains(a.lines().nth(1).unwrap()), "no PEM text in a plan: {plan}");
    let report = bench.round().await;
    assert!(!report.failed(), "{}\n{}", report.render_text(), logs(&bench.fleet));
    assert!(!report.render_text().contains(a.lines().nth(1).unwrap()), "no PEM text in a report");
    expect(&bench, &first, &report);
    assert_quiet(&bench.round().await);

    // Changed: a replaced by b and c.
    let second = format!("{b}{c}");
    set_bundle(&bench, &second).await;
    let plan = plan_live(&bench).await;
    assert!(plan.contains(&shown(&certificates(&second).unwrap())), "{plan}");
    let report = bench.round().await;
    assert!(!report.failed(), "{}\n{}", report.render_text(), logs(&bench.fleet));
    expect(&bench, &second, &report);
    assert_quiet(&bench.round().await);

    // Removed: the Proxy names no trusted CA any more.
    name_in_proxy(&bench, "").await;
    let plan = plan_live(&bench).await;
    assert!(plan.contains("(no certificate)"), "{plan}");
    let report = bench.round().await;
    assert!(!report.failed(), "{}\n{}", report.render_text(), logs(&bench.fleet));
    expect(&bench, "", &report);
    assert_quiet(&bench.round().await);

    let now: Vec<_> = bench.fleet.nodes.iter().map(|n| n.service_pids()).collect();
    assert_eq!(now, pids, "no service restarted for a trust change");

    // Deconfigure takes what it imported: the bundle again, then the first
    // node leaves the repository.
    name_in_proxy(&bench, CONFIG_MAP).await;
    let report = bench.round().await;
    expect(&bench, &second, &report);
    deconfigure_first(bench).await;
}

/// The first node leaves the repository and is deconfigured: its bundle,
/// import record and imported certificates are gone (and the store's
/// directory with them); the other node keeps its own.
async fn deconfigure_first(mut bench: Bench) {
    let path = bench.repo.path().join("instances.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let first = format!("  - address: {}\n", bench.fleet.nodes[0].address);
    let start = text.find(&first).unwrap();
    let end = text[start + first.len()..].find("  - address: ").map_or(text.len(), |e| start + first.len() + e);
    std::fs::write(&path, format!("{}{}", &text[..start], &text[end..])).unwrap();
    bench.reload();
    let report = bench.round().await;
    let deconfigures = &report.cluster.as_ref().unwrap().deconfigures;
    assert!(
        matches!(deconfigures[..], [ref d] if matches!(d.result, DeconfigureResult::Deconfigured { .. })),
        "{}\n{}",
        report.render_text(),
        logs(&bench.fleet)
    );
    let spec = bench.desired.specs[&Shell::Posix].lifecycle.clone().unwrap();
    let record = trusted_ca::record_path(&spec);
    let store = record.rsplit_once('/').unwrap().0.to_owned();
    let (gone, kept) = (&bench.fleet.nodes[0], &bench.fleet.nodes[1]);
    assert!(!on_node(gone, &spec.kube_path(BUNDLE)).exists(), "ca-bundle.crt removed");
    assert!(!on_node(gone, &store).exists(), "the imported certificates, the record and their directory removed");
    assert_eq!(
        std::fs::read_dir(on_node(kept, &store)).unwrap().count(),
        3,
        "the other node keeps its two and the record"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_ca_is_added_changed_and_removed_on_the_in_memory_server() {
    a_trusted_ca_is_added_changed_and_removed(bench(Backend::InMemory, &NAMES).await.unwrap()).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_ca_is_added_changed_and_removed_on_the_real_control_plane() {
    let Some(bench) = bench(Backend::Real, &NAMES).await else { return };
    a_trusted_ca_is_added_changed_and_removed(bench).await;
}

/// The import's scripts in both dialects, for a bundle of two fixed CAs
/// (tests/fixtures/trusted_ca/): the write of the bundle and of the import
/// record, and a deconfigure's removal of the record. Golden files; the
/// PowerShell ones parsed with the PowerShell grammar.
#[test]
fn the_import_scripts_match_their_golden_files_and_parse() {
    let bundle = ["proxy-ca.pem", "corp-root.pem"]
        .iter()
        .map(|f| std::fs::read_to_string(support::fixture(&format!("trusted_ca/{f}"))).unwrap())
        .fold("# the corporate CAs\n".to_owned(), |all, pem| all + &pem);
    let mut failures = Vec::new();
    for shell in [Shell::Powershell, Shell::Posix] {
        let manifest = ServicesManifest {
            name: "windows-services-golden".into(),
            origin: "services.yaml".into(),
            services: vec![],
            digest: "ab".repeat(32),
            canonical: String::new(),
        };
        let dirs = LifecycleDirs { posix_payload: "payload", posix_units: "/etc/systemd/system", registries: "" };
        let spec = LifecycleSpec::new(shell, &format!("sha256:{}", "cd".repeat(32)), &manifest, dirs);
        let files = trusted_ca::render(&spec, &TrustedCa { source: None, bundle: bundle.clone() });
        let record = trusted_ca::record_path(&spec);
        let old = "0".repeat(64);
        let write = [
            LifecycleChange::WriteGenerated { file: &files[0], observed: None },
            LifecycleChange::WriteGenerated { file: &files[1], observed: Some(&old) },
        ];
        let remove = [LifecycleChange::RemoveFile { path: &record }];
        for (kind, changes) in [("apply", &write[..]), ("remove", &remove[..])] {
            let indexed: Vec<(usize, &LifecycleChange<'_>)> = changes.iter().enumerate().collect();
            let (text, ext) = match shell {
                Shell::Powershell => (powershell_lifecycle::apply(&indexed), "ps1"),
                Shell::Posix => (posix_lifecycle_apply::apply(&spec, &indexed), "sh"),
            };
            let path = support::fixture(&format!("dialect/trusted-ca/{}-{kind}.{ext}", shell_name(shell)));
            if let Err(e) = support::check_golden(&path, &text) {
                failures.push(e);
            }
            assert!(!text.contains("Example Corp") && !text.contains("corporate CAs"), "{kind}: values are encoded");
            if shell == Shell::Powershell {
                match support::powershell::check(&text) {
                    Ok(checked) => assert!(kind == "remove" || checked.carries(&bundle), "the bundle travels base64"),
                    Err(e) => failures.push(format!("{}: {e}", path.display())),
                }
            }
        }
    }
    support::report(failures);
}

fn shell_name(shell: Shell) -> &'static str {
    match shell {
        Shell::Powershell => "powershell",
        Shell::Posix => "posix",
    }
}

/// deploy/'s RBAC is enough: the ServiceAccount `winfleet`, with the rules
/// of deploy/base/rbac.yaml applied as they are, reads the bundle the
/// Proxy names (Role winfleet-trusted-ca in openshift-config), on a real
/// kube-apiserver.
#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_service_account_reads_the_trusted_ca_on_the_real_control_plane() {
    let Some(plane) = ControlPlane::start().await else { return };
    install_identity(&plane, None).await;
    let client = plane.client_with_token(&service_account_token(&plane).await).await;
    let pem = std::fs::read_to_string(support::fixture("trusted_ca/proxy-ca.pem")).unwrap();
    plane
        .seed(json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": CONFIG_MAP, "namespace": "openshift-config"},
                     "data": {"ca-bundle.crt": pem}}))
        .await;
    let proxies: Api<DynamicObject> =
        Api::all_with(plane.client(), &resource("config.openshift.io", "v1", "Proxy", "proxies"));
    let patch = json!({"spec": {"trustedCA": {"name": CONFIG_MAP}}});
    proxies.patch("cluster", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let read = winfleet::cluster::trusted_ca::read(&client).await.unwrap();
    assert_eq!(read.bundle, pem);
    assert_eq!(read.source.as_deref(), Some("openshift-config/user-ca-bundle"));
}
