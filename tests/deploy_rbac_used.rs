//! Issue 35, item 10: deploy/base/rbac.yaml grants winfleet's
//! ServiceAccount exactly the verbs its code uses. Every (namespace,
//! apiGroup, resource, verb) the ServiceAccount is bound to must have a row
//! in [`USES`], naming the source file and the call that needs it; a row's
//! call must still be in its file. A verb granted with no row fails (grant
//! nothing unused: CSR `get`, approval `update`, MachineSet `get`/`watch`
//! and Machine `get` were removed so), and so does a row whose call is gone.
//! tests/real_cluster_rbac.rs proves the grants suffice on a real API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;

use serde_json::Value;

/// (namespace or "" for the ClusterRole, apiGroup, resource, verb, file, call).
/// A `create` granted for a server-side apply names the apply: an apply
/// that creates the object is authorized as a create.
const USES: &[(&str, &str, &str, &str, &str, &str)] = &[
    ("", "", "nodes", "get", "src/cluster/rollout.rs", "nodes.get_opt("),
    ("", "", "nodes", "list", "src/cluster/observe.rs", "nodes.list(&windows_nodes)"),
    ("", "", "nodes", "watch", "src/daemon/triggers/cluster_watch.rs", "watcher::watcher(nodes,"),
    ("", "", "nodes", "patch", "src/cluster/cordon.rs", "nodes.patch(name"),
    ("", "", "nodes", "delete", "src/cluster/deconfigure.rs", "nodes.delete(name"),
    ("", "", "pods", "list", "src/cluster/drain.rs", "all.list(&on_node)"),
    ("", "", "pods/eviction", "create", "src/cluster/drain.rs", ".evict("),
    ("", "config.openshift.io", "proxies", "get", "src/cluster/observe.rs", "proxies.get_opt(\"cluster\")"),
    (
        "",
        "config.openshift.io",
        "imagedigestmirrorsets",
        "list",
        "src/cluster/sources.rs",
        "api.list(&ListParams::default())",
    ),
    (
        "",
        "config.openshift.io",
        "imagetagmirrorsets",
        "list",
        "src/cluster/sources.rs",
        "api.list(&ListParams::default())",
    ),
    ("", "config.openshift.io", "infrastructures", "get", "src/cluster/material.rs", "\"infrastructures\""),
    ("", "config.openshift.io", "networks", "get", "src/cluster/material.rs", "\"networks\""),
    ("", "operator.openshift.io", "networks", "get", "src/cluster/network.rs", "api.get_opt(\"cluster\")"),
    (
        "",
        "machineconfiguration.openshift.io",
        "controllerconfigs",
        "get",
        "src/cluster/material.rs",
        "\"controllerconfigs\"",
    ),
    (
        "",
        "machineconfiguration.openshift.io",
        "machineconfigpools",
        "get",
        "src/cluster/machine_config.rs",
        "pools.get_opt(WORKER_POOL)",
    ),
    (
        "",
        "machineconfiguration.openshift.io",
        "machineconfigs",
        "get",
        "src/cluster/machine_config.rs",
        "configs.get_opt(name)",
    ),
    (
        "",
        "machineconfiguration.openshift.io",
        "machineconfigs",
        "list",
        "src/cluster/machine_config.rs",
        "configs.list(&ListParams::default())",
    ),
    (
        "",
        "certificates.k8s.io",
        "certificatesigningrequests",
        "list",
        "src/cluster/approve.rs",
        "api.list(&ListParams::default())",
    ),
    (
        "",
        "certificates.k8s.io",
        "certificatesigningrequests",
        "watch",
        "src/daemon/triggers/cluster_watch.rs",
        "watcher::watcher(csrs,",
    ),
    (
        "",
        "certificates.k8s.io",
        "certificatesigningrequests/approval",
        "patch",
        "src/cluster/approve.rs",
        "api.patch_approval(",
    ),
    // The API server checks `approve` on the CSR's signer when an approval is written.
    ("", "certificates.k8s.io", "signers", "approve", "src/cluster/approve.rs", "api.patch_approval("),
    (
        "openshift-machine-api",
        "machine.openshift.io",
        "machinesets",
        "list",
        "src/cluster/observe.rs",
        "list_or_absent(&sets,",
    ),
    (
        "openshift-machine-api",
        "machine.openshift.io",
        "machinesets",
        "create",
        "src/cluster/apply.rs",
        "Patch::Apply(object)",
    ),
    (
        "openshift-machine-api",
        "machine.openshift.io",
        "machinesets",
        "patch",
        "src/cluster/apply.rs",
        "Patch::Apply(object)",
    ),
    (
        "openshift-machine-api",
        "machine.openshift.io",
        "machinesets",
        "delete",
        "src/cluster/apply.rs",
        "api.delete(&change.name",
    ),
    (
        "openshift-machine-api",
        "machine.openshift.io",
        "machines",
        "list",
        "src/cluster/observe.rs",
        "labels(WINDOWS_MACHINES)).await?",
    ),
    (
        "openshift-machine-api",
        "machine.openshift.io",
        "machinehealthchecks",
        "list",
        "src/cluster/observe.rs",
        "list_or_absent(&checks,",
    ),
    (
        "openshift-machine-api",
        "machine.openshift.io",
        "machines",
        "watch",
        "src/daemon/triggers/cluster_watch.rs",
        "watcher::watcher(machines,",
    ),
    (
        "openshift-machine-api",
        "machine.openshift.io",
        "machines",
        "patch",
        "src/cluster/machine_failures.rs",
        "api.patch(&machine.name",
    ),
    (
        "openshift-machine-api",
        "machine.openshift.io",
        "machines",
        "delete",
        "src/cluster/keys.rs",
        "machines.delete(&machine",
    ),
    ("openshift-machine-api", "", "secrets", "create", "src/cluster/user_data.rs", "Patch::Apply(&object)"),
    ("openshift-machine-api", "", "secrets", "get", "src/cluster/user_data.rs", "secrets.get_opt(SECRET_NAME)"),
    ("openshift-machine-api", "", "secrets", "patch", "src/cluster/user_data.rs", "secrets.patch(SECRET_NAME"),
    // kube's Recorder creates an Event, and patches a repeated one's series.
    ("openshift-machine-api", "events.k8s.io", "events", "create", "src/cluster/events.rs", "self.recorder.publish("),
    ("openshift-machine-api", "events.k8s.io", "events", "patch", "src/cluster/events.rs", "self.recorder.publish("),
    ("default", "events.k8s.io", "events", "create", "src/cluster/events.rs", "self.recorder.publish("),
    ("default", "events.k8s.io", "events", "patch", "src/cluster/events.rs", "self.recorder.publish("),
    (
        "default",
        "events.k8s.io",
        "events",
        "list",
        "src/reconcile/prerequisites.rs",
        "api.list(&ListParams::default())",
    ),
    ("winfleet", "events.k8s.io", "events", "create", "src/cluster/events.rs", "self.recorder.publish("),
    ("winfleet", "events.k8s.io", "events", "patch", "src/cluster/events.rs", "self.recorder.publish("),
    ("openshift-machine-config-operator", "", "secrets", "get", "src/cluster/material.rs", "secrets.get_opt(name)"),
    ("winfleet", "coordination.k8s.io", "leases", "get", "src/daemon/leadership/lease/mod.rs", "self.api.get_opt("),
    ("winfleet", "coordination.k8s.io", "leases", "update", "src/daemon/leadership/lease/mod.rs", "self.api.replace("),
    ("winfleet", "coordination.k8s.io", "leases", "create", "src/daemon/leadership/lease/mod.rs", "self.api.create("),
    ("winfleet", "", "services", "get", "src/cluster/monitoring/mod.rs", "services.get_opt(NAME)"),
    ("winfleet", "", "services", "patch", "src/cluster/monitoring/mod.rs", "Patch::Apply(object)"),
    ("winfleet", "", "services", "create", "src/cluster/monitoring/mod.rs", "Patch::Apply(object)"),
    ("winfleet", "", "endpoints", "get", "src/cluster/monitoring/mod.rs", "endpoints.get_opt(NAME)"),
    ("winfleet", "", "endpoints", "patch", "src/cluster/monitoring/mod.rs", "Patch::Apply(object)"),
    ("winfleet", "", "endpoints", "create", "src/cluster/monitoring/mod.rs", "Patch::Apply(object)"),
    (
        "winfleet",
        "monitoring.coreos.com",
        "servicemonitors",
        "get",
        "src/cluster/monitoring/mod.rs",
        "monitors.get_opt(NAME)",
    ),
    (
        "winfleet",
        "monitoring.coreos.com",
        "servicemonitors",
        "patch",
        "src/cluster/monitoring/mod.rs",
        "Patch::Apply(object)",
    ),
    (
        "winfleet",
        "monitoring.coreos.com",
        "servicemonitors",
        "create",
        "src/cluster/monitoring/mod.rs",
        "Patch::Apply(object)",
    ),
    (
        "winfleet",
        "monitoring.coreos.com",
        "servicemonitors",
        "list",
        "src/cluster/monitoring/mod.rs",
        "monitors.list_metadata(",
    ),
    ("winfleet", "", "namespaces", "get", "src/cluster/monitoring/mod.rs", "namespaces.get_opt(namespace)"),
    ("winfleet", "", "namespaces", "patch", "src/cluster/monitoring/mod.rs", "namespaces.patch(namespace"),
    ("openshift-config", "", "secrets", "get", "src/cluster/pull_secret.rs", "secrets.get_opt(name)"),
    ("openshift-config", "", "configmaps", "get", "src/cluster/trusted_ca.rs", "maps.get_opt(name)"),
    // Azure: cloud-node-manager's token, minted for one ServiceAccount and kept in one Secret.
    (
        "winfleet",
        "",
        "serviceaccounts/token",
        "create",
        "src/cluster/node_manager.rs",
        "accounts.create_token_request(SERVICE_ACCOUNT",
    ),
    ("winfleet", "", "secrets", "get", "src/cluster/node_manager.rs", "secrets.get_opt(RECORD_SECRET)"),
    ("winfleet", "", "secrets", "patch", "src/cluster/node_manager.rs", "Patch::Apply(&object)"),
    ("winfleet", "", "secrets", "create", "src/cluster/node_manager.rs", "Patch::Apply(&object)"),
];

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect()).unwrap_or_default()
}

