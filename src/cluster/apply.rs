//! The cluster plan (pure) and its application: every write first sent with
//! `dryRun=All`; any rejection aborts the plan's writes (MachineSets and
//! Node metadata) before any of them is made. Then each write for real,
//! with an Event for each change and failure. A failing write never stops
//! the others.
//!
//! A Node patch that meets a 409 (the Node changed since the round
//! observed it: its kubelet's status updates) is no rejection: that Node
//! alone is read and planned again ([`super::replan`]), in the dry run and
//! in the write.
//!
//! MachineSets are applied without force unless the plan says so: a field
//! conflict the API server finds in the dry run (409, `FieldManagerConflict`
//! causes) that the plan did not foresee turns that MachineSet's step into a
//! conflict of the plan, and the other writes go on.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use serde::Serialize;
use serde_json::Value;

use super::associate::Association;
use super::events::{Events, Reason, Regarding};
use super::machinesets::defaults;
use super::machinesets::ownership::{self, FieldConflict};
use super::machinesets::{Conflict, MachineSetStep, plan_machine_sets};
use super::metadata::{NodeMetadataPlan, plan_node_metadata};
use super::observe::machine_set_resource;
use super::replan;
use super::{ClusterFacts, FIELD_MANAGER, MACHINE_API_NAMESPACE};
use crate::desired::model::{Instance, MachineSetDesired};
use crate::node::outcome::Outcome;
use crate::plan::fields::FieldChange;

/// Everything the cluster part of a round would write.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterPlan {
    /// MachineSet steps, by name.
    pub machine_sets: Vec<MachineSetStep>,
    /// Node metadata patches, by node name.
    pub nodes: Vec<NodeMetadataPlan>,
    /// Node patches left for the next round (the Node kept changing while
    /// it was planned again), with why.
    pub left: Vec<(NodeMetadataPlan, String)>,
    /// What the API server sets differently from each MachineSet apply,
    /// as its dry run answered ([`defaults::defaulted`]; by name).
    pub defaulted: BTreeMap<String, Vec<FieldChange>>,
}

impl ClusterPlan {
    /// Whether anything would be written (conflicts are reported, not written).
    pub fn has_writes(&self) -> bool {
        !self.nodes.is_empty() || self.machine_sets.iter().any(|s| !matches!(s, MachineSetStep::Conflict(_)))
    }
}

/// Plans the cluster side. Pure. `machine_sets` is `None` when the round
/// covers only some nodes (`--nodes`): MachineSets are then out of scope,
/// neither applied nor pruned.
pub fn plan<'a>(
    instances: impl IntoIterator<Item = &'a Instance>,
    machine_sets: Option<&BTreeMap<String, MachineSetDesired>>,
    facts: &ClusterFacts,
    associations: &BTreeMap<String, Association>,
) -> ClusterPlan {
    let mut nodes: Vec<NodeMetadataPlan> = instances
        .into_iter()
        .filter_map(|instance| {
            let node = facts.nodes.get(associations.get(&instance.address)?.node()?)?;
            plan_node_metadata(instance, node)
        })
        .collect();
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    let machine_sets = machine_sets.map(|m| plan_machine_sets(m, &facts.machine_sets)).unwrap_or_default();
    ClusterPlan { machine_sets, nodes, left: Vec::new(), defaulted: BTreeMap::new() }
}

/// The outcome of one cluster write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteReport {
    /// `MachineSet/<name>` or `Node/<name>`.
    pub target: String,
    /// Applied or failed with the API's words.
    #[serde(flatten)]
    pub outcome: Outcome,
}

