//! The worker pool's rendered MachineConfig, as far as a Windows node needs
//! it (issue 36; WMCO's `pkg/ignition` and `pkg/nodeconfig`
//! `createFilesFromIgnition`): the kubelet's `--cloud-provider` and
//! `--cloud-config` from the unit `kubelet.service`, the ECR credential
//! provider's config and the legacy `cloud.conf` from `storage.files`.
//! Pure: the MachineConfig is read elsewhere
//! ([`crate::cluster::machine_config`]); its files are rendered by
//! [`super::platform_files`].
//!
//! Ignition spec 3.x only (MCO renders 3.4 or 3.5). A file's
//! `contents.source` is a data URL (`data:,<percent-escaped>` as MCO's
//! templates give, `data:;base64,<...>` as its generated files give).
//! A compressed file is refused with the reason: WMCO ignores
//! `contents.compression` and would write the gzip bytes; MCO compresses
//! no file WMCO reads.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use percent_encoding::percent_decode_str;
use serde_json::Value;

use super::credential_provider::CredentialProviderConfig;

/// The ECR credential provider's config in the MachineConfig (MCO's AWS
/// template, the only one WMCO reads).
pub const ECR_CONFIG: &str = "/etc/kubernetes/credential-providers/ecr-credential-provider.yaml";
/// The legacy cloud provider config (OCP ≤ 4.15, with `--cloud-config`).
pub const CLOUD_CONF: &str = "/etc/kubernetes/cloud.conf";
/// The kubelet's unit.
pub const KUBELET_UNIT: &str = "kubelet.service";

/// The kubelet flags WMCO carries over (`parseKubeletArgs`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeletArgs {
    /// `--cloud-provider` (`external`, or empty on platform None).
    pub cloud_provider: Option<String>,
    /// `--cloud-config` (only before OCP 4.16).
    pub cloud_config: Option<String>,
}

/// What a Windows node takes from the rendered worker MachineConfig.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedWorker {
    /// The MachineConfig's name (`rendered-worker-<hash>`).
    pub name: String,
    /// Why that one: the pool's configuration, or WMCO's newest rule.
    pub chosen_by: String,
    /// The kubelet unit's cloud flags.
    pub kubelet: KubeletArgs,
    /// The ECR credential provider's config, when the MachineConfig has one.
    pub credential_provider: Option<CredentialProviderConfig>,
    /// `cloud.conf`, when the kubelet has `--cloud-config` and the
    /// MachineConfig the file (secret: cloud credentials may be inline).
    pub cloud_conf: Option<String>,
}

/// Reads `config` (`spec.config` of MachineConfig `name`).
pub fn parse(name: &str, chosen_by: &str, config: &Value) -> Result<RenderedWorker, String> {
    let at = |e: String| format!("MachineConfig {name}: {e}");
    let version = config.pointer("/ignition/version").and_then(Value::as_str).unwrap_or_default();
    if !version.starts_with("3.") {
        return Err(at(format!("ignition spec version {version:?} is not 3.x")));
    }
    let kubelet = kubelet_args(config).map_err(at)?;
    let credential_provider = match file(config, ECR_CONFIG).map_err(at)? {
        Some(text) => Some(CredentialProviderConfig::parse(&text).map_err(|e| at(format!("{ECR_CONFIG}: {e}")))?),
        None => None,
    };
    let cloud_conf = match kubelet.cloud_config {
        Some(_) => file(config, CLOUD_CONF).map_err(at)?,
        None => None,
    };
    Ok(RenderedWorker {
        name: name.to_owned(),
        chosen_by: chosen_by.to_owned(),
        kubelet,
        credential_provider,
        cloud_conf,
    })
}

