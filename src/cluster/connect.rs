//! The Kubernetes client: an explicit kubeconfig, the usual kubeconfig
//! (`KUBECONFIG`, `~/.kube/config`), or the pod's service account; with none
//! of them winfleet runs SSH-only.

use std::path::{Path, PathBuf};

use kube::Client;
use kube::config::{Config, KubeConfigOptions, Kubeconfig};

/// Where the cluster is, as the command line says it.
#[derive(Clone, Debug, Default)]
pub struct ClusterConfig {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
}

/// A connected (not yet contacted) cluster.
#[derive(Clone)]
pub struct Cluster {
    /// The client.
    pub client: Client,
    /// The API server URL, for messages.
    pub url: String,
}

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {reason}")]
    Kubeconfig {
        /// Which file (or "the default kubeconfig").
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// In-cluster configuration failed.
    #[error("in-cluster configuration: {0}")]
    InCluster(String),
    /// The client could not be built from the configuration.
    #[error("Kubernetes client: {0}")]
    Client(String),
}

/// Builds the client, or `None` when no cluster is configured at all (no
/// `--kubeconfig`, no `KUBECONFIG`, no `~/.kube/config`, not in a pod).
/// Building makes no connection; the first request does.
pub async fn connect(config: &ClusterConfig) -> Result<Option<Cluster>, ConnectError> {
    let options = KubeConfigOptions { context: config.context.clone(), ..KubeConfigOptions::default() };
    let kube_config = if let Some(path) = &config.kubeconfig {
        Some(from_file(path, &options).await?)
    } else if let Some(path) = default_kubeconfig() {
        Some(from_file(&path, &options).await?)
    } else if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        Some(Config::incluster().map_err(|e| ConnectError::InCluster(e.to_string()))?)
    } else {
        None
    };
    let Some(mut kube_config) = kube_config else { return Ok(None) };
    // kube retries 429 by itself (up to 15 times, backing off towards
    // minutes): a PodDisruptionBudget's 429 on an eviction must reach the
    // drain, which retries, reports and honours its own timeout. winfleet
    // retries on its own terms everywhere (drain loop, next round).
    kube_config.default_retry = false;
    let url = kube_config.cluster_url.to_string();
    let client = Client::try_from(kube_config).map_err(|e| ConnectError::Client(e.to_string()))?;
    Ok(Some(Cluster { client, url }))
}

async fn from_file(path: &Path, options: &KubeConfigOptions) -> Result<Config, ConnectError> {
    let error = |reason: String| ConnectError::Kubeconfig { path: path.display().to_string(), reason };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| error(e.to_string()))?;
    Config::from_custom_kubeconfig(kubeconfig, options).await.map_err(|e| error(e.to_string()))
}

/// `KUBECONFIG` (its first entry) or `~/.kube/config`, when it exists.
fn default_kubeconfig() -> Option<PathBuf> {
    if let Some(list) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        return std::env::split_paths(&list).next();
    }
    let home = std::env::var_os("HOME")?;
    let path = PathBuf::from(home).join(".kube").join("config");
    path.is_file().then_some(path)
}
