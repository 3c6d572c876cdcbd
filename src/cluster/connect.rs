//! The Kubernetes client: an explicit kubeconfig, the usual kubeconfig
//! (`KUBECONFIG`, `~/.kube/config`), or the pod's service account; with none
//! of them winfleet runs SSH-only.

use std::path::{Path, PathBuf};

use std::time::Duration;

use http::{Method, Request, Response};
use kube::Client;
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder};
use kube::config::{Config, KubeConfigOptions, Kubeconfig};
use tower::buffer::BufferLayer;
use tower::retry::{Policy, RetryLayer};

/// The User-Agent of every request: `winfleet/<version>`.
pub const USER_AGENT: &str = concat!("winfleet/", env!("CARGO_PKG_VERSION"));

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
    } else if let Some(kubeconfig) = default_kubeconfig()? {
        let error = |e: kube::config::KubeconfigError| ConnectError::Kubeconfig {
            path: "the default kubeconfig (KUBECONFIG or ~/.kube/config)".into(),
            reason: e.to_string(),
        };
        Some(Config::from_custom_kubeconfig(kubeconfig, &options).await.map_err(error)?)
    } else if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        Some(Config::incluster().map_err(|e| ConnectError::InCluster(e.to_string()))?)
    } else {
        None
    };
    let Some(mut kube_config) = kube_config else { return Ok(None) };
    // kube's own retry covers every verb (up to 15 times, backing off
    // towards minutes): a PodDisruptionBudget's 429 on an eviction must
    // reach the drain, which retries, reports and honours its own timeout,
    // and a write is retried on winfleet's terms (re-read, conditional).
    // Reads and watches are retried here instead: bounded, with jitter,
    // honouring Retry-After.
    kube_config.default_retry = false;
    // Every request says who sends it (audit logs, API priority and
    // fairness, and the field manager the API server derives for a write
    // that names none, which would otherwise be `unknown`).
    kube_config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static(USER_AGENT)));
    let url = kube_config.cluster_url.to_string();
    let builder = ClientBuilder::try_from(kube_config).map_err(|e| ConnectError::Client(e.to_string()))?;
    // kube's service stack is not Clone; a buffer in front makes it so.
    let client = builder.with_layer(&BufferLayer::new(1024)).with_layer(&RetryLayer::new(ReadsOnly::new())).build();
    Ok(Some(Cluster { client, url }))
}

/// kube's retry policy (429, 503, 504; exponential back-off with jitter;
/// `Retry-After` honoured) for GET requests only: gets, lists and watches.
#[derive(Clone)]
struct ReadsOnly(RetryPolicy);

impl ReadsOnly {
    fn new() -> Self {
        // At most 5 retries, 200 ms growing to 10 s: a round is not held up
        // for long by an API server that stays unavailable.
        match RetryPolicy::new(Duration::from_millis(200), Duration::from_secs(10), 5, true) {
            Ok(policy) => Self(policy),
            Err(_) => Self(RetryPolicy::default()),
        }
    }
}

impl<Res> Policy<Request<Body>, Response<Res>, tower::BoxError> for ReadsOnly {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        req: &mut Request<Body>,
        result: &mut Result<Response<Res>, tower::BoxError>,
    ) -> Option<Self::Future> {
        if req.method() != Method::GET {
            return None;
        }
        self.0.retry(req, result)
    }

    fn clone_request(&mut self, req: &Request<Body>) -> Option<Request<Body>> {
        if req.method() != Method::GET {
            return None;
        }
        <RetryPolicy as Policy<Request<Body>, Response<Res>, tower::BoxError>>::clone_request(&mut self.0, req)
    }
}

async fn from_file(path: &Path, options: &KubeConfigOptions) -> Result<Config, ConnectError> {
    let error = |reason: String| ConnectError::Kubeconfig { path: path.display().to_string(), reason };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| error(e.to_string()))?;
    Config::from_custom_kubeconfig(kubeconfig, options).await.map_err(|e| error(e.to_string()))
}

/// Every entry of `KUBECONFIG` merged as kubectl merges them (the first
/// file to set a value wins), or `~/.kube/config`, when there is one.
fn default_kubeconfig() -> Result<Option<Kubeconfig>, ConnectError> {
    let error = |reason: String| ConnectError::Kubeconfig { path: "KUBECONFIG".into(), reason };
    if let Some(merged) = Kubeconfig::from_env().map_err(|e| error(e.to_string()))? {
        return Ok(Some(merged));
    }
    let Some(home) = std::env::var_os("HOME") else { return Ok(None) };
    let path = PathBuf::from(home).join(".kube").join("config");
    if !path.is_file() {
        return Ok(None);
    }
    Kubeconfig::read_from(&path)
        .map(Some)
        .map_err(|e| ConnectError::Kubeconfig { path: path.display().to_string(), reason: e.to_string() })
}
