//! `winfleet import` against the in-memory API server filled with what a
//! WMCO cluster holds: the written repository validates, carries no field
//! the API server set, and is the same byte for byte on a second import.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use support::apiserver::{ApiServer, fixtures};

const WMCO: &str = "openshift-windows-machine-config-operator";

fn server_fields(mut object: serde_json::Value) -> serde_json::Value {
    let metadata = object["metadata"].as_object_mut().unwrap();
    metadata.insert("managedFields".into(), json!([{ "manager": "kubectl", "operation": "Apply" }]));
    metadata.insert(
        "annotations".into(),
        json!({ "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"v1\"}" }),
    );
    object
}

fn wmco_cluster() -> ApiServer {
    let api = ApiServer::new();
    api.seed(server_fields(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "windows-instances", "namespace": WMCO },
        "data": { "10.0.0.10": "username=Administrator", "win-b.corp.example": "username=Administrator" },
    })));
    api.seed(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": { "name": "unrelated", "namespace": WMCO },
        "data": { "x": "y" },
    }));
    api.seed(server_fields(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet",
        "metadata": { "name": "quay" },
        "spec": { "imageDigestMirrors": [{ "source": "quay.io/openshift", "mirrors": ["mirror.corp.example/openshift"] }] },
    })));
    api.seed(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ImageTagMirrorSet",
        "metadata": { "name": "ubi" },
        "spec": { "imageTagMirrors": [{ "source": "registry.access.redhat.com/ubi9", "mirrors": ["mirror.corp.example/ubi9"] }] },
    }));
    api.seed(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "Proxy",
        "metadata": { "name": "cluster" },
        "spec": { "httpProxy": "http://proxy.corp.example:3128", "noProxy": ".cluster.local,10.0.0.0/16", "trustedCA": { "name": "" } },
        "status": { "noProxy": ".cluster.local,10.0.0.0/16,172.30.0.0/16" },
    }));
    // WMCO's services manifest (examples-repo's copy of it).
    let text = std::fs::read_to_string(support::root().join("examples-repo/services/windows-services.yaml")).unwrap();
    let mut services: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    services["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    api.seed(server_fields(services));
    // The examples-repo's AWS MachineSet as the cluster returns it.
    let text = std::fs::read_to_string(support::root().join("examples-repo/machinesets/winworker-aws.yaml")).unwrap();
    let mut windows: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    windows["status"] = json!({ "replicas": 1, "readyReplicas": 1, "observedGeneration": 3 });
    api.seed(server_fields(windows));
    let labels = [("machine.openshift.io/cluster-api-cluster", "prod-7xk2p")];
    let mut linux = fixtures::machine_set("worker", 3, &labels);
    linux["spec"]["template"]["metadata"]["labels"]["machine.openshift.io/os-id"] = json!("Linux");
    api.seed(linux);
    api
}

fn import(kubeconfig: &std::path::Path, out: &std::path::Path) -> (i32, String, String) {
    support::winfleet(&["import", "--kubeconfig", kubeconfig.to_str().unwrap(), "--output", out.to_str().unwrap()])
}

fn files(dir: &std::path::Path) -> Vec<(String, String)> {
    let snapshot = winfleet::source::read_worktree(dir).unwrap();
    snapshot.files.into_iter().map(|f| (f.path, String::from_utf8(f.bytes).unwrap())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_wmco_cluster_is_a_valid_repository_without_server_fields_and_imports_the_same_twice() {
    let api = wmco_cluster();
    let served = api.serve().await;
    let out = tempfile::tempdir().unwrap();
    let (first, second) = (out.path().join("first"), out.path().join("second"));
    let kubeconfig = served.kubeconfig.clone();
    let (code, stdout, err) = {
        let (k, f) = (kubeconfig.clone(), first.clone());
        tokio::task::spawn_blocking(move || import(&k, &f)).await.unwrap()
    };
    assert_eq!(code, 0, "{stdout}{err}");
    let written = files(&first);
    let paths: Vec<&str> = written.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, support::IMPORTED_WMCO_FILES);
    for (path, text) in &written {
        for field in
            ["managedFields", "resourceVersion", "uid", "creationTimestamp", "last-applied-configuration", "status:"]
        {
            assert!(!text.contains(field), "{path} keeps {field}:\n{text}");
        }
    }
    let machine_set = &written.iter().find(|(p, _)| p == "machinesets/prod-7xk2p-windows-us-east-1a.yaml").unwrap().1;
    assert!(
        machine_set.contains("winfleet.io/adopt: 'true'") || machine_set.contains("winfleet.io/adopt: \"true\""),
        "{machine_set}"
    );
    let proxy = &written.iter().find(|(p, _)| p == "proxy.yaml").unwrap().1;
    assert!(proxy.contains("httpProxy: http://proxy.corp.example:3128") && !proxy.contains("trustedCA"), "{proxy}");

    let (code, out_text, err) = support::winfleet(&["validate", "--repo", first.to_str().unwrap()]);
    assert_eq!(code, 0, "the imported repository validates:\n{out_text}{err}");
    assert!(
        out_text.contains("valid: 2 instance(s), 1 MachineSet(s), 2 registry mirror set(s), proxy set"),
        "{out_text}"
    );

    let (code, _, _) = tokio::task::spawn_blocking(move || import(&kubeconfig, &second)).await.unwrap();
    assert_eq!(code, 0);
    assert_eq!(files(&out.path().join("second")), written, "deterministic");
    let (code, _, err) = tokio::task::spawn_blocking({
        let (k, f) = (served.kubeconfig.clone(), first.clone());
        move || import(&k, &f)
    })
    .await
    .unwrap();
    assert_eq!(code, 1, "never writes over a repository");
    assert!(err.contains("exists and is not empty"), "{err}");
}
