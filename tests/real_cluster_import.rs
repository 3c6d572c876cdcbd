//! Issue 24, item 8: `winfleet import` from a cluster WMCO runs, then
//! `winfleet validate` and `winfleet plan --live` on the result, the
//! binary as an admin runs it, against either API server ([`Backend`]):
//! kube-apiserver v1.37.2 with the OpenShift CRDs, or the in-memory one.
//!
//! The cluster is seeded as WMCO leaves it: the `windows-instances`
//! ConfigMap naming two BYOH hosts (real sshd nodes), their Windows Nodes
//! with WMCO's labels and annotations (byoh, version, pub-key-hash,
//! username), the `cloud-private-key` Secret, WMCO's services ConfigMap,
//! an ImageDigestMirrorSet and an ImageTagMirrorSet, the cluster Proxy
//! (spec and status), a Windows and a Linux MachineSet. The hosts carry
//! what WMCO wrote on them: hosts.toml in WMCO's exact format (WMCO-SPEC
//! section 1.7, written here by hand, not by winfleet) and the proxy
//! variables from the Proxy's status. The plan of the imported repository
//! must then change no file content and no Node; what it does plan is what
//! winfleet does differently by design: its marker in each registry
//! directory it adopts, its annotation and label on the MachineSet it
//! adopts, and its own user-data script ([`check_plan`]).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::path::Path;

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sha2::Digest;
use support::apiserver::fixtures;
use support::controlplane::{Backend, TestApi};
use support::fleet::TestFleet;
use winfleet::cluster::observe::proxy_resource;

const WMCO: &str = "openshift-windows-machine-config-operator";
const VERSION: &str = "10.19.0-4f1e0f9";
const NO_PROXY: &str = ".cluster.local,10.0.0.0/16";
const STATUS_NO_PROXY: &str = ".cluster.local,10.0.0.0/16,172.30.0.0/16";
const HTTP_PROXY: &str = "http://proxy.corp.example:3128";

/// WMCO's pub-key-hash: SHA-256 of `<type> <base64>` of the public key.
fn pub_key_hash(public: &str) -> String {
    let mut words = public.split_whitespace();
    let text = format!("{} {}", words.next().unwrap(), words.next().unwrap());
    sha2::Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn read_yaml(rel: &str) -> Value {
    let text = std::fs::read_to_string(support::root().join(rel)).unwrap();
    let mut value: Value = serde_saphyr::from_str(&text).unwrap();
    value["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    value
}

/// The cluster Proxy as an admin set it, and its status as the cluster
/// network operator fills it (Proxy `cluster` exists on both servers).
async fn set_proxy(api: &TestApi) {
    let proxies: Api<DynamicObject> = Api::all_with(api.client(), &proxy_resource());
    let mut proxy = proxies.get("cluster").await.unwrap();
    proxy.data["spec"] = json!({ "httpProxy": HTTP_PROXY, "noProxy": NO_PROXY, "trustedCA": { "name": "" } });
    proxies.replace("cluster", &PostParams::default(), &proxy).await.unwrap();
    let status = json!({ "status": { "httpProxy": HTTP_PROXY, "noProxy": STATUS_NO_PROXY } });
    proxies.patch_status("cluster", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

/// Seeds what a WMCO-run cluster holds for `fleet`'s hosts.
async fn wmco_cluster(api: &TestApi, fleet: &TestFleet) {
    let user = format!("username={}", fleet.user);
    let data: serde_json::Map<String, Value> = fleet.nodes.iter().map(|n| (n.address.clone(), json!(user))).collect();
    api.seed(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "windows-instances", "namespace": WMCO },
        "data": data,
    }))
    .await;
    api.seed(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "unrelated", "namespace": WMCO },
        "data": { "x": "y" },
    }))
    .await;
    let private_key = std::fs::read_to_string(&fleet.rsa_key).unwrap();
    api.seed(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": "cloud-private-key", "namespace": WMCO },
        "stringData": { "private-key.pem": private_key },
    }))
    .await;
    let public = std::fs::read_to_string(format!("{}.pub", fleet.rsa_key.display())).unwrap();
    // WMCO's user data for new Machines (its own script; winfleet writes its own).
    let script = format!(
        "<powershell>\n# WMCO GenerateUserData\n$key = '{}'\n</powershell>\n<persist>true</persist>\n",
        public.trim()
    );
    api.seed(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": "windows-user-data", "namespace": "openshift-machine-api" },
        "stringData": { "userData": script },
    }))
    .await;
    for (i, node) in fleet.nodes.iter().enumerate() {
        let labels = [
            ("node.openshift.io/os_id", "Windows"),
            ("windowsmachineconfig.openshift.io/byoh", "true"),
            ("node-role.kubernetes.io/worker", ""),
        ];
        let mut object = fixtures::node(&format!("win-byoh-{i}"), &[("InternalIP", &node.address)], true, &labels);
        object["metadata"]["annotations"] = json!({
            "windowsmachineconfig.openshift.io/version": VERSION,
            "windowsmachineconfig.openshift.io/desired-version": VERSION,
            "windowsmachineconfig.openshift.io/pub-key-hash": pub_key_hash(&public),
            // WMCO's OpenPGP-encrypted user name (opaque here: nobody decrypts it).
            "windowsmachineconfig.openshift.io/username": "wcBMA0sn3mJtd6yDAQgAoYr2<wmcoMarker>=Y6Ag",
        });
        api.seed(object).await;
    }
    let mut services = read_yaml("examples-repo/services/windows-services.yaml");
    services["metadata"]["namespace"] = json!(WMCO);
    api.seed(services).await;
    api.seed(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet",
        "metadata": { "name": "quay" },
        "spec": { "imageDigestMirrors": [{ "source": "quay.io/openshift", "mirrors": ["mirror.corp.example/openshift"] }] },
    }))
    .await;
    api.seed(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ImageTagMirrorSet",
        "metadata": { "name": "ubi" },
        "spec": { "imageTagMirrors": [{ "source": "registry.access.redhat.com/ubi9", "mirrors": ["mirror.corp.example/ubi9"] }] },
    }))
    .await;
    set_proxy(api).await;
    let mut windows = read_yaml("examples-repo/machinesets/winworker-aws.yaml");
    windows["status"] = json!({ "replicas": 1, "readyReplicas": 1, "observedGeneration": 1 });
    api.seed(windows).await;
    let labels = [("machine.openshift.io/cluster-api-cluster", "prod-7xk2p")];
    let mut linux = fixtures::machine_set("prod-7xk2p-worker-us-east-1a", 3, &labels);
    linux["spec"]["template"]["metadata"]["labels"]["machine.openshift.io/os-id"] = json!("Linux");
    api.seed(linux).await;
}

