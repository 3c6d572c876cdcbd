//! Reading a payload directory (`--payload-dir`): every file, its SHA-256
//! and size, WMCO's `.tar.gz` entries unpacked once into a private scratch
//! directory, and the result checked against WMCO's own `sha256sum` list
//! when the directory has one.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::manifest::{ManifestEntry, digest, is_relative_path, manifest_text};
use super::{Payload, PayloadError, PayloadFile, Skipped};

/// WMCO's checksum list at the payload's root (not a payload file).
pub const WMCO_SHA256SUM: &str = "sha256sum";
/// WMCO's node daemon: winfleet does its job itself and never ships it.
pub const WICD: &str = "windows-instance-config-daemon.exe";
const ARCHIVE_SUFFIX: &str = ".tar.gz";

/// What identifies the directory's content cheaply: each file's path,
/// size and modification time.
pub type Fingerprint = Vec<(PathBuf, u64, Option<SystemTime>)>;

/// Reads `dir`.
pub fn load(dir: &Path) -> Result<Payload, PayloadError> {
    let fingerprint = fingerprint(dir)?;
    let scratch = tempfile::Builder::new()
        .prefix("winfleet-payload-")
        .tempdir()
        .map_err(|e| PayloadError::Io { path: std::env::temp_dir(), source: e })?;
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let mut wmco_sums = None;
    for (path, _, _) in &fingerprint {
        let rel = relative(dir, path)?;
        if rel == WMCO_SHA256SUM {
            wmco_sums = Some(read_sums(path)?);
            skipped.push(Skipped { path: rel, reason: "WMCO's checksum list: checked, not shipped".into() });
            continue;
        }
        let file = match rel.strip_suffix(ARCHIVE_SUFFIX) {
            Some(inner) => unpack(path, inner, scratch.path())?,
            None => hashed(path, rel.clone(), path.to_owned())?,
        };
        if file.rel.rsplit('/').next() == Some(WICD) {
            skipped.push(Skipped { path: rel, reason: "WMCO's node daemon: winfleet does its job".into() });
            continue;
        }
        files.push(file);
    }
    files.sort_by(|a, b| a.rel.as_bytes().cmp(b.rel.as_bytes()));
    if let Some(dup) = files.windows(2).find(|w| w[0].rel == w[1].rel) {
        return Err(PayloadError::Duplicate(dup[0].rel.clone()));
    }
    if let Some(sums) = wmco_sums {
        check_wmco_sums(&files, &sums)?;
    }
    let entries: Vec<ManifestEntry> =
        files.iter().map(|f| ManifestEntry { path: f.rel.clone(), sha256: f.sha256.clone() }).collect();
    let manifest = manifest_text(&entries);
    let kubelet_version = kubelet_version(&files)?;
    Ok(Payload {
        dir: dir.to_owned(),
        digest: digest(&manifest),
        manifest,
        files,
        skipped,
        kubelet_version,
        fingerprint,
        _scratch: scratch,
    })
}

/// The version of the first kubelet among `files` (by path), read from
/// its bytes (unpacked when it came in a `.tar.gz`).
fn kubelet_version(files: &[PayloadFile]) -> Result<Option<String>, PayloadError> {
    let is_kubelet =
        |f: &&PayloadFile| super::kubelet_version::KUBELET_NAMES.contains(&f.rel.rsplit('/').next().unwrap_or(""));
    let Some(kubelet) = files.iter().find(is_kubelet) else { return Ok(None) };
    super::kubelet_version::scan(&kubelet.source)
        .map_err(|e| PayloadError::Io { path: kubelet.source.clone(), source: e })
}

/// Every regular file under `dir` (symbolic links followed), sorted, with
/// size and modification time.
pub fn fingerprint(dir: &Path) -> Result<Fingerprint, PayloadError> {
    let mut out = Vec::new();
    walk(dir, &mut out, 0)?;
    out.sort();
    Ok(out)
}

fn walk(dir: &Path, out: &mut Fingerprint, depth: usize) -> Result<(), PayloadError> {
    if depth > 32 {
        return Err(PayloadError::Layout(format!("{}: directories nested too deep (a link loop?)", dir.display())));
    }
    let io_err = |source| PayloadError::Io { path: dir.to_owned(), source };
    for entry in fs::read_dir(dir).map_err(io_err)? {
        let path = entry.map_err(io_err)?.path();
        let meta = fs::metadata(&path).map_err(|source| PayloadError::Io { path: path.clone(), source })?;
        if meta.is_dir() {
            walk(&path, out, depth + 1)?;
        } else if meta.is_file() {
            out.push((path, meta.len(), meta.modified().ok()));
        }
    }
    Ok(())
}