enum Write<'p> {
    MachineSet(&'p MachineSetStep),
    Node(&'p NodeMetadataPlan),
}

impl Write<'_> {
    /// The failed request as a sentence naming its verb and object.
    fn failure(&self, e: &kube::Error) -> String {
        let (verb, resource, object) = match self {
            Write::MachineSet(MachineSetStep::Delete { change, .. }) => {
                ("delete", "machinesets", format!("{MACHINE_API_NAMESPACE}/{}", change.name))
            }
            Write::MachineSet(step) => ("patch", "machinesets", format!("{MACHINE_API_NAMESPACE}/{}", step.name())),
            Write::Node(plan) => ("patch", "nodes", plan.node.clone()),
        };
        super::fault::describe(e, Some(&super::fault::Request { verb, resource, object: Some(&object) }))
    }

    fn target(&self) -> String {
        match self {
            Write::MachineSet(step) => format!("MachineSet/{}", step.name()),
            Write::Node(plan) => format!("Node/{}", plan.node),
        }
    }
}

fn writes(plan: &ClusterPlan) -> Vec<Write<'_>> {
    let sets = plan.machine_sets.iter().filter(|s| !matches!(s, MachineSetStep::Conflict(_)));
    sets.map(Write::MachineSet).chain(plan.nodes.iter().map(Write::Node)).collect()
}

/// A failed request as a plain sentence ([`super::fault`]); the verb and
/// resource of an RBAC denial come from the server's words.
pub fn api_error(e: &kube::Error) -> String {
    super::fault::describe(e, None)
}

/// Sends one write; a MachineSet apply answers the object as stored (or as it would be).
async fn send(client: &Client, write: &Write<'_>, dry_run: bool) -> Result<Option<Value>, kube::Error> {
    match write {
        Write::MachineSet(MachineSetStep::Apply { change, object, force, .. }) => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), MACHINE_API_NAMESPACE, &machine_set_resource());
            let mut params = PatchParams::apply(FIELD_MANAGER);
            params.force = *force;
            params.dry_run = dry_run;
            let answer = api.patch(&change.name, &params, &Patch::Apply(object)).await?;
            Ok(serde_json::to_value(answer).ok())
        }
        Write::MachineSet(MachineSetStep::Delete { change, uid }) => {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), MACHINE_API_NAMESPACE, &machine_set_resource());
            let params = DeleteParams {
                dry_run,
                preconditions: Some(Preconditions { uid: Some(uid.clone()), resource_version: None }),
                ..DeleteParams::default()
            };
            api.delete(&change.name, &params).await.map(|_| None)
        }
        Write::MachineSet(MachineSetStep::Conflict(_)) => Ok(None),
        Write::Node(plan) => {
            let api: Api<Node> = Api::all(client.clone());
            let params = PatchParams { dry_run, field_manager: Some(FIELD_MANAGER.into()), ..PatchParams::default() };
            api.patch(&plan.node, &params, &Patch::Merge(&plan.patch)).await.map(|_| None)
        }
    }
}

/// Sends every write with `dryRun=All`; returns the rejections (empty:
/// the plan may be written). What the server sets differently from each
/// MachineSet apply it accepts is recorded ([`ClusterPlan::defaulted`]).
/// A MachineSet apply the API server refuses
/// for a field conflict becomes a conflict of the plan, not a rejection;
/// a Node that changed since it was observed is planned again from the
/// Node as it is now (`instances` are the plan's), or left for the next
/// round ([`ClusterPlan::left`]). `live` are the MachineSets as observed
/// (by name).
pub async fn dry_run(
    client: &Client,
    plan: &mut ClusterPlan,
    instances: &[&Instance],
    live: &BTreeMap<String, Value>,
) -> Vec<WriteReport> {
    let writes = writes(plan);
    let results = futures::future::join_all(writes.iter().map(|w| send(client, w, true))).await;
    let mut rejected = Vec::new();
    let mut conflicts = Vec::new();
    let mut moved = Vec::new();
    let mut defaulted = BTreeMap::new();
    for (w, result) in writes.iter().zip(results) {
        let answer = match result {
            Ok(answer) => answer,
            Err(e) => {
                match (w, field_conflicts(w, &e)) {
                    (Write::MachineSet(step), Some(fields)) => conflicts.push(Conflict::of_fields(step.name(), fields)),
                    (Write::Node(node), _) if replan::moved(&e) => moved.push(node.node.clone()),
                    _ => rejected.push(WriteReport { target: w.target(), outcome: Outcome::Failed(w.failure(&e)) }),
                }
                continue;
            }
        };
        if let (Write::MachineSet(MachineSetStep::Apply { change, object, .. }), Some(answer)) = (w, answer) {
            let fields = defaults::defaulted(object, &answer, live.get(&change.name));
            if !fields.is_empty() {
                defaulted.insert(change.name.clone(), fields);
            }
        }
    }
    plan.defaulted = defaulted;
    for conflict in conflicts {
        if let Some(step) = plan.machine_sets.iter_mut().find(|s| s.name() == conflict.name) {
            *step = MachineSetStep::Conflict(conflict);
        }
    }
    for name in moved {
        rejected.extend(dry_run_again(client, plan, &name, instances).await);
    }
    rejected
}