/// What WMCO wrote on each host: one hosts.toml per source registry in
/// WMCO's format (mirrors of an IDMS pull only, of an ITMS resolve tags
/// too; the mirror keeps no trailing path the source has), and the proxy
/// variables, NO_PROXY from the Proxy's status (a posix host keeps them
/// in a systemd drop-in where Windows has machine variables).
fn wmco_host_files(fleet: &TestFleet) {
    let files = [
        (
            "certs.d/quay.io/hosts.toml",
            "server = \"https://quay.io/v2\"\n\noverride_path = true\n\n[host.\"https://mirror.corp.example/v2\"]\n  capabilities = [\"pull\"]\n  override_path = true\n".to_owned(),
        ),
        (
            "certs.d/registry.access.redhat.com/hosts.toml",
            "server = \"https://registry.access.redhat.com/v2\"\n\noverride_path = true\n\n[host.\"https://mirror.corp.example/v2\"]\n  capabilities = [\"pull\", \"resolve\"]\n  override_path = true\n".to_owned(),
        ),
        (
            "systemd/90-winfleet-environment.conf",
            format!(
                "[Manager]\nDefaultEnvironment=\"HTTP_PROXY={HTTP_PROXY}\" \"NO_PROXY={STATUS_NO_PROXY}\"\n"
            ),
        ),
    ];
    for node in &fleet.nodes {
        for (rel, content) in &files {
            let path = node.path(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
    }
}

fn run(args: &[&str]) -> (i32, String, String) {
    support::winfleet(args)
}

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

async fn import_then_plan_live(backend: Backend) {
    let api = TestApi::start(backend).await;
    let fleet = TestFleet::start(2);
    wmco_cluster(&api, &fleet).await;
    wmco_host_files(&fleet);

    let out = tempfile::tempdir().unwrap();
    let imported = out.path().join("imported");
    let kubeconfig = api.kubeconfig().to_owned();
    let (code, stdout, err) = blocking({
        let (k, d) = (kubeconfig.clone(), imported.clone());
        move || run(&["import", "--kubeconfig", s(&k), "--output", s(&d)])
    })
    .await;
    assert_eq!(code, 0, "{stdout}{err}");
    let written = support::tree(&imported);
    let paths: Vec<&str> = written.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, support::IMPORTED_WMCO_FILES, "{backend:?}");
    for (path, bytes) in &written {
        let text = String::from_utf8_lossy(bytes);
        for field in ["managedFields", "resourceVersion", "uid:", "creationTimestamp", "generation:", "status:"] {
            assert!(!text.contains(field), "{backend:?}: {path} keeps {field}:\n{text}");
        }
    }

    let (code, _, err) = blocking({
        let (k, d) = (kubeconfig.clone(), out.path().join("second"));
        move || run(&["import", "--kubeconfig", s(&k), "--output", s(&d)])
    })
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(support::tree(&out.path().join("second")), written, "{backend:?}: deterministic");

    // The admin's one edit the written README asks for: how to reach these
    // hosts (their SSH port, the posix shell, loopback addresses allowed).
    std::fs::write(imported.join("fleet.yaml"), fleet.fleet_yaml()).unwrap();
    let repo = support::GitRepo::new();
    repo.commit_dir(&imported, "winfleet import");
    let dir = repo.path().to_owned();
    let (code, stdout, err) = run(&["validate", "--repo", s(&dir)]);
    assert_eq!(code, 0, "{backend:?}: the imported repository validates:\n{stdout}{err}");
    assert!(stdout.contains("valid: 2 instance(s), 1 MachineSet(s), 2 registry mirror set(s), proxy set"), "{stdout}");

    let (key, known_hosts) = (fleet.rsa_key.clone(), fleet.known_hosts.clone());
    let (code, stdout, err) = blocking(move || {
        run(&[
            "plan",
            "--live",
            "--repo",
            s(&dir),
            "--kubeconfig",
            s(&kubeconfig),
            "--require-cluster",
            "--ssh-key",
            s(&key),
            "--known-hosts",
            s(&known_hosts),
            "--output",
            "json",
        ])
    })
    .await;
    eprintln!("{backend:?} plan --live:\n{err}");
    assert!(code == 0 || code == 2, "{backend:?}: plan --live failed ({code}):\n{stdout}{err}");
    let plan: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    check_plan(backend, &plan, &fleet);
}

/// Nothing to change on the hosts: their hosts.toml are as winfleet
/// renders them (each write only adds winfleet's marker to the directory
/// it adopts), their variables too. In the cluster: every host associated
/// with its Node and no Node key to change; the Windows MachineSet adopted
/// (winfleet's annotation and label, nothing else); the user-data Secret
/// rewritten with winfleet's own script (WMCO's is another one).
fn check_plan(backend: Backend, plan: &Value, fleet: &TestFleet) {
    let cluster = &plan["cluster"];
    assert!(cluster["error"].is_null(), "{backend:?}: {}", cluster["error"]);
    for empty in ["conflicts", "rejected", "unassociated", "reboots"] {
        assert_eq!(cluster[empty], json!([]), "{backend:?}: {empty}");
    }
    for (i, node) in fleet.nodes.iter().enumerate() {
        assert_eq!(cluster["associated"][&node.address], format!("win-byoh-{i}"), "{backend:?}");
    }
    for node in cluster["nodes"].as_array().unwrap() {
        assert_eq!(node["changes"], json!([]), "{backend:?}: no Node key changes: {node}");
    }
    let machine_sets = cluster["machineSets"].as_array().unwrap();
    assert_eq!(machine_sets.len(), 1, "{backend:?}: {machine_sets:#?}");
    assert_eq!(machine_sets[0]["name"], "prod-7xk2p-windows-us-east-1a");
    assert_eq!(machine_sets[0]["action"], "update");
    let fields: Vec<&str> =
        machine_sets[0]["fields"].as_array().unwrap().iter().map(|f| f["pointer"].as_str().unwrap()).collect();
    assert_eq!(
        fields,
        ["/metadata/annotations/winfleet.io~1adopt", "/metadata/labels/app.kubernetes.io~1managed-by"],
        "{backend:?}: adopting changes nothing of the spec: {machine_sets:#?}"
    );
    assert_eq!(cluster["machines"]["userData"]["action"], "update", "{backend:?}");

    let nodes = plan["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), fleet.nodes.len());
    for node in nodes {
        assert_eq!(node["state"], "done", "{backend:?}: {node}");
        assert_eq!(node["rebootRequired"], false, "{backend:?}: {node}");
        for op in node["operations"].as_array().unwrap() {
            let diff = op["diff"].as_str().unwrap_or_default();
            assert!(
                op["op"] == "writeFile" && diff.contains(" as desired; the directory gets winfleet's marker"),
                "{backend:?}: only the marker of an adopted registry directory: {op}"
            );
        }
    }
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_wmco_cluster_plans_no_change_against_itself_real() {
    import_then_plan_live(Backend::Real).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_wmco_cluster_plans_no_change_against_itself_in_memory() {
    import_then_plan_live(Backend::InMemory).await;
}