fn relative(dir: &Path, path: &Path) -> Result<String, PayloadError> {
    let rel = path
        .strip_prefix(dir)
        .map_err(|_| PayloadError::Layout(format!("{} is outside the payload", path.display())))?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    let rel = parts.map(|p| p.join("/")).filter(|r| is_relative_path(r));
    rel.ok_or_else(|| {
        PayloadError::Layout(format!(
            "{}: a payload path must be UTF-8 names without control characters or backslashes",
            path.display()
        ))
    })
}

/// SHA-256 and size of a file, streamed.
fn hashed(path: &Path, rel: String, source: PathBuf) -> Result<PayloadFile, PayloadError> {
    let io_err = |e| PayloadError::Io { path: path.to_owned(), source: e };
    let mut file = fs::File::open(path).map_err(io_err)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io_err)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    let mode = mode_of(&file.metadata().map_err(io_err)?);
    Ok(PayloadFile { rel, sha256: hex(&hasher.finalize()), size, mode, source })
}

#[cfg(unix)]
fn mode_of(meta: &fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o755
}

#[cfg(not(unix))]
fn mode_of(_: &fs::Metadata) -> u32 {
    0o644
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Unpacks WMCO's `<name>.tar.gz` (one regular file named `<name>`) into
/// the scratch directory; the payload file is the unpacked one, at the
/// archive's path without `.tar.gz`.
fn unpack(archive: &Path, inner_rel: &str, scratch: &Path) -> Result<PayloadFile, PayloadError> {
    let name = inner_rel.rsplit('/').next().unwrap_or(inner_rel);
    let bad = |why: String| PayloadError::Archive { path: archive.to_owned(), reason: why };
    let file = fs::File::open(archive).map_err(|e| PayloadError::Io { path: archive.to_owned(), source: e })?;
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(file));
    let target = scratch.join(inner_rel.replace('/', "%"));
    let mut found = None;
    for entry in tar.entries().map_err(|e| bad(e.to_string()))? {
        let mut entry = entry.map_err(|e| bad(e.to_string()))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path().map_err(|e| bad(e.to_string()))?.into_owned();
        let entry_name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if entry_name != name || found.is_some() {
            return Err(bad(format!("expected exactly one file named {name}, found {}", path.display())));
        }
        let mode = entry.header().mode().unwrap_or(0o644) & 0o755;
        let mut out = fs::File::create(&target).map_err(|e| PayloadError::Io { path: target.clone(), source: e })?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0; 1 << 16];
        let mut size = 0u64;
        loop {
            let n = entry.read(&mut buf).map_err(|e| bad(e.to_string()))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(|e| PayloadError::Io { path: target.clone(), source: e })?;
            size += n as u64;
        }
        found = Some(PayloadFile {
            rel: inner_rel.to_owned(),
            sha256: hex(&hasher.finalize()),
            size,
            mode,
            source: target.clone(),
        });
    }
    found.ok_or_else(|| bad(format!("no file named {name} inside")))
}

/// WMCO's list: file name (its last path component) → SHA-256.
fn read_sums(path: &Path) -> Result<BTreeMap<String, String>, PayloadError> {
    let text = fs::read_to_string(path).map_err(|e| PayloadError::Io { path: path.to_owned(), source: e })?;
    let mut sums = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let Some((sum, file)) = line.split_once("  ") else {
            return Err(PayloadError::Layout(format!("{}: unexpected line {line:?}", path.display())));
        };
        let name = file.rsplit('/').next().unwrap_or(file);
        sums.insert(name.to_owned(), sum.to_ascii_lowercase());
    }
    Ok(sums)
}

fn check_wmco_sums(files: &[PayloadFile], sums: &BTreeMap<String, String>) -> Result<(), PayloadError> {
    for file in files {
        let name = file.rel.rsplit('/').next().unwrap_or(&file.rel);
        if let Some(expected) = sums.get(name).filter(|s| **s != file.sha256) {
            return Err(PayloadError::Layout(format!(
                "{}: SHA-256 {} differs from {expected} in the payload's own {WMCO_SHA256SUM} list (a damaged copy?)",
                file.rel, file.sha256
            )));
        }
    }
    Ok(())
}
