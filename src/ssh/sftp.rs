//! Uploading files over SFTP on a node's existing connection (WMCO-SPEC
//! 8.4: SFTP, never scp), with many writes in flight per file.

use std::path::PathBuf;
use std::time::Duration;

use russh_sftp::client::{Config, SftpSession};
use russh_sftp::protocol::{FileAttributes, OpenFlags};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// Writes in flight per file, and the size of each.
const IN_FLIGHT: usize = 64;
const CHUNK: u32 = 64 * 1024;

impl Session {
    /// Uploads `files` in order over one SFTP channel; returns the bytes
    /// sent. The first failure stops the upload and names the file.
    pub async fn upload(&self, files: &[Upload], timeout: Duration) -> Result<u64, SshError> {
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
        let mut sent = 0u64;
        for file in files {
            sent += send(&sftp, file).await.map_err(|reason| SshError::Transfer {
                target: self.target().to_string(),
                what: format!("uploading {}", file.remote),
                reason,
            })?;
        }
        let _ = sftp.close().await;
        Ok(sent)
    }
}

async fn send(sftp: &SftpSession, file: &Upload) -> Result<u64, String> {
    let mut local = tokio::fs::File::open(&file.source).await.map_err(|e| format!("{}: {e}", file.source.display()))?;
    let attributes = FileAttributes { permissions: Some(file.mode), ..FileAttributes::empty() };
    let flags = OpenFlags::CREATE | OpenFlags::TRUNCATE | OpenFlags::WRITE;
    let mut remote =
        sftp.open_with_flags_and_attributes(&file.remote, flags, attributes).await.map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 1 << 20];
    let mut sent = 0u64;
    loop {
        let n = local.read(&mut buf).await.map_err(|e| format!("{}: {e}", file.source.display()))?;
        if n == 0 {
            break;
        }
        remote.write_all(&buf[..n]).await.map_err(|e| e.to_string())?;
        sent += n as u64;
    }
    remote.shutdown().await.map_err(|e| e.to_string())?;
    Ok(sent)
}
