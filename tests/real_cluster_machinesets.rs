//! MachineSets by server-side apply against both API servers (switched by
//! [`Backend`]): create, update and prune; a field another field manager
//! changed is a conflict in the plan and the round report, never
//! overwritten; a MachineSet winfleet does not manage is never touched.
//! The first test pins what the real kube-apiserver v1.37.2 does with
//! conflicts, which the in-memory one must do alike.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::apiserver::fixtures;
use support::cluster::{Repo, pool};
use support::controlplane::{Backend, TestApi, resource};
use winfleet::cluster::apply as cluster_apply;
use winfleet::cluster::machinesets::{Conflict, MachineSetStep};
use winfleet::desired::kinds::fleet::DriftMode;
use winfleet::desired::model::Instance;
use winfleet::reconcile::{self, Options, report::RoundReport};
use winfleet::status::model::MachineSetPhase;

const MAPI: &str = "openshift-machine-api";
const MS: &str = "machine.openshift.io/v1beta1";
const MANAGED: (&str, &str) = ("app.kubernetes.io/managed-by", "winfleet");

fn machine_sets(api: &TestApi) -> Api<DynamicObject> {
    let ms = resource("machine.openshift.io", "v1beta1", "MachineSet", "machinesets");
    Api::namespaced_with(api.client(), MAPI, &ms)
}

fn managers(object: &DynamicObject) -> Vec<String> {
    let entries = object.metadata.managed_fields.clone().unwrap_or_default();
    entries.iter().map(|e| format!("{} {}", e.manager.clone().unwrap(), e.operation.clone().unwrap())).collect()
}

fn conflict(e: kube::Error) -> (String, Vec<(String, String)>) {
    let kube::Error::Api(status) = e else { panic!("not a Status: {e}") };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"), "{status:?}");
    // Sorted: the real server's order of causes varies (a Go map).
    let mut causes: Vec<_> = status.details.unwrap().causes.into_iter().map(|c| (c.field, c.message)).collect();
    causes.sort();
    (status.message, causes)
}

