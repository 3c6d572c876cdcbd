//! One shell on one channel for several scripts: a node's observation and
//! then its apply go through the same `/bin/sh -s` (posix) or
//! `powershell.exe -Command -` (Windows), which saves opening a second
//! channel, and with it a process or two on the node (measured in
//! benches/fleet.rs: the channel is most of what a no-op round costs; on
//! Windows, starting powershell.exe costs more than the script).
//! The pool keeps the shell with the connection between rounds
//! ([`Shells`]), so a warm round opens no channel and starts no shell at
//! all; the scripts run their body in a subshell (posix) or a child scope
//! (PowerShell: a script block invoked with `&`), so nothing one leaves
//! behind (variables, functions, umask, preferences) reaches the next. A
//! kept shell that turns out to be gone is replaced once, before anything
//! ran.
//!
//! Each script is followed by a line, in the shell's own language
//! ([`Interpreter::end_line`]), printing a marker that only this
//! conversation knows (`\0winfleet-exchange-<random>\0`); the output up to
//! it is that script's. A shell that exits (a syntax error, a killed
//! process) ends the conversation: the exchange returns what it printed
//! and its exit status, and later exchanges fail.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::time::Duration;

use russh::ChannelMsg;
use russh::client::Msg;

use super::session::{Output, Session, append};
use super::{SshError, Target};
use crate::dialect::Interpreter;

/// A shell waiting for scripts on standard input.
pub struct Conversation {
    channel: russh::Channel<Msg>,
    target: Target,
    interpreter: Interpreter,
    marker: Vec<u8>,
    ended: bool,
    /// Exchanges completed (a kept shell has done at least one).
    exchanges: u32,
    /// Keeps the connection up while the shell runs.
    session: Arc<Session>,
}

impl Conversation {
    /// Opens a channel and starts the interpreter on it, within `timeout`:
    /// a node whose sshd stopped answering fails here, not at its keepalive.
    pub(crate) async fn open(
        session: Arc<Session>,
        interpreter: Interpreter,
        timeout: Duration,
    ) -> Result<Self, SshError> {
        let target = session.target().to_string();
        match tokio::time::timeout(timeout, Self::start(session, interpreter)).await {
            Ok(result) => result,
            Err(_) => Err(SshError::Timeout { target, what: "opening a shell", after: timeout }),
        }
    }

    async fn start(session: Arc<Session>, interpreter: Interpreter) -> Result<Self, SshError> {
        let target = session.target().clone();
        let protocol = |source| SshError::Protocol { target: target.to_string(), source };
        let channel = session.handle().channel_open_session().await.map_err(protocol)?;
        channel.exec(true, interpreter.command).await.map_err(protocol)?;
        let random = RandomState::new().hash_one(std::time::SystemTime::now());
        let marker = format!("\0winfleet-exchange-{random:016x}\0").into_bytes();
        Ok(Self { channel, target, interpreter, marker, ended: false, exchanges: 0, session })
    }

    /// Sends `input` (a whole script) and returns what it printed, within
    /// `timeout`. A conversation that timed out is over.
    pub async fn exchange(&mut self, input: &str, timeout: Duration) -> Result<Output, SshError> {
        if self.ended {
            return Err(SshError::Protocol { target: self.target.to_string(), source: russh::Error::Disconnect });
        }
        match tokio::time::timeout(timeout, self.send(input)).await {
            Ok(result) => {
                self.exchanges += 1;
                result
            }
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
        // Nothing the node prints by itself can know the marker's random
        // part; the end line encodes it (octal escapes, base64), so the
        // marker's bytes never appear in what is sent.
        text.push_str(&(self.interpreter.end_line)(&self.marker));
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

    /// How the shell is spoken to.
    pub fn interpreter(&self) -> Interpreter {
        self.interpreter
    }

    /// Whether an earlier exchange (of this round or one before) used it.
    pub fn reused(&self) -> bool {
        self.exchanges > 0
    }

    fn alive(&self) -> bool {
        !self.ended && !self.session.is_closed()
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

/// The shells the pool keeps between rounds, one per node at most.
#[derive(Default)]
pub(crate) struct Shells(tokio::sync::Mutex<HashMap<Target, Conversation>>);

impl Shells {
    /// The kept shell of `target` started by `interpreter`, if it is still
    /// usable as far as can be told without using it.
    pub(crate) async fn take(&self, target: &Target, interpreter: Interpreter) -> Option<Conversation> {
        let kept = self.0.lock().await.remove(target)?;
        if kept.alive() && kept.interpreter.command == interpreter.command {
            return Some(kept);
        }
        kept.close().await;
        None
    }

    /// Keeps `conversation` for the next round, or closes it when it is
    /// over.
    pub(crate) async fn keep(&self, conversation: Conversation) {
        if !conversation.alive() {
            conversation.close().await;
            return;
        }
        let replaced = self.0.lock().await.insert(conversation.target.clone(), conversation);
        if let Some(old) = replaced {
            old.close().await;
        }
    }

    /// Drops `target`'s shell (its connection is being dropped).
    pub(crate) async fn forget(&self, target: &Target) {
        let kept = self.0.lock().await.remove(target);
        if let Some(kept) = kept {
            kept.close().await;
        }
    }

    /// Closes every kept shell.
    pub(crate) async fn close(&self) {
        let kept: Vec<Conversation> = self.0.lock().await.drain().map(|(_, c)| c).collect();
        futures::future::join_all(kept.into_iter().map(Conversation::close)).await;
    }
}
