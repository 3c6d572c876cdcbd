//! The cluster-wide proxy's trusted CA bundle on a node (issue 27, item 2;
//! WMCO's `SyncTrustedCABundle` and WICD's `certs.Reconcile`). Pure: the
//! bundle is read elsewhere ([`crate::cluster::trusted_ca`]).
//!
//! Two generated files, always present once a node has the cluster
//! material (empty when the Proxy names no trusted CA, as WMCO writes an
//! empty bundle):
//!
//! - `ca-bundle.crt` in the kube directory (WMCO's `TrustedCABundlePath`,
//!   `C:\k\ca-bundle.crt`): the bundle as the ConfigMap holds it;
//! - the import record ([`RECORD`], WICD's `C:\k\imported-certs.pem`; on
//!   posix nodes `<kube>/ca-certificates/imported-certs.pem`): the bundle's
//!   certificates, one canonical PEM block each. Writing it is the import:
//!   the dialect adds every certificate the node's trust store lacks
//!   (Windows: `Cert:\LocalMachine\Root`; posix: one `<sha256>.crt` file
//!   per certificate beside the record, the layout `update-ca-certificates`
//!   reads) and removes those winfleet added before that the new record
//!   does not hold; removing it (deconfigure) removes what winfleet added.
//!
//! What winfleet added is the node's own fact, not a desired file: the
//! dialect keeps it beside the record ([`added_path`], one store key a
//! line: the Windows thumbprint, the posix SHA-256), and only a
//! certificate listed there is ever removed. One already in the store when
//! the import came (a root Windows ships, one the administrator or WMCO
//! put there) is not listed, so it stays whatever the bundle does. A
//! record without that list (WICD's, adopted from a host WMCO configured)
//! proves no addition: WICD copies its whole bundle over the record and
//! adds with `CERT_STORE_ADD_REPLACE_EXISTING`, which succeeds whether the
//! certificate was there or not (docs/wmco-spec.md "Trusted CA bundle").
//!
//! Plans show each file as the certificates' subjects and SHA-256
//! fingerprints, never the PEM text.

use std::fmt::Write;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use x509_parser::pem::Pem;

use super::{GeneratedFile, LifecycleSpec};
use crate::vocab::Shell;
use crate::vocab::file::{ManagedFile, node_path, sha256_hex};

/// The bundle's file name, in the kube directory (WMCO's).
pub const BUNDLE: &str = "ca-bundle.crt";
/// The import record's file name (WICD's `imported-certs.pem`).
pub const RECORD: &str = "imported-certs.pem";
/// The list of what winfleet added to the store, beside the record.
pub const ADDED: &str = "imported-certs.added";
/// posix: the directory (in the kube directory) that stands for the trust
/// store, holding the record and one file per imported certificate.
pub const POSIX_STORE: &str = "ca-certificates";
/// The ConfigMap key that holds the bundle (OpenShift's, WMCO's).
pub const BUNDLE_KEY: &str = "ca-bundle.crt";

/// The trusted CA bundle the cluster gives every node; empty when the
/// Proxy names none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedCa {
    /// The ConfigMap it came from (`openshift-config/<name>`), if any.
    pub source: Option<String>,
    /// The bundle, as the ConfigMap holds it.
    pub bundle: String,
}

/// One certificate of a bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificate {
    /// The DER bytes.
    pub der: Vec<u8>,
    /// Its subject, as RFC 4514 text.
    pub subject: String,
    /// Lower-case hex SHA-256 of the DER bytes (the fingerprint).
    pub sha256: String,
}

impl Certificate {
    /// One canonical PEM block (64 columns, a final newline).
    pub fn pem(&self) -> String {
        let body = STANDARD.encode(&self.der);
        let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
        for chunk in body.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(chunk));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
        out
    }
}

/// The certificates of a PEM bundle, in order, duplicates dropped; blocks
/// other than `CERTIFICATE` are ignored (as WICD reads only certificates).
/// An error names the block that does not parse.
pub fn certificates(bundle: &str) -> Result<Vec<Certificate>, String> {
    let mut out: Vec<Certificate> = Vec::new();
    for (n, block) in Pem::iter_from_buffer(bundle.as_bytes()).enumerate() {
        let block = block.map_err(|e| format!("PEM block {}: {e}", n + 1))?;
        if block.label != "CERTIFICATE" {
            continue;
        }
        let cert = block.parse_x509().map_err(|e| format!("certificate {}: {e}", n + 1))?;
        let subject = cert.subject().to_string();
        let sha256 = sha256_hex(&block.contents);
        if !out.iter().any(|c| c.sha256 == sha256) {
            out.push(Certificate { der: block.contents.clone(), subject, sha256 });
        }
    }
    Ok(out)
}

