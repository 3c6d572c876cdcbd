//! `winfleet import --kubeconfig FILE --output DIR`: reads what WMCO works
//! from in a running cluster and writes a config repository
//! (`winfleet::import` decides the files).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use winfleet::cluster::MACHINE_API_NAMESPACE;
use winfleet::cluster::connect::{ClusterConfig, connect};
use winfleet::cluster::observe::{machine_set_resource, proxy_resource};
use winfleet::desired::kinds::services::SERVICES_CONFIGMAP_PREFIX;
use winfleet::import::{self, ClusterObjects};

use super::output;

/// WMCO's namespace, where its ConfigMaps live.
const WMCO_NAMESPACE: &str = "openshift-windows-machine-config-operator";

/// Where to read from and write to.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The cluster's kubeconfig (default: KUBECONFIG or ~/.kube/config).
    #[arg(long, value_name = "FILE", env = "WINFLEET_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context.
    #[arg(long)]
    context: Option<String>,
    /// The directory to write the repository into (new or empty).
    #[arg(long, value_name = "DIR")]
    output: PathBuf,
}

/// Reads the cluster, writes the files, lists them.
pub fn run(args: &ImportArgs) -> anyhow::Result<ExitCode> {
    if args.output.exists() && std::fs::read_dir(&args.output).map(|mut d| d.next().is_some()).unwrap_or(true) {
        bail!("{} exists and is not empty: import writes a new repository", args.output.display());
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let objects = runtime.block_on(read(args))?;
    let files = import::repository(&objects);
    write(&args.output, &files)?;
    let list: Vec<&str> = files.keys().map(String::as_str).collect();
    output::out(&format!("wrote {} file(s) to {}:\n  {}\n", files.len(), args.output.display(), list.join("\n  ")));
    Ok(ExitCode::SUCCESS)
}

async fn read(args: &ImportArgs) -> anyhow::Result<ClusterObjects> {
    let config = ClusterConfig { kubeconfig: args.kubeconfig.clone(), context: args.context.clone() };
    let Some(cluster) = connect(&config).await? else { bail!("no cluster: give --kubeconfig (or set KUBECONFIG)") };
    let client = cluster.client;
    let url = cluster.url.trim_end_matches('/');
    let list = |api: Api<DynamicObject>, what: &'static str| async move {
        let listed =
            api.list(&ListParams::default()).await.map_err(|e| anyhow!("listing {what}: {}", unanswered(&e, url)))?;
        let values: anyhow::Result<Vec<serde_json::Value>> =
            listed.items.iter().map(|o| serde_json::to_value(o).context("encoding")).collect();
        values
    };
    let configmaps = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
    let wmco = list(Api::namespaced_with(client.clone(), WMCO_NAMESPACE, &configmaps), "WMCO's ConfigMaps").await?;
    let named =
        |v: &serde_json::Value| v.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or_default().to_owned();
    let mirror = |kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("config.openshift.io", "v1", kind), plural)
    };
    let mut mirror_sets = list(
        Api::all_with(client.clone(), &mirror("ImageDigestMirrorSet", "imagedigestmirrorsets")),
        "ImageDigestMirrorSets",
    )
    .await?;
    mirror_sets.extend(
        list(Api::all_with(client.clone(), &mirror("ImageTagMirrorSet", "imagetagmirrorsets")), "ImageTagMirrorSets")
            .await?,
    );
    let proxies = list(Api::all_with(client.clone(), &proxy_resource()), "Proxies").await?;
    let machine_sets =
        list(Api::namespaced_with(client, MACHINE_API_NAMESPACE, &machine_set_resource()), "MachineSets")
            .await?
            .into_iter()
            .filter(|m| {
                m.pointer("/spec/template/metadata/labels/machine.openshift.io~1os-id").and_then(|v| v.as_str())
                    == Some("Windows")
            })
            .collect();
    Ok(ClusterObjects {
        instances: wmco.iter().find(|c| named(c) == "windows-instances").map(with_kind("v1", "ConfigMap")),
        services: wmco
            .iter()
            .filter(|c| named(c).starts_with(SERVICES_CONFIGMAP_PREFIX))
            .map(with_kind("v1", "ConfigMap"))
            .collect(),
        mirror_sets,
        proxy: proxies.into_iter().find(|p| named(p) == "cluster"),
        machine_sets,
    })
}

/// A failed call in winfleet's words: the API server's answer, or that
/// none came and the innermost cause (kube's wrappers repeat themselves).
fn unanswered(error: &kube::Error, url: &str) -> String {
    if let kube::Error::Api(_) = error {
        return winfleet::cluster::apply::api_error(error);
    }
    let mut cause: &dyn std::error::Error = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    format!("no answer from the API server {url}: {cause}")
}

/// A listed item may come without apiVersion and kind.
fn with_kind(api_version: &'static str, kind: &'static str) -> impl Fn(&serde_json::Value) -> serde_json::Value {
    move |value| {
        let mut value = value.clone();
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), api_version.into());
            map.insert("kind".into(), kind.into());
        }
        value
    }
}

fn write(dir: &Path, files: &std::collections::BTreeMap<String, String>) -> anyhow::Result<()> {
    for (path, content) in files {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&target, content).with_context(|| format!("writing {}", target.display()))?;
    }
    Ok(())
}