/// The text of the file at `path` in `storage.files` (the last entry for
/// that path wins, as Ignition merges); `None` when there is none.
pub fn file(config: &Value, path: &str) -> Result<Option<String>, String> {
    let files = config.pointer("/storage/files").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let Some(entry) = files.iter().rev().find(|f| f.get("path").and_then(Value::as_str) == Some(path)) else {
        return Ok(None);
    };
    let compression = entry.pointer("/contents/compression").and_then(Value::as_str).unwrap_or_default();
    if !compression.is_empty() {
        return Err(format!(
            "{path} is compressed ({compression}); winfleet does not write compressed contents (WMCO would write the \
             compressed bytes as they are)"
        ));
    }
    let source = entry
        .pointer("/contents/source")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{path} has no contents.source (WMCO: \"File is empty\")"))?;
    let bytes = data_url(source).map_err(|e| format!("{path}: {e}"))?;
    String::from_utf8(bytes).map(Some).map_err(|_| format!("{path} is not UTF-8 text"))
}

/// The bytes of an RFC 2397 data URL (`data:[<type>][;base64],<data>`).
pub fn data_url(source: &str) -> Result<Vec<u8>, String> {
    let rest = source
        .strip_prefix("data:")
        .ok_or_else(|| "contents.source is not a data URL (remote sources are not read)".to_owned())?;
    let (header, data) = rest.split_once(',').ok_or_else(|| "the data URL has no ','".to_owned())?;
    let bytes: Vec<u8> = percent_decode_str(data).collect();
    if header.to_ascii_lowercase().ends_with(";base64") {
        let text: Vec<u8> = bytes.into_iter().filter(|b| !b.is_ascii_whitespace()).collect();
        STANDARD.decode(text).map_err(|e| format!("the data URL's base64 does not decode: {e}"))
    } else {
        Ok(bytes)
    }
}

