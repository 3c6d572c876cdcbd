//! Uploading files over SFTP on a node's existing connection (WMCO-SPEC
//! 8.4: SFTP, never scp), several files at once and many writes in flight
//! per file; payload files gzip-encoded where that pays ([`wire`]).
//!
//! Several files at once because a file costs round trips that carry no
//! data: its open, and its close after the last write is acknowledged. One
//! file after another, a 200-file payload idles 400 round trips per node
//! (16 s at 40 ms); [`FILES_AT_ONCE`] files on the one channel overlap them.

pub mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use russh_sftp::client::fs::File;
use russh_sftp::client::{Config, SftpSession};
use russh_sftp::protocol::{FileAttributes, OpenFlags};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::SshError;
use super::session::Session;

/// One file to upload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    /// The local file.
    pub source: PathBuf,
    /// The path on the node (created or truncated).
    pub remote: String,
    /// Permission bits for a new file (posix nodes; Windows ignores them).
    pub mode: u32,
}

/// An upload whose bytes may be sent gzip-encoded.
#[derive(Clone, Debug)]
pub struct Packed {
    /// The file and where it goes.
    pub upload: Upload,
    /// The encoded bytes ([`wire::packed`]), sent to the remote path with
    /// [`wire::SUFFIX`] added; `None` sends the file as it is.
    pub gzip: Option<Arc<Vec<u8>>>,
}

/// What [`Session::upload`] sends: a file as it is, or [`Packed`].
pub trait Outgoing: Sync {
    /// The file and where it goes.
    fn upload(&self) -> &Upload;
    /// The gzip-encoded bytes to send instead of the file, if any.
    fn gzip(&self) -> Option<&[u8]> {
        None
    }
}

impl Outgoing for Upload {
    fn upload(&self) -> &Upload {
        self
    }
}

impl Outgoing for Packed {
    fn upload(&self) -> &Upload {
        &self.upload
    }
    fn gzip(&self) -> Option<&[u8]> {
        self.gzip.as_deref().map(Vec::as_slice)
    }
}

/// Writes in flight per file, and the size of each.
const IN_FLIGHT: usize = 64;
const CHUNK: u32 = 64 * 1024;

/// Files sent at once on one SFTP channel.
const FILES_AT_ONCE: usize = 8;

impl Session {
    /// Uploads `files` over one SFTP channel, [`FILES_AT_ONCE`] at a time
    /// in their order; returns the bytes sent (the encoded ones for a
    /// packed file). The first failure stops the upload and names the file.
    pub async fn upload<F: Outgoing>(&self, files: &[F], timeout: Duration) -> Result<u64, SshError> {
        let target = self.target().to_string();
        let protocol = |source| SshError::Protocol { target: target.clone(), source };
        let channel = self.handle().channel_open_session().await.map_err(protocol)?;
        channel.request_subsystem(true, "sftp").await.map_err(protocol)?;
        let config = Config {
            max_concurrent_writes: IN_FLIGHT,
            max_write_packet_len: CHUNK,
            request_timeout_secs: timeout.as_secs().max(1),
            ..Config::default()
        };
        let sftp_error = |what: String| {
            move |e: russh_sftp::client::error::Error| SshError::Transfer {
                target: target.clone(),
                what: what.clone(),
                reason: e.to_string(),
            }
        };
        let sftp = SftpSession::new_with_config(channel.into_stream(), config)
            .await
            .map_err(sftp_error("starting SFTP".into()))?;
        // A plain loop over FuturesUnordered, not a stream adaptor with a
        // closure: the daemon spawns rounds, and this keeps the future
        // `Send` without rustc's higher-ranked lifetime trouble.
        let mut waiting = files.iter();
        let mut running = FuturesUnordered::new();
        let mut sent = 0u64;
        let result = loop {
            while running.len() < FILES_AT_ONCE {
                let Some(file) = waiting.next() else { break };
                running.push(send_one(&sftp, file));
            }
            match running.next().await {
                None => break Ok(sent),
                Some(Ok(n)) => sent += n,
                Some(Err((file, reason))) => {
                    break Err(SshError::Transfer {
                        target: self.target().to_string(),
                        what: format!("uploading {file}"),
                        reason,
                    });
                }
            }
        };
        drop(running);
        let _ = sftp.close().await;
        result
    }
}

/// Sends one file; an error names its remote path.
async fn send_one<F: Outgoing>(sftp: &SftpSession, file: &F) -> Result<u64, (String, String)> {
    let result = match file.gzip() {
        Some(bytes) => send_bytes(sftp, file.upload(), bytes).await,
        None => send(sftp, file.upload()).await,
    };
    result.map_err(|reason| (file.upload().remote.clone(), reason))
}

async fn open(sftp: &SftpSession, path: &str, mode: u32) -> Result<File, String> {
    let attributes = FileAttributes { permissions: Some(mode), ..FileAttributes::empty() };
    let flags = OpenFlags::CREATE | OpenFlags::TRUNCATE | OpenFlags::WRITE;
    sftp.open_with_flags_and_attributes(path, flags, attributes).await.map_err(|e| e.to_string())
}

/// Sends encoded bytes to the remote path with [`wire::SUFFIX`] added.
async fn send_bytes(sftp: &SftpSession, file: &Upload, bytes: &[u8]) -> Result<u64, String> {
    let remote = open(sftp, &format!("{}{}", file.remote, wire::SUFFIX), file.mode).await?;
    copy(bytes, remote, "the encoded bytes").await
}

async fn send(sftp: &SftpSession, file: &Upload) -> Result<u64, String> {
    let local = tokio::fs::File::open(&file.source).await.map_err(|e| format!("{}: {e}", file.source.display()))?;
    let remote = open(sftp, &file.remote, file.mode).await?;
    copy(local, remote, &file.source.display().to_string()).await
}

/// Copies `local` to `remote` in 1 MiB writes (the session keeps many in
/// flight) and closes it; returns the bytes sent. `what` names `local` in
/// a read error.
async fn copy(mut local: impl AsyncRead + Unpin, mut remote: File, what: &str) -> Result<u64, String> {
    let mut buf = vec![0u8; 1 << 20];
    let mut sent = 0u64;
    loop {
        let n = local.read(&mut buf).await.map_err(|e| format!("{what}: {e}"))?;
        if n == 0 {
            break;
        }
        remote.write_all(&buf[..n]).await.map_err(|e| e.to_string())?;
        sent += n as u64;
    }
    remote.shutdown().await.map_err(|e| e.to_string())?;
    Ok(sent)
}
