//! A pushed instance becomes a Node, end to end: real sshd nodes with their
//! own host names, a payload whose kubelet is the fake kubelet of
//! tests/support/kubelet.rs (a real process started by the systemctl shim
//! from the unit winfleet wrote), and the in-memory API server served over
//! loopback, which issues the kubelet's certificates once winfleet approves
//! its CSRs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::fs;

use support::apiserver::ApiServer;
use support::join::{logs, node, round, setup};
use winfleet::cluster::join::JoinResult;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pushed_instance_becomes_a_ready_labelled_uncordoned_node_and_the_next_round_writes_nothing() {
    let setup = setup(&["win-node-1", "WIN-NODE-2"]).await;
    let report = round(&setup).await;
    let cluster = report.cluster.as_ref().unwrap();
    for join in &cluster.joins {
        assert_eq!(
            join.result,
            JoinResult::Joined,
            "{}: {:?}\n{}\n{}",
            join.address,
            join.result,
            report.render_text(),
            logs(&setup.fleet)
        );
    }
    assert_eq!(cluster.joins.len(), 2, "{}", report.render_text());
    let version = setup.version();
    for (name, test_node) in ["win-node-1", "win-node-2"].into_iter().zip(&setup.fleet.nodes) {
        let node = node(&setup.server, name);
        support::join::assert_joined(&node, name, &version, &setup.pool.public_key_hash());
        support::join::assert_host_key(&node, &test_node.dir);
        assert_eq!(node["spec"]["taints"][0]["key"], "os", "the kubelet registered with kubelet.conf's taint");
    }
    let csrs = setup.server.list("certificates.k8s.io/v1", "CertificateSigningRequest");
    assert_eq!(csrs.len(), 4, "a client and a serving CSR per node");
    for csr in &csrs {
        let approved = csr["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Approved" && c["reason"] == "WinfleetApprove");
        assert!(approved, "{csr:#}");
        assert!(csr["status"]["certificate"].is_string(), "issued: {csr:#}");
    }
    for node in &setup.fleet.nodes {
        let log = node.read("../services/hybrid-overlay-node.log").unwrap_or_default();
        assert!(
            log.contains(&format!("hybrid overlay for {}", node.hostname.to_lowercase())),
            "NODE_NAME resolved from the Node: {log}"
        );
    }

    let writes_before =
        setup.server.history().iter().filter(|w| w.field_manager.as_deref() == Some("winfleet")).count();
    let second = round(&setup).await;
    assert!(!second.failed(), "{}", second.render_text());
    for node in &second.nodes {
        let winfleet::engine::report::NodeResult::Done { operations, .. } = &node.result else { panic!("{node:?}") };
        assert!(operations.is_empty(), "the next round writes nothing on {}: {operations:#?}", node.address);
    }
    let writes_after = setup.server.history().iter().filter(|w| w.field_manager.as_deref() == Some("winfleet")).count();
    assert_eq!(writes_before, writes_after, "the next round writes nothing to the cluster");
    assert!(second.cluster.as_ref().unwrap().joins.is_empty(), "nothing left to join");
}