/// How a bundle is shown: its certificates' subjects and fingerprints.
pub fn describe(certs: &[Certificate]) -> String {
    if certs.is_empty() {
        return "no certificate".to_owned();
    }
    let mut out = format!("{} certificate{}: ", certs.len(), if certs.len() == 1 { "" } else { "s" });
    for (i, c) in certs.iter().take(3).enumerate() {
        let _ = write!(out, "{}{} sha256:{}", if i > 0 { "; " } else { "" }, c.subject, c.sha256);
    }
    if certs.len() > 3 {
        let _ = write!(out, "; and {} more", certs.len() - 3);
    }
    out
}

/// Where the import record lives in `spec`'s dialect.
pub fn record_path(spec: &LifecycleSpec) -> String {
    match spec.shell {
        Shell::Powershell => spec.kube_path(RECORD),
        Shell::Posix => node_path(spec.shell, &spec.kube_dir, &[POSIX_STORE, RECORD]),
    }
}

/// Where the list of what winfleet added lives: beside the record at
/// `record` (same directory, [`ADDED`]).
pub fn added_path(record: &str) -> String {
    match record.rfind(['/', '\\']) {
        Some(i) => format!("{}{ADDED}", &record[..=i]),
        None => ADDED.to_owned(),
    }
}

/// Whether a node path is an import record (its file name is
/// [`RECORD`]): the dialects import on its write and remove on its removal.
pub fn is_record(path: &str) -> bool {
    path.rsplit(['/', '\\']).next() == Some(RECORD)
}

/// The two generated files. `ca` was checked when it was read; a bundle
/// that does not parse here imports nothing.
pub fn render(spec: &LifecycleSpec, ca: &TrustedCa) -> Vec<GeneratedFile> {
    let certs = certificates(&ca.bundle).unwrap_or_default();
    let shown = describe(&certs);
    let record: String = certs.iter().map(Certificate::pem).collect();
    vec![
        GeneratedFile::new(spec.kube_path(BUNDLE), ManagedFile::with_secret(ca.bundle.clone(), shown.clone())),
        GeneratedFile::new(record_path(spec), ManagedFile::with_secret(record, shown)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca(name: &str) -> String {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("{e}"));
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        params.self_signed(&key).unwrap_or_else(|e| panic!("{e}")).pem()
    }

    #[test]
    fn a_bundle_is_read_certificate_by_certificate_and_shown_by_subject_and_fingerprint() {
        let (a, b) = (ca("proxy-ca"), ca("corp-root"));
        let bundle = format!("# a comment\n{a}\n{b}{a}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n");
        let certs = certificates(&bundle).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(certs.len(), 2, "duplicates dropped, other blocks ignored");
        assert_eq!(certs[0].subject, "CN=proxy-ca");
        assert_eq!(certs[0].pem().replace('\n', ""), a.replace(['\n', '\r'], ""));
        let shown = describe(&certs);
        assert!(shown.starts_with("2 certificates: CN=proxy-ca sha256:"), "{shown}");
        assert!(!shown.contains(a.lines().nth(1).unwrap_or_default()), "{shown}");
        assert!(certificates("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").is_err());
        assert_eq!(describe(&[]), "no certificate");
    }

    #[test]
    fn both_files_are_rendered_even_with_no_bundle_and_the_record_is_found_by_name() {
        let spec = crate::lifecycle::tests_support::posix_spec();
        let files = render(&spec, &TrustedCa::default());
        assert_eq!(files[0].path, "payload/ca-bundle.crt");
        assert_eq!(files[1].path, "payload/ca-certificates/imported-certs.pem");
        assert!(files.iter().all(|f| f.file.content().is_empty() && f.file.display() == "no certificate"));
        assert!(is_record(&files[1].path) && !is_record(&files[0].path));
        assert!(is_record(r"C:\k\imported-certs.pem"));
        assert_eq!(added_path(&files[1].path), "payload/ca-certificates/imported-certs.added");
        assert_eq!(added_path(r"C:\k\imported-certs.pem"), r"C:\k\imported-certs.added");
        assert_eq!(added_path("imported-certs.pem"), "imported-certs.added");
    }
}