/// The dry run of a Node that changed since it was observed, planned
/// again from the Node as it is now (up to [`replan::REPLANS`] times):
/// its rejection, if the new patch is refused for another reason.
async fn dry_run_again(
    client: &Client,
    plan: &mut ClusterPlan,
    name: &str,
    instances: &[&Instance],
) -> Option<WriteReport> {
    let i = plan.nodes.iter().position(|n| n.node == name)?;
    for _ in 0..replan::REPLANS {
        let write = Write::Node(&plan.nodes[i]);
        let rejection =
            |e: &kube::Error| WriteReport { target: write.target(), outcome: Outcome::Failed(write.failure(e)) };
        let fresh = match replan::replan(client, &plan.nodes[i], instances).await {
            Ok(fresh) => fresh,
            Err(e) => return Some(rejection(&e)),
        };
        let Some(fresh) = fresh else {
            plan.nodes.remove(i);
            return None;
        };
        plan.nodes[i] = fresh;
        let write = Write::Node(&plan.nodes[i]);
        match send(client, &write, true).await {
            Ok(_) => return None,
            Err(e) if replan::moved(&e) => continue,
            Err(e) => return Some(WriteReport { target: write.target(), outcome: Outcome::Failed(write.failure(&e)) }),
        }
    }
    let node = plan.nodes.remove(i);
    plan.left.push((node, replan::left_reason()));
    None
}

/// The field conflicts of an unforced MachineSet apply's 409.
fn field_conflicts(write: &Write<'_>, e: &kube::Error) -> Option<Vec<FieldConflict>> {
    let Write::MachineSet(MachineSetStep::Apply { object, force: false, .. }) = write else { return None };
    let causes = super::fault::field_conflicts(e);
    let fields = ownership::from_causes(causes.iter().map(|(f, m)| (f.as_str(), m.as_str())), object);
    (!fields.is_empty()).then_some(fields)
}

