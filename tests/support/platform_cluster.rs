//! A cluster as the installer of a platform leaves it, for issue 36's
//! per-platform tests, on either API server (through a `kube::Client`):
//! Infrastructure `cluster`'s `status.platformStatus.type`, the
//! MachineConfigPool `worker` whose `status.configuration.name` names the
//! rendered MachineConfig, and that MachineConfig with MCO's kubelet unit
//! and credential-provider file for the platform
//! (docs/platforms-research.md §1 and §7, MCO master `7ff337a4`):
//!
//! | platform | `--cloud-provider=` | credential provider file |
//! |---|---|---|
//! | AWS | `external` | `ecr-credential-provider.yaml` |
//! | Azure | `external` | `acr-credential-provider.yaml` |
//! | GCP | `external` | `gcr-credential-provider.yaml` |
//! | vSphere, Nutanix | `external` | none |
//! | None | (empty) | none |
//!
//! [`rotate_rendered_worker`] stands in for MCO rendering a new
//! configuration (a new credential provider config): a new
//! `rendered-worker-*` MachineConfig the pool then runs.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use winfleet::vocab::platform::Platform;

use super::controlplane::resource;

/// MCO's ECR template (`templates/common/aws/files/
/// etc-kubernetes-credential-providers-ecr-credential-provider.yaml`).
pub const MCO_ECR: &str = "apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ecr-credential-provider
    matchImages:
      - \"*.dkr.ecr.*.amazonaws.com\"
      - \"*.dkr.ecr.*.amazonaws.com.cn\"
      - \"*.dkr.ecr-fips.*.amazonaws.com\"
      - \"*.dkr.ecr.us-iso-east-1.c2s.ic.gov\"
      - \"*.dkr.ecr.us-isob-east-1.sc2s.sgov.gov\"
    defaultCacheDuration: \"12h\"
    apiVersion: credentialprovider.kubelet.k8s.io/v1
";

/// What WMCO writes to `C:\k\credential-provider-config.yaml` from
/// [`MCO_ECR`] (research §1: WMCO's unmarshal, `.exe` rename and
/// `sigs.k8s.io/yaml` marshal run on its vendored libraries).
pub const WMCO_ECR_WINDOWS: &str = "apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- apiVersion: credentialprovider.kubelet.k8s.io/v1
  defaultCacheDuration: 12h0m0s
  matchImages:
  - '*.dkr.ecr.*.amazonaws.com'
  - '*.dkr.ecr.*.amazonaws.com.cn'
  - '*.dkr.ecr-fips.*.amazonaws.com'
  - '*.dkr.ecr.us-iso-east-1.c2s.ic.gov'
  - '*.dkr.ecr.us-isob-east-1.sc2s.sgov.gov'
  name: ecr-credential-provider.exe
";

/// The same on a posix stand-in node: the provider's name is kept (its
/// stand-in binary has no `.exe`; docs/wmco-spec.md).
pub fn wmco_ecr_posix() -> String {
    WMCO_ECR_WINDOWS.replace("ecr-credential-provider.exe", "ecr-credential-provider")
}

/// MCO's ACR template (Azure; WMCO does not read it).
pub const MCO_ACR: &str = "apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: acr-credential-provider
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    defaultCacheDuration: \"10m\"
    matchImages:
      - \"*.azurecr.io\"
      - \"*.azurecr.cn\"
      - \"*.azurecr.de\"
      - \"*.azurecr.us\"
    args:
      - /etc/kubernetes/cloud.conf
";

/// MCO's GCR template (GCP; WMCO does not read it).
pub const MCO_GCR: &str = "apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: gcr-credential-provider
    matchImages:
      - \"gcr.io\"
      - \"*.gcr.io\"
      - \"container.cloud.google.com\"
      - \"*.pkg.dev\"
    defaultCacheDuration: \"1m\"
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    args:
      - get-credentials
      - --v=3
";

const PROVIDERS_DIR: &str = "/etc/kubernetes/credential-providers";

/// The credential provider file MCO renders for `platform`: (file name, text).
pub fn credential_provider_file(platform: Platform) -> Option<(&'static str, &'static str)> {
    match platform {
        Platform::Aws => Some(("ecr-credential-provider.yaml", MCO_ECR)),
        Platform::Azure => Some(("acr-credential-provider.yaml", MCO_ACR)),
        Platform::Gcp => Some(("gcr-credential-provider.yaml", MCO_GCR)),
        _ => None,
    }
}

