//! The cluster's own Proxy `cluster` and mirror sets (issue 27, item 4):
//! read every round, followed when the Fleet's `spec.sources` says
//! `cluster` (as WMCO does: its registry controller watches the
//! ImageDigestMirrorSets and ImageTagMirrorSets, and the Proxy drives its
//! nodes' proxy variables), compared with the repository's otherwise
//! ([`super::disagree`]).
//!
//! The cluster's objects go through the repository's own rules (typed
//! parse, proxy URL checks, mirror syntax, merge per registry), so a node
//! gets from a cluster object exactly what it would get from the same
//! object committed. What the rules refuse is an error naming the object.
//!
//! A failed read keeps what was last read in this process (an API outage
//! must not strip the nodes' mirrors or proxy); with nothing read yet, a
//! round that follows the cluster changes no node (see [`Followed`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::{Value, json};

use super::apply::api_error;
use super::observe::proxy_resource;
use crate::desired::kinds::fleet::ConfigSource;
use crate::desired::model::{Desired, Instance, with_rebuilt_specs};
use crate::desired::{Doc, rules};
use crate::diagnostic::Diagnostic;
use crate::node::registry_dir_name;
use crate::render::hosts_toml;
use crate::render::mirrors::RegistryMirrors;

/// `config.openshift.io/v1` ImageDigestMirrorSet.
pub fn digest_mirror_set_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("config.openshift.io", "v1", "ImageDigestMirrorSet");
    ApiResource::from_gvk_with_plural(&gvk, "imagedigestmirrorsets")
}

/// `config.openshift.io/v1` ImageTagMirrorSet.
pub fn tag_mirror_set_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "ImageTagMirrorSet"),
        "imagetagmirrorsets",
    )
}

/// One cluster object's `spec` and UID (for Events about it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConfigObject {
    /// `metadata.uid`.
    pub uid: String,
    /// `spec` (an empty object when it has none).
    pub spec: Value,
}

/// The cluster's Proxy `cluster` and mirror sets as read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterConfig {
    /// Proxy `cluster`, when the cluster has one.
    pub proxy: Option<ConfigObject>,
    /// Every ImageDigestMirrorSet and ImageTagMirrorSet by `Kind/name`.
    pub mirror_sets: BTreeMap<String, ConfigObject>,
}

/// What was last read in this process.
static LAST: Mutex<Option<ClusterConfig>> = Mutex::new(None);

/// Reads the Proxy `cluster` and every mirror set. A cluster that does not
/// serve one of those kinds (404) has none of it.
pub async fn read(client: &Client) -> Result<ClusterConfig, String> {
    let proxies: Api<DynamicObject> = Api::all_with(client.clone(), &proxy_resource());
    let proxy = match proxies.get_opt("cluster").await {
        Ok(found) => found.map(|p| object(&p)),
        Err(kube::Error::Api(e)) if e.code == 404 => None,
        Err(e) => return Err(format!("cannot read Proxy cluster: {}", api_error(&e))),
    };
    let mut mirror_sets = BTreeMap::new();
    for (kind, resource) in
        [("ImageDigestMirrorSet", digest_mirror_set_resource()), ("ImageTagMirrorSet", tag_mirror_set_resource())]
    {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let items = match api.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(kube::Error::Api(e)) if e.code == 404 => Vec::new(),
            Err(e) => return Err(format!("cannot list the cluster's {kind}s: {}", api_error(&e))),
        };
        for item in &items {
            let name = item.metadata.name.clone().unwrap_or_default();
            mirror_sets.insert(format!("{kind}/{name}"), object(item));
        }
    }
    Ok(ClusterConfig { proxy, mirror_sets })
}

fn object(o: &DynamicObject) -> ConfigObject {
    ConfigObject {
        uid: o.metadata.uid.clone().unwrap_or_default(),
        spec: o.data.get("spec").cloned().unwrap_or_else(|| json!({})),
    }
}

/// The round's view of the cluster's objects.
#[derive(Clone, Debug, Default)]
pub struct Read {
    /// Read this round: what the comparison uses.
    pub fresh: Option<ClusterConfig>,
    /// Read this round, or else last read in this process: what a round
    /// that follows the cluster renders.
    pub usable: Option<ClusterConfig>,
    /// Why this round's read failed.
    pub error: Option<String>,
}

/// Reads the cluster's objects (when `reachable`), remembering them.
pub async fn for_round(client: &Client, reachable: bool) -> Read {
    let result = if reachable { read(client).await } else { Err("the cluster could not be read".to_owned()) };
    match result {
        Ok(config) => {
            if let Ok(mut last) = LAST.lock() {
                *last = Some(config.clone());
            }
            Read { fresh: Some(config.clone()), usable: Some(config), error: None }
        }
        Err(error) => {
            let usable = LAST.lock().ok().and_then(|last| last.clone());
            Read { fresh: None, usable, error: Some(error) }
        }
    }
}

/// Whether the Fleet follows the cluster for the proxy or the mirrors.
pub fn follows_cluster(desired: &Desired) -> bool {
    desired.fleet.proxy_source == ConfigSource::Cluster || desired.fleet.mirrors_source == ConfigSource::Cluster
}

/// What a round that follows the cluster renders from it (pure).
#[derive(Clone, Debug, Default)]
pub struct Followed {
    /// The mirror sets merged per registry (the repository's with
    /// `spec.sources.mirrors: repository`).
    pub registries: Vec<RegistryMirrors>,
    /// The instances with their specs rebuilt from the cluster's objects.
    pub instances: Vec<Instance>,
}

