//! Machines become nodes (issue 26), end to end on real sshd nodes: the
//! test Machine API provider of tests/support/machine_provider.rs creates
//! Machines for the MachineSet winfleet applies from Git and plays the
//! cloud (a VM per Machine, reachable with the key the `windows-user-data`
//! Secret authorizes); winfleet configures each Provisioned Machine as it
//! does a BYOH instance.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::controlplane::Backend;
use support::machine_bench::{MAPI, MachineApi, MachineBench, SET, machine_set_ready};
use winfleet::cluster::approve::CsrOutcome;
use winfleet::cluster::join::JoinResult;
use winfleet::reconcile::machines::MachineStep;
use winfleet::reconcile::report::RoundReport;
use winfleet::status::model::MachineSetPhase;
use winfleet::status::verdict::Context;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_set_scaled_from_0_to_3_in_git_gives_three_ready_nodes_and_status_is_ready_only_at_the_end() {
    let mut bench = MachineBench::start(Backend::InMemory, 3, Some(0)).await;
    let first = bench.round().await;
    assert!(!first.failed(), "{}", first.render_text());
    let secret = bench.api.get("v1", "Secret", Some(MAPI), "windows-user-data").await.expect("user data kept");
    assert_eq!(
        secret["metadata"]["annotations"]["winfleet.io/authorized-key-fingerprint"],
        bench.pool.public_key_fingerprint()
    );

    bench.scale_in_git(Some(3));
    let reports = bench.rounds_until(30, machine_set_ready).await;
    let last = reports.last().unwrap();
    for earlier in &reports[..reports.len() - 1] {
        assert!(!machine_set_ready(earlier), "Ready before every Machine was: {}", earlier.render_text());
    }
    let machines = bench.machines().await;
    assert_eq!(machines.len(), 3);
    let version = bench.version();
    for machine in &machines {
        assert_eq!(machine["status"]["phase"], "Running", "{machine:#}");
        let node = bench.node(machine["status"]["nodeRef"]["name"].as_str().unwrap()).await;
        let labels = &node["metadata"]["labels"];
        assert!(labels.get("windowsmachineconfig.openshift.io/byoh").is_none(), "a Machine's node is no BYOH node");
        assert_eq!(labels["node-role.kubernetes.io/worker"], "");
        assert_eq!(node["metadata"]["annotations"]["windowsmachineconfig.openshift.io/version"], version.as_str());
        assert_ne!(node["spec"]["unschedulable"], true);
    }
    let cluster = last.cluster.as_ref().unwrap();
    assert!(cluster.machines.machines.iter().all(|m| m.step == MachineStep::Ready), "{}", last.render_text());
    assert!(
        bench.cloud.log().booted.iter().all(|(_, key)| key.as_deref() == Some(bench.pool.public_key_line().as_str()))
    );

    let next = bench.round().await;
    assert!(!next.failed(), "{}", next.render_text());
    assert!(next.nodes.iter().all(|n| !n.has_changes()), "the next round writes nothing: {}", next.render_text());
    let c = next.cluster.as_ref().unwrap();
    assert!(c.joins.is_empty() && c.machine_sets.is_empty() && c.nodes.is_empty(), "{}", next.render_text());
    assert!(machine_set_ready(&next));
    assert_eq!(status(&next), (MachineSetPhase::Ready, "InSync"));
    let _ = SET;
}

/// The MachineSet's status verdict after `report` (what `winfleet status`
/// and summary.yaml show).
fn status(report: &RoundReport) -> (MachineSetPhase, &'static str) {
    let ctx = Context { round: report, drift_check: false, warn: false, at_revision: false, suspended: false };
    let verdict = winfleet::status::machineset::machine_set(SET, ctx).unwrap();
    (verdict.phase, verdict.reason)
}