/// MCO's kubelet unit for `platform` (OCP ≥ 4.16: no `--cloud-config`).
pub fn kubelet_unit(platform: Platform) -> String {
    let cloud_provider = match platform {
        Platform::None | Platform::Other => "",
        _ => "external",
    };
    let credentials = credential_provider_file(platform).map_or(String::new(), |(file, _)| {
        format!(
            "      --image-credential-provider-bin-dir=/usr/libexec/kubelet-image-credential-provider-plugins \
             --image-credential-provider-config={PROVIDERS_DIR}/{file} \\\n"
        )
    });
    format!(
        "[Unit]\nDescription=Kubernetes Kubelet\n\n[Service]\nExecStart=/usr/local/bin/kubenswrapper \\\n    \
         /usr/bin/kubelet \\\n      --config=/etc/kubernetes/kubelet.conf \\\n      \
         --cloud-provider={cloud_provider} \\\n{credentials}      --hostname-override=${{KUBELET_NODE_NAME}} \\\n      \
         --v=${{KUBELET_LOG_LEVEL}}\n\nRestart=always\n"
    )
}

/// A file entry as MCO renders a template: a `data:,` URL, percent-escaped.
pub fn ignition_file(path: &str, text: &str) -> Value {
    let escaped: String = percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).collect();
    json!({"path": path, "mode": 420, "overwrite": true, "contents": {"source": format!("data:,{escaped}")}})
}

/// The rendered worker MachineConfig `name` for `platform`; `ecr` replaces
/// the credential provider's text (AWS's by default).
pub fn rendered_worker(name: &str, platform: Platform, credential_provider: Option<&str>) -> Value {
    let mut files = vec![ignition_file("/etc/kubernetes/kubelet-ca.crt", "-----BEGIN CERTIFICATE-----\n")];
    if let Some((file, text)) = credential_provider_file(platform) {
        files.push(ignition_file(&format!("{PROVIDERS_DIR}/{file}"), credential_provider.unwrap_or(text)));
    }
    json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": name, "annotations": {
            "machineconfiguration.openshift.io/generated-by-controller-version": "0123abcd",
            "machineconfiguration.openshift.io/release-image-version": "4.22.0"}},
        "spec": {"config": {
            "ignition": {"version": "3.5.0"},
            "storage": {"files": files},
            "systemd": {"units": [
                {"name": "crio.service", "enabled": true},
                {"name": "kubelet.service", "enabled": true, "contents": kubelet_unit(platform)},
            ]},
        }},
    })
}

fn infrastructures(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &resource("config.openshift.io", "v1", "Infrastructure", "infrastructures"))
}

fn machine_configs(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource("machineconfiguration.openshift.io", "v1", "MachineConfig", "machineconfigs"),
    )
}

fn pools(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &resource("machineconfiguration.openshift.io", "v1", "MachineConfigPool", "machineconfigpools"),
    )
}

/// Seeds `platform` into a cluster the harness seeded (Infrastructure
/// `cluster` exists): its platform type, the worker pool and its rendered
/// MachineConfig. Returns that MachineConfig's name.
pub async fn seed_platform(client: &Client, platform: Platform) -> String {
    let status = json!({"status": {"platform": platform.as_str(), "platformStatus": {"type": platform.as_str()}}});
    infrastructures(client).patch_status("cluster", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    let name = format!("rendered-worker-{}", platform.as_str().to_lowercase());
    create(client, rendered_worker(&name, platform, None)).await;
    let pool = json!({
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfigPool",
        "metadata": {"name": "worker"},
        "spec": {"configuration": {"name": name},
                 "machineConfigSelector": {"matchLabels": {"machineconfiguration.openshift.io/role": "worker"}},
                 "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/worker": ""}}},
    });
    let pool: DynamicObject = serde_json::from_value(pool).unwrap();
    pools(client).create(&PostParams::default(), &pool).await.unwrap();
    run_configuration(client, &name).await;
    name
}

/// MCO renders a new configuration for `platform` with `credential_provider`
/// as the credential provider's text, and the pool runs it. Returns its name.
pub async fn rotate_rendered_worker(
    client: &Client,
    platform: Platform,
    suffix: &str,
    credential_provider: &str,
) -> String {
    let name = format!("rendered-worker-{}-{suffix}", platform.as_str().to_lowercase());
    create(client, rendered_worker(&name, platform, Some(credential_provider))).await;
    let spec = json!({"spec": {"configuration": {"name": name}}});
    pools(client).patch("worker", &PatchParams::default(), &Patch::Merge(&spec)).await.unwrap();
    run_configuration(client, &name).await;
    name
}

/// The pool's nodes all run `name` (what MCO's status says once updated).
async fn run_configuration(client: &Client, name: &str) {
    let status = json!({"status": {"configuration": {"name": name}, "machineCount": 2, "updatedMachineCount": 2}});
    pools(client).patch_status("worker", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
}

async fn create(client: &Client, object: Value) {
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    machine_configs(client).create(&PostParams::default(), &object).await.unwrap();
}
