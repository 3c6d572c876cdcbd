//! Issue 41: monitoring that scrapes. WMCO's services manifest starts
//! windows_exporter with `--web.config.file C:\k\tls\windows-exporter-webconfig.yaml`,
//! whose certificate and key come from the Secret the service CA operator
//! issues for the windows-exporter Service. Here the test plays the
//! service CA (a CA, and a serving certificate for the Service's DNS
//! name, in Secret `winfleet/windows-machine-config-operator-tls`), the
//! test nodes (real sshd) run Debian's `prometheus-node-exporter` as the
//! exporter's stand-in (it reads the same exporter-toolkit web config),
//! started by the services manifest, and `curl` scrapes `/metrics` as
//! Prometheus does with the ServiceMonitor's `tlsConfig`: the service CA
//! as the only root, the Service's DNS name as the server name, the
//! node's address as the target. Every joined node scrapes (`up == 1`); a
//! rotation rewrites the files and restarts windows_exporter alone; a
//! deconfigured node no longer serves and keeps no file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose};
use serde_json::json;
use support::bench_checks::{assert_all_joined, assert_quiet, on_node};
use support::controlplane::{Backend, TestApi};
use support::identity::{install_identity, service_account_token};
use support::join::{Bench, bench, logs};
use support::join_payload::{executable, services_manifest_with};
use winfleet::cluster::monitoring::plan::{NAME, PORT, SERVING_CERT};
use winfleet::vocab::Shell;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

/// winfleet's namespace outside a pod.
const NAMESPACE: &str = "winfleet";
const EXPORTER: &str = "/usr/bin/prometheus-node-exporter";

fn node_exporter_or_say_why(test: &str) -> bool {
    let found = Path::new(EXPORTER).is_file();
    if !found {
        support::containerd::cannot_run(
            test,
            "prometheus-node-exporter is not installed (Debian: apt-get install prometheus-node-exporter)",
        );
    }
    found
}

/// The Service's DNS name: the ServiceMonitor's `tlsConfig.serverName`.
fn server_name() -> String {
    format!("{NAME}.{NAMESPACE}.svc")
}

/// What the service CA operator issues: its CA, and a serving certificate
/// for the Service's names.
struct Issued {
    ca: String,
    cert: String,
    key: String,
}

fn service_ca(generation: &str) -> Issued {
    let ca_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, format!("openshift-service-serving-signer@{generation}"));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let issuer = CertifiedIssuer::self_signed(params, ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let names = vec![server_name(), format!("{}.cluster.local", server_name())];
    let mut params = CertificateParams::new(names).unwrap();
    params.distinguished_name.push(DnType::CommonName, server_name());
    let cert = params.signed_by(&key, &issuer).unwrap();
    Issued { ca: issuer.pem(), cert: cert.pem(), key: key.serialize_pem() }
}

fn secret_data(issued: &Issued) -> serde_json::Value {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({ "tls.crt": b64(&issued.cert), "tls.key": b64(&issued.key) })
}

