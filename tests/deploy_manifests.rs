//! deploy/ rendered with `kubectl kustomize`, every variant, and the fields
//! an admin's review turns on checked in the rendered objects: images
//! pinned by digest, the PodDisruptionBudget, Service, NetworkPolicy and
//! ServiceMonitor selecting the pods (and the ports they name existing),
//! the NetworkPolicy's peers, the Lease Role limited to winfleet's Lease, the
//! Route's edge TLS, the git-sync wiring (signal, shared process
//! namespace, credential keys), the control token of suspend/resume and the
//! Role for the Event on winfleet's own Pod.
//!
//! The tests that run kubectl are #[ignore]d (a plain `cargo test` lists
//! them as ignored); `scripts/test.sh` installs kubectl and runs them, and
//! a missing or too old kubectl fails them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::process::Command;

use serde_json::{Value, json};
use winfleet::daemon::leadership::lease::DEFAULT_NAME as LEASE_NAME;
use winfleet::daemon::triggers::git_sync::parse_signal;

/// The objects of one rendered kustomization, or `None` when kubectl is
/// absent here (and not required).
fn render(dir: &str) -> Option<Vec<Value>> {
    let path = support::root().join(dir);
    let output = match Command::new("kubectl").arg("kustomize").arg(&path).output() {
        Ok(output) => output,
        // Its tests are #[ignore]d: one that runs was asked for.
        Err(error) => panic!("kubectl kustomize {dir}: {error} (scripts/test.sh installs kubectl)"),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "kubectl kustomize {dir} failed (components need kubectl 1.21 or newer): {stderr}"
    );
    let text = String::from_utf8(output.stdout).unwrap();
    Some(serde_saphyr::from_multiple::<Value>(&text).unwrap().into_iter().filter(|doc| !doc.is_null()).collect())
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} among the rendered objects"))
}

fn container<'a>(deployment: &'a Value, name: &str) -> Option<&'a Value> {
    deployment["spec"]["template"]["spec"]["containers"].as_array().unwrap().iter().find(|c| c["name"] == name)
}

fn env<'a>(container: &'a Value, name: &str) -> Option<&'a Value> {
    container["env"].as_array()?.iter().find(|e| e["name"] == name)
}

/// Every key/value of `selector` is among `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().unwrap();
    !selector.is_empty() && selector.iter().all(|(key, value)| labels.get(key) == Some(value))
}