/// Non-forced apply against another manager's field: 409 with one
/// `FieldManagerConflict` cause per field, the manager named without a
/// time; the applier's own `Update` entry is another manager; the same
/// value is shared, not a conflict; force takes the field from both.
async fn conflicts_as_the_real_server_reports_them(api: &TestApi) {
    let sets = machine_sets(api);
    let apply = PatchParams::apply("winfleet");
    let mut config = json!({
        "apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
        "metadata": {"name": "ssa", "namespace": MAPI, "labels": {"app": "w"}},
        "spec": {"replicas": 1, "template": {"spec": {"providerSpec": {"value": {"instanceType": "a"}}}}},
    });
    sets.patch("ssa", &apply, &Patch::Apply(&config)).await.unwrap();
    let edit = PatchParams { field_manager: Some("kubectl-edit".into()), ..Default::default() };
    sets.patch("ssa", &edit, &Patch::Merge(json!({"spec": {"replicas": 5}}))).await.unwrap();
    let own = PatchParams { field_manager: Some("winfleet".into()), ..Default::default() };
    let value = json!({"spec": {"template": {"spec": {"providerSpec": {"value": {"instanceType": "b"}}}}}});
    let edited = sets.patch("ssa", &own, &Patch::Merge(value)).await.unwrap();
    assert_eq!(managers(&edited), ["winfleet Apply", "kubectl-edit Update", "winfleet Update"]);

    config["spec"]["replicas"] = json!(3);
    for dry_run in [true, false] {
        let params = PatchParams { dry_run, ..apply.clone() };
        let (message, causes) = conflict(sets.patch("ssa", &params, &Patch::Apply(&config)).await.unwrap_err());
        let using = "using machine.openshift.io/v1beta1";
        assert_eq!(
            causes,
            [
                (".spec.replicas".to_owned(), format!("conflict with \"kubectl-edit\" {using}")),
                (
                    ".spec.template.spec.providerSpec.value.instanceType".to_owned(),
                    format!("conflict with \"winfleet\" {using}")
                ),
            ],
            "{message}"
        );
        assert!(message.starts_with("Apply failed with 2 conflicts: conflicts with \"kubectl-edit\" "), "{message}");
    }
    let stored = sets.get("ssa").await.unwrap();
    assert_eq!((stored.data["spec"]["replicas"].clone(), managers(&stored).len()), (json!(5), 3), "nothing written");

    // The values the others set: shared, no conflict, nothing taken.
    config["spec"]["replicas"] = json!(5);
    config["spec"]["template"]["spec"]["providerSpec"]["value"]["instanceType"] = json!("b");
    let shared = sets.patch("ssa", &apply, &Patch::Apply(&config)).await.unwrap();
    assert_eq!(managers(&shared), ["winfleet Apply", "kubectl-edit Update", "winfleet Update"]);

    config["spec"]["replicas"] = json!(2);
    let forced = sets.patch("ssa", &apply.clone().force(), &Patch::Apply(&config)).await.unwrap();
    assert_eq!(forced.data["spec"]["replicas"], 2);
    assert_eq!(managers(&forced), ["winfleet Apply", "winfleet Update"], "kubectl-edit lost its only field");
    let owned: Value = serde_json::to_value(&forced.metadata.managed_fields.unwrap()[0].fields_v1).unwrap();
    assert!(owned.pointer("/f:spec/f:replicas").is_some(), "{owned}");
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_conflicts_against_the_real_server() {
    let api = TestApi::start(Backend::Real).await;
    conflicts_as_the_real_server_reports_them(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_conflicts_against_the_in_memory_server() {
    let api = TestApi::start(Backend::InMemory).await;
    conflicts_as_the_real_server_reports_them(&api).await;
}

/// One whole round of the library pipeline against `api`.
async fn round(api: &TestApi, repo: &Repo, dry_run: bool) -> RoundReport {
    let tmp = tempfile::tempdir().unwrap();
    let pool = pool(tmp.path());
    let desired = repo.desired();
    let instances: Vec<&Instance> = desired.instances.values().collect();
    let cluster = winfleet::cluster::connect::Cluster { client: api.client(), url: api.url().to_owned() };
    let host = winfleet::engine::host::SshHost { pool: &pool };
    let options = Options { dry_run, max_parallel: 4, whole_fleet: true, ..Options::default() };
    reconcile::round(Some(&cluster), &pool, &host, &desired, &instances, &options, |_| {}).await
}

/// The repository's MachineSet `name` (examples-repo's AWS one) with
/// `replicas`, `instanceType` and the given annotations.
fn machine_set(repo: &Repo, name: &str, replicas: i64, instance_type: &str, annotations: &[(&str, &str)]) {
    let template =
        std::fs::read_to_string(support::root().join("examples-repo/machinesets/winworker-aws.yaml")).unwrap();
    let mut text = template
        .replace("prod-7xk2p-windows-us-east-1a", name)
        .replace("replicas: 1", &format!("replicas: {replicas}"))
        .replace("instanceType: m5a.large", &format!("instanceType: {instance_type}"));
    if !annotations.is_empty() {
        let lines: String = annotations.iter().map(|(k, v)| format!("    {k}: \"{v}\"\n")).collect();
        text = text.replace(
            "  namespace: openshift-machine-api\n",
            &format!("  namespace: openshift-machine-api\n  annotations:\n{lines}"),
        );
    }
    repo.write(&format!("machinesets/{name}.yaml"), &text);
}

async fn get(api: &TestApi, name: &str) -> Option<Value> {
    api.get(MS, "MachineSet", Some(MAPI), name).await
}

fn actions(report: &RoundReport) -> Vec<String> {
    let cluster = report.cluster.as_ref().unwrap();
    assert!(cluster.error.is_none() && cluster.rejected.is_empty(), "{cluster:#?}");
    cluster.machine_sets.iter().map(|m| format!("{} {:?}", m.change.name, m.change.action)).collect()
}

/// Each conflict as `name: field by manager` lines.
fn conflicts(report: &RoundReport) -> Vec<String> {
    let cluster = report.cluster.as_ref().unwrap();
    let mut lines = Vec::new();
    for c in &cluster.conflicts {
        lines.extend(c.fields.iter().map(|f| format!("{}: {} by {}", c.name, f.pointer, f.manager)));
        if c.fields.is_empty() {
            lines.push(format!("{}: not managed", c.name));
        }
    }
    lines
}

/// Event reasons on MachineSet `name`.
async fn events(api: &TestApi, name: &str) -> Vec<String> {
    let mut reasons: Vec<String> = event_notes(api, name).await.into_iter().map(|(reason, _)| reason).collect();
    reasons.sort();
    reasons
}

/// Events on MachineSet `name`: reason and note.
async fn event_notes(api: &TestApi, name: &str) -> Vec<(String, String)> {
    let ar = resource("events.k8s.io", "v1", "Event", "events");
    let list: Api<DynamicObject> = Api::namespaced_with(api.client(), MAPI, &ar);
    let items = list.list(&ListParams::default()).await.unwrap().items;
    let text = |e: &DynamicObject, k: &str| e.data[k].as_str().unwrap_or_default().to_owned();
    items.iter().filter(|e| e.data["regarding"]["name"] == name).map(|e| (text(e, "reason"), text(e, "note"))).collect()
}

/// What status says about MachineSet `name` after `report`.
fn status_of(report: &RoundReport, repo: &Repo, name: &str) -> (MachineSetPhase, String) {
    let names: Vec<String> = repo.desired().machine_sets.keys().cloned().collect();
    let input = winfleet::status::RoundInput {
        now: jiff::Timestamp::UNIX_EPOCH,
        attempted: "r1",
        applied: Some("r1"),
        invalid: &[],
        instances: &[],
        machine_sets: &names,
        report: Some(report),
        drift_check: false,
        drift_mode: DriftMode::Correct,
        secrets: &[],
        suspended_by: None,
    };
    let status = winfleet::status::render(&winfleet::status::Status::default(), &input);
    let set = &status.machine_sets[name];
    (set.phase, set.last_error.clone().unwrap_or_default())
}

async fn create_update_and_prune_only_what_winfleet_manages(api: &TestApi) {
    api.seed(fixtures::machine_set("old", 1, &[MANAGED])).await;
    api.seed(fixtures::machine_set("theirs", 2, &[("owner", "someone-else")])).await;
    api.seed(fixtures::machine_set("linux-workers", 3, &[])).await;
    let theirs_before = get(api, "theirs").await.unwrap();
    let repo = Repo::new();
    machine_set(&repo, "winb", 1, "m5a.large", &[]);
    machine_set(&repo, "theirs", 5, "m5a.large", &[]);

    let plan = round(api, &repo, true).await;
    assert_eq!(actions(&plan), ["old Delete", "winb Create"]);
    assert_eq!(conflicts(&plan), ["theirs: not managed"]);
    assert!(get(api, "winb").await.is_none() && get(api, "old").await.is_some(), "a plan writes nothing");

    let applied = round(api, &repo, false).await;
    assert_eq!(actions(&applied), ["old Delete", "winb Create"]);
    let winb = get(api, "winb").await.expect("created");
    assert_eq!(winb["metadata"]["labels"][MANAGED.0], MANAGED.1);
    assert_eq!(winb["spec"]["replicas"], 1);
    assert!(get(api, "old").await.is_none(), "managed and gone from the repository: deleted");
    assert!(get(api, "linux-workers").await.is_some(), "not winfleet's: never pruned");
    let theirs = get(api, "theirs").await.unwrap();
    assert_eq!(theirs["metadata"]["resourceVersion"], theirs_before["metadata"]["resourceVersion"], "never touched");
    assert_eq!(status_of(&applied, &repo, "theirs").0, MachineSetPhase::Conflict);
    assert_eq!(events(api, "theirs").await, ["MachineSetConflict"]);

    // A changed field in Git reaches the cluster.
    machine_set(&repo, "winb", 1, "m5a.xlarge", &[]);
    let updated = round(api, &repo, false).await;
    assert_eq!(actions(&updated), ["winb Update"]);
    let winb = get(api, "winb").await.unwrap();
    assert_eq!(winb["spec"]["template"]["spec"]["providerSpec"]["value"]["instanceType"], "m5a.xlarge");
    assert_eq!(actions(&round(api, &repo, true).await), Vec::<String>::new(), "in sync");

    // Gone from Git: deleted; the unmanaged namesake still untouched.
    repo.remove("machinesets/winb.yaml");
    let pruned = round(api, &repo, false).await;
    assert_eq!(actions(&pruned), ["winb Delete"]);
    assert!(get(api, "winb").await.is_none());
    let theirs = get(api, "theirs").await.unwrap();
    assert_eq!(theirs["metadata"]["resourceVersion"], theirs_before["metadata"]["resourceVersion"]);
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_update_and_prune_against_the_real_server() {
    let api = TestApi::start(Backend::Real).await;
    create_update_and_prune_only_what_winfleet_manages(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_update_and_prune_against_the_in_memory_server() {
    let api = TestApi::start(Backend::InMemory).await;
    create_update_and_prune_only_what_winfleet_manages(&api).await;
}

/// `patch` of MachineSet `name` as field manager `manager`: a merge patch
/// (an Update, as `kubectl edit` writes) or a forced apply.
async fn change_as(api: &TestApi, name: &str, manager: &str, patch: Patch<Value>) {
    let params = match &patch {
        Patch::Apply(_) => PatchParams::apply(manager).force(),
        _ => PatchParams { field_manager: Some(manager.to_owned()), ..Default::default() },
    };
    machine_sets(api).patch(name, &params, &patch).await.unwrap();
}

fn instance_type(set: &Value) -> &Value {
    &set["spec"]["template"]["spec"]["providerSpec"]["value"]["instanceType"]
}

async fn another_managers_change_is_reported_and_never_overwritten(api: &TestApi) {
    let repo = Repo::new();
    machine_set(&repo, "winb", 1, "m5a.large", &[]);
    assert_eq!(actions(&round(api, &repo, false).await), ["winb Create"]);

    // An administrator's kubectl edit (an Update) of replicas, and another
    // tool's forced server-side apply of the instance type.
    change_as(api, "winb", "kubectl-edit", Patch::Merge(json!({"spec": {"replicas": 4}}))).await;
    let ops = json!({"apiVersion": MS, "kind": "MachineSet", "metadata": {"name": "winb", "namespace": MAPI},
                     "spec": {"template": {"spec": {"providerSpec": {"value": {"instanceType": "m6i.large"}}}}}});
    change_as(api, "winb", "ops-tool", Patch::Apply(ops)).await;
    let edited = get(api, "winb").await.unwrap();

    let plan = round(api, &repo, true).await;
    let expected = [
        "winb: /spec/replicas by \"kubectl-edit\" (Update)",
        "winb: /spec/template/spec/providerSpec/value/instanceType by \"ops-tool\" (Apply)",
    ];
    assert_eq!(conflicts(&plan), expected);
    assert_eq!(actions(&plan), Vec::<String>::new(), "a MachineSet with a conflict is not written at all");
    let text = plan.render_text();
    assert!(text.contains("MachineSet winb: ! conflict: 2 field(s) of MachineSet winb"), "{text}");
    assert!(text.contains("/spec/replicas owned by \"kubectl-edit\" (Update), live 4, repository 1"), "{text}");

    let report = round(api, &repo, false).await;
    assert_eq!(conflicts(&report), expected);
    let now = get(api, "winb").await.unwrap();
    assert_eq!(now["metadata"]["resourceVersion"], edited["metadata"]["resourceVersion"], "nothing overwritten");
    assert_eq!((now["spec"]["replicas"].clone(), instance_type(&now).clone()), (json!(4), json!("m6i.large")));
    let (phase, error) = status_of(&report, &repo, "winb");
    assert_eq!(phase, MachineSetPhase::Conflict);
    assert!(error.contains("/spec/replicas owned by \"kubectl-edit\" (Update), live 4, repository 1"), "{error}");
    assert!(error.contains("winfleet.io/force-fields"), "{error}");
    assert_eq!(events(api, "winb").await, ["MachineSetConflict", "MachineSetCreated"]);

    // Resolved one way: Git takes the administrator's replicas; the
    // instance type is still ops-tool's.
    machine_set(&repo, "winb", 4, "m5a.large", &[]);
    assert_eq!(conflicts(&round(api, &repo, true).await), [expected[1]]);

    // The other way: the repository says its values win. The take-over is
    // in the plan, the report and the Event.
    machine_set(&repo, "winb", 4, "m5a.large", &[("winfleet.io/force-fields", "true")]);
    let forced = round(api, &repo, false).await;
    assert_eq!(actions(&forced), ["winb Update"]);
    assert!(conflicts(&forced).is_empty());
    let text = forced.render_text();
    let taken = "takes over /spec/template/spec/providerSpec/value/instanceType owned by \"ops-tool\" (Apply), \
                 live \"m6i.large\", repository \"m5a.large\"";
    assert!(text.contains(taken), "{text}");
    let notes = event_notes(api, "winb").await;
    let (_, note) = notes.iter().find(|(reason, _)| reason == "MachineSetUpdated").unwrap();
    assert!(
        note.contains("took over /spec/template/spec/providerSpec/value/instanceType owned by \"ops-tool\""),
        "{note}"
    );
    let now = get(api, "winb").await.unwrap();
    assert_eq!((now["spec"]["replicas"].clone(), instance_type(&now).clone()), (json!(4), json!("m5a.large")));
    let managers: Vec<&str> =
        now["metadata"]["managedFields"].as_array().unwrap().iter().map(|m| m["manager"].as_str().unwrap()).collect();
    assert!(!managers.contains(&"ops-tool"), "ops-tool lost its only field: {managers:?}");

    // Clean: without the annotation again, nothing to do and no conflict.
    machine_set(&repo, "winb", 4, "m5a.large", &[]);
    let clean = round(api, &repo, false).await;
    assert!(conflicts(&clean).is_empty(), "{:?}", conflicts(&clean));
    assert_eq!(actions(&clean), ["winb Update"], "the annotation itself leaves");
    let again = round(api, &repo, true).await;
    assert!(conflicts(&again).is_empty() && actions(&again).is_empty());
    // (Not Ready: no Machine of it is a Node, which these tests do not run.)
    let (phase, error) = status_of(&again, &repo, "winb");
    assert!(phase != MachineSetPhase::Conflict && !error.contains("owned by"), "{phase:?} {error}");
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_managers_change_against_the_real_server() {
    let api = TestApi::start(Backend::Real).await;
    another_managers_change_is_reported_and_never_overwritten(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_managers_change_against_the_in_memory_server() {
    let api = TestApi::start(Backend::InMemory).await;
    another_managers_change_is_reported_and_never_overwritten(&api).await;
}

/// A field another manager changes between winfleet's observation and its
/// dry run: the API server's 409 becomes a conflict of the plan (not a
/// rejection of the whole cluster plan), and a write that meets one anyway
/// fails with a sentence that says whose field it is.
async fn a_conflict_the_server_finds_joins_the_plan(api: &TestApi) {
    let repo = Repo::new();
    machine_set(&repo, "winb", 1, "m5a.large", &[]);
    assert_eq!(actions(&round(api, &repo, false).await), ["winb Create"]);
    machine_set(&repo, "winb", 2, "m5a.large", &[]);
    let desired = repo.desired();
    let client = api.client();
    let facts = winfleet::cluster::observe::observe(&client).await.unwrap();
    let mut plan = cluster_apply::plan(std::iter::empty(), Some(&desired.machine_sets), &facts, &Default::default());
    let planned = plan.clone();
    assert!(matches!(&plan.machine_sets[..], [MachineSetStep::Apply { force: false, .. }]), "{plan:?}");

    change_as(api, "winb", "kubectl-edit", Patch::Merge(json!({"spec": {"replicas": 7}}))).await;
    let rejected = cluster_apply::dry_run(&client, &mut plan, &[], &facts.machine_sets).await;
    assert!(rejected.is_empty(), "{rejected:?}");
    let [MachineSetStep::Conflict(Conflict { fields, reason, .. })] = &plan.machine_sets[..] else {
        panic!("{plan:?}")
    };
    let shown: Vec<String> = fields.iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["/spec/replicas owned by \"kubectl-edit\" (Update), repository 2"]);
    assert!(reason.contains("winfleet.io/force-fields"), "{reason}");
    assert!(!plan.has_writes());

    let events = winfleet::cluster::events::Events::new(client.clone());
    let written = cluster_apply::write(&client, &events, &planned, &facts, &[]).await;
    let [report] = &written[..] else { panic!("{written:?}") };
    let failure = report.outcome.to_string();
    assert!(
        failure.contains("conflict: cannot patch machinesets openshift-machine-api/winb: another field manager owns"),
        "{failure}"
    );
    assert!(failure.contains("conflict with \"kubectl-edit\" using machine.openshift.io/v1beta1"), "{failure}");
    assert_eq!(get(api, "winb").await.unwrap()["spec"]["replicas"], 7, "not overwritten");
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_found_by_the_real_server_joins_the_plan() {
    let api = TestApi::start(Backend::Real).await;
    a_conflict_the_server_finds_joins_the_plan(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_found_by_the_in_memory_server_joins_the_plan() {
    let api = TestApi::start(Backend::InMemory).await;
    a_conflict_the_server_finds_joins_the_plan(&api).await;
}

/// Adoption takes over the fields of the MachineSet's creator once, and
/// says so; after that a change by someone else is a conflict again.
async fn adoption_takes_the_fields_over_once(api: &TestApi) {
    api.seed(fixtures::machine_set("theirs", 2, &[("owner", "someone-else")])).await;
    let repo = Repo::new();
    machine_set(&repo, "theirs", 5, "m5a.large", &[("winfleet.io/adopt", "true")]);
    let plan = round(api, &repo, true).await;
    assert_eq!(actions(&plan), ["theirs Update"]);
    let taken: Vec<String> =
        plan.cluster.as_ref().unwrap().machine_sets[0].taken_over.iter().map(|t| t.pointer.clone()).collect();
    assert!(taken.contains(&"/spec/replicas".to_owned()), "{taken:?}");
    assert!(plan.render_text().contains("takes over /spec/replicas owned by"), "{}", plan.render_text());

    round(api, &repo, false).await;
    let adopted = get(api, "theirs").await.unwrap();
    assert_eq!(adopted["spec"]["replicas"], 5);
    assert_eq!(adopted["metadata"]["labels"][MANAGED.0], MANAGED.1);
    assert_eq!(adopted["metadata"]["labels"]["owner"], "someone-else", "a field the repository leaves out stays");

    change_as(api, "theirs", "kubectl-edit", Patch::Merge(json!({"spec": {"replicas": 6}}))).await;
    let plan = round(api, &repo, true).await;
    assert_eq!(conflicts(&plan), ["theirs: /spec/replicas by \"kubectl-edit\" (Update)"]);
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adoption_against_the_real_server() {
    let api = TestApi::start(Backend::Real).await;
    adoption_takes_the_fields_over_once(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adoption_against_the_in_memory_server() {
    let api = TestApi::start(Backend::InMemory).await;
    adoption_takes_the_fields_over_once(&api).await;
}

/// An autoscaler (or `kubectl scale`) writes replicas through the `scale`
/// subresource: a repository that sets replicas conflicts with it, named
/// with its subresource; a repository that leaves replicas out leaves them
/// to it, and nothing conflicts.
async fn the_scale_subresource_owns_replicas(api: &TestApi) {
    let repo = Repo::new();
    machine_set(&repo, "winb", 1, "m5a.large", &[]);
    assert_eq!(actions(&round(api, &repo, false).await), ["winb Create"]);
    let autoscaler = PatchParams { field_manager: Some("cluster-autoscaler".into()), ..Default::default() };
    let three = Patch::Merge(json!({"spec": {"replicas": 3}}));
    let scaled = machine_sets(api).patch_scale("winb", &autoscaler, &three).await.unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(3));
    let entries = get(api, "winb").await.unwrap()["metadata"]["managedFields"].clone();
    let scale = entries.as_array().unwrap().iter().find(|e| e["manager"] == "cluster-autoscaler").unwrap();
    assert_eq!((scale["operation"].as_str(), scale["subresource"].as_str()), (Some("Update"), Some("scale")));
    assert_eq!(scale["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));

    let plan = round(api, &repo, true).await;
    assert_eq!(conflicts(&plan), ["winb: /spec/replicas by \"cluster-autoscaler\" (Update, subresource scale)"]);

    let text = std::fs::read_to_string(support::root().join("examples-repo/machinesets/winworker-aws.yaml")).unwrap();
    repo.write(
        "machinesets/winb.yaml",
        &text.replace("prod-7xk2p-windows-us-east-1a", "winb").replace("  replicas: 1\n", ""),
    );
    let report = round(api, &repo, false).await;
    assert!(conflicts(&report).is_empty(), "{:?}", conflicts(&report));
    assert_eq!(get(api, "winb").await.unwrap()["spec"]["replicas"], 3, "the autoscaler's");
    let again = round(api, &repo, true).await;
    assert!(conflicts(&again).is_empty() && actions(&again).is_empty(), "{again:#?}");
}

#[ignore = "needs the real control plane (Go builds it): scripts/test.sh runs it"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scale_subresource_against_the_real_server() {
    let api = TestApi::start(Backend::Real).await;
    the_scale_subresource_owns_replicas(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scale_subresource_against_the_in_memory_server() {
    let api = TestApi::start(Backend::InMemory).await;
    the_scale_subresource_owns_replicas(&api).await;
}
