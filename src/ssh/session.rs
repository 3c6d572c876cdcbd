//! One authenticated SSH connection to a node.

use std::sync::Arc;
use std::time::Duration;

use russh::client::{self, Handle};
use russh::keys::{PrivateKey, PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use russh::{ChannelMsg, Disconnect};

use super::{KnownHosts, Settings, SshError, Target};
use crate::dialect::Script;

/// The most output a script may return; a node printing more is cut off.
const MAX_OUTPUT: usize = 16 << 20;

/// What a script printed and how it exited.
#[derive(Clone, Debug, Default)]
pub struct Output {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// Exit status, if the node sent one.
    pub exit_status: Option<u32>,
}

/// Checks the server's host key against the known_hosts file.
pub(crate) struct Verifier {
    address: String,
    port: u16,
    known_hosts: Arc<KnownHosts>,
}

impl client::Handler for Verifier {
    type Error = SshError;

    async fn check_server_key(&mut self, key: &PublicKeyOrCertificate) -> Result<bool, Self::Error> {
        let key = match key {
            PublicKeyOrCertificate::PublicKey { key, .. } => key.clone(),
            PublicKeyOrCertificate::Certificate(cert) => PublicKey::from(cert.public_key().clone()),
        };
        self.known_hosts.verify(&self.address, self.port, &key)?;
        Ok(true)
    }
}

/// A live connection.
pub struct Session {
    target: Target,
    handle: Handle<Verifier>,
}

impl Session {
    /// Connects, verifies the host key and authenticates, within the
    /// connect timeout.
    pub async fn connect(
        target: &Target,
        key: &Arc<PrivateKey>,
        known_hosts: &Arc<KnownHosts>,
        settings: &Settings,
    ) -> Result<Self, SshError> {
        let work = Self::handshake(target, key, known_hosts, settings);
        match tokio::time::timeout(settings.connect_timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(SshError::Timeout {
                target: target.to_string(),
                what: "connecting",
                after: settings.connect_timeout,
            }),
        }
    }

    async fn handshake(
        target: &Target,
        key: &Arc<PrivateKey>,
        known_hosts: &Arc<KnownHosts>,
        settings: &Settings,
    ) -> Result<Self, SshError> {
        let mut config = client::Config {
            keepalive_interval: Some(settings.keepalive),
            keepalive_max: 3,
            inactivity_timeout: None,
            nodelay: true,
            ..client::Config::default()
        };
        // Recorded key types first, the rest after: a host presents a
        // recorded key when it has one, and any other key gets the clear
        // mismatch message rather than a negotiation failure.
        let mut order = known_hosts.recorded_algorithms(&target.address, target.port);
        if !order.is_empty() {
            for algorithm in config.preferred.key.iter() {
                if !order.contains(algorithm) {
                    order.push(algorithm.clone());
                }
            }
            config.preferred.key = std::borrow::Cow::Owned(order);
        }
        let config = Arc::new(config);
        let stream = tokio::net::TcpStream::connect((target.address.as_str(), target.port))
            .await
            .map_err(|source| SshError::Connect { target: target.to_string(), source })?;
        let _ = stream.set_nodelay(true);
        let verifier =
            Verifier { address: target.address.clone(), port: target.port, known_hosts: Arc::clone(known_hosts) };
        let mut handle = client::connect_stream(config, stream, verifier).await?;
        let protocol = |source| SshError::Protocol { target: target.to_string(), source };
        let hash = handle.best_supported_rsa_hash().await.map_err(protocol)?.flatten();
        let auth = handle
            .authenticate_publickey(&target.username, PrivateKeyWithHashAlg::new(Arc::clone(key), hash))
            .await
            .map_err(protocol)?;
        if !auth.success() {
            return Err(SshError::Auth { target: target.to_string(), user: target.username.clone() });
        }
        Ok(Self { target: target.clone(), handle })
    }

    /// The node this connection reaches.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The russh handle (for other channels, such as SFTP).
    pub(crate) fn handle(&self) -> &Handle<Verifier> {
        &self.handle
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.handle.is_closed()
    }

    /// Runs `script`: its command with its input on standard input, within
    /// `timeout`.
    pub async fn run(&self, script: &Script, timeout: Duration) -> Result<Output, SshError> {
        match tokio::time::timeout(timeout, self.exec(script)).await {
            Ok(result) => result,
            Err(_) => {
                Err(SshError::Timeout { target: self.target.to_string(), what: "running a script", after: timeout })
            }
        }
    }

    async fn exec(&self, script: &Script) -> Result<Output, SshError> {
        let protocol = |source| SshError::Protocol { target: self.target.to_string(), source };
        let mut channel = self.handle.channel_open_session().await.map_err(protocol)?;
        channel.exec(true, script.command).await.map_err(protocol)?;
        channel.data(script.input.as_bytes()).await.map_err(protocol)?;
        channel.eof().await.map_err(protocol)?;
        let mut output = Output::default();
        while let Some(message) = channel.wait().await {
            match message {
                ChannelMsg::Data { data } => append(&mut output.stdout, &data),
                ChannelMsg::ExtendedData { data, ext: 1 } => append(&mut output.stderr, &data),
                ChannelMsg::ExitStatus { exit_status } => output.exit_status = Some(exit_status),
                ChannelMsg::Failure => {
                    return Err(protocol(russh::Error::RequestDenied));
                }
                _ => {}
            }
        }
        Ok(output)
    }

    /// Says goodbye to the node.
    pub async fn close(&self) {
        let _ = self.handle.disconnect(Disconnect::ByApplication, "", "en").await;
    }
}

pub(crate) fn append(buffer: &mut Vec<u8>, data: &[u8]) {
    let room = MAX_OUTPUT.saturating_sub(buffer.len());
    buffer.extend_from_slice(&data[..data.len().min(room)]);
}