/// Every (namespace, apiGroup, resource, verb) bound to system:serviceaccount:winfleet:winfleet.
fn granted() -> BTreeSet<(String, String, String, String)> {
    let text = std::fs::read_to_string(support::root().join("deploy/base/rbac.yaml")).unwrap();
    let docs: Vec<Value> =
        serde_saphyr::from_multiple::<Value>(&text).unwrap().into_iter().filter(|d| !d.is_null()).collect();
    let bound: BTreeSet<(String, String)> = docs
        .iter()
        .filter(|d| d["kind"] == "RoleBinding" || d["kind"] == "ClusterRoleBinding")
        .filter(|d| {
            d["subjects"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["kind"] == "ServiceAccount" && s["name"] == "winfleet" && s["namespace"] == "winfleet")
        })
        .map(|d| {
            let ns = d["metadata"]["namespace"].as_str().unwrap_or_default().to_owned();
            (ns, d["roleRef"]["name"].as_str().unwrap().to_owned())
        })
        .collect();
    let mut out = BTreeSet::new();
    for role in docs.iter().filter(|d| d["kind"] == "Role" || d["kind"] == "ClusterRole") {
        let ns = role["metadata"]["namespace"].as_str().unwrap_or_default().to_owned();
        if !bound.contains(&(ns.clone(), role["metadata"]["name"].as_str().unwrap().to_owned())) {
            continue;
        }
        for rule in role["rules"].as_array().unwrap() {
            for group in strings(&rule["apiGroups"]) {
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        out.insert((ns.clone(), group.clone(), resource.clone(), verb));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_verb_deploy_grants_winfleet_is_one_its_code_uses() {
    let granted = granted();
    assert!(granted.len() > 40, "rbac.yaml read: {granted:?}");
    let rows: BTreeSet<(String, String, String, String)> = USES
        .iter()
        .map(|(ns, group, resource, verb, _, _)| ((*ns).into(), (*group).into(), (*resource).into(), (*verb).into()))
        .collect();
    assert_eq!(rows.len(), USES.len(), "one row per grant");
    let unused: Vec<_> = granted.difference(&rows).collect();
    assert!(unused.is_empty(), "granted with no call that uses it (remove the verb, or add the row): {unused:#?}");
    let missing: Vec<_> = rows.difference(&granted).collect();
    assert!(missing.is_empty(), "rows for verbs rbac.yaml does not grant: {missing:#?}");
    let mut gone = Vec::new();
    for (ns, group, resource, verb, file, call) in USES {
        let source = std::fs::read_to_string(support::root().join(file)).unwrap();
        if !source.contains(call) {
            gone.push(format!("{ns}/{group}/{resource} {verb}: {file} no longer has `{call}`"));
        }
    }
    assert!(gone.is_empty(), "the calls these grants were for are gone:\n{}", gone.join("\n"));
}

/// The rows above hold one call a verb; `get` on Secrets in winfleet's
/// namespace serves two, each for exactly one Secret by name.
#[test]
fn winfleet_reads_exactly_two_secrets_of_its_namespace_by_name() {
    let text = std::fs::read_to_string(support::root().join("deploy/base/rbac.yaml")).unwrap();
    let docs: Vec<Value> =
        serde_saphyr::from_multiple::<Value>(&text).unwrap().into_iter().filter(|d| !d.is_null()).collect();
    let mut names = BTreeSet::new();
    for role in docs.iter().filter(|d| d["kind"] == "Role" && d["metadata"]["namespace"] == "winfleet") {
        for rule in role["rules"].as_array().unwrap() {
            if strings(&rule["resources"]).contains(&"secrets".to_owned())
                && strings(&rule["verbs"]).contains(&"get".to_owned())
            {
                let named = strings(&rule["resourceNames"]);
                assert!(!named.is_empty(), "a get on every Secret of winfleet's namespace: {rule}");
                names.extend(named);
            }
        }
    }
    let expected = ["windows-machine-config-operator-tls", "winfleet-cloud-node-manager-token"];
    assert_eq!(names.iter().map(String::as_str).collect::<Vec<_>>(), expected);
    let material = std::fs::read_to_string(support::root().join("src/cluster/material.rs")).unwrap();
    assert!(material.contains("let name = super::monitoring::plan::SERVING_CERT.1;"));
    assert!(material.contains("secrets.get_opt(name)"));
}
