//! `config.openshift.io/v1` Proxy: the egress proxy for the nodes.

use serde::Deserialize;

use super::meta::ObjectMeta;

/// The cluster-wide proxy, as OpenShift shapes it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Proxy {
    /// `config.openshift.io/v1`.
    pub api_version: String,
    /// `Proxy`.
    pub kind: String,
    /// Name (OpenShift uses `cluster`).
    pub metadata: ObjectMeta,
    /// The desired proxy settings.
    #[serde(default)]
    pub spec: ProxySpec,
}

/// `spec` of a [`Proxy`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ProxySpec {
    /// `HTTP_PROXY` on the nodes.
    #[serde(default)]
    pub http_proxy: Option<String>,
    /// `HTTPS_PROXY` on the nodes.
    #[serde(default)]
    pub https_proxy: Option<String>,
    /// `NO_PROXY` on the nodes, comma-separated, passed verbatim.
    #[serde(default)]
    pub no_proxy: Option<String>,
    /// Accepted for copied objects; not used on Windows nodes.
    #[serde(default)]
    pub readiness_endpoints: Vec<String>,
    /// Accepted for copied objects; the trusted CA comes with a later issue.
    #[serde(default, rename = "trustedCA")]
    pub trusted_ca: Option<ConfigMapRef>,
}

/// A reference to a ConfigMap by name.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigMapRef {
    /// ConfigMap name.
    pub name: String,
}
