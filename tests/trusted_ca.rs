//! Issue 27, item 2 (second half): the cluster-wide proxy's trusted CA
//! bundle reaches every node. Two posix sshd nodes join (fake kubelets) on
//! either API server ([`Backend`]); then the Proxy `cluster` is pointed at
//! a ConfigMap `openshift-config/user-ca-bundle` (key `ca-bundle.crt`), its
//! bundle changed, and the Proxy's `trustedCA` emptied again, each between
//! two rounds with the same loaded revision. After each: a `plan --live`
//! round (a dry run) shows the change by subject and SHA-256 fingerprint
//! and writes nothing; the next round leaves every node's `ca-bundle.crt`
//! holding the bundle and its trust store (the posix stand-in: one
//! `<sha256>.crt` per certificate beside the import record)
//! holding exactly the bundle's certificates, a removed one deleted; the
//! round after writes nothing. The bundle's PEM text is never shown. Last,
//! with the bundle named again, one node leaves the repository: its
//! deconfigure removes the bundle, the record and what it imported.
//!
//! Issue 35, item 5: a node prepared as a host WMCO configured (a root in
//! the store before anyone, WICD's record listing CNO's merged bundle and
//! the store holding all of it) keeps every certificate winfleet did not
//! add, through bundle changes and its deconfigure; what winfleet added is
//! removed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;
use support::bench_checks::{assert_all_joined, assert_quiet, on_node};
use support::controlplane::{Backend, ControlPlane, resource};
use support::fleet::TestNode;
use support::identity::{install_identity, service_account_token};
use support::join::{Bench, bench, logs};
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
            (bundle, in_store(n, &store))
        })
        .collect()
}

/// The fingerprints of the certificates in a node's store (the posix
/// stand-in: one `<sha256>.crt` per certificate).
fn in_store(node: &TestNode, store: &str) -> BTreeSet<String> {
    let mut held = BTreeSet::new();
    for entry in std::fs::read_dir(on_node(node, store)).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let Some(fp) = name.strip_suffix(".crt").filter(|f| !f.starts_with('.')) else { continue };
        let pem = std::fs::read_to_string(on_node(node, &format!("{store}/{name}"))).unwrap();
        assert_eq!(certificates(&pem).unwrap()[0].sha256, fp, "{name} holds the certificate it names");
        held.insert(fp.to_owned());
    }
    held
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
    bench.remove_first().await;
    let spec = bench.desired.specs[&Shell::Posix].lifecycle.clone().unwrap();
    let record = trusted_ca::record_path(&spec);
    let store = record.rsplit_once('/').unwrap().0.to_owned();
    let (gone, kept) = (&bench.fleet.nodes[0], &bench.fleet.nodes[1]);
    assert!(!on_node(gone, &spec.kube_path(BUNDLE)).exists(), "ca-bundle.crt removed");
    assert!(!on_node(gone, &store).exists(), "the imported certificates, the record and their directory removed");
    assert_eq!(
        std::fs::read_dir(on_node(kept, &store)).unwrap().count(),
        4,
        "the other node keeps its two, the record and the list of what was added"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_ca_is_added_changed_and_removed_on_the_in_memory_server() {
    a_trusted_ca_is_added_changed_and_removed(bench(Backend::InMemory, &NAMES).await).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_ca_is_added_changed_and_removed_on_the_real_control_plane() {
    let bench = bench(Backend::Real, &NAMES).await;
    a_trusted_ca_is_added_changed_and_removed(bench).await;
}

const ADOPTED: [&str; 2] = ["win-tcw1", "win-tcw2"];

/// The certificates of a node prepared as a host WMCO configured.
struct Wmco {
    /// A root the store held before anyone (one Windows ships).
    os_root: String,
    /// A public root of RHCOS's list that CNO merged into WMCO's bundle.
    public_root: String,
    /// The Proxy's own CA, in WMCO's bundle too.
    proxy: String,
}

/// Prepares each node as WMCO leaves it: the store holds the three
/// certificates (`os_root` was there before WMCO, WICD imported the rest
/// with `CERT_STORE_ADD_REPLACE_EXISTING`), and WICD's record is CNO's
/// merged bundle, copied byte for byte from `ca-bundle.crt`, as
/// `certs.Reconcile` leaves it.
fn prepare_as_wmco(bench: &Bench, wmco: &Wmco) -> String {
    let spec = bench.desired.specs[&Shell::Posix].lifecycle.clone().unwrap();
    let record = trusted_ca::record_path(&spec);
    let store = record.rsplit_once('/').unwrap().0.to_owned();
    let merged = format!("# system trust bundle, merged by CNO\n{}{}{}", wmco.os_root, wmco.public_root, wmco.proxy);
    for node in &bench.fleet.nodes {
        std::fs::create_dir_all(on_node(node, &store)).unwrap();
        for pem in [&wmco.os_root, &wmco.public_root, &wmco.proxy] {
            let fp = &certificates(pem).unwrap()[0].sha256;
            std::fs::write(on_node(node, &format!("{store}/{fp}.crt")), pem).unwrap();
        }
        std::fs::write(on_node(node, &record), &merged).unwrap();
        std::fs::write(on_node(node, &spec.kube_path(BUNDLE)), &merged).unwrap();
        owned_by_node(node, &on_node(node, &spec.kube_dir));
    }
    store
}

/// Gives what the test wrote under `path` to the node's user (the owner of
/// the node's directory), as the node's own files are.
fn owned_by_node(node: &TestNode, path: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let owner = std::fs::metadata(node.path("")).unwrap();
    std::os::unix::fs::chown(path, Some(owner.uid()), Some(owner.gid())).unwrap();
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            owned_by_node(node, &entry.unwrap().path());
        }
    }
}

