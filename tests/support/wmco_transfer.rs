//! "WMCO's strategy" for a node's files, on winfleet's own SSH transport,
//! for the benches that measure winfleet against it (benches/lifecycle.rs,
//! benches/machines.rs): a new connection per node, one SSH session per
//! command, and per payload file: create its directory, check it
//! (`sha256sum`), upload its `.tar.gz` over a new SFTP session, extract it
//! with `tar -xzf`, remove the archive (WMCO-SPEC 8.1, 8.4). And the
//! files the benches pad a payload with, about as compressible as Windows
//! binaries.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use winfleet::desired::model::Instance;
use winfleet::dialect::Script;
use winfleet::engine;
use winfleet::payload::Payload;
use winfleet::ssh::sftp::Upload;
use winfleet::ssh::{KnownHosts, Session, Settings};

/// The benches' SSH settings: long timeouts (a busy machine, big files).
pub fn settings() -> Settings {
    Settings {
        connect_timeout: Duration::from_secs(120),
        command_timeout: Duration::from_secs(600),
        ..Settings::default()
    }
}

/// `files` files, `mib` MiB in all, about as compressible as Windows
/// binaries (half random, half repetitive), in 8 directories under `dir`.
pub fn binaries(dir: &Path, files: usize, mib: usize) {
    let size = mib * (1 << 20) / files.max(1);
    let mut rng = fastrand::Rng::with_seed(7);
    for i in 0..files {
        let sub = dir.join(format!("dir{}", i % 8));
        std::fs::create_dir_all(&sub).unwrap();
        let mut bytes = vec![0u8; size];
        for (j, chunk) in bytes.chunks_mut(4096).enumerate() {
            if j % 2 == 0 {
                rng.fill(chunk);
            } else {
                chunk.iter_mut().enumerate().for_each(|(k, b)| *b = (k % 61) as u8);
            }
        }
        std::fs::write(sub.join(format!("file{i}.exe")), bytes).unwrap();
    }
}

/// WMCO's packaging: each file as `<name>.tar.gz` holding that one file,
/// written under `root/archives`; by the file's relative path.
pub fn archives(payload: &Payload, root: &Path) -> BTreeMap<String, PathBuf> {
    let dir = root.join("archives");
    std::fs::create_dir_all(&dir).unwrap();
    payload
        .files
        .iter()
        .map(|f| {
            let name = f.rel.rsplit('/').next().unwrap();
            let path = dir.join(format!("{}.tar.gz", f.rel.replace('/', "%")));
            let out = std::fs::File::create(&path).unwrap();
            let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(out, flate2::Compression::new(9)));
            tar.append_path_with_name(&f.source, name).unwrap();
            tar.into_inner().unwrap().finish().unwrap().flush().unwrap();
            (f.rel.clone(), path)
        })
        .collect()
}

/// A bench-only command: fixed text built by the bench, never from a
/// repository.
pub fn command(text: String) -> Script {
    Script { command: Box::leak(text.into_boxed_str()), input: String::new() }
}

/// WMCO's way for one node: every archive unpacked under `dir` (relative
/// to the login directory) on `instance`; returns the bytes sent.
pub async fn node(
    instance: &Instance,
    archives: &BTreeMap<String, PathBuf>,
    dir: &str,
    key: &Arc<russh::keys::PrivateKey>,
    known: &Arc<KnownHosts>,
) -> u64 {
    let target = engine::target(instance);
    let session = Session::connect(&target, key, known, &settings()).await.unwrap();
    let timeout = Duration::from_secs(120);
    let mut sent = 0;
    for (rel, archive) in archives {
        let path = format!("{dir}/{rel}");
        let (dir, name) = path.rsplit_once('/').unwrap();
        session.run(&command(format!("mkdir -p {dir}")), timeout).await.unwrap();
        session.run(&command(format!("test -f {path} && sha256sum {path} || true")), timeout).await.unwrap();
        let upload = Upload { source: archive.clone(), remote: format!("{dir}/{name}.tar.gz"), mode: 0o644 };
        sent += session.upload(&[upload], timeout).await.unwrap();
        session.run(&command(format!("tar -xzf {dir}/{name}.tar.gz -C {dir}")), timeout).await.unwrap();
        session.run(&command(format!("rm -f {dir}/{name}.tar.gz")), timeout).await.unwrap();
    }
    session.close().await;
    sent
}