/// `--cloud-provider` and `--cloud-config` of the unit `kubelet.service`
/// as WMCO's `parseKubeletArgs` reads them: `ExecStart=` up to the first
/// blank line, split on the line continuations, each piece trimmed and
/// its `--` dropped, keyed on what precedes its first `=` (so a line with
/// two flags keys on its first).
pub fn kubelet_args(config: &Value) -> Result<KubeletArgs, String> {
    let units = config.pointer("/systemd/units").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let unit = units
        .iter()
        .find(|u| u.get("name").and_then(Value::as_str) == Some(KUBELET_UNIT))
        .ok_or_else(|| format!("no systemd unit {KUBELET_UNIT}"))?;
    let contents = unit.get("contents").and_then(Value::as_str).unwrap_or_default();
    let (_, exec) =
        contents.split_once("ExecStart=").ok_or_else(|| format!("the unit {KUBELET_UNIT} has no ExecStart"))?;
    let exec = exec.split("\n\n").next().unwrap_or_default();
    let mut args = KubeletArgs::default();
    for piece in exec.split("\\\n") {
        let piece = piece.trim();
        let piece = piece.strip_prefix("--").unwrap_or(piece);
        match piece.split_once('=') {
            Some(("cloud-provider", value)) => args.cloud_provider = Some(value.to_owned()),
            Some(("cloud-config", value)) => args.cloud_config = Some(value.to_owned()),
            _ => {}
        }
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// MCO's kubelet unit on AWS (OCP ≥ 4.16): research §7.
    pub(crate) const AWS_UNIT: &str = "[Unit]\nDescription=Kubernetes Kubelet\n\n[Service]\nExecStart=/usr/local/bin/kubenswrapper \\\n    /usr/bin/kubelet \\\n      --config=/etc/kubernetes/kubelet.conf \\\n      --cloud-provider=external \\\n      --image-credential-provider-bin-dir=/usr/libexec/kubelet-image-credential-provider-plugins --image-credential-provider-config=/etc/kubernetes/credential-providers/ecr-credential-provider.yaml \\\n      --hostname-override=${KUBELET_NODE_NAME} \\\n      --v=${KUBELET_LOG_LEVEL}\n\nRestart=always\n";

    fn config(unit: &str, files: Value) -> Value {
        json!({
            "ignition": {"version": "3.5.0"},
            "storage": {"files": files},
            "systemd": {"units": [{"name": "crio.service"}, {"name": "kubelet.service", "enabled": true, "contents": unit}]},
        })
    }

    #[test]
    fn the_kubelet_units_cloud_flags_are_read_as_wmcos_parse_kubelet_args_does() {
        let aws = kubelet_args(&config(AWS_UNIT, json!([]))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(aws, KubeletArgs { cloud_provider: Some("external".into()), cloud_config: None });
        let none = AWS_UNIT.replace("--cloud-provider=external", "--cloud-provider=");
        let none = kubelet_args(&config(&none, json!([]))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(none.cloud_provider.as_deref(), Some(""), "platform None: empty, copied as WMCO does");
        // WMCO's TestParseKubeletArgs: an Azure unit of OCP ≤ 4.15.
        let azure = "[Service]\nExecStart=/usr/bin/hyperkube \\\n    kubelet \\\n      --cloud-provider=azure \\\n      --cloud-config=/etc/kubernetes/cloud.conf \\\n      --v=2\n\nRestart=always\n";
        let azure = kubelet_args(&config(azure, json!([]))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(azure.cloud_provider.as_deref(), Some("azure"));
        assert_eq!(azure.cloud_config.as_deref(), Some("/etc/kubernetes/cloud.conf"));
        // A flag after the first blank line is not the command's.
        let after = "ExecStart=/usr/bin/kubelet \\\n  --v=2\n\n--cloud-provider=aws\n";
        assert_eq!(kubelet_args(&config(after, json!([]))).unwrap_or_else(|e| panic!("{e}")), KubeletArgs::default());
        let no_unit = json!({"ignition": {"version": "3.5.0"}, "systemd": {"units": []}});
        assert!(kubelet_args(&no_unit).unwrap_err().contains("no systemd unit kubelet.service"));
        assert!(kubelet_args(&config("[Service]\n", json!([]))).unwrap_err().contains("no ExecStart"));
    }

    #[test]
    fn data_urls_decode_in_both_of_mcos_forms_and_compression_is_refused_with_the_reason() {
        assert_eq!(data_url("data:,a%3A%20b%0A").unwrap_or_default(), b"a: b\n");
        assert_eq!(data_url("data:text/plain;charset=utf-8;base64,YTogYgo=").unwrap_or_default(), b"a: b\n");
        assert!(data_url("https://example.com/x").unwrap_err().contains("not a data URL"));
        assert!(data_url("data:;base64,***").is_err());
        let files = json!([
            {"path": "/etc/a", "contents": {"source": "data:,one"}},
            {"path": "/etc/a", "contents": {"source": "data:,two"}},
            {"path": "/etc/z", "contents": {"source": "data:;base64,H4sI", "compression": "gzip"}},
            {"path": "/etc/e", "contents": {}},
        ]);
        let c = config(AWS_UNIT, files);
        assert_eq!(file(&c, "/etc/a").unwrap_or_default().as_deref(), Some("two"), "the last entry wins");
        assert_eq!(file(&c, "/etc/missing").unwrap_or_default(), None);
        let gzip = file(&c, "/etc/z").unwrap_err();
        assert!(gzip.contains("compressed (gzip)") && gzip.contains("WMCO would write"), "{gzip}");
        assert!(file(&c, "/etc/e").unwrap_err().contains("File is empty"));
    }

    #[test]
    fn cloud_conf_is_taken_only_when_the_kubelet_names_a_cloud_config() {
        let files = json!([{"path": CLOUD_CONF, "contents": {"source": "data:,%5BGlobal%5D%0A"}}]);
        let current =
            parse("rendered-worker-a", "test", &config(AWS_UNIT, files.clone())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((current.cloud_conf, current.credential_provider), (None, None));
        let legacy = AWS_UNIT.replace(
            "--cloud-provider=external",
            "--cloud-provider=aws \\\n      --cloud-config=/etc/kubernetes/cloud.conf",
        );
        let legacy = parse("rendered-worker-b", "test", &config(&legacy, files)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(legacy.cloud_conf.as_deref(), Some("[Global]\n"));
        let v2 = json!({"ignition": {"version": "2.2.0"}});
        assert!(
            parse("rendered-worker-c", "test", &v2).unwrap_err().contains("rendered-worker-c: ignition spec version")
        );
    }
}
