//! winfleet's MachineSets through machine-api-operator's admission webhooks
//! (issue 37, points 1 and 6): on the real control plane, MAO's Machine and
//! MachineSet defaulting and validating webhooks (served by tests/machineapi
//! over TLS with the harness's test CA, registered as MAO registers them:
//! tests/machineapi/webhooks.go) see every write of a MachineSet, beside
//! MAO's MachineSet, Machine and nodelink controllers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use support::controlplane::{Backend, resource};
use support::machine_bench::{MAPI, MachineApi, MachineBench, SET, machine_set_ready};
use winfleet::reconcile::machines::MachineStep;
use winfleet::reconcile::report::RoundReport;
use winfleet::status::model::MachineSetPhase;
use winfleet::status::verdict::Context;

#[test]
#[ignore = "entry point of the fake kubelet process that node tests start; not a test"]
fn fake_kubelet_process() {
    support::kubelet::main_from_env();
}

fn status(report: &RoundReport) -> (MachineSetPhase, &'static str) {
    let ctx = Context { round: report, drift_check: false, warn: false, at_revision: false, suspended: false };
    let verdict = winfleet::status::machineset::machine_set(SET, ctx).unwrap();
    (verdict.phase, verdict.reason)
}

/// The live MachineSet.
async fn live_machine_set(bench: &MachineBench) -> Value {
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        bench.api.client(),
        MAPI,
        &resource("machine.openshift.io", "v1beta1", "MachineSet", "machinesets"),
    );
    serde_json::to_value(api.get(SET).await.unwrap()).unwrap()
}

/// winfleet's entries of the MachineSet's managedFields.
fn winfleet_fields(set: &Value) -> Vec<Value> {
    let entries = set["metadata"]["managedFields"].as_array().unwrap();
    entries.iter().filter(|e| e["manager"] == "winfleet").cloned().collect()
}

#[ignore = "needs the real control plane and machine-api-operator's controllers and webhooks (Go builds them): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaled_from_0_to_3_through_the_webhooks_three_ready_nodes_and_the_next_round_writes_nothing() {
    let mut bench = MachineBench::start_on(Backend::Real, MachineApi::Real, 3, 0, Some(0)).await;
    let first = bench.round().await;
    assert!(!first.failed(), "{}", first.render_text());
    // MAO's MachineSet defaulter saw the create: it hands back the whole
    // MachineSet as Go marshals it, which adds the template's empty
    // lifecycleHooks the repository does not set.
    let created = live_machine_set(&bench).await;
    assert_eq!(created["spec"]["template"]["spec"]["lifecycleHooks"], serde_json::json!({}), "{created:#}");
    bench.scale_in_git(Some(3));
    let reports = bench.rounds_until(120, machine_set_ready).await;
    for earlier in &reports[..reports.len() - 1] {
        assert!(!machine_set_ready(earlier), "Ready before every Machine was: {}", earlier.render_text());
        assert_ne!(status(earlier).0, MachineSetPhase::Ready, "{}", earlier.render_text());
    }
    let last = reports.last().unwrap();
    let cluster = last.cluster.as_ref().unwrap();
    assert_eq!(cluster.machines.machines.len(), 3, "{}", last.render_text());
    assert!(cluster.machines.machines.iter().all(|m| m.step == MachineStep::Ready), "{}", last.render_text());
    let machines = bench.machines().await;
    assert_eq!(machines.len(), 3, "{}", bench.cloud.controllers_log());
    for machine in &machines {
        assert_eq!(machine["status"]["phase"], "Running", "{machine:#}");
        let node = machine["status"]["nodeRef"]["name"].as_str().expect("nodeRef set by nodelink");
        let node = bench.node(node).await;
        assert_eq!(
            node["metadata"]["annotations"]["windowsmachineconfig.openshift.io/version"],
            bench.version().as_str()
        );
    }
    // The next rounds write nothing: no apply fights the webhooks' defaults.
    let before = live_machine_set(&bench).await;
    for _ in 0..2 {
        let next = bench.round().await;
        assert!(!next.failed(), "{}", next.render_text());
        assert!(!next.has_changes(), "the next round writes nothing: {}", next.render_text());
        assert_eq!(status(&next), (MachineSetPhase::Ready, "InSync"));
    }
    let after = live_machine_set(&bench).await;
    assert_eq!(after["metadata"]["generation"], before["metadata"]["generation"], "{after:#}");
    assert_eq!(winfleet_fields(&after), winfleet_fields(&before));
}

/// Commits the bench's repository as it is (`plan --live` reads `HEAD`).
fn commit(bench: &MachineBench, message: &str) {
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").current_dir(bench.repo.path()).args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    if !bench.repo.path().join(".git").exists() {
        git(&["init", "-q"]);
    }
    git(&["add", "-A"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message]);
}

