//! The payload kubelet's version, read from the binary itself: the
//! Kubernetes build stamps its version with the Go linker
//! (`-X 'k8s.io/component-base/version.gitVersion=v1.36.2+a80dac2'`, from
//! `KUBE_GIT_VERSION`: WMCO's Makefile sets `KUBELET_GIT_VERSION` and
//! builds `kubelet.exe` with it), and Go (1.18 and later) records those
//! linker flags in the build information every binary carries (what `go
//! version -m kubelet.exe` prints as `build -ldflags=…`), stripped or not,
//! PE or ELF. So the version is found by looking for that text in the
//! bytes: nothing of the payload is ever executed on the winfleet host (a
//! Windows `.exe` cannot run there), and no executable format is parsed.
//! WMCO's payload carries no version file (`build/Dockerfile.base` packs
//! the binaries and a `sha256sum` list only).
//!
//! [`find`] is pure; [`scan`] streams a file through it.

use std::io::Read;
use std::path::Path;

use crate::vocab::kube_version::major_minor;

/// What precedes the version in the build information.
pub const MARKER: &[u8] = b"k8s.io/component-base/version.gitVersion=";
/// The file names of the kubelet in a payload (WMCO's, and a posix test
/// node's).
pub const KUBELET_NAMES: [&str; 2] = ["kubelet.exe", "kubelet"];
/// The longest version text read after the marker.
const MAX_VERSION: usize = 64;

/// The version after the first [`MARKER`] in `bytes` that is a Kubernetes
/// version (`v1.36.2+a80dac2`), or `None`.
pub fn find(bytes: &[u8]) -> Option<String> {
    positions(bytes).find_map(|at| version_at(&bytes[at + MARKER.len()..]))
}

fn positions(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes.windows(MARKER.len()).enumerate().filter(|(_, w)| *w == MARKER).map(|(at, _)| at)
}

fn version_at(after: &[u8]) -> Option<String> {
    let version: String = after
        .iter()
        .take(MAX_VERSION)
        .take_while(|b| b.is_ascii_alphanumeric() || b".+-_~".contains(b))
        .map(|&b| char::from(b))
        .collect();
    major_minor(&version).is_some().then_some(version)
}

/// The version stamped into the file at `path` ([`find`] over its bytes,
/// read in pieces: a kubelet is about a hundred megabytes).
pub fn scan(path: &Path) -> std::io::Result<Option<String>> {
    let mut file = std::fs::File::open(path)?;
    let keep = MARKER.len() + MAX_VERSION;
    let mut window: Vec<u8> = Vec::with_capacity((1 << 20) + keep);
    let mut chunk = vec![0; 1 << 20];
    loop {
        let n = file.read(&mut chunk)?;
        window.extend_from_slice(&chunk[..n]);
        let eof = n == 0;
        // A marker in the last `keep` bytes may be cut short: it is looked
        // at again with the next piece, unless the file ends here.
        let complete = if eof { window.len() } else { window.len().saturating_sub(keep) };
        let found = positions(&window).take_while(|at| *at < complete).find_map(|at| {
            let end = (at + MARKER.len() + MAX_VERSION).min(window.len());
            version_at(&window[at + MARKER.len()..end])
        });
        if found.is_some() || eof {
            return Ok(found);
        }
        window.drain(..window.len().saturating_sub(keep));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_after_the_linker_flag_is_found_wherever_it_is() {
        let info = b"\xff Go buildinf:\x08\x02path\tk8s.io/kubernetes/cmd/kubelet\nbuild\t-ldflags=\"-X 'k8s.io/component-base/version.gitVersion=v1.36.2+a80dac2' -X 'k8s.io/component-base/version.gitMajor=1'\"\n";
        assert_eq!(find(info).as_deref(), Some("v1.36.2+a80dac2"));
        let unquoted =
            b"-X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1";
        assert_eq!(find(unquoted).as_deref(), Some("v1.37.2"));
        assert_eq!(find(b"#!/bin/sh\nexec sleep 3600\n"), None);
        let garbage_first =
            b"k8s.io/component-base/version.gitVersion=$Format k8s.io/component-base/version.gitVersion=v1.31.3";
        assert_eq!(find(garbage_first).as_deref(), Some("v1.31.3"));
    }

    #[test]
    fn a_marker_across_two_pieces_of_a_large_file_is_found() {
        let dir = tempfile::tempdir().unwrap();
        for offset in [0, (1 << 20) - 50, (1 << 20) - 10, (1 << 20) + 3, 3 << 20] {
            let mut bytes = vec![0u8; offset];
            bytes.extend_from_slice(b"k8s.io/component-base/version.gitVersion=v1.33.9+abc ");
            bytes.extend(vec![7u8; 100]);
            let path = dir.path().join("kubelet.exe");
            std::fs::write(&path, &bytes).unwrap();
            assert_eq!(scan(&path).unwrap().as_deref(), Some("v1.33.9+abc"), "at {offset}");
        }
        std::fs::write(dir.path().join("none"), vec![1u8; 3 << 20]).unwrap();
        assert_eq!(scan(&dir.path().join("none")).unwrap(), None);
    }
}