/// What every variant must satisfy; returns the winfleet Deployment.
fn check_common(variant: &str, objects: &[Value]) -> Value {
    let deployment = find(objects, "Deployment", "winfleet").clone();
    let pod = &deployment["spec"]["template"];
    let labels = &pod["metadata"]["labels"];

    let init = pod["spec"]["initContainers"].as_array().unwrap();
    for c in init.iter().chain(pod["spec"]["containers"].as_array().unwrap()) {
        let image = c["image"].as_str().unwrap();
        let digest = image.rsplit_once("@sha256:").map(|(_, hex)| hex).unwrap_or_default();
        assert!(
            digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{variant}: container {} image {image} is not pinned by digest",
            c["name"]
        );
    }
    assert!(selects(&deployment["spec"]["selector"]["matchLabels"], labels), "{variant}: Deployment selector");

    let pdb = find(objects, "PodDisruptionBudget", "winfleet");
    assert!(selects(&pdb["spec"]["selector"]["matchLabels"], labels), "{variant}: the PDB selects no winfleet pod");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1, "{variant}");

    let winfleet = container(&deployment, "winfleet").unwrap();
    let ports: Vec<&str> = winfleet["ports"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    let service = find(objects, "Service", "winfleet");
    assert!(selects(&service["spec"]["selector"], labels), "{variant}: the Service selects no winfleet pod");
    let service_ports: Vec<&str> =
        service["spec"]["ports"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();

    let policy = find(objects, "NetworkPolicy", "winfleet");
    assert!(selects(&policy["spec"]["podSelector"]["matchLabels"], labels), "{variant}: NetworkPolicy podSelector");
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]), "{variant}");
    let ingress = policy["spec"]["ingress"].as_array().unwrap();
    let peers = |port: &str| -> Vec<&Value> {
        ingress.iter().filter(|rule| rule["ports"].as_array().unwrap().iter().any(|p| p["port"] == port)).collect()
    };
    let router = json!([{"namespaceSelector": {"matchLabels": {"policy-group.network.openshift.io/ingress": ""}}}]);
    let monitoring = json!([{"namespaceSelector": {"matchExpressions": [{
        "key": "kubernetes.io/metadata.name",
        "operator": "In",
        "values": ["openshift-monitoring", "openshift-user-workload-monitoring"],
    }]}}]);
    let replicas = json!([{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "winfleet"}}}]);
    let webhook: Vec<&Value> = peers("webhook").iter().map(|r| &r["from"]).collect();
    assert_eq!(webhook, [&router, &replicas], "{variant}: webhook from the router and the other replica");
    assert_eq!(peers("metrics").iter().map(|r| &r["from"]).collect::<Vec<_>>(), [&monitoring], "{variant}: metrics");
    assert_eq!(ingress.len(), 3, "{variant}: no other ingress rule");
    let winfleet = container(&deployment, "winfleet").unwrap();
    let pod_ip = env(winfleet, "POD_IP").map(|e| &e["valueFrom"]["fieldRef"]["fieldPath"]);
    assert_eq!(pod_ip, Some(&json!("status.podIP")), "{variant}: the address the leader advertises for its webhook");
    for rule in ingress {
        assert!(rule["from"].as_array().is_some_and(|from| !from.is_empty()), "{variant}: a rule open to all");
        for port in rule["ports"].as_array().unwrap() {
            assert!(ports.contains(&port["port"].as_str().unwrap()), "{variant}: {port} is no container port");
        }
    }

    let monitor = find(objects, "ServiceMonitor", "winfleet");
    assert!(selects(&monitor["spec"]["selector"]["matchLabels"], &service["metadata"]["labels"]), "{variant}");
    let endpoints = monitor["spec"]["endpoints"].as_array().unwrap();
    assert!(endpoints.iter().all(|e| e["port"] == "metrics" && e["path"] == "/metrics"), "{variant}: {endpoints:?}");

    let route = find(objects, "Route", "winfleet-webhook");
    assert_eq!(route["spec"]["tls"]["termination"], "edge", "{variant}");
    assert_eq!(route["spec"]["tls"]["insecureEdgeTerminationPolicy"], "None", "{variant}: plain HTTP is refused");
    assert_eq!(route["spec"]["to"], json!({"kind": "Service", "name": "winfleet", "weight": 100}), "{variant}");
    assert_eq!(route["spec"]["port"]["targetPort"], "webhook", "{variant}");
    assert_eq!(route["spec"]["path"], "/webhook", "{variant}: only the webhook is exposed");
    assert!(service_ports.contains(&"webhook") && service_ports.contains(&"metrics"), "{variant}");

    let role = find(objects, "Role", "winfleet-leader-election");
    assert_eq!(role["metadata"]["namespace"], "winfleet", "{variant}");
    for rule in role["rules"].as_array().unwrap() {
        assert_eq!((&rule["apiGroups"], &rule["resources"]), (&json!(["coordination.k8s.io"]), &json!(["leases"])));
        // create is the one verb Kubernetes cannot limit by name.
        if rule["verbs"] != json!(["create"]) {
            assert_eq!(rule["resourceNames"], json!([LEASE_NAME]), "{variant}: {rule}");
        }
    }
    let verbs: Vec<&Value> =
        role["rules"].as_array().unwrap().iter().flat_map(|r| r["verbs"].as_array().unwrap()).collect();
    assert_eq!(verbs, [&json!("get"), &json!("update"), &json!("create")], "{variant}: exactly the calls lease/ makes");
    check_control_token(variant, &deployment);
    // Liveness is /healthz (503 for a wedged loop, tests/daemon_http_health.rs), readiness /readyz.
    let probe = |kind: &str| (winfleet[kind]["httpGet"]["path"].clone(), winfleet[kind]["httpGet"]["port"].clone());
    assert_eq!(probe("livenessProbe"), (json!("/healthz"), json!("metrics")), "{variant}");
    assert_eq!(probe("readinessProbe"), (json!("/readyz"), json!("metrics")), "{variant}");
    check_token_isolation(variant, &deployment);
    check_pod_events(variant, objects);
    check_admission_policies(variant, objects);
    deployment
}

