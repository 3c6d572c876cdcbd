//! The identity of Azure's `cloud-node-manager` on a Windows node (issue
//! 36): a token of the ServiceAccount [`SERVICE_ACCOUNT`] in winfleet's
//! namespace, which deploy/ binds to upstream's `cloud-node-manager`
//! ClusterRole and nothing else (nodes get/list/watch/update/patch,
//! nodes/status patch). [`crate::lifecycle::node_manager`] renders it
//! into `C:\k\wicd-kubeconfig`, the file WMCO's Azure services manifest
//! gives the service.
//!
//! The token comes from the TokenRequest API with a bounded lifetime
//! ([`LIFETIME_SECONDS`]; the API server may shorten it) and is kept, with
//! when it was minted and when it expires, in the Secret [`RECORD_SECRET`]
//! of winfleet's namespace. Every round reuses the kept token while more
//! than a third of its lifetime remains ([`fresh`]), so the node's file
//! stays byte-identical and the service is not restarted; past that the
//! round mints a new one, keeps it, and the node's file (and only the
//! service naming it) changes. The record is written before any node gets
//! the token: a crash before the write loses a token nobody holds (it
//! expires unused), a crash after it leaves a record the next round uses.
//! A dry run (plan) never mints: it shows the kept token, or a placeholder
//! when the round would mint one.
//!
//! The token never leaves this module but into the rendered file, whose
//! display is redacted ([`crate::lifecycle::material::redacted`]).

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::ByteString;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use super::FIELD_MANAGER;
use super::apply::api_error;
use crate::vocab::platform::Platform;

/// The ServiceAccount whose token cloud-node-manager runs with (deploy/).
pub const SERVICE_ACCOUNT: &str = "winfleet-cloud-node-manager";
/// The Secret, in winfleet's namespace, that keeps the current token.
pub const RECORD_SECRET: &str = "winfleet-cloud-node-manager-token";
/// The lifetime asked of the TokenRequest API: three days. A token is
/// re-minted once less than a third of it remains (a day), so a winfleet
/// stopped for up to a day leaves no node with an expired token, and each
/// node's cloud-node-manager restarts about every two days for the new one.
pub const LIFETIME_SECONDS: i64 = 3 * 24 * 3600;
/// What a plan shows when the round would mint a new token.
pub const PLACEHOLDER: &str = "<minted when applied>";

/// The record's keys.
const TOKEN: &str = "token";
const ISSUED: &str = "issued";
const EXPIRES: &str = "expires";

/// A kept token and its lifetime (Unix seconds). Never displayed.
#[derive(Clone, PartialEq, Eq)]
pub struct Record {
    /// The bearer token (secret).
    pub token: String,
    /// When it was minted.
    pub issued: i64,
    /// When it expires (the TokenRequest's `status.expirationTimestamp`).
    pub expires: i64,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record").field("issued", &self.issued).field("expires", &self.expires).finish()
    }
}

/// Whether `record` may still be handed out at `now`: more than a third of
/// its lifetime remains. Pure.
pub fn fresh(record: &Record, now: i64) -> bool {
    let lifetime = record.expires.saturating_sub(record.issued);
    lifetime > 0 && now < record.expires.saturating_sub(lifetime / 3)
}

/// The record a Secret's data holds; `None` when any key is missing or
/// malformed (the round then mints, as for no record). Pure.
pub fn parse(data: &BTreeMap<String, ByteString>) -> Option<Record> {
    let text = |key: &str| data.get(key).and_then(|b| std::str::from_utf8(&b.0).ok()).map(str::trim);
    let token = text(TOKEN).filter(|t| !t.is_empty())?.to_owned();
    Some(Record { token, issued: text(ISSUED)?.parse().ok()?, expires: text(EXPIRES)?.parse().ok()? })
}

