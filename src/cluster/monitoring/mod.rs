//! Windows node monitoring (issue 27, item 5): winfleet keeps the Service,
//! Endpoints and ServiceMonitor WMCO's metric controller kept for
//! windows_exporter, and its namespace's cluster-monitoring label, at the
//! end of every cluster round. The thin shell: read ([`observe`]), plan
//! ([`plan::plan`], pure), write by server-side apply ([`keep`]).
//!
//! Only when the cluster serves ServiceMonitors (`monitoring.coreos.com/v1`);
//! otherwise, and when winfleet's namespace is missing or its label is
//! turned off, it says so once (again only when the reason changes).

pub mod plan;

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Endpoints, Namespace, Node, Service};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::FIELD_MANAGER;
use super::apply::api_error;
use super::observe::WINDOWS_NODES;
use plan::{MONITORING_LABEL, NAME, Observed, Plan, Write};

/// The pod's namespace file (the service account's), read for winfleet's
/// own namespace.
const POD_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
/// winfleet's namespace outside a pod (deploy/'s).
pub const DEFAULT_NAMESPACE: &str = "winfleet";

/// What the monitoring step did in one round.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Kept {
    /// The writes made (or, in a dry run, that would be made), described.
    pub writes: Vec<String>,
    /// Why nothing is kept, when nothing is.
    pub note: Option<String>,
    /// A read or write that failed.
    pub error: Option<String>,
}

/// winfleet's namespace: the pod's, else [`DEFAULT_NAMESPACE`].
pub fn namespace() -> String {
    std::fs::read_to_string(POD_NAMESPACE_FILE)
        .ok()
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned())
}

fn service_monitor_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("monitoring.coreos.com", "v1", "ServiceMonitor"),
        "servicemonitors",
    )
}

/// Reads what the plan needs; `Ok` with `service_monitor_served: false`
/// (and nothing else read) when the cluster does not serve the kind.
pub async fn observe(client: &Client, namespace: &str) -> Result<Observed, String> {
    let monitors: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &service_monitor_resource());
    // Listing an unserved kind is 404; a served one lists, even empty.
    match monitors.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Observed::default()),
        Err(e) => return Err(format!("cannot list ServiceMonitors in {namespace}: {}", api_error(&e))),
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let labels = match namespaces.get_opt(namespace).await {
        Ok(found) => found.map(|n| n.labels().clone()),
        Err(e) => return Err(format!("cannot read Namespace {namespace}: {}", api_error(&e))),
    };
    let mut observed = Observed { namespace_labels: labels, service_monitor_served: true, ..Observed::default() };
    if observed.namespace_labels.is_none() {
        return Ok(observed);
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let nodes = nodes.list(&ListParams::default().labels(WINDOWS_NODES)).await.map_err(|e| api_error(&e))?;
    observed.nodes = nodes.items.iter().filter_map(|n| serde_json::to_value(n).ok()).collect();
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), namespace);
    let (service, endpoints, monitor) =
        futures::try_join!(services.get_opt(NAME), endpoints.get_opt(NAME), monitors.get_opt(NAME))
            .map_err(|e| format!("cannot read the {NAME} objects in {namespace}: {}", api_error(&e)))?;
    observed.service = service.and_then(|s| serde_json::to_value(s).ok());
    observed.endpoints = endpoints.and_then(|e| serde_json::to_value(e).ok());
    observed.service_monitor = monitor.and_then(|m| serde_json::to_value(m).ok());
    Ok(observed)
}

/// One round's monitoring step: observe, plan, and (unless `dry_run`)
/// write. Logs what it did; a reason for keeping nothing is logged once.
pub async fn keep(client: &Client, dry_run: bool) -> Kept {
    let namespace = namespace();
    let mut kept = Kept::default();
    let observed = match observe(client, &namespace).await {
        Ok(observed) => observed,
        Err(e) => {
            tracing::warn!(error = %e, "Windows node monitoring: cannot read the cluster; tried again next round");
            kept.error = Some(e);
            return kept;
        }
    };
    let note = match plan::plan(&namespace, &observed) {
        Plan::Writes(writes) => {
            let left_out = plan::left_out(&observed.nodes);
            if !left_out.is_empty() {
                let names: Vec<String> = left_out.iter().map(|(node, ip)| format!("{node} ({ip})")).collect();
                say_once(&format!(
                    "Windows Nodes left out of Endpoints {namespace}/{NAME} (the API server refuses loopback and \
                     link-local addresses there; their windows_exporter is not scraped): {}",
                    names.join(", ")
                ));
            }
            return write_all(client, &namespace, &writes, dry_run, left_out.is_empty()).await;
        }
        Plan::NotServed => "the cluster does not serve ServiceMonitors (monitoring.coreos.com/v1): \
                            Windows node metrics are not set up for scraping"
            .to_owned(),
        Plan::NoNamespace => format!("namespace {namespace} does not exist: Windows node monitoring is not kept"),
        Plan::Disabled(value) => {
            format!("namespace {namespace} has {MONITORING_LABEL}={value}: Windows node monitoring is turned off")
        }
    };
    say_once(&note);
    kept.note = Some(note);
    kept
}

/// Sends the plan's writes in order (none in a dry run); the first
/// failure stops the rest until the next round.
async fn write_all(client: &Client, namespace: &str, writes: &[Write], dry_run: bool, all_in: bool) -> Kept {
    let mut kept = Kept::default();
    if all_in {
        say_once("");
    }
    for write in writes {
        let what = write.describe(namespace);
        if dry_run {
            tracing::info!("Windows node monitoring: would {what}");
        } else if let Err(e) = send(client, namespace, write).await {
            let e = format!("cannot {what}: {}", api_error(&e));
            tracing::warn!(error = %e, "Windows node monitoring");
            kept.error = Some(e);
            return kept;
        } else {
            tracing::info!("Windows node monitoring: {what}");
        }
        kept.writes.push(what);
    }
    kept
}

async fn send(client: &Client, namespace: &str, write: &Write) -> Result<(), kube::Error> {
    match write {
        Write::LabelNamespace => {
            let namespaces: Api<Namespace> = Api::all(client.clone());
            let patch = json!({"metadata": {"labels": {MONITORING_LABEL: "true"}}});
            namespaces.patch(namespace, &crate::cluster::patch_params(), &Patch::Merge(&patch)).await.map(drop)
        }
        Write::Apply(object) => {
            let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
            let resource = match kind {
                "Service" => ApiResource::erase::<Service>(&()),
                "Endpoints" => ApiResource::erase::<Endpoints>(&()),
                _ => service_monitor_resource(),
            };
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
            api.patch(NAME, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(object)).await.map(drop)
        }
    }
}

/// The last reason logged for keeping nothing: said once, again only when
/// it changes.
static SAID: Mutex<Option<String>> = Mutex::new(None);

fn say_once(note: &str) {
    let Ok(mut said) = SAID.lock() else { return };
    if said.as_deref() == Some(note) {
        return;
    }
    if !note.is_empty() {
        tracing::warn!("{note}");
    }
    *said = Some(note.to_owned());
}

/// The Windows Nodes' InternalIPs the Endpoints hold now, by Node name (for
/// tests and diagnostics).
pub fn endpoint_addresses(endpoints: &Value) -> BTreeMap<String, String> {
    plan::addresses(endpoints)
        .into_iter()
        .filter_map(|a| {
            let node = a.pointer("/targetRef/name").and_then(Value::as_str)?;
            Some((node.to_owned(), a.get("ip").and_then(Value::as_str)?.to_owned()))
        })
        .collect()
}