fn steps(report: &RoundReport) -> Vec<&'static str> {
    report.cluster.as_ref().unwrap().machines.machines.iter().map(|m| m.step.name()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaled_from_3_to_1_the_machine_api_removes_two_and_winfleet_deconfigures_nothing_over_ssh() {
    let mut bench = MachineBench::start(Backend::InMemory, 3, Some(3)).await;
    bench.rounds_until(30, machine_set_ready).await;
    bench.scale_in_git(Some(1));
    let report = bench.round().await;
    assert!(!report.failed(), "{}", report.render_text());
    assert!(report.cluster.as_ref().unwrap().deconfigures.is_empty(), "{}", report.render_text());
    // The Machine API deletes two Machines; their VMs and Nodes go with them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while bench.cloud.log().deleted.len() < 2 {
        assert!(std::time::Instant::now() < deadline, "the provider never scaled down: {:?}", bench.cloud.log());
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let reports = bench.rounds_until(10, machine_set_ready).await;
    let last = reports.last().unwrap();
    assert_eq!(steps(last), ["ready"], "status follows: {}", last.render_text());
    assert!(last.cluster.as_ref().unwrap().deconfigures.is_empty(), "nothing deconfigured over SSH");
    assert_eq!(bench.machines().await.len(), 1);
    assert_eq!(status(last), (MachineSetPhase::Ready, "InSync"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_booting_vm_is_waiting_not_failed_then_configured_once_it_answers() {
    let bench = MachineBench::start(Backend::InMemory, 1, Some(1)).await;
    bench.cloud.set_boot_delay(std::time::Duration::from_secs(20));
    let reports = bench.rounds_until(60, machine_set_ready).await;
    let waited: Vec<&RoundReport> =
        reports.iter().filter(|r| r.cluster.as_ref().is_some_and(|c| !c.machines.machines.is_empty())).collect();
    let first = waited.first().unwrap();
    assert_eq!(steps(first), ["waiting"], "{}", first.render_text());
    assert!(!first.failed(), "a booting VM is no failure: {}", first.render_text());
    assert_eq!(status(first), (MachineSetPhase::Progressing, "MachinesWaiting"));
    assert!(matches!(&first.cluster.as_ref().unwrap().machines.machines[0].step, MachineStep::Waiting { .. }));
    assert_eq!(steps(reports.last().unwrap()), ["ready"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_autoscaler_change_of_replicas_is_followed_not_reverted_when_git_leaves_them_out() {
    let bench = MachineBench::start(Backend::InMemory, 2, None).await;
    bench.rounds_until(30, machine_set_ready).await;
    assert_eq!(bench.machines().await.len(), 1, "the MachineSet's default");
    // The autoscaler scales the MachineSet on the cluster, not in Git.
    let sets: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        bench.api.client(),
        MAPI,
        &support::controlplane::resource("machine.openshift.io", "v1beta1", "MachineSet", "machinesets"),
    );
    let patch = serde_json::json!({ "spec": { "replicas": 2 } });
    let params = kube::api::PatchParams { field_manager: Some("cluster-autoscaler".into()), ..Default::default() };
    sets.patch(SET, &params, &kube::api::Patch::Merge(&patch)).await.unwrap();
    let reports = bench.rounds_until(30, |r| machine_set_ready(r) && steps(r).len() == 2).await;
    for report in &reports {
        assert!(report.cluster.as_ref().unwrap().machine_sets.is_empty(), "not reverted: {}", report.render_text());
    }
    let set = bench.api.get(support::machine_bench::MS, "MachineSet", Some(MAPI), SET).await.unwrap();
    assert_eq!(set["spec"]["replicas"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_failing_three_rounds_in_a_row_is_reported_on_the_machine_and_never_deleted() {
    let bench = MachineBench::start(Backend::InMemory, 1, Some(1)).await;
    bench.cloud.ignore_user_data();
    let reports = bench
        .rounds_until(30, |r| {
            r.cluster.as_ref().is_some_and(|c| c.machines.machines.iter().any(|m| m.failed_rounds == 3))
        })
        .await;
    let last = reports.last().unwrap();
    let text = last.render_text();
    assert!(text.contains("FAILED (3 rounds in a row; never deleted by winfleet)"), "{text}");
    assert!(text.contains("refused public key authentication"), "{text}");
    assert_eq!(status(last), (MachineSetPhase::Progressing, "MachinesFailed"));
    let machines = bench.machines().await;
    assert_eq!(machines.len(), 1, "never deleted");
    let name = machines[0]["metadata"]["name"].as_str().unwrap();
    assert_eq!(machines[0]["metadata"]["annotations"]["winfleet.io/configure-failures"], "3");
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(bench.api.client(), MAPI);
    let reported: Vec<_> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("MachineConfigureFailed"))
        .collect();
    assert_eq!(reported.len(), 1, "one Event, at the third round");
    assert_eq!(reported[0].regarding.as_ref().unwrap().name.as_deref(), Some(name));
    assert_eq!(reported[0].regarding.as_ref().unwrap().kind.as_deref(), Some("Machine"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csrs_another_approver_decides_first_or_a_409_on_approval_are_no_error() {
    let bench = MachineBench::start(Backend::InMemory, 2, Some(2)).await;
    let support::controlplane::TestApi::InMemory { server, .. } = &bench.api else { unreachable!() };
    // The first approvals winfleet sends meet a 409 (another writer won).
    server.fail("PATCH", "/approval", 409, None, 2);
    // A second approver (as OpenShift's cluster-machine-approver) races
    // winfleet once winfleet's approvals have met the two 409s.
    let client = bench.api.client();
    let served = server.clone();
    let racer = tokio::spawn(async move {
        while served.faults_served().len() < 2 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let csrs: kube::Api<k8s_openapi::api::certificates::v1::CertificateSigningRequest> = kube::Api::all(client);
        loop {
            for csr in csrs.list(&Default::default()).await.map(|l| l.items).unwrap_or_default() {
                let decided = csr.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|c| !c.is_empty());
                if !decided {
                    let patch = serde_json::json!({ "status": { "conditions": [{
                        "type": "Approved", "status": "True", "reason": "NodeCSRApprove", "message": "machine-approver" }] } });
                    let name = csr.metadata.name.clone().unwrap();
                    let _ = csrs.patch_approval(&name, &Default::default(), &kube::api::Patch::Merge(&patch)).await;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });
    let reports = bench.rounds_until(30, machine_set_ready).await;
    racer.abort();
    for report in &reports {
        let cluster = report.cluster.as_ref().unwrap();
        let refused: Vec<_> = cluster
            .csrs
            .iter()
            .filter(|c| matches!(c.outcome, winfleet::cluster::approve::CsrOutcome::Refused { .. }))
            .collect();
        assert!(refused.is_empty(), "{}", report.render_text());
        assert!(cluster.joins.iter().all(|j| !matches!(j.result, winfleet::cluster::join::JoinResult::Failed { .. })));
    }
    assert_eq!(server.faults_served().len(), 2, "winfleet's approvals met both 409s");
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_set_scaled_from_0_to_2_becomes_ready_nodes_on_the_real_control_plane() {
    scaled_from_0_to_2_on_the_real_control_plane(MachineApi::Model).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_set_scaled_from_0_to_2_becomes_ready_nodes_under_machine_api_operators_controllers() {
    scaled_from_0_to_2_on_the_real_control_plane(MachineApi::Real).await;
}

async fn scaled_from_0_to_2_on_the_real_control_plane(machine_api: MachineApi) {
    let mut bench = MachineBench::start_on(Backend::Real, machine_api, 2, 0, Some(0)).await;
    let first = bench.round().await;
    assert!(!first.failed(), "{}", first.render_text());
    bench.scale_in_git(Some(2));
    let reports = bench.rounds_until(60, machine_set_ready).await;
    for earlier in &reports[..reports.len() - 1] {
        assert!(!machine_set_ready(earlier), "Ready before every Machine was: {}", earlier.render_text());
    }
    let machines = bench.machines().await;
    assert_eq!(machines.len(), 2);
    for machine in &machines {
        assert_eq!(machine["status"]["phase"], "Running", "{machine:#}");
    }
    let next = bench.round().await;
    assert!(next.nodes.iter().all(|n| !n.has_changes()), "the next round writes nothing: {}", next.render_text());
    assert_eq!(status(&next), (MachineSetPhase::Ready, "InSync"));
}

/// `plan --live`'s dry run of a new MachineSet, on either API server: what
/// the server sets that the repository leaves out (here the CRD's default
/// `spec.authoritativeAPI`) is shown under the MachineSet, and nothing is
/// written.
async fn the_plan_of_a_new_machine_set_shows_what_the_api_server_defaults(backend: Backend) {
    let bench = MachineBench::start(backend, 1, Some(1)).await;
    let plan = bench.plan().await;
    assert!(!plan.failed(), "{}", plan.render_text());
    let set = &plan.cluster.as_ref().unwrap().machine_sets[0];
    let default = set.defaulted.iter().find(|f| f.pointer == "/spec/authoritativeAPI");
    let default = default.unwrap_or_else(|| panic!("{}", plan.render_text()));
    assert_eq!((&default.from, &default.to), (&None, &Some(serde_json::json!("MachineAPI"))));
    let text = plan.render_text();
    assert!(
        text.contains("      defaulted by the API server: /spec/authoritativeAPI: (absent) -> \"MachineAPI\""),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&plan.render_json()).unwrap();
    let fields = json["cluster"]["machineSets"][0]["defaulted"].as_array().unwrap();
    assert!(fields.iter().any(|f| f["pointer"] == "/spec/authoritativeAPI" && f["to"] == "MachineAPI"), "{json:#}");
    assert!(bench.api.get(support::machine_bench::MS, "MachineSet", Some(MAPI), SET).await.is_none(), "written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_of_a_new_machine_set_shows_what_the_in_memory_api_server_defaults() {
    the_plan_of_a_new_machine_set_shows_what_the_api_server_defaults(Backend::InMemory).await;
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_of_a_new_machine_set_shows_what_the_real_api_server_defaults() {
    the_plan_of_a_new_machine_set_shows_what_the_api_server_defaults(Backend::Real).await;
}

/// Issue 37: a cloud provisions a MachineSet's Machines one after another;
/// a Machine that gets its address while a round configures and joins the
/// others is taken into that round, not left for the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_that_gets_its_address_while_a_round_runs_is_configured_and_joined_in_that_round() {
    // One host name contains the other: each batch's CSR passes must know
    // the other batch's exact names, or they report a near match.
    let (bench, first, second) = second_held().await;
    let report = round_releasing_after(&bench, &first.1).await;
    assert!(!report.failed(), "{}", report.render_text());
    let c = report.cluster.as_ref().unwrap();
    assert_eq!(c.machines.taken_late, [second.as_str()], "{}", report.render_text());
    let joined: Vec<&str> =
        c.joins.iter().filter(|j| j.result == JoinResult::Joined).map(|j| j.address.as_str()).collect();
    assert_eq!(joined.len(), 2, "both joined in one round: {}", report.render_text());
    assert!(report.render_text().contains(&format!("Machine {second} (")), "{}", report.render_text());
    assert!(report.render_text().contains("(got its address during the round)"), "{}", report.render_text());
    let near: Vec<_> = c.csrs.iter().filter(|r| matches!(r.outcome, CsrOutcome::NearMatch { .. })).collect();
    assert!(near.is_empty(), "no CSR of the round is a near match of another batch's host: {near:?}");
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::all(bench.api.client());
    let said = events.list(&Default::default()).await.unwrap().items;
    let near_events: Vec<_> = said.iter().filter(|e| e.reason.as_deref() == Some("CsrNearMatch")).collect();
    assert!(near_events.is_empty(), "{near_events:#?}");

    let next = bench.round().await;
    assert!(machine_set_ready(&next), "{}", next.render_text());
    assert!(next.cluster.as_ref().unwrap().joins.is_empty(), "nothing joins twice: {}", next.render_text());
}

/// A CSR that nearly matches hosts of two batches of one round (the
/// Machines taken late form a batch of their own) is said once: one
/// `CsrNearMatch` Event and one NearMatch line, not one per batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_near_match_that_two_batches_of_a_round_see_is_said_once() {
    let (bench, first, _) = second_held().await;
    // Close to both host names, equal to neither.
    support::join::submit_client_csr(&bench.api, "csr-impostor", "win-node-12-impostor").await;
    let report = round_releasing_after(&bench, &first.1).await;
    let text = report.render_text();
    assert!(!report.failed(), "{text}");
    let c = report.cluster.as_ref().unwrap();
    assert_eq!(c.machines.taken_late.len(), 1, "a second batch ran: {text}");
    let near: Vec<&str> =
        c.csrs.iter().filter(|r| matches!(r.outcome, CsrOutcome::NearMatch { .. })).map(|r| r.csr.as_str()).collect();
    assert_eq!(near, ["csr-impostor"], "{text}");
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::all(bench.api.client());
    let said = events.list(&Default::default()).await.unwrap().items;
    let told: i32 = said
        .iter()
        .filter(|e| e.reason.as_deref() == Some("CsrNearMatch"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("csr-impostor"))
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum();
    assert_eq!(told, 1, "said once: {said:#?}");
}

/// A MachineSet of two scaled up in Git (VMs `win-node-1` and
/// `win-node-12`) with the cloud holding the second VM: the bench, the
/// provisioned Machine's (name, address) and the other's name.
async fn second_held() -> (MachineBench, (String, String), String) {
    let mut bench = MachineBench::start_with_vm_names(&["win-node-1", "win-node-12"], Some(0)).await;
    assert!(!bench.round().await.failed());
    bench.cloud.provision_only(1);
    bench.scale_in_git(Some(2));
    let wrote = bench.round().await;
    assert!(!wrote.failed(), "{}", wrote.render_text());
    let (first, second) = one_provisioned_of_two(&bench).await;
    (bench, first, second)
}

/// A round in which the held VM is provisioned once the round has
/// configured the node at `first`.
async fn round_releasing_after(bench: &MachineBench, first: &str) -> RoundReport {
    let cloud = &bench.cloud;
    bench
        .round_with(|r| {
            if r.address == first {
                cloud.release()
            }
        })
        .await
}

/// Waits until the model has created two Machines and the cloud has
/// provisioned one: (name, address) of that one, and the other's name.
async fn one_provisioned_of_two(bench: &MachineBench) -> ((String, String), String) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let machines = bench.machines().await;
        let address = |m: &serde_json::Value| {
            m.pointer("/status/addresses/0/address").and_then(|a| a.as_str()).map(str::to_owned)
        };
        let name = |m: &serde_json::Value| m["metadata"]["name"].as_str().unwrap().to_owned();
        let (with, without): (Vec<_>, Vec<_>) = machines.iter().partition(|m| address(m).is_some());
        if let ([one], [other]) = (with.as_slice(), without.as_slice()) {
            return ((name(one), address(one).unwrap()), name(other));
        }
        assert!(std::time::Instant::now() < deadline, "Machines: {machines:#?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