fn fingerprints(pems: &[&String]) -> BTreeSet<String> {
    pems.iter().map(|p| certificates(p).unwrap()[0].sha256.clone()).collect()
}

/// A round with the Proxy's bundle set to `bundle`; every node's store
/// then holds exactly `held`.
async fn round_with(bench: &Bench, store: &str, bundle: &str, held: &BTreeSet<String>) {
    set_bundle(bench, bundle).await;
    let report = bench.round().await;
    assert!(!report.failed(), "{}\n{}", report.render_text(), logs(&bench.fleet));
    for node in &bench.fleet.nodes {
        assert_eq!(&in_store(node, store), held, "{}\n{}", report.render_text(), logs(&bench.fleet));
    }
}

async fn certificates_winfleet_did_not_add_are_never_removed(mut bench: Bench) {
    let wmco = Wmco { os_root: ca("os-root"), public_root: ca("rhcos-public-root"), proxy: ca("proxy-ca") };
    let fresh = ca("fresh-ca");
    let store = prepare_as_wmco(&bench, &wmco);
    let wmco_held = fingerprints(&[&wmco.os_root, &wmco.public_root, &wmco.proxy]);
    name_in_proxy(&bench, CONFIG_MAP).await;

    // Adoption: the Proxy's bundle is the proxy's CA alone; WICD's record
    // listed two more, which stay (it proves no addition).
    set_bundle(&bench, &wmco.proxy).await;
    let report = bench.round().await;
    assert_all_joined(&bench.fleet, &report);
    for node in &bench.fleet.nodes {
        assert_eq!(in_store(node, &store), wmco_held, "{}\n{}", report.render_text(), logs(&bench.fleet));
    }
    // The bundle names the root that was there before and a new CA: only
    // the new one is added; the proxy's CA, no longer named, stays (not
    // winfleet's to remove).
    let mut with_fresh = wmco_held.clone();
    with_fresh.extend(fingerprints(&[&fresh]));
    round_with(&bench, &store, &format!("{}{fresh}", wmco.os_root), &with_fresh).await;
    // The new CA dropped: removed, as winfleet added it; the old root kept.
    round_with(&bench, &store, &wmco.os_root, &wmco_held).await;
    // Named again, then the first node is deconfigured: what winfleet
    // added goes, the rest stays, the record and its list with it.
    round_with(&bench, &store, &format!("{}{fresh}", wmco.os_root), &with_fresh).await;
    bench.remove_first().await;
    let spec = bench.desired.specs[&Shell::Posix].lifecycle.clone().unwrap();
    let record = trusted_ca::record_path(&spec);
    let gone = &bench.fleet.nodes[0];
    assert_eq!(
        in_store(gone, &store),
        wmco_held,
        "deconfigure removes only what winfleet added\n{}",
        logs(&bench.fleet)
    );
    assert!(!on_node(gone, &record).exists(), "the record removed");
    assert!(!on_node(gone, &trusted_ca::added_path(&record)).exists(), "the list of what was added removed");
    assert_eq!(in_store(&bench.fleet.nodes[1], &store), with_fresh, "the other node keeps its own");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_winfleet_did_not_add_are_never_removed_on_the_in_memory_server() {
    certificates_winfleet_did_not_add_are_never_removed(bench(Backend::InMemory, &ADOPTED).await).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_winfleet_did_not_add_are_never_removed_on_the_real_control_plane() {
    let bench = bench(Backend::Real, &ADOPTED).await;
    certificates_winfleet_did_not_add_are_never_removed(bench).await;
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
            services_at: Default::default(),
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
                Shell::Posix => {
                    let (text, values) = posix_lifecycle_apply::apply(&spec, &indexed);
                    (values.render() + &text, "sh")
                }
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
    let plane = ControlPlane::start().await;
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
