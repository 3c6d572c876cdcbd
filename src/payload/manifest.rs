//! The canonical payload manifest and its digest, the value the Fleet's
//! `spec.payload.digest` pins. Pure.
//!
//! The manifest is `sha256sum`'s own format, one line per file sorted by
//! path (byte order): `<lower-case hex sha256>  <relative/path>\n`, with
//! `/` as separator whatever the machine. The digest is `sha256:` and the
//! SHA-256 of that text. Admins know the format (WMCO's image carries a
//! `/payload/sha256sum` of the same shape), and any change of a byte, a
//! name or the set of files changes the digest.

use crate::vocab::file::sha256_hex;

/// The prefix of every payload digest.
pub const DIGEST_PREFIX: &str = "sha256:";

/// One line of the manifest: a file's path relative to the payload
/// directory (`/`-separated) and the SHA-256 of its content.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ManifestEntry {
    /// Relative path, `/`-separated, no `.` or `..` components.
    pub path: String,
    /// Lower-case hex SHA-256 of the content.
    pub sha256: String,
}

/// The canonical manifest text of `entries` (sorted here; the caller's
/// order does not matter).
pub fn manifest_text(entries: &[ManifestEntry]) -> String {
    let mut sorted: Vec<&ManifestEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let mut text = String::with_capacity(sorted.len() * 100);
    for entry in sorted {
        text.push_str(&entry.sha256);
        text.push_str("  ");
        text.push_str(&entry.path);
        text.push('\n');
    }
    text
}

/// The digest of a manifest text: `sha256:<hex>`.
pub fn digest(manifest: &str) -> String {
    format!("{DIGEST_PREFIX}{}", sha256_hex(manifest.as_bytes()))
}

/// Whether `text` has the shape of a payload digest (`sha256:` and 64
/// lower-case hex digits).
pub fn is_digest(text: &str) -> bool {
    text.strip_prefix(DIGEST_PREFIX)
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// Whether a relative payload path is acceptable: `/`-separated names,
/// none empty, `.` or `..`, no backslash or control character (the path
/// becomes a node path on both dialects).
pub fn is_relative_path(path: &str) -> bool {
    !path.is_empty()
        && path.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
        && !path.chars().any(|c| c.is_control() || c == '\\')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, sha: char) -> ManifestEntry {
        ManifestEntry { path: path.into(), sha256: sha.to_string().repeat(64) }
    }

    #[test]
    fn the_manifest_is_sorted_sha256sum_text_and_its_digest_is_stable() {
        let entries = [entry("kube-node/kubelet.exe", 'b'), entry("cni/win-overlay.exe", 'a')];
        let text = manifest_text(&entries);
        assert_eq!(
            text,
            format!("{}  cni/win-overlay.exe\n{}  kube-node/kubelet.exe\n", "a".repeat(64), "b".repeat(64))
        );
        let reversed = [entries[1].clone(), entries[0].clone()];
        assert_eq!(digest(&manifest_text(&reversed)), digest(&text));
        assert!(is_digest(&digest(&text)));
    }

    #[test]
    fn any_change_of_name_or_content_changes_the_digest() {
        let base = digest(&manifest_text(&[entry("a", 'a')]));
        assert_ne!(base, digest(&manifest_text(&[entry("b", 'a')])));
        assert_ne!(base, digest(&manifest_text(&[entry("a", 'c')])));
        assert_ne!(base, digest(&manifest_text(&[entry("a", 'a'), entry("b", 'a')])));
    }

    #[test]
    fn digests_and_paths_are_checked_for_shape() {
        assert!(!is_digest("sha256:ABC"));
        assert!(!is_digest(&format!("md5:{}", "a".repeat(64))));
        assert!(is_relative_path("cni/host-local.exe"));
        for bad in ["", "/abs", "a//b", "a/../b", "./a", "a\\b", "a\nb"] {
            assert!(!is_relative_path(bad), "{bad:?}");
        }
    }
}