/// The container's file mounted from `volume` at `path`, as (Secret name,
/// key), when a Secret volume provides it.
fn secret_file(deployment: &Value, container: &Value, path: &str) -> Option<(String, String)> {
    let (dir, file) = path.rsplit_once('/')?;
    let mount = container["volumeMounts"].as_array()?.iter().find(|m| m["mountPath"] == dir)?;
    let volumes = deployment["spec"]["template"]["spec"]["volumes"].as_array()?;
    let secret = &volumes.iter().find(|v| v["name"] == mount["name"])?["secret"];
    let key = match secret["items"].as_array() {
        Some(items) => items.iter().find(|i| i["path"] == file)?["key"].as_str()?.to_owned(),
        None => file.to_owned(),
    };
    Some((secret["secretName"].as_str()?.to_owned(), key))
}

/// `winfleet suspend`/`resume` work in the pod: the daemon and the CLI in
/// its container read the control token from Secret winfleet-control, which
/// deploy/README.md has the admin create; no other container mounts it.
fn check_control_token(variant: &str, deployment: &Value) {
    let winfleet = container(deployment, "winfleet").unwrap();
    let path = env(winfleet, "WINFLEET_CONTROL_TOKEN_FILE").expect("the control token is wired")["value"].as_str();
    let source = secret_file(deployment, winfleet, path.unwrap());
    assert_eq!(source, Some(("winfleet-control".to_owned(), "token".to_owned())), "{variant}");
    let readme = std::fs::read_to_string(support::root().join("deploy/README.md")).unwrap();
    assert!(readme.contains("oc create secret generic winfleet-control -n winfleet"), "deploy/README.md creates it");
    let pod = &deployment["spec"]["template"]["spec"];
    let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["secret"]["secretName"] == "winfleet-control");
    let volume = &volume.unwrap()["name"];
    for c in pod["containers"].as_array().unwrap().iter().chain(pod["initContainers"].as_array().unwrap()) {
        let mounts = c["volumeMounts"].as_array().map(Vec::as_slice).unwrap_or_default();
        let mounted = mounts.iter().any(|m| &m["name"] == volume);
        assert_eq!(mounted, c["name"] == "winfleet", "{variant}: container {} and the control token", c["name"]);
    }
}

/// Every container of the pod, init containers included.
fn all_containers(deployment: &Value) -> Vec<&Value> {
    let pod = &deployment["spec"]["template"]["spec"];
    let init = pod["initContainers"].as_array().map(Vec::as_slice).unwrap_or_default();
    pod["containers"].as_array().unwrap().iter().chain(init).collect()
}

/// The Secrets a container reads: through its volume mounts and its env.
fn secrets_of(deployment: &Value, container: &Value) -> Vec<String> {
    let volumes = deployment["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
    let mut names = Vec::new();
    for mount in container["volumeMounts"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let volume = volumes.iter().find(|v| v["name"] == mount["name"]).unwrap();
        names.extend(volume["secret"]["secretName"].as_str().map(str::to_owned));
        // A projected ServiceAccount token counts as the token.
        let sources = volume["projected"]["sources"].as_array().map(Vec::as_slice).unwrap_or_default();
        if sources.iter().any(|s| s.get("serviceAccountToken").is_some()) {
            names.push("<serviceaccount token>".to_owned());
        }
    }
    for e in container["env"].as_array().map(Vec::as_slice).unwrap_or_default() {
        names.extend(e["valueFrom"]["secretKeyRef"]["name"].as_str().map(str::to_owned));
    }
    names
}

/// No token where it is not needed: the ServiceAccount token is not
/// automounted but projected into winfleet's container alone, at the path
/// and with the three files kube's in-cluster config reads; winfleet's Git
/// push credential (Secret winfleet-git) and its other Secrets reach it
/// alone; git-sync reads only its own read-only Secret.
fn check_token_isolation(variant: &str, deployment: &Value) {
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false, "{variant}: the token is not mounted everywhere");
    let winfleet = container(deployment, "winfleet").unwrap();
    let path = "/var/run/secrets/kubernetes.io/serviceaccount";
    let mounts = winfleet["volumeMounts"].as_array().unwrap();
    let mount = mounts.iter().find(|m| m["mountPath"] == path).expect("the token projected into winfleet");
    assert_eq!(mount["readOnly"], true, "{variant}");
    let volumes = pod["volumes"].as_array().unwrap();
    let volume = volumes.iter().find(|v| v["name"] == mount["name"]).unwrap();
    let sources = volume["projected"]["sources"].as_array().expect("a projected volume");
    let token = sources.iter().find_map(|s| s.get("serviceAccountToken")).expect("a serviceAccountToken source");
    assert_eq!(token["path"], "token", "{variant}");
    assert!(token.get("audience").is_none(), "{variant}: the API server's own audience");
    let ca = sources.iter().find_map(|s| s.get("configMap")).expect("the cluster CA");
    assert_eq!(ca["name"], "kube-root-ca.crt", "{variant}");
    assert_eq!(ca["items"], json!([{"key": "ca.crt", "path": "ca.crt"}]), "{variant}");
    let downward = sources.iter().find_map(|s| s.get("downwardAPI")).expect("the namespace");
    assert_eq!(downward["items"][0]["path"], "namespace", "{variant}");
    assert_eq!(downward["items"][0]["fieldRef"]["fieldPath"], "metadata.namespace", "{variant}");

    let winfleet_only = ["<serviceaccount token>", "winfleet-git", "winfleet-webhook", "winfleet-control"];
    for c in all_containers(deployment) {
        let name = c["name"].as_str().unwrap();
        let secrets = secrets_of(deployment, c);
        for secret in winfleet_only {
            let has = secrets.iter().any(|s| s == secret);
            assert_eq!(has, name == "winfleet", "{variant}: container {name} and {secret}: {secrets:?}");
        }
        if name == "git-sync" {
            assert!(secrets.iter().all(|s| s == "winfleet-git-sync"), "{variant}: git-sync reads {secrets:?}");
        }
    }
}

