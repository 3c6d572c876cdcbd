//! One shell on one channel for several scripts: a node's observation and
//! then its apply go through the same `/bin/sh -s`, which saves opening a
//! second channel, and with it a process or two on the node (measured in
//! benches/fleet.rs: the channel is most of what a no-op round costs).
//!
//! Each script is followed by a line printing a marker that only this
//! conversation knows (`\0winfleet-exchange-<random>\0`); the output up to
//! it is that script's. A shell that exits (a syntax error, a killed
//! process) ends the conversation: the exchange returns what it printed
//! and its exit status, and later exchanges fail.

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Duration;

use russh::ChannelMsg;
use russh::client::Msg;

use super::session::{Output, Session, append};
use super::{SshError, Target};

/// A shell waiting for scripts on standard input.
pub struct Conversation {
    channel: russh::Channel<Msg>,
    target: Target,
    marker: Vec<u8>,
    ended: bool,
    /// Keeps the connection up while the shell runs.
    _session: Arc<Session>,
}

impl Conversation {
    /// Opens a channel and starts `command` on it, within `timeout`: a
    /// node whose sshd stopped answering fails here, not at its keepalive.
    pub(crate) async fn open(session: Arc<Session>, command: &str, timeout: Duration) -> Result<Self, SshError> {
        let target = session.target().to_string();
        match tokio::time::timeout(timeout, Self::start(session, command)).await {
            Ok(result) => result,
            Err(_) => Err(SshError::Timeout { target, what: "opening a shell", after: timeout }),
        }
    }

    async fn start(session: Arc<Session>, command: &str) -> Result<Self, SshError> {
        let target = session.target().clone();
        let protocol = |source| SshError::Protocol { target: target.to_string(), source };
        let channel = session.handle().channel_open_session().await.map_err(protocol)?;
        channel.exec(true, command).await.map_err(protocol)?;
        let random = RandomState::new().hash_one(std::time::SystemTime::now());
        let marker = format!("\0winfleet-exchange-{random:016x}\0").into_bytes();
        Ok(Self { channel, target, marker, ended: false, _session: session })
    }

    /// Sends `input` (a whole script) and returns what it printed, within
    /// `timeout`. A conversation that timed out is over.
    pub async fn exchange(&mut self, input: &str, timeout: Duration) -> Result<Output, SshError> {
        if self.ended {
            return Err(SshError::Protocol { target: self.target.to_string(), source: russh::Error::Disconnect });
        }
        match tokio::time::timeout(timeout, self.send(input)).await {
            Ok(result) => result,
            Err(_) => {
                self.ended = true;
                Err(SshError::Timeout { target: self.target.to_string(), what: "running a script", after: timeout })
            }
        }
    }

    async fn send(&mut self, input: &str) -> Result<Output, SshError> {
        let target = self.target.to_string();
        let protocol = |source| SshError::Protocol { target: target.clone(), source };
        let mut text = String::with_capacity(input.len() + 64);
        text.push_str(input);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        // The marker is printed with octal escapes: the shell's printf
        // turns them into NUL bytes, and nothing the node prints by itself
        // can know the random part.
        text.push_str("printf '");
        for &b in &self.marker {
            text.push_str(&format!("\\{b:03o}"));
        }
        text.push_str("'\n");
        self.channel.data(text.as_bytes()).await.map_err(protocol)?;
        let mut output = Output::default();
        let mut tail: Vec<u8> = Vec::with_capacity(self.marker.len() * 2);
        while let Some(message) = self.channel.wait().await {
            match message {
                ChannelMsg::Data { data } => {
                    append(&mut output.stdout, &data);
                    tail.extend_from_slice(&data);
                    if tail.len() > self.marker.len() {
                        tail.drain(..tail.len() - self.marker.len());
                    }
                    if tail == self.marker {
                        if output.stdout.ends_with(&self.marker) {
                            output.stdout.truncate(output.stdout.len() - self.marker.len());
                        }
                        return Ok(output);
                    }
                }
                ChannelMsg::ExtendedData { data, ext: 1 } => append(&mut output.stderr, &data),
                ChannelMsg::ExitStatus { exit_status } => output.exit_status = Some(exit_status),
                ChannelMsg::Failure => return Err(protocol(russh::Error::RequestDenied)),
                _ => {}
            }
        }
        self.ended = true;
        Ok(output)
    }

    /// The node.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Whether the shell has gone (it exited, or an exchange timed out).
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Ends the shell's input (it exits) and closes the channel, without
    /// waiting for either; a connection that stopped answering is given
    /// one second.
    pub async fn close(self) {
        let close = async {
            let _ = self.channel.eof().await;
            let _ = self.channel.close().await;
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), close).await;
    }
}
