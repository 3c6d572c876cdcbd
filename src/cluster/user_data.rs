//! The `windows-user-data` Secret in `openshift-machine-api`: what new
//! Windows Machines boot with (WMCO-SPEC 6), kept by winfleet as WMCO keeps
//! it. Its script comes from [`crate::render::user_data`]; this module
//! reads the Secret and the platform, decides (pure, [`plan`]) and writes
//! it by server-side apply.
//!
//! The Secret is rewritten when the fleet key changes (the script then
//! authorizes the new public key), so replacements of Machines boot with
//! the new key. Plans and reports name the key by its fingerprint only;
//! the script never leaves this module.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde_json::json;

use super::apply::api_error;
use super::{FIELD_MANAGER, MACHINE_API_NAMESPACE, MANAGED_BY};
use crate::render::user_data::{FINGERPRINT_ANNOTATION, SECRET_KEY, SECRET_NAME, render};

/// What the Secret needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum UserDataAction {
    /// It is absent: created.
    Create,
    /// It authorizes another key (or holds another script): rewritten.
    Update,
    /// It is as desired.
    InSync,
}

/// What a round did about the Secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserDataReport {
    /// What it needs.
    pub action: UserDataAction,
    /// The fingerprint of the key it authorizes (the fleet's).
    pub fingerprint: String,
    /// The fingerprint it carried before, when it changes (as recorded on
    /// the Secret; `None` when unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous: Option<String>,
    /// Written (false in a dry run or when in sync).
    pub written: bool,
    /// Why it could not be read or written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The Secret as observed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserDataObs {
    /// Its `userData`, when the Secret exists.
    pub user_data: Option<Vec<u8>>,
    /// The fingerprint annotation it carries.
    pub fingerprint: Option<String>,
}

/// Decides: the desired script against the observed Secret. Pure.
pub fn plan(desired: &str, observed: &UserDataObs) -> UserDataAction {
    match &observed.user_data {
        None => UserDataAction::Create,
        Some(data) if data.as_slice() == desired.as_bytes() => UserDataAction::InSync,
        Some(_) => UserDataAction::Update,
    }
}

/// Reads, plans and (unless `dry_run`) writes the Secret for the fleet's
/// public key (`<type> <base64>`) and its fingerprint. `None` when the
/// cluster has no `openshift-machine-api` namespace (no Machine API: no
/// Machine boots with user data there).
pub async fn reconcile(client: &Client, public_key: &str, fingerprint: &str, dry_run: bool) -> Option<UserDataReport> {
    let mut report = UserDataReport {
        action: UserDataAction::InSync,
        fingerprint: fingerprint.to_owned(),
        previous: None,
        written: false,
        error: None,
    };
    let fail = |mut report: UserDataReport, error: String| {
        report.error = Some(error);
        Some(report)
    };
    let platform = match super::observe::platform(client).await {
        Ok(p) => p,
        Err(e) => return fail(report, format!("cannot read Infrastructure cluster: {}", api_error(&e))),
    };
    let script = match render(public_key, platform) {
        Ok(s) => s,
        Err(e) => return fail(report, e.to_string()),
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), MACHINE_API_NAMESPACE);
    let observed = match secrets.get_opt(SECRET_NAME).await {
        Ok(secret) => observe(secret.as_ref()),
        Err(kube::Error::Api(e)) if e.code == 404 => return None,
        Err(e) => {
            return fail(
                report,
                format!("cannot read Secret {MACHINE_API_NAMESPACE}/{SECRET_NAME}: {}", api_error(&e)),
            );
        }
    };
    report.action = plan(&script, &observed);
    if report.action == UserDataAction::Update {
        report.previous = observed.fingerprint.filter(|f| f != fingerprint);
    }
    if dry_run || report.action == UserDataAction::InSync {
        return Some(report);
    }
    let object = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": SECRET_NAME,
            "namespace": MACHINE_API_NAMESPACE,
            "labels": { MANAGED_BY.0: MANAGED_BY.1 },
            "annotations": { FINGERPRINT_ANNOTATION: fingerprint },
        },
        "type": "Opaque",
        // `data`, not `stringData`: what is read back is what was written
        // (the in-memory test API keeps `stringData` as it is).
        "data": { SECRET_KEY: STANDARD.encode(script.as_bytes()) },
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match secrets.patch(SECRET_NAME, &params, &Patch::Apply(&object)).await {
        Ok(_) => report.written = true,
        Err(kube::Error::Api(e)) if e.code == 404 && report.action == UserDataAction::Create => return None,
        Err(e) => {
            report.error =
                Some(format!("cannot apply Secret {MACHINE_API_NAMESPACE}/{SECRET_NAME}: {}", api_error(&e)));
        }
    }
    Some(report)
}

fn observe(secret: Option<&Secret>) -> UserDataObs {
    let Some(secret) = secret else { return UserDataObs::default() };
    UserDataObs {
        user_data: secret.data.as_ref().and_then(|d| d.get(SECRET_KEY)).map(|b| b.0.clone()),
        fingerprint: secret.metadata.annotations.as_ref().and_then(|a| a.get(FINGERPRINT_ANNOTATION)).cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_is_created_when_absent_rewritten_when_it_differs_and_left_when_equal() {
        let absent = UserDataObs::default();
        assert_eq!(plan("script", &absent), UserDataAction::Create);
        let other = UserDataObs { user_data: Some(b"old script".to_vec()), fingerprint: Some("SHA256:old".into()) };
        assert_eq!(plan("script", &other), UserDataAction::Update);
        let same = UserDataObs { user_data: Some(b"script".to_vec()), fingerprint: None };
        assert_eq!(plan("script", &same), UserDataAction::InSync);
    }
}