/// The Secret that keeps `record` (type Opaque, as deploy/'s admission
/// policy requires of winfleet's Secrets).
fn record_secret(namespace: &str, record: &Record) -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": RECORD_SECRET,
            "namespace": namespace,
            "labels": { (super::MANAGED_BY.0): super::MANAGED_BY.1 },
        },
        "data": {
            TOKEN: STANDARD.encode(&record.token),
            ISSUED: STANDARD.encode(record.issued.to_string()),
            EXPIRES: STANDARD.encode(record.expires.to_string()),
        },
    })
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The token cloud-node-manager's kubeconfig carries this round: `None`
/// off Azure (nothing is read); the kept token while [`fresh`]; else a new
/// one, kept first (`mint`), or [`PLACEHOLDER`] in a dry run. The error
/// names the object and the call that failed.
pub async fn token(client: &Client, platform: Platform, mint: bool) -> Result<Option<String>, String> {
    if platform != Platform::Azure {
        return Ok(None);
    }
    let namespace = super::monitoring::namespace();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let kept = match secrets.get_opt(RECORD_SECRET).await {
        Ok(secret) => secret.and_then(|s| parse(&s.data.unwrap_or_default())),
        Err(e) => return Err(format!("cannot read Secret {namespace}/{RECORD_SECRET}: {}", api_error(&e))),
    };
    let issued = now();
    if let Some(record) = kept.filter(|r| fresh(r, issued)) {
        return Ok(Some(record.token));
    }
    if !mint {
        return Ok(Some(PLACEHOLDER.to_owned()));
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec { expiration_seconds: Some(LIFETIME_SECONDS), ..TokenRequestSpec::default() },
        ..TokenRequest::default()
    };
    let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..PostParams::default() };
    let minted = accounts.create_token_request(SERVICE_ACCOUNT, &params, &request).await.map_err(|e| {
        format!("cannot mint a token for ServiceAccount {namespace}/{SERVICE_ACCOUNT}: {}", api_error(&e))
    })?;
    let status = minted
        .status
        .filter(|s| !s.token.is_empty())
        .ok_or_else(|| format!("the TokenRequest for ServiceAccount {namespace}/{SERVICE_ACCOUNT} has no token"))?;
    let record = Record { token: status.token, issued, expires: status.expiration_timestamp.0.as_second() };
    let object = record_secret(&namespace, &record);
    secrets
        .patch(RECORD_SECRET, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&object))
        .await
        .map_err(|e| format!("cannot keep the token in Secret {namespace}/{RECORD_SECRET}: {}", api_error(&e)))?;
    Ok(Some(record.token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(issued: i64, expires: i64) -> Record {
        Record { token: "TOKEN-SENTINEL".into(), issued, expires }
    }

    #[test]
    fn a_token_is_fresh_until_a_third_of_its_lifetime_remains() {
        let r = record(0, 300);
        assert!(fresh(&r, 0));
        assert!(fresh(&r, 199));
        assert!(!fresh(&r, 200));
        assert!(!fresh(&r, 400), "expired");
        assert!(!fresh(&record(300, 300), 0), "no lifetime");
        assert!(!fresh(&record(300, 0), 0), "expires before it was minted");
    }

    #[test]
    fn a_record_with_a_missing_or_malformed_key_is_no_record() {
        let data = |pairs: &[(&str, &str)]| -> BTreeMap<String, ByteString> {
            pairs.iter().map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec()))).collect()
        };
        let whole = data(&[(TOKEN, "t"), (ISSUED, "10"), (EXPIRES, "20\n")]);
        assert_eq!(parse(&whole), Some(Record { token: "t".into(), issued: 10, expires: 20 }));
        assert_eq!(parse(&data(&[(TOKEN, "t"), (ISSUED, "10")])), None);
        assert_eq!(parse(&data(&[(TOKEN, ""), (ISSUED, "10"), (EXPIRES, "20")])), None);
        assert_eq!(parse(&data(&[(TOKEN, "t"), (ISSUED, "ten"), (EXPIRES, "20")])), None);
    }

    #[test]
    fn a_record_never_shows_its_token() {
        assert!(!format!("{:?}", record(1, 2)).contains("TOKEN-SENTINEL"));
    }
}
