//! Private keys never belong in Git: any PEM private key block anywhere in
//! the repository (any file, not only YAML) is an error.

use memchr::memmem;

use crate::diagnostic::Diagnostic;
use crate::source::Snapshot;

const BEGIN: &[u8] = b"-----BEGIN ";

/// Finds PEM private key headers (`-----BEGIN … PRIVATE KEY-----`, which
/// covers RSA, EC, OpenSSH, PKCS#8, encrypted and PGP keys).
pub fn scan(snapshot: &Snapshot) -> Vec<Diagnostic> {
    let finder = memmem::Finder::new(BEGIN);
    let mut found = Vec::new();
    for file in &snapshot.files {
        for at in finder.find_iter(&file.bytes) {
            let rest = &file.bytes[at + BEGIN.len()..];
            let line_end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
            let label = &rest[..line_end];
            let label = label.strip_suffix(b"\r").unwrap_or(label);
            let Some(label) = label.strip_suffix(b"-----") else { continue };
            if memmem::find(label, b"PRIVATE KEY").is_none() {
                continue;
            }
            let before = &file.bytes[..at];
            let line = memchr::memchr_iter(b'\n', before).count() + 1;
            let column = at - before.iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1) + 1;
            found.push(Diagnostic::at(
                &file.path,
                line,
                column,
                "a PEM private key is committed here: private keys never belong in the config repository \
                 (winfleet reads the SSH key from --ssh-key / the cloud-private-key secret); remove it and rotate the key",
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::SourceFile;

    fn snapshot(path: &str, text: &str) -> Snapshot {
        Snapshot {
            revision: None,
            files: vec![SourceFile { path: path.into(), bytes: text.as_bytes().to_vec() }],
            links: Vec::new(),
        }
    }

    #[test]
    fn finds_private_keys_in_any_file_with_their_position() {
        let d = scan(&snapshot("notes/id.txt", "hello\n  -----BEGIN OPENSSH PRIVATE KEY-----\nabc\n"));
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].line, d[0].column), (2, 3));
    }

    #[test]
    fn public_keys_and_certificates_are_fine() {
        assert!(scan(&snapshot("a.pem", "-----BEGIN CERTIFICATE-----\n-----BEGIN PUBLIC KEY-----\n")).is_empty());
    }
}