/// The instances' specs with the proxy and mirrors the Fleet says come from
/// the cluster, from `config`. `Err` says why no node can be rendered (the
/// round then changes none).
pub fn follow(desired: &Desired, instances: &[&Instance], config: Option<&ClusterConfig>) -> Result<Followed, String> {
    let fleet = &desired.fleet;
    let Some(config) = config else {
        return Err("the Fleet's spec.sources follows the cluster, and the cluster's Proxy and mirror sets have \
                    not been read: no node is changed until they are"
            .to_owned());
    };
    let mut registries = desired.registries.clone();
    let mut environment = None;
    if fleet.mirrors_source == ConfigSource::Cluster {
        registries = cluster_registries(config)?;
    }
    if fleet.proxy_source == ConfigSource::Cluster {
        environment = Some(cluster_environment(config)?);
    }
    let instances = with_rebuilt_specs(instances, |spec| {
        if spec.leaving {
            return Arc::clone(spec);
        }
        let mut rebuilt = (**spec).clone();
        if fleet.mirrors_source == ConfigSource::Cluster {
            rebuilt.registries = registries
                .iter()
                .map(|set| (registry_dir_name(&set.registry, spec.shell), hosts_toml::render(set, None)))
                .collect();
        }
        if let Some(environment) = &environment {
            rebuilt.environment.clone_from(environment);
        }
        Arc::new(rebuilt)
    });
    Ok(Followed { registries, instances })
}

/// The Proxy `cluster`'s variables, through the repository's proxy rules.
pub fn cluster_environment(config: &ClusterConfig) -> Result<BTreeMap<String, String>, String> {
    let Some(proxy) = &config.proxy else { return Ok(BTreeMap::new()) };
    let doc = typed::<crate::desired::kinds::proxy::Proxy>("Proxy", "cluster", &proxy.spec)?;
    let mut diagnostics = Vec::new();
    let environment = rules::proxy::environment(&[doc], &mut diagnostics);
    refused(&diagnostics).map(|()| environment)
}

/// The cluster's mirror sets merged per registry, through the repository's
/// mirror rules.
pub fn cluster_registries(config: &ClusterConfig) -> Result<Vec<RegistryMirrors>, String> {
    let (mut digest, mut tag) = (Vec::new(), Vec::new());
    for (key, set) in &config.mirror_sets {
        match key.split_once('/') {
            Some(("ImageDigestMirrorSet", name)) => digest.push(typed("ImageDigestMirrorSet", name, &set.spec)?),
            Some(("ImageTagMirrorSet", name)) => tag.push(typed("ImageTagMirrorSet", name, &set.spec)?),
            _ => {}
        }
    }
    let mut diagnostics = Vec::new();
    let registries = rules::mirrors::collect(&digest, &tag, &mut diagnostics);
    refused(&diagnostics).map(|()| registries)
}

/// A cluster object as a repository document of its kind.
fn typed<T: serde::de::DeserializeOwned>(kind: &str, name: &str, spec: &Value) -> Result<Doc<T>, String> {
    let raw = json!({"apiVersion": "config.openshift.io/v1", "kind": kind, "metadata": {"name": name}, "spec": spec});
    let value = serde_json::from_value(raw.clone())
        .map_err(|e| format!("the cluster's {kind} {name} cannot be read as winfleet reads one: {e}"))?;
    Ok(Doc { path: format!("cluster:{kind}/{name}"), index: 0, value, raw: Arc::new(raw) })
}

/// The errors the rules found in cluster objects, as one sentence.
fn refused(diagnostics: &[Diagnostic]) -> Result<(), String> {
    let errors: Vec<String> = diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| format!("{} {}: {}", d.path.trim_start_matches("cluster:"), d.pointer, d.message))
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    Err(format!("the cluster's objects cannot be followed: {}", errors.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(sets: &[(&str, Value)], proxy: Option<Value>) -> ClusterConfig {
        ClusterConfig {
            proxy: proxy.map(|spec| ConfigObject { uid: "u".into(), spec }),
            mirror_sets: sets
                .iter()
                .map(|(k, spec)| ((*k).to_owned(), ConfigObject { uid: String::new(), spec: spec.clone() }))
                .collect(),
        }
    }

    #[test]
    fn the_clusters_mirror_sets_merge_per_registry_as_the_repositorys_would() {
        let idms = json!({"imageDigestMirrors": [{"source": "quay.io/org", "mirrors": ["m.example:5000/org"]}]});
        let registries = cluster_registries(&config(&[("ImageDigestMirrorSet/a", idms)], None)).unwrap();
        assert_eq!(registries.len(), 1);
        assert_eq!(registries[0].registry, "quay.io");
        assert_eq!(registries[0].mirrors[0].host, "m.example:5000");
    }

    #[test]
    fn a_cluster_object_the_rules_refuse_is_an_error_naming_it() {
        let idms = json!({"imageDigestMirrors": [{"source": "*.example.com", "mirrors": ["m.example"]}]});
        let error = cluster_registries(&config(&[("ImageDigestMirrorSet/bad", idms)], None)).unwrap_err();
        assert!(error.contains("ImageDigestMirrorSet/bad /spec/imageDigestMirrors/0/source"), "{error}");
        let proxy = json!({"httpProxy": "proxy.example:3128"});
        let error = cluster_environment(&config(&[], Some(proxy))).unwrap_err();
        assert!(error.contains("Proxy/cluster /spec/httpProxy"), "{error}");
    }

    #[test]
    fn the_clusters_proxy_gives_the_variables_and_none_without_one() {
        let proxy = json!({"httpProxy": "http://p:3128", "noProxy": ".cluster.local", "trustedCA": {"name": ""}});
        let env = cluster_environment(&config(&[], Some(proxy))).unwrap();
        assert_eq!(env["HTTP_PROXY"], "http://p:3128");
        assert_eq!(env["NO_PROXY"], ".cluster.local");
        assert!(cluster_environment(&config(&[], None)).unwrap().is_empty());
    }
}