/// The RevisionUntrusted Event on winfleet's own Pod (its namespace) is
/// allowed: events.k8s.io create and patch, what kube's Recorder calls
/// (tests/real_cluster_rbac*.rs prove it on a real API server).
fn check_pod_events(variant: &str, objects: &[Value]) {
    let role = find(objects, "Role", "winfleet-pod-events");
    assert_eq!(role["metadata"]["namespace"], "winfleet", "{variant}");
    let expected = json!([{"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}]);
    assert_eq!(role["rules"], expected, "{variant}");
    let binding = find(objects, "RoleBinding", "winfleet-pod-events");
    assert_eq!(binding["roleRef"]["name"], "winfleet-pod-events", "{variant}");
    let subject = json!([{"kind": "ServiceAccount", "name": "winfleet", "namespace": "winfleet"}]);
    assert_eq!(binding["subjects"], subject, "{variant}");
}

/// Every admission policy (base/admission.yaml) judges winfleet's
/// ServiceAccount alone (one, cloud-node-manager's, whose tokens winfleet mints), fails closed and has its binding, which denies
/// (tests/real_cluster_admission.rs proves each rule on a real API server).
fn check_admission_policies(variant: &str, objects: &[Value]) {
    let policies: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "ValidatingAdmissionPolicy").collect();
    let names: Vec<&str> = policies.iter().map(|p| p["metadata"]["name"].as_str().unwrap()).collect();
    // kustomize sorts them by name.
    let expected = [
        "winfleet-cloud-node-manager-nodes",
        "winfleet-namespace",
        "winfleet-own-objects",
        "winfleet-secrets",
        "winfleet-windows-machines",
        "winfleet-windows-nodes",
    ];
    assert_eq!(names, expected, "{variant}");
    let only_winfleet = json!([{"name": "winfleet-service-account",
        "expression": "request.userInfo.username == 'system:serviceaccount:winfleet:winfleet'"}]);
    // The identity winfleet mints tokens for (Azure's cloud-node-manager) has its own.
    let only_node_manager = json!([{"name": "cloud-node-manager-service-account",
        "expression": "request.userInfo.username == 'system:serviceaccount:winfleet:winfleet-cloud-node-manager'"}]);
    for policy in policies {
        let name = policy["metadata"]["name"].as_str().unwrap();
        let judged = if name == "winfleet-cloud-node-manager-nodes" { &only_node_manager } else { &only_winfleet };
        assert_eq!(&policy["spec"]["matchConditions"], judged, "{variant}: {name} judges one identity alone");
        assert_eq!(policy["spec"]["failurePolicy"], "Fail", "{variant}: {name} fails closed");
        let binding = find(objects, "ValidatingAdmissionPolicyBinding", name);
        assert_eq!(binding["spec"]["policyName"], name, "{variant}");
        assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]), "{variant}: {name}");
    }
}

