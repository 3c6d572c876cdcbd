//! The TokenRequest API (`POST .../serviceaccounts/NAME/token`), as
//! kube-apiserver serves it: the ServiceAccount must exist (404
//! otherwise); the answer is the request with `status.token` and
//! `status.expirationTimestamp` (now plus `spec.expirationSeconds`, 3600
//! when unset; the real server refuses less than 600); the token
//! authenticates as `system:serviceaccount:NS:NAME` in the groups
//! `system:serviceaccounts` and `system:serviceaccounts:NS` until the
//! server stops. No RBAC is checked (this server authorizes nothing; the
//! real control plane does: tests/real_cluster_cloud_node_manager.rs).

use serde_json::{Value, json};

use super::identity::{Identity, authenticated};
use super::resources::Resource;
use super::status::{ApiError, bad_request};
use super::store::State;

/// Mints a token for ServiceAccount `namespace/name`.
/// `res` is the ServiceAccount resource the path named.
pub(crate) fn mint(
    st: &mut State,
    res: &Resource,
    namespace: &str,
    name: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    let account = st
        .get(res, Some(namespace), name)
        .cloned()
        .ok_or_else(|| ApiError::new(404, "NotFound", format!("serviceaccounts \"{name}\" not found")))?;
    let seconds = body.pointer("/spec/expirationSeconds").and_then(Value::as_i64).unwrap_or(3600);
    if seconds < 600 {
        return Err(bad_request(
            "spec.expirationSeconds: Invalid value: may not specify a duration less than 10 minutes",
        ));
    }
    let token = format!("sa.{namespace}.{name}.{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    let uid = account.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default().to_owned();
    let mut groups = vec!["system:serviceaccounts".to_owned(), format!("system:serviceaccounts:{namespace}")];
    authenticated(&mut groups);
    st.tokens
        .insert(token.clone(), Identity { user: format!("system:serviceaccount:{namespace}:{name}"), uid, groups });
    let expires = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(seconds);
    let mut answer = body.clone();
    answer["apiVersion"] = json!("authentication.k8s.io/v1");
    answer["kind"] = json!("TokenRequest");
    answer["metadata"] = json!({"name": name, "namespace": namespace});
    answer["spec"]["expirationSeconds"] = json!(seconds);
    answer["status"] =
        json!({"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()});
    Ok(answer)
}
