//! The files a node takes from the worker pool's rendered MachineConfig
//! (issue 36; WMCO's `createFilesFromIgnition`), at WMCO's paths in the
//! kube directory. Pure: the MachineConfig is read and parsed elsewhere
//! ([`super::ignition`]).
//!
//! - [`CREDENTIAL_PROVIDER_CONFIG`], when the MachineConfig carries the ECR
//!   credential provider's config (AWS): WMCO's re-marshalled text
//!   ([`super::credential_provider`]). The provider's binary is a payload
//!   file (`ecr-credential-provider.exe`), not generated.
//! - [`CLOUD_CONF`], when the kubelet unit names a `--cloud-config` (OCP ≤
//!   4.15): the bytes as they are.
//!
//! Like the other generated files, each is written only when its SHA-256
//! differs, restarts the services whose command names its path (WMCO's
//! kubelet: `--image-credential-provider-config`, `--cloud-config`), and is
//! recorded, so a deconfigure removes it. Plans show which MachineConfig it
//! came from and a SHA-256 prefix; `cloud.conf` may hold cloud credentials.

use super::ignition::RenderedWorker;
use super::{GeneratedFile, LifecycleSpec};
use crate::vocab::file::{ManagedFile, sha256_hex};

/// The credential provider config's file name (WMCO's
/// `CredentialProviderConfigPath`, `C:\k\credential-provider-config.yaml`).
pub const CREDENTIAL_PROVIDER_CONFIG: &str = "credential-provider-config.yaml";
/// The cloud provider config's file name (WMCO's `CloudConfigPath`).
pub const CLOUD_CONF: &str = "cloud.conf";

/// The generated files `worker` gives a node of `spec`'s dialect.
pub fn render(spec: &LifecycleSpec, worker: &RenderedWorker) -> Vec<GeneratedFile> {
    let shown =
        |content: &str| format!("from MachineConfig {}, sha256:{}", worker.name, &sha256_hex(content.as_bytes())[..12]);
    let mut files = Vec::new();
    if let Some(config) = &worker.credential_provider {
        let text = config.node_text(spec.shell);
        let display = shown(&text);
        files.push(GeneratedFile::new(
            spec.kube_path(CREDENTIAL_PROVIDER_CONFIG),
            ManagedFile::with_secret(text, display),
        ));
    }
    if let Some(text) = &worker.cloud_conf {
        let display = format!("<redacted> {}", shown(text));
        files.push(GeneratedFile::new(spec.kube_path(CLOUD_CONF), ManagedFile::with_secret(text.clone(), display)));
    }
    files
}

/// What a plan says of the MachineConfig a node's files come from.
pub fn describe(worker: &RenderedWorker) -> String {
    let mut files = Vec::new();
    if worker.credential_provider.is_some() {
        files.push(CREDENTIAL_PROVIDER_CONFIG);
    }
    if worker.cloud_conf.is_some() {
        files.push(CLOUD_CONF);
    }
    let files = if files.is_empty() { "no file".to_owned() } else { files.join(", ") };
    format!("MachineConfig {} ({}): {files}", worker.name, worker.chosen_by)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::credential_provider::CredentialProviderConfig;
    use crate::lifecycle::ignition::KubeletArgs;

    fn worker(cloud_conf: Option<&str>) -> RenderedWorker {
        let ecr = "providers:\n- name: ecr-credential-provider\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  \
                   matchImages: ['*.dkr.ecr.*.amazonaws.com']\n";
        RenderedWorker {
            name: "rendered-worker-0a1b".into(),
            chosen_by: "the pool worker's status.configuration".into(),
            kubelet: KubeletArgs::default(),
            credential_provider: Some(CredentialProviderConfig::parse(ecr).unwrap_or_else(|e| panic!("{e}"))),
            cloud_conf: cloud_conf.map(str::to_owned),
        }
    }

    #[test]
    fn the_files_go_to_wmcos_paths_and_show_their_machine_config_not_their_secrets() {
        let spec = crate::lifecycle::tests_support::posix_spec();
        let files = render(&spec, &worker(Some("[Global]\naadClientSecret = SECRET-SENTINEL\n")));
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["payload/credential-provider-config.yaml", "payload/cloud.conf"]);
        assert!(files[0].file.content().contains("name: ecr-credential-provider\n"));
        assert!(files[0].file.display().starts_with("from MachineConfig rendered-worker-0a1b, sha256:"));
        assert!(files[1].file.content().contains("SECRET-SENTINEL"));
        assert!(!files[1].file.display().contains("SECRET-SENTINEL"));
        assert!(files[1].file.display().starts_with("<redacted> from MachineConfig"));
        assert_eq!(
            describe(&worker(None)),
            "MachineConfig rendered-worker-0a1b (the pool worker's status.configuration): credential-provider-config.yaml"
        );
    }
}
