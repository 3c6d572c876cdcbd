//! The kubelet's image credential provider config (`kubelet.config.k8s.io/v1`
//! `CredentialProviderConfig`, k8s.io/kubelet) as WMCO writes it to
//! `C:\k\credential-provider-config.yaml` (`modifyCredentialProviderConfig`):
//! read into the typed config (unknown fields dropped, as Go's unmarshal
//! does), every provider's `name` given the `.exe` suffix it lacks on
//! Windows, and marshalled again with `sigs.k8s.io/yaml` ([`super::go_yaml`]:
//! keys sorted, `12h` → `12h0m0s`). Pure.
//!
//! On posix nodes (the test stand-in of a Windows host) the names are kept:
//! the stand-in's provider binary has no `.exe` (docs/wmco-spec.md).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::go_yaml::{duration_string, parse_duration, to_yaml};
use crate::vocab::Shell;

/// The config, with the fields k8s.io/kubelet's v1 type has.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct CredentialProviderConfig {
    /// `kubelet.config.k8s.io/v1`.
    #[serde(rename = "apiVersion", default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `CredentialProviderConfig`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The providers (Go writes `null` for none).
    #[serde(default)]
    pub providers: Option<Vec<Provider>>,
}

/// One provider (`CredentialProvider`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct Provider {
    /// The provider's binary, in the kubelet's `--image-credential-provider-bin-dir`.
    #[serde(default)]
    pub name: String,
    /// The images it serves.
    #[serde(rename = "matchImages", default)]
    pub match_images: Option<Vec<String>>,
    /// How long its answers are cached (a Go duration, normalised).
    #[serde(rename = "defaultCacheDuration", default, skip_serializing_if = "Option::is_none")]
    pub default_cache_duration: Option<String>,
    /// The exec plugin's API version.
    #[serde(rename = "apiVersion", default)]
    pub api_version: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// Its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// The service account token it asks for (kept as given).
    #[serde(rename = "tokenAttributes", default, skip_serializing_if = "Option::is_none")]
    pub token_attributes: Option<Value>,
}

/// One `ExecEnvVar`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct EnvVar {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Value.
    #[serde(default)]
    pub value: String,
}

impl CredentialProviderConfig {
    /// Reads the YAML text; the duration is normalised as Go's
    /// `metav1.Duration` reads and writes it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut config: CredentialProviderConfig =
            serde_saphyr::from_str(text).map_err(|e| format!("not a CredentialProviderConfig: {e}"))?;
        for provider in config.providers.iter_mut().flatten() {
            if let Some(duration) = provider.default_cache_duration.as_mut() {
                *duration = duration_string(parse_duration(duration)?);
            }
            // Go's omitempty: an empty list is not written.
            provider.args = provider.args.take().filter(|a| !a.is_empty());
            provider.env = provider.env.take().filter(|e| !e.is_empty());
        }
        Ok(config)
    }

    /// The names of the providers, as the node's file names them.
    pub fn provider_names(&self, shell: Shell) -> Vec<String> {
        self.for_node(shell).providers.into_iter().flatten().map(|p| p.name).collect()
    }

    /// The text WMCO writes (on Windows, every name ends in `.exe`).
    pub fn node_text(&self, shell: Shell) -> String {
        to_yaml(&serde_json::to_value(self.for_node(shell)).unwrap_or(Value::Null))
    }

    fn for_node(&self, shell: Shell) -> CredentialProviderConfig {
        let mut config = self.clone();
        if shell == Shell::Powershell {
            for provider in config.providers.iter_mut().flatten() {
                if !provider.name.ends_with(".exe") {
                    provider.name.push_str(".exe");
                }
            }
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MCO's ECR template (`templates/common/aws/files/
    /// etc-kubernetes-credential-providers-ecr-credential-provider.yaml`).
    pub(crate) const MCO_ECR: &str = "apiVersion: kubelet.config.k8s.io/v1
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

    /// What WMCO writes to `C:\k\credential-provider-config.yaml` for it:
    /// research §1, obtained by running WMCO's unmarshal, rename and
    /// marshal on its vendored libraries.
    pub(crate) const WMCO_ECR: &str = "apiVersion: kubelet.config.k8s.io/v1
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

    #[test]
    fn mcos_ecr_config_becomes_wmcos_text_byte_for_byte_on_windows() {
        let config = CredentialProviderConfig::parse(MCO_ECR).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.node_text(Shell::Powershell), WMCO_ECR);
        assert_eq!(config.node_text(Shell::Posix), WMCO_ECR.replace(".exe", ""), "posix keeps the name");
    }

    #[test]
    fn a_name_with_exe_keeps_it_and_others_gain_it_as_in_wmcos_unit_test() {
        // WMCO's TestModifyCredentialProviderConfig: quay-provider gains
        // .exe, other-provider.exe is unchanged.
        let text = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n\
                    - name: quay-provider\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: [quay.io]\n  \
                    args: []\n  env: [{name: REGION, value: us-east-1}]\n  unknownField: dropped\n\
                    - name: other-provider.exe\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n  matchImages: []\n  \
                    defaultCacheDuration: 90m\n";
        let config = CredentialProviderConfig::parse(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(config.provider_names(Shell::Powershell), ["quay-provider.exe", "other-provider.exe"]);
        let written = config.node_text(Shell::Powershell);
        let expected = "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n\
                        - apiVersion: credentialprovider.kubelet.k8s.io/v1\n  env:\n  - name: REGION\n    value: us-east-1\n  \
                        matchImages:\n  - quay.io\n  name: quay-provider.exe\n\
                        - apiVersion: credentialprovider.kubelet.k8s.io/v1\n  defaultCacheDuration: 1h30m0s\n  \
                        matchImages: []\n  name: other-provider.exe\n";
        assert_eq!(written, expected);
    }

    #[test]
    fn a_config_that_is_not_one_is_refused_with_the_reason() {
        assert!(
            CredentialProviderConfig::parse("providers: 3\n").unwrap_err().contains("not a CredentialProviderConfig")
        );
        let bad = "providers:\n- name: x\n  defaultCacheDuration: soon\n";
        assert!(CredentialProviderConfig::parse(bad).unwrap_err().contains("not a Go duration"));
    }
}
