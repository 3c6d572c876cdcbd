//! The pull secret from the cluster (issue 27, item 3): in cluster mode the
//! registry credentials of the mirrors' `authorization` headers come from
//! Secret `openshift-config/pull-secret` (key `.dockerconfigjson`), read
//! every round, so a rotated Secret reaches the nodes' hosts.toml files in
//! the next round without a restart (WMCO's registry controller watches the
//! same Secret).
//!
//! Which source wins: the cluster's Secret when it exists; `--pull-secret
//! FILE` (rendered when the revision was loaded) when the cluster has no
//! such Secret, and in SSH-only mode. A read that fails keeps the Secret
//! last read in this process (a transient API error must not strip the
//! nodes' credentials); with none read yet, the file's (or no) credentials.
//!
//! The credentials never reach a log, plan, Event or status: errors name
//! the Secret, never its content; [`secret_values`] feeds the daemon's
//! status redaction.

use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::Api;

use super::apply::api_error;
use crate::desired::model::{Instance, with_rebuilt_specs};
use crate::node::{NodeSpec, registry_dir_name};
use crate::render::hosts_toml;
use crate::render::mirrors::RegistryMirrors;
use crate::render::pull_secret::PullSecret;

/// The Secret's namespace and name, and its key.
pub const PULL_SECRET: (&str, &str, &str) = ("openshift-config", "pull-secret", ".dockerconfigjson");

/// The cluster's pull secret as last read in this process.
static LAST: Mutex<Option<PullSecret>> = Mutex::new(None);

/// Reads the Secret: `Ok(None)` when the cluster has none; the error names
/// the Secret and what is wrong, never its content.
pub async fn read(client: &Client) -> Result<Option<PullSecret>, String> {
    let (namespace, name, key) = PULL_SECRET;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = match secrets.get_opt(name).await {
        Ok(Some(secret)) => secret,
        Ok(None) => return Ok(None),
        Err(e) => return Err(format!("cannot read Secret {namespace}/{name}: {}", api_error(&e))),
    };
    let data = secret.data.unwrap_or_default();
    let Some(json) = data.get(key) else { return Err(format!("Secret {namespace}/{name} has no key {key}")) };
    PullSecret::parse(&json.0).map(Some).map_err(|e| format!("Secret {namespace}/{name}, key {key}: {e}"))
}

/// The round's pull secret from the cluster: read now (when `reachable`),
/// else the one last read; `None` when the repository's render stands.
/// A failed read is logged (the Secret's name and the reason only).
pub async fn for_round(client: &Client, reachable: bool) -> Option<PullSecret> {
    if reachable {
        match read(client).await {
            Ok(found) => {
                if let Ok(mut last) = LAST.lock() {
                    last.clone_from(&found);
                }
                return found;
            }
            Err(e) => tracing::warn!(error = %e, "the pull secret from the cluster: keeping the one last read"),
        }
    }
    LAST.lock().ok().and_then(|last| last.clone())
}

/// Every credential of the pull secret last read from the cluster, in each
/// form it could leak in (for redaction).
pub fn secret_values() -> Vec<String> {
    LAST.lock().ok().and_then(|last| last.as_ref().map(PullSecret::secret_values)).unwrap_or_default()
}

/// The instances with their hosts.toml files rendered with `secret`
/// (pure). Specs are shared by dialect, so each distinct spec is rebuilt
/// once; an instance whose files do not change keeps its spec.
pub fn rendered(instances: &[&Instance], registries: &[RegistryMirrors], secret: &PullSecret) -> Vec<Instance> {
    with_rebuilt_specs(instances, |spec| with_secret(spec, registries, secret))
}

fn with_secret(spec: &Arc<NodeSpec>, registries: &[RegistryMirrors], secret: &PullSecret) -> Arc<NodeSpec> {
    let mut files = spec.registries.clone();
    for set in registries {
        let dir = registry_dir_name(&set.registry, spec.shell);
        // Only the directories the spec has (a leaving node's spec has none).
        if let Some(file) = files.get_mut(&dir) {
            *file = hosts_toml::render(set, Some(secret));
        }
    }
    if files == spec.registries {
        return Arc::clone(spec);
    }
    Arc::new(NodeSpec { registries: files, ..(**spec).clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::mirrors::Mirror;
    use crate::vocab::Shell;

    fn set() -> RegistryMirrors {
        RegistryMirrors {
            registry: "quay.io".into(),
            mirrors: vec![Mirror { host: "mirror.example:5000/quay".into(), resolve_tags: false }],
            never_contact_source: false,
        }
    }

    fn secret(password: &str) -> PullSecret {
        let json = format!(r#"{{"auths":{{"mirror.example:5000":{{"username":"u","password":"{password}"}}}}}}"#);
        PullSecret::parse(json.as_bytes()).unwrap()
    }

    #[test]
    fn a_rotated_secret_changes_the_mirrors_authorization_and_only_the_displayed_form_hides_it() {
        let mut spec = NodeSpec::empty(Shell::Posix);
        spec.registries.insert("quay.io".into(), hosts_toml::render(&set(), None));
        let spec = Arc::new(spec);
        let old = with_secret(&spec, &[set()], &secret("first"));
        let new = with_secret(&old, &[set()], &secret("second"));
        let header = |s: &NodeSpec| s.registries["quay.io"].content().to_owned();
        assert!(header(&old).contains("authorization = \"Basic "), "{}", header(&old));
        assert_ne!(header(&old), header(&new));
        assert!(!format!("{:?}", new.registries["quay.io"]).contains(&secret("second").secret_values()[1]));
        // Unchanged credentials: the same spec, shared.
        assert!(Arc::ptr_eq(&with_secret(&new, &[set()], &secret("second")), &new));
    }

    #[test]
    fn a_spec_without_the_registry_gets_no_file() {
        let spec = Arc::new(NodeSpec::empty(Shell::Posix));
        assert!(with_secret(&spec, &[set()], &secret("x")).registries.is_empty());
    }
}