fn pending(server: &ApiServer) -> Vec<String> {
    server
        .list("certificates.k8s.io/v1", "CertificateSigningRequest")
        .iter()
        .filter(|c| c["status"]["conditions"].as_array().is_none_or(|c| c.is_empty()))
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn foreign_csr(server: &ApiServer, name: &str, node: &str) {
    let (pem, _) = support::kubelet::certificate_request(node, &[]);
    use base64::Engine;
    server.seed(serde_json::json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": { "name": name },
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "usages": ["digital signature", "client auth"],
            "username": "system:bootstrap:abcdef",
            "groups": ["system:bootstrappers", "system:authenticated"],
        },
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csrs_for_near_or_unlisted_names_stay_pending_and_near_matches_are_reported() {
    let setup = setup(&["win-node-1"]).await;
    foreign_csr(&setup.server, "csr-substring", "win-node");
    foreign_csr(&setup.server, "csr-superstring", "win-node-1-evil");
    foreign_csr(&setup.server, "csr-unlisted", "db-server-7");
    let report = round(&setup).await;
    let cluster = report.cluster.as_ref().unwrap();
    assert_eq!(cluster.joins[0].result, JoinResult::Joined, "{}", report.render_text());
    let mut still = pending(&setup.server);
    still.sort();
    assert_eq!(
        still,
        ["csr-substring", "csr-superstring", "csr-unlisted"],
        "only the kubelet's own CSRs were approved"
    );
    let near: Vec<&str> = cluster
        .csrs
        .iter()
        .filter(|c| matches!(c.outcome, winfleet::cluster::approve::CsrOutcome::NearMatch { .. }))
        .map(|c| c.csr.as_str())
        .collect();
    assert_eq!(near, ["csr-substring", "csr-superstring"], "{}", report.render_text());
    assert!(!cluster.csrs.iter().any(|c| c.csr == "csr-unlisted"), "an unlisted name is left alone, unreported");
    let text = report.render_text();
    assert!(text.contains("CSR csr-superstring (node win-node-1-evil): NOT approved"), "{text}");
    let events = setup.server.list("events.k8s.io/v1", "Event");
    let reported: Vec<&str> = events
        .iter()
        .filter(|e| e["reason"] == "CsrNearMatch")
        .filter_map(|e| e["regarding"]["name"].as_str())
        .collect();
    assert!(reported.contains(&"csr-substring") && reported.contains(&"csr-superstring"), "{reported:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupted_binary_is_uploaded_again_and_its_services_restarted() {
    let setup = setup(&["win-node-1"]).await;
    let first = round(&setup).await;
    assert_eq!(first.cluster.as_ref().unwrap().joins[0].result, JoinResult::Joined, "{}", first.render_text());
    let node = &setup.fleet.nodes[0];
    let before = node.service_pids();
    fs::write(node.path("payload/kube-node/kubelet"), "#!/bin/sh\nexit 1\n").unwrap();
    let second = round(&setup).await;
    assert!(!second.failed(), "{}", second.render_text());
    let text = second.render_text();
    assert!(text.contains("~ payload/kube-node/kubelet (upload kube-node/kubelet"), "{text}");
    for service in ["kubelet", "hybrid-overlay-node"] {
        assert!(text.contains(&format!("▶ start service {service}")), "{service} restarts: {text}");
    }
    assert!(!text.contains("start service containerd"), "containerd does not depend on the kubelet: {text}");
    let after = node.service_pids();
    assert_ne!(before["kubelet"], after["kubelet"], "the kubelet runs the good binary again");
    assert_eq!(before["containerd"], after["containerd"]);
    assert_eq!(
        fs::read(node.path("payload/kube-node/kubelet")).unwrap(),
        support::kubelet::wrapper_script().into_bytes()
    );
    let csrs = setup.server.list("certificates.k8s.io/v1", "CertificateSigningRequest");
    let clients =
        csrs.iter().filter(|c| c["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet").count();
    assert_eq!(clients, 1, "a restarted kubelet keeps its certificate");
    let third = round(&setup).await;
    assert!(third.nodes.iter().all(|n| !n.has_changes()), "{}", third.render_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn winfleet_killed_mid_configure_is_finished_by_the_next_round_without_repeating_steps() {
    let setup = setup(&["win-node-1"]).await;
    let node = &setup.fleet.nodes[0];
    let mut apply = support::join::spawn_apply(&setup);
    // Killed as soon as the kubelet asks for its certificate: files and
    // bootstrap services are in place, the join has begun.
    support::join::wait_for("the kubelet's certificate request", || {
        !setup.server.list("certificates.k8s.io/v1", "CertificateSigningRequest").is_empty()
    })
    .await;
    apply.kill().unwrap();
    let _ = apply.wait();
    let starts = |name: &str| {
        let log = fs::read_to_string(node.dir.join("services/systemctl.log")).unwrap_or_default();
        log.lines().filter(|l| *l == format!("start -- {name}.service")).count()
    };
    assert_eq!(starts("kubelet"), 1);
    let report = round(&setup).await;
    assert_eq!(report.cluster.as_ref().unwrap().joins[0].result, JoinResult::Joined, "{}", report.render_text());
    let text = report.render_text();
    assert!(!text.contains("(upload "), "nothing uploaded twice: {text}");
    assert_eq!(starts("kubelet"), 1, "the kubelet is not started twice: {text}");
    let clients = setup
        .server
        .list("certificates.k8s.io/v1", "CertificateSigningRequest")
        .iter()
        .filter(|c| c["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet")
        .count();
    assert_eq!(clients, 1, "the CSR of the first attempt is the one approved");
    assert!(pending(&setup.server).is_empty());
}