/// The git-sync layout: git-sync's signal is winfleet's, and they can see
/// each other; its credentials follow git-sync v4's rules.
fn check_git_sync(variant: &str, deployment: &Value) {
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["shareProcessNamespace"], true, "{variant}");
    let git_sync = container(deployment, "git-sync").expect("a git-sync sidecar");
    let flag = git_sync["args"].as_array().unwrap().iter().find_map(|a| a.as_str()?.strip_prefix("--sync-on-signal="));
    let winfleet = container(deployment, "winfleet").unwrap();
    let ours = env(winfleet, "WINFLEET_GIT_SYNC_SIGNAL").expect("winfleet signals git-sync")["value"].as_str().unwrap();
    assert_eq!(
        parse_signal(flag.expect("git-sync --sync-on-signal")).unwrap(),
        parse_signal(ours).unwrap(),
        "{variant}: winfleet sends the signal git-sync waits for"
    );
    assert_eq!(env(winfleet, "WINFLEET_REPO_PATH").unwrap()["value"], "/git/current", "{variant}");
    // git-sync v4 starts only with both username and token, or neither.
    let user = &env(git_sync, "GITSYNC_USERNAME").unwrap()["valueFrom"]["secretKeyRef"];
    let token = &env(git_sync, "GITSYNC_PASSWORD").unwrap()["valueFrom"]["secretKeyRef"];
    assert_eq!((&user["name"], &user["key"]), (&json!("winfleet-git-sync"), &json!("username")), "{variant}");
    assert_eq!((&token["name"], &token["key"]), (&json!("winfleet-git-sync"), &json!("token")), "{variant}");
    assert_eq!(user["optional"], token["optional"], "{variant}: one without the other");
}

fn check_self_pull(variant: &str, deployment: &Value) {
    assert!(container(deployment, "git-sync").is_none(), "{variant}");
    assert_ne!(deployment["spec"]["template"]["spec"]["shareProcessNamespace"], true, "{variant}");
    let winfleet = container(deployment, "winfleet").unwrap();
    assert!(env(winfleet, "WINFLEET_GIT_SYNC_SIGNAL").is_none() && env(winfleet, "WINFLEET_REPO_PATH").is_none());
    assert!(env(winfleet, "WINFLEET_REPO_URL").is_some(), "{variant}");
}

fn check_credentials(variant: &str, deployment: &Value, ssh: bool) {
    let winfleet = container(deployment, "winfleet").unwrap();
    assert_eq!(env(winfleet, "WINFLEET_GIT_TOKEN_FILE").is_some(), !ssh, "{variant}");
    assert_eq!(env(winfleet, "WINFLEET_GIT_SSH_KEY").is_some(), ssh, "{variant}");
}

#[ignore = "needs kubectl: scripts/test.sh runs it"]
#[test]
fn the_git_sync_layout_renders_an_approvable_deployment() {
    let Some(objects) = render("deploy") else { return };
    let deployment = check_common("deploy", &objects);
    check_git_sync("deploy", &deployment);
    check_credentials("deploy", &deployment, false);
}

#[ignore = "needs kubectl: scripts/test.sh runs it"]
#[test]
fn the_self_pull_variant_renders_without_the_sidecar() {
    let Some(objects) = render("deploy/variants/self-pull") else { return };
    let deployment = check_common("self-pull", &objects);
    check_self_pull("self-pull", &deployment);
    check_credentials("self-pull", &deployment, false);
}

#[ignore = "needs kubectl: scripts/test.sh runs it"]
#[test]
fn the_git_ssh_component_composes_with_both_layouts() {
    let Some(objects) = render("tests/fixtures/deploy/git-sync-ssh") else { return };
    let deployment = check_common("git-sync + git-ssh", &objects);
    check_git_sync("git-sync + git-ssh", &deployment);
    check_credentials("git-sync + git-ssh", &deployment, true);

    let Some(objects) = render("tests/fixtures/deploy/self-pull-ssh") else { return };
    let deployment = check_common("self-pull + git-ssh", &objects);
    check_self_pull("self-pull + git-ssh", &deployment);
    check_credentials("self-pull + git-ssh", &deployment, true);
}