/// `curl` as Prometheus scrapes the target: HTTPS to the node's address,
/// the certificate checked against the service CA alone for the Service's
/// name. Polled while the exporter starts (it is started by the round,
/// asynchronously on the node).
fn scrape(dir: &Path, ca: &str, address: &str) -> Result<String, String> {
    let ca_file = dir.join(format!("service-ca-{address}.crt"));
    std::fs::write(&ca_file, ca).unwrap();
    let host = server_name();
    let mut last = String::new();
    for _ in 0..100 {
        let out = Command::new("curl")
            .args(["--silent", "--show-error", "--fail", "--max-time", "5", "--cacert"])
            .arg(&ca_file)
            .arg("--resolve")
            .arg(format!("{host}:{PORT}:{address}"))
            .arg(format!("https://{host}:{PORT}/metrics"))
            .output()
            .unwrap();
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        last = String::from_utf8_lossy(&out.stderr).into_owned();
        // Refused while the exporter starts; anything else is an answer.
        if !last.contains("Connection refused") && !last.contains("Couldn't connect") {
            return Err(last);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Err(last)
}

/// `up`: the scrape succeeded and is node_exporter's answer.
fn up(dir: &Path, ca: &str, address: &str) {
    let body = scrape(dir, ca, address).unwrap_or_else(|e| panic!("scrape of {address} failed: {e}"));
    assert!(body.contains("node_exporter_build_info"), "{body}");
}

/// The services manifest with WMCO's windows_exporter service, posix
/// paths: the web config winfleet writes, listening on the node's address
/// (the NODE_IP pre-script of the kubelet's).
fn manifest() -> String {
    let exporter = json!({ "name": "windows_exporter",
        "path": format!("payload/windows-exporter/windows_exporter --web.config.file=payload/tls/windows-exporter-webconfig.yaml --web.listen-address=NODE_IP:{PORT}"),
        "powershellPreScripts": [{ "variableName": "NODE_IP", "path": "set -- $SSH_CONNECTION; echo $3", "NodeArgs": null }],
        "bootstrap": false, "priority": 2 });
    services_manifest_with("", Vec::new(), vec![exporter])
}

fn tls_file(bench: &Bench, n: usize, name: &str) -> std::path::PathBuf {
    let spec = bench.desired.specs[&Shell::Posix].lifecycle.clone().unwrap();
    on_node(&bench.fleet.nodes[n], &format!("{}/tls/{name}", spec.kube_dir))
}

async fn scraped_rotated_and_removed(backend: Backend) {
    let mut bench = bench(backend, &["win-0", "win-1"]).await;
    if let TestApi::Real(plane) = &bench.api {
        install_identity(plane, None).await;
    }
    let dir = bench.fleet.dir().to_path_buf();
    bench.repin(|payload| {
        executable(
            &payload.join("windows-exporter/windows_exporter"),
            &format!("#!/bin/sh\nexec {EXPORTER} --collector.disable-defaults --collector.loadavg \"$@\"\n"),
        )
    });
    std::fs::write(bench.repo.path().join("services.yaml"), manifest()).unwrap();
    bench.reload();

    // No Secret yet: the nodes join; the round says why there is no certificate.
    let report = bench.round().await;
    assert!(!report.failed(), "{}\n{}", report.render_text(), logs(&bench.fleet));
    assert_all_joined(&bench.fleet, &report);
    let note = report.cluster.as_ref().unwrap().exporter_tls_note.clone().unwrap_or_default();
    assert!(note.contains(&format!("Secret {NAMESPACE}/{} not found", SERVING_CERT.1)), "{note}");
    assert!(!tls_file(&bench, 0, "certs/tls.crt").exists());

    // The service CA issues the certificate: the next round delivers it and
    // every node scrapes.
    let first = service_ca("1");
    bench
        .api
        .seed(json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": SERVING_CERT.1, "namespace": NAMESPACE}, "data": secret_data(&first)}))
        .await;
    let report = bench.round().await;
    let text = report.render_text();
    assert!(!report.failed(), "{text}\n{}", logs(&bench.fleet));
    assert!(report.cluster.as_ref().unwrap().exporter_tls_note.is_none(), "{text}");
    assert!(!text.contains("PRIVATE KEY"), "no key in a report");
    for node in &bench.fleet.nodes {
        up(&dir, &first.ca, &node.address);
    }
    if let TestApi::Real(plane) = &bench.api {
        // deploy/'s identity reads that Secret with winfleet's own code, and no other.
        let sa = plane.client_with_token(&service_account_token(plane).await).await;
        let material = winfleet::cluster::material::read(&sa, false).await.unwrap();
        assert_eq!(material.exporter_tls.unwrap().cert, first.cert);
        let other = Api::<Secret>::namespaced(sa, NAMESPACE).get("winfleet-git").await;
        assert!(matches!(other, Err(kube::Error::Api(ref e)) if e.code == 403), "{other:?}");
    }
    // Another CA's certificate is refused, as Prometheus refuses it.
    assert!(scrape(&dir, &service_ca("other").ca, &bench.fleet.nodes[0].address).is_err());
    assert_quiet(&bench.round().await);

    // A rotation: the files change, windows_exporter alone restarts, and
    // the nodes serve the new certificate.
    let pids = bench.fleet.nodes[0].service_pids();
    assert!(pids.contains_key("windows_exporter") && pids.contains_key("kubelet"), "{pids:?}");
    let second = service_ca("2");
    let secrets: Api<Secret> = Api::namespaced(bench.api.client(), NAMESPACE);
    let patch = json!({ "data": secret_data(&second) });
    secrets.patch(SERVING_CERT.1, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let report = bench.round().await;
    assert!(!report.failed(), "{}\n{}", report.render_text(), logs(&bench.fleet));
    let after = bench.fleet.nodes[0].service_pids();
    for (service, pid) in &pids {
        let restarted = after.get(service) != Some(pid);
        assert_eq!(restarted, service == "windows_exporter", "{service} restarted: {restarted}; {pids:?} -> {after:?}");
    }
    assert_eq!(std::fs::read_to_string(tls_file(&bench, 0, "certs/tls.crt")).unwrap(), second.cert);
    for node in &bench.fleet.nodes {
        up(&dir, &second.ca, &node.address);
    }
    assert_quiet(&bench.round().await);

    // The first node leaves: deconfigured, it serves nothing and keeps no
    // TLS file; the other still scrapes.
    bench.remove_first().await;
    let gone = scrape(&dir, &second.ca, &bench.fleet.nodes[0].address);
    assert!(gone.is_err(), "a deconfigured node still serves: {gone:?}");
    for name in ["certs/tls.crt", "certs/tls.key", "windows-exporter-webconfig.yaml"] {
        assert!(!tls_file(&bench, 0, name).exists(), "{name} removed at deconfigure");
    }
    up(&dir, &second.ca, &bench.fleet.nodes[1].address);
}

#[ignore = "needs prometheus-node-exporter: scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_serves_windows_exporter_over_the_service_cas_certificate_on_the_in_memory_server() {
    if !node_exporter_or_say_why(
        "every_node_serves_windows_exporter_over_the_service_cas_certificate_on_the_in_memory_server",
    ) {
        return;
    }
    scraped_rotated_and_removed(Backend::InMemory).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_serves_windows_exporter_over_the_service_cas_certificate_on_the_real_control_plane() {
    if !node_exporter_or_say_why(
        "every_node_serves_windows_exporter_over_the_service_cas_certificate_on_the_real_control_plane",
    ) {
        return;
    }
    scraped_rotated_and_removed(Backend::Real).await;
}