/// `winfleet plan --live --output <format>` against the bench: exit code and stdout.
async fn plan_live(bench: &MachineBench, format: &str) -> (i32, String) {
    let mut args: Vec<String> = ["plan", "--live", "--output", format].iter().map(|s| (*s).to_owned()).collect();
    for (flag, value) in [
        ("--repo", bench.repo.path().to_owned()),
        ("--ssh-key", bench.cloud.key.clone()),
        ("--known-hosts", bench.cloud.known_hosts.clone()),
        ("--kubeconfig", bench.api.kubeconfig().to_owned()),
        ("--payload-dir", bench.cloud.dir.join("payload-src")),
    ] {
        args.push(flag.to_owned());
        args.push(value.to_str().unwrap().to_owned());
    }
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        support::winfleet(&args)
    })
    .await
    .unwrap();
    assert!(code == 1 || code == 2 || code == 0, "{code}: {out}\n{err}");
    (code, format!("{out}\n--- stderr\n{err}"))
}

/// The bench's MachineSet with the label `example.com/pool: blue` added to
/// its selector and its template: valid as winfleet validates a
/// repository, and a selector change, which MAO's webhook refuses.
fn machine_set_with_new_selector() -> String {
    let doc = support::machine_bench::machine_set(Some(0));
    let doc = doc.replacen("  template:\n", "      example.com/pool: blue\n  template:\n", 1);
    doc.replacen(
        "machine.openshift.io/os-id: Windows\n",
        "machine.openshift.io/os-id: Windows\n        example.com/pool: blue\n",
        1,
    )
}

#[ignore = "needs the real control plane and machine-api-operator's controllers and webhooks (Go builds them): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_live_shows_what_the_webhooks_default_before_anything_is_written_and_their_refusal_with_exit_1() {
    let bench = MachineBench::start_on(Backend::Real, MachineApi::Real, 1, 0, Some(0)).await;
    commit(&bench, "a Windows MachineSet");
    let defaulted = "defaulted by the API server: /spec/template/spec/lifecycleHooks: (absent) -> {}";
    for format in ["text", "markdown"] {
        let (code, out) = plan_live(&bench, format).await;
        assert_eq!(code, 2, "{out}");
        assert!(out.contains(&format!("MachineSet {SET}: + create")), "{out}");
        assert!(out.contains(defaulted), "{format}: {out}");
    }
    let (code, out) = plan_live(&bench, "json").await;
    assert_eq!(code, 2, "{out}");
    let json: Value = serde_json::from_str(out.split("\n--- stderr\n").next().unwrap()).unwrap();
    let set = &json["cluster"]["machineSets"][0];
    assert_eq!(set["name"], SET, "{json:#}");
    let fields = set["defaulted"].as_array().unwrap_or_else(|| panic!("{json:#}"));
    let hooks = fields.iter().find(|f| f["pointer"] == "/spec/template/spec/lifecycleHooks").unwrap();
    assert_eq!((&hooks["from"], &hooks["to"]), (&Value::Null, &serde_json::json!({})), "{json:#}");
    // Nothing was written: the MachineSet does not exist yet.
    let sets: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        bench.api.client(),
        MAPI,
        &resource("machine.openshift.io", "v1beta1", "MachineSet", "machinesets"),
    );
    assert!(sets.get_opt(SET).await.unwrap().is_none(), "plan --live wrote the MachineSet");

    let round = bench.round().await;
    assert!(!round.failed(), "{}", round.render_text());
    let created = live_machine_set(&bench).await;
    std::fs::write(bench.repo.path().join("machinesets/winworker.yaml"), machine_set_with_new_selector()).unwrap();
    commit(&bench, "a new selector");
    let refusal = "admission webhook \"validation.machineset.machine.openshift.io\" denied the request: \
                   spec.selector: Forbidden: selector is immutable";
    for format in ["text", "markdown", "json"] {
        let (code, out) = plan_live(&bench, format).await;
        assert_eq!(code, 1, "the plan of a change the cluster refuses fails: {out}");
        let out = if format == "json" { out.replace("\\\"", "\"") } else { out };
        assert!(out.contains(refusal), "{format}: {out}");
        assert!(out.contains("an admission webhook of the cluster refused it"), "{format}: {out}");
        assert!(!out.contains("RBAC"), "{format}: {out}");
    }
    // Nothing was written: not the spec (its generation), not winfleet's
    // fields. The resourceVersion is no witness: the MachineSet controller
    // writes the status whenever it reconciles.
    let after = live_machine_set(&bench).await;
    assert_eq!(after["metadata"]["generation"], created["metadata"]["generation"], "nothing was written: {after:#}");
    assert_eq!(after["spec"], created["spec"], "nothing was written");
    assert_eq!(winfleet_fields(&after), winfleet_fields(&created), "nothing was written");
}