/// Writes the plan (after a clean dry run), one Event per change or
/// failure; a Node that changed since the dry run is planned again
/// (`instances` are the plan's).
pub async fn write(
    client: &Client,
    events: &Events,
    plan: &ClusterPlan,
    facts: &ClusterFacts,
    instances: &[&Instance],
) -> Vec<WriteReport> {
    let mut reports = Vec::new();
    for step in &plan.machine_sets {
        if let MachineSetStep::Conflict(Conflict { name, reason, .. }) = step {
            let uid = uid_of(facts, name);
            events.publish(Regarding::MachineSet(name, &uid), Reason::MachineSetConflict, reason.clone()).await;
        }
    }
    for write in writes(plan) {
        let target = write.target();
        let (written, outcome) = match write {
            Write::Node(node) => write_node(client, node, instances).await,
            _ => (
                None,
                send(client, &write, false)
                    .await
                    .map_or_else(|e| Outcome::Failed(write.failure(&e)), |_| Outcome::Applied),
            ),
        };
        let write = match &written {
            Some(node) => Write::Node(node),
            None => write,
        };
        match write {
            Write::MachineSet(step) => {
                let name = step.name();
                let uid = uid_of(facts, name);
                let (reason, note) = match (step, &outcome) {
                    (_, Outcome::Failed(e)) => {
                        (Reason::MachineSetFailed, format!("cannot write MachineSet {name}: {e}"))
                    }
                    (MachineSetStep::Delete { .. }, _) => {
                        (Reason::MachineSetDeleted, format!("deleted MachineSet {name}: it left the repository"))
                    }
                    (MachineSetStep::Apply { change, taken_over, .. }, _) => {
                        let what = crate::plan::replicas_text(change, "->").unwrap_or_default();
                        match change.action {
                            crate::plan::MachineSetAction::Create => {
                                (Reason::MachineSetCreated, format!("created MachineSet {name} {what}"))
                            }
                            _ => (
                                Reason::MachineSetUpdated,
                                format!("updated {} field(s) of MachineSet {name} {what}", change.fields.len())
                                    .trim_end()
                                    .to_owned()
                                    + &taken_note(taken_over),
                            ),
                        }
                    }
                    (MachineSetStep::Conflict(_), _) => continue,
                };
                events.publish(Regarding::MachineSet(name, &uid), reason, note.trim_end().to_owned()).await;
            }
            Write::Node(plan) => {
                let uid = facts.nodes.get(&plan.node).map(|n| n.uid.clone()).unwrap_or_default();
                let (reason, note) = match &outcome {
                    Outcome::Failed(e) => (Reason::NodeMetadataFailed, format!("cannot update Node metadata: {e}")),
                    Outcome::Unchanged => {
                        reports.push(WriteReport { target, outcome });
                        continue;
                    }
                    Outcome::Applied => (Reason::NodeMetadataUpdated, metadata_note(plan)),
                };
                events.publish(Regarding::Node(&plan.node, &uid), reason, note).await;
            }
        }
        reports.push(WriteReport { target, outcome });
    }
    reports
}

/// Writes one Node's patch; a Node that changed since it was planned is
/// read and planned again (up to [`replan::REPLANS`] times). The plan as
/// written when it was planned again, and the outcome (`Unchanged`: the
/// Node needed nothing any more).
async fn write_node(
    client: &Client,
    node: &NodeMetadataPlan,
    instances: &[&Instance],
) -> (Option<NodeMetadataPlan>, Outcome) {
    let mut current: Option<NodeMetadataPlan> = None;
    for _ in 0..=replan::REPLANS {
        let plan = current.as_ref().unwrap_or(node);
        let write = Write::Node(plan);
        let failure = match send(client, &write, false).await {
            Ok(_) => return (current, Outcome::Applied),
            Err(e) if replan::moved(&e) => match replan::replan(client, plan, instances).await {
                Ok(Some(fresh)) => {
                    current = Some(fresh);
                    continue;
                }
                Ok(None) => return (current, Outcome::Unchanged),
                Err(e) => write.failure(&e),
            },
            Err(e) => write.failure(&e),
        };
        return (current, Outcome::Failed(failure));
    }
    (current, Outcome::Failed(replan::left_reason()))
}

/// `; took over <field> owned by <manager>, …` for a forced apply.
fn taken_note(taken_over: &[FieldConflict]) -> String {
    if taken_over.is_empty() {
        return String::new();
    }
    let fields: Vec<String> = taken_over.iter().map(ToString::to_string).collect();
    format!("; took over {}", fields.join("; "))
}

fn uid_of(facts: &ClusterFacts, name: &str) -> String {
    facts
        .machine_sets
        .get(name)
        .and_then(|o| o.pointer("/metadata/uid"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn metadata_note(plan: &NodeMetadataPlan) -> String {
    let changes: Vec<String> = plan
        .changes
        .iter()
        .map(|c| match &c.to {
            Some(v) => format!("{}={v}", c.setting),
            None => format!("{} removed", c.setting),
        })
        .collect();
    if changes.is_empty() {
        format!("recorded the keys winfleet manages for instance {}", plan.instance)
    } else {
        format!("instance {}: {}", plan.instance, changes.join(", "))
    }
}
