//! Reads the worker pool's rendered MachineConfig
//! (`machineconfiguration.openshift.io/v1`), parsed by
//! [`crate::lifecycle::ignition`] into what a Windows node takes from it
//! (issue 36).
//!
//! Which one (docs/wmco-spec.md decision 15): the MachineConfig the
//! MachineConfigPool `worker` names in `status.configuration.name` (the
//! configuration every Linux worker runs) when the pool exists and names
//! one; else WMCO's rule (`getLatestRenderedWorker`): the newest
//! `rendered-worker-*` MachineConfig, by `creationTimestamp`, with a
//! non-empty `spec.config`. A cluster that has neither (no Machine Config
//! Operator, a cluster that does not serve the kinds) gives no file.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use super::apply::api_error;
use crate::lifecycle::ignition::{RenderedWorker, parse};

/// The pool whose configuration Windows workers follow.
pub const WORKER_POOL: &str = "worker";
/// The prefix of the worker pool's rendered MachineConfigs.
pub const RENDERED_WORKER_PREFIX: &str = "rendered-worker-";

fn resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("machineconfiguration.openshift.io", "v1", kind), plural)
}

/// The MachineConfig resource.
pub fn machine_config_resource() -> ApiResource {
    resource("MachineConfig", "machineconfigs")
}

/// The MachineConfigPool resource.
pub fn machine_config_pool_resource() -> ApiResource {
    resource("MachineConfigPool", "machineconfigpools")
}

/// One MachineConfig as [`newest_rendered_worker`] weighs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// Its name.
    pub name: &'a str,
    /// `metadata.creationTimestamp`, in seconds.
    pub created: i64,
    /// Whether `spec.config` is a non-empty object.
    pub has_config: bool,
}

/// WMCO's rule: the newest `rendered-worker-*` with a config (the greater
/// name between two of the same second, so the choice is stable). Pure.
pub fn newest_rendered_worker<'a>(candidates: &[Candidate<'a>]) -> Option<&'a str> {
    candidates
        .iter()
        .filter(|c| c.name.starts_with(RENDERED_WORKER_PREFIX) && c.has_config)
        .max_by(|a, b| (a.created, a.name).cmp(&(b.created, b.name)))
        .map(|c| c.name)
}

fn has_config(data: &Value) -> bool {
    data.pointer("/spec/config").and_then(Value::as_object).is_some_and(|c| !c.is_empty())
}

/// Reads the pool's rendered MachineConfig; `None` when the cluster has
/// none. The error names the object that failed.
pub async fn read(client: &Client) -> Result<Option<RenderedWorker>, String> {
    let configs: Api<DynamicObject> = Api::all_with(client.clone(), &machine_config_resource());
    let pools: Api<DynamicObject> = Api::all_with(client.clone(), &machine_config_pool_resource());
    let pool = match pools.get_opt(WORKER_POOL).await {
        Ok(pool) => pool,
        Err(kube::Error::Api(e)) if e.code == 404 => None,
        Err(e) => return Err(format!("cannot read MachineConfigPool {WORKER_POOL}: {}", api_error(&e))),
    };
    let named = pool.as_ref().and_then(|p| p.data.pointer("/status/configuration/name")).and_then(Value::as_str);
    if let Some(name) = named.filter(|n| !n.is_empty()) {
        let chosen_by = format!("MachineConfigPool {WORKER_POOL}'s status.configuration");
        let config = match configs.get_opt(name).await {
            Ok(Some(config)) => config,
            Ok(None) => {
                return Err(format!("MachineConfigPool {WORKER_POOL} runs MachineConfig {name}, which is not found"));
            }
            Err(e) => return Err(format!("cannot read MachineConfig {name}: {}", api_error(&e))),
        };
        let spec = config.data.pointer("/spec/config").cloned().unwrap_or(Value::Null);
        return parse(name, &chosen_by, &spec).map(Some);
    }
    let list = match configs.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(None),
        Err(e) => return Err(format!("cannot list MachineConfigs: {}", api_error(&e))),
    };
    let candidates: Vec<Candidate<'_>> = list
        .iter()
        .filter_map(|mc| {
            Some(Candidate {
                name: mc.metadata.name.as_deref()?,
                created: mc.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
                has_config: has_config(&mc.data),
            })
        })
        .collect();
    let Some(name) = newest_rendered_worker(&candidates) else { return Ok(None) };
    let spec = list
        .iter()
        .find(|mc| mc.metadata.name.as_deref() == Some(name))
        .and_then(|mc| mc.data.pointer("/spec/config"))
        .cloned()
        .unwrap_or(Value::Null);
    parse(name, &format!("the newest {RENDERED_WORKER_PREFIX}* MachineConfig, as WMCO chooses"), &spec).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wmcos_rule_takes_the_newest_rendered_worker_with_a_config() {
        let c = |name, created, has_config| Candidate { name, created, has_config };
        let all = [
            c("rendered-worker-old", 100, true),
            c("rendered-worker-new", 300, true),
            c("rendered-worker-empty", 400, false),
            c("rendered-master-newest", 500, true),
            c("99-worker-ssh", 600, true),
            c("rendered-worker-b", 300, true),
        ];
        assert_eq!(newest_rendered_worker(&all), Some("rendered-worker-new"));
        assert_eq!(newest_rendered_worker(&all[..2]), Some("rendered-worker-new"));
        assert_eq!(newest_rendered_worker(&all[2..5]), None);
    }
}
