//! windows_exporter's TLS material on a node (issue 41). Pure: the Secret
//! is read elsewhere ([`crate::cluster::material`]).
//!
//! WMCO's services manifest starts windows_exporter with
//! `--web.config.file C:\k\tls\windows-exporter-webconfig.yaml`; that web
//! config (exporter-toolkit's format) names `C:\k\tls\certs\tls.crt` and
//! `tls.key`, which WMCO copies from the Secret the service CA operator
//! issues for the exporter's Service (`windows-machine-config-operator-tls`,
//! WMCO's `createTLSCerts` and its secret controller on rotation). winfleet
//! writes the three as generated files:
//!
//! - `tls/certs/tls.crt`, `tls/certs/tls.key` under the kube directory
//!   (`C:\k\tls\certs\...` on Windows, beside the payload on posix nodes);
//! - `tls/windows-exporter-webconfig.yaml`: on Windows, the same bytes as
//!   the file WMCO's payload ships (`windows-exporter/` in the payload, laid
//!   out at the same path, which gives way to the generated one: one writer
//!   a path); on posix nodes the certificate paths are relative, which
//!   exporter-toolkit resolves from the web config's own directory.
//!
//! The certificate files are named only inside the web config, so a
//! changed certificate or key restarts the services whose command names
//! the web config ([`GeneratedFile::named_in`]; the plan's restart rule): windows_exporter
//! and nothing else. All three are removed at deconfigure with the other
//! recorded files. The key is secret; all three are shown as hash prefixes.

use std::fmt;

use super::{GeneratedFile, LifecycleSpec};
use crate::vocab::Shell;
use crate::vocab::file::{ManagedFile, node_path};

/// The directory under the kube directory (WMCO's `TLSDir`).
pub const TLS_DIR: &str = "tls";
/// The web config's file name (WMCO's `TLSConfPath`).
pub const WEB_CONFIG: &str = "windows-exporter-webconfig.yaml";
/// The certificates' directory under [`TLS_DIR`] (WMCO's `TLSCertsPath`).
pub const CERTS_DIR: &str = "certs";
/// The Secret's keys, and the files' names.
pub const CERT: &str = "tls.crt";
/// See [`CERT`].
pub const KEY: &str = "tls.key";

/// The serving certificate and key of the exporter's Service (PEM).
#[derive(Clone, PartialEq, Eq)]
pub struct ExporterTls {
    /// `tls.crt`.
    pub cert: String,
    /// `tls.key` (secret).
    pub key: String,
}

impl fmt::Debug for ExporterTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExporterTls").field("key", &"<redacted>").finish_non_exhaustive()
    }
}

/// The web config's node path.
pub fn web_config_path(spec: &LifecycleSpec) -> String {
    node_path(spec.shell, &spec.kube_dir, &[TLS_DIR, WEB_CONFIG])
}

fn cert_path(spec: &LifecycleSpec, name: &str) -> String {
    node_path(spec.shell, &spec.kube_dir, &[TLS_DIR, CERTS_DIR, name])
}

/// The web config's text for the dialect.
fn web_config(shell: Shell) -> String {
    match shell {
        // WMCO's pkg/internal/windows-exporter-webconfig.yaml, byte for byte
        // (a plain YAML scalar: the doubled backslashes are in the path).
        Shell::Powershell => "tls_server_config:\n  cert_file: C:\\\\k\\\\tls\\\\certs\\\\tls.crt\n  key_file: \
             C:\\\\k\\\\tls\\\\certs\\\\tls.key\n"
            .to_owned(),
        Shell::Posix => format!("tls_server_config:\n  cert_file: {CERTS_DIR}/{CERT}\n  key_file: {CERTS_DIR}/{KEY}\n"),
    }
}

/// The generated files when the cluster material carries the Secret's
/// content; none without it.
pub fn render(spec: &LifecycleSpec, tls: Option<&ExporterTls>) -> Vec<GeneratedFile> {
    let Some(tls) = tls else { return Vec::new() };
    // The certificate and key are named only in the web config: a change
    // restarts the service whose command names that (windows_exporter).
    let named_in_web_config = |path: String, content: &str| GeneratedFile {
        path,
        file: ManagedFile::secret(content.to_owned()),
        named_in: Some(web_config_path(spec)),
    };
    vec![
        named_in_web_config(cert_path(spec, CERT), &tls.cert),
        named_in_web_config(cert_path(spec, KEY), &tls.key),
        GeneratedFile::new(web_config_path(spec), ManagedFile::secret(web_config(spec.shell))),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::tests_support::{posix_spec, windows_spec};

    fn tls() -> ExporterTls {
        ExporterTls { cert: "CERT".into(), key: "KEY-SENTINEL".into() }
    }

    #[test]
    fn no_secret_means_no_file() {
        assert!(render(&posix_spec(), None).is_empty());
    }

    #[test]
    fn windows_nodes_get_wmcos_paths_and_wmcos_web_config() {
        let files = render(&windows_spec(), Some(&tls()));
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [r"C:\k\tls\certs\tls.crt", r"C:\k\tls\certs\tls.key", r"C:\k\tls\windows-exporter-webconfig.yaml"]
        );
        assert_eq!(
            files[2].file.content(),
            "tls_server_config:\n  cert_file: C:\\\\k\\\\tls\\\\certs\\\\tls.crt\n  key_file: \
             C:\\\\k\\\\tls\\\\certs\\\\tls.key\n"
        );
        assert_eq!(files[0].file.content(), "CERT");
    }

    #[test]
    fn posix_nodes_get_them_beside_the_payload_with_paths_relative_to_the_web_config() {
        let files = render(&posix_spec(), Some(&tls()));
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            ["payload/tls/certs/tls.crt", "payload/tls/certs/tls.key", "payload/tls/windows-exporter-webconfig.yaml"]
        );
        assert_eq!(
            files[2].file.content(),
            "tls_server_config:\n  cert_file: certs/tls.crt\n  key_file: certs/tls.key\n"
        );
    }

    #[test]
    fn the_key_is_never_shown() {
        let files = render(&posix_spec(), Some(&tls()));
        assert_eq!(files[1].file.content(), "KEY-SENTINEL");
        assert_eq!(files[1].file.display(), crate::lifecycle::material::redacted("KEY-SENTINEL"));
        assert!(!format!("{:?} {:?}", files[1].file, tls()).contains("KEY-SENTINEL"));
    }

    #[test]
    fn the_certificate_and_key_are_named_in_the_web_config_only() {
        let files = render(&windows_spec(), Some(&tls()));
        let named: Vec<(&str, Option<&str>)> = files.iter().map(|f| (f.path.as_str(), f.named_in.as_deref())).collect();
        let web = r"C:\k\tls\windows-exporter-webconfig.yaml";
        assert_eq!(
            named,
            [(r"C:\k\tls\certs\tls.crt", Some(web)), (r"C:\k\tls\certs\tls.key", Some(web)), (web, None)]
        );
    }
}
