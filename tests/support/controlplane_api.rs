//! The one switch of the cluster suites: [`TestApi`] is either API server
//! (the in-memory one or the real control plane) behind one interface.
//! Part of tests/support/controlplane.rs.

use std::path::Path;

use kube::api::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::super::apiserver::{ApiServer, Served, fixtures};
use super::{BOOTSTRAP_TOKEN, ControlPlane, SERVICE_NETWORK, controller_config};

/// Which API server a test runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// tests/support/apiserver: fast, deterministic, fault injection.
    InMemory,
    /// This module's control plane.
    Real,
}

/// Either API server behind one interface: the one switch of the cluster
/// suites.
pub enum TestApi {
    InMemory { server: ApiServer, served: Served },
    Real(ControlPlane),
}

impl TestApi {
    /// Starts `backend`, seeded like an OpenShift cluster.
    pub async fn start(backend: Backend) -> TestApi {
        match backend {
            Backend::Real => TestApi::Real(ControlPlane::start().await),
            Backend::InMemory => {
                let server = ApiServer::new();
                let served = server.serve().await;
                let ca = server.ca_pem();
                server.seed(fixtures::bootstrap_secret(BOOTSTRAP_TOKEN, &ca));
                server.seed(fixtures::infrastructure(&served.url));
                server.seed(fixtures::network(SERVICE_NETWORK));
                server.seed(fixtures::proxy_cluster(""));
                server.seed(controller_config(&ca));
                server.add_token(
                    BOOTSTRAP_TOKEN,
                    "system:bootstrap:abcdef",
                    &["system:bootstrappers", "system:bootstrappers:worker"],
                );
                TestApi::InMemory { server, served }
            }
        }
    }

    pub fn backend(&self) -> Backend {
        match self {
            TestApi::InMemory { .. } => Backend::InMemory,
            TestApi::Real(_) => Backend::Real,
        }
    }

    pub fn client(&self) -> kube::Client {
        match self {
            TestApi::InMemory { server, .. } => server.client(),
            TestApi::Real(plane) => plane.client(),
        }
    }

    pub fn url(&self) -> &str {
        match self {
            TestApi::InMemory { served, .. } => &served.url,
            TestApi::Real(plane) => &plane.url,
        }
    }

    pub fn kubeconfig(&self) -> &Path {
        match self {
            TestApi::InMemory { served, .. } => &served.kubeconfig,
            TestApi::Real(plane) => &plane.kubeconfig,
        }
    }

    pub async fn seed(&self, obj: Value) -> Value {
        match self {
            TestApi::InMemory { server, .. } => server.seed(obj),
            TestApi::Real(plane) => plane.seed(obj).await,
        }
    }

    pub async fn get(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        match self {
            TestApi::InMemory { server, .. } => server.get(api_version, kind, namespace, name),
            TestApi::Real(plane) => plane.get(api_version, kind, namespace, name).await,
        }
    }

    /// A client that authenticates with a bearer token (the bootstrap
    /// token, a ServiceAccount's), not as the admin.
    pub async fn client_with_token(&self, token: &str) -> kube::Client {
        match self {
            TestApi::InMemory { served, .. } => {
                let mut config = kube::Config::new(served.url.parse().unwrap());
                config.auth_info.token = Some(token.to_owned().into());
                kube::Client::try_from(config).unwrap()
            }
            TestApi::Real(plane) => plane.client_with_token(token).await,
        }
    }
}

/// A discovered ApiResource for the tests that build their own Api.
pub fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}
