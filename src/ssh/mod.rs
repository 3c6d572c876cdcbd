//! The SSH transport (russh): key authentication, pinned host keys,
//! timeouts, keepalive, retries with backoff for transient failures, and a
//! pool that keeps one connection per node for reuse within a round and
//! across rounds.
//!
//! - host key pinning and trust-on-first-use are [`crate::known_hosts`].
//! - [`session`]: one authenticated connection; runs a [`Script`].
//!
//! [`Script`]: crate::dialect::Script

pub mod activity;
pub mod conversation;
mod fleet_key;
pub mod session;
pub mod sftp;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use russh::keys::PrivateKey;
use tokio::sync::Mutex;

pub use crate::known_hosts::{HostKeyError, KnownHosts};
pub use activity::Activity;
pub use activity::Traffic;
pub use conversation::Conversation;
pub use session::{Output, Session};

use crate::dialect::{Interpreter, Script};
use crate::lifecycle::facts::HashCache;

/// Where and as whom to connect.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// DNS name or IPv4 address.
    pub address: String,
    /// TCP port.
    pub port: u16,
    /// SSH user.
    pub username: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}:{}", self.username, self.address, self.port)
    }
}

/// Transport settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Limit for TCP connect plus SSH handshake and authentication.
    pub connect_timeout: Duration,
    /// Limit for one script, from channel open to exit.
    pub command_timeout: Duration,
    /// Keepalive interval on idle connections.
    pub keepalive: Duration,
    /// Extra connection attempts after a transient failure.
    pub retries: u32,
    /// Delay before the first retry; doubled for each further one, plus a
    /// random jitter of up to as much again.
    pub backoff: Duration,
    /// The daemon closes its connections once no round has used them for
    /// this long (`None`: kept open between rounds). Closing frees the
    /// memory and keepalives they cost on both ends; the next round
    /// connects again.
    pub idle_timeout: Option<Duration>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(15),
            command_timeout: Duration::from_secs(120),
            keepalive: Duration::from_secs(15),
            retries: 2,
            backoff: Duration::from_millis(500),
            idle_timeout: Some(Duration::from_secs(120)),
        }
    }
}

/// Why talking to a node failed. Messages name the node.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    /// TCP connect failed.
    #[error("cannot connect to {target}: {source}")]
    Connect {
        /// The node.
        target: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// Something took longer than its limit.
    #[error("{what} on {target} timed out after {after:?}")]
    Timeout {
        /// The node.
        target: String,
        /// What was being done.
        what: &'static str,
        /// The limit.
        after: Duration,
    },
    /// The host key was refused (never retried).
    #[error(transparent)]
    HostKey(#[from] HostKeyError),
    /// The server refused the key (never retried).
    #[error("{target} {AUTH_REFUSED} for user {user:?}")]
    Auth {
        /// The node.
        target: String,
        /// The user.
        user: String,
    },
    /// The SSH protocol failed (connection lost, channel refused).
    #[error("SSH error with {target}: {source}")]
    Protocol {
        /// The node.
        target: String,
        /// russh's error.
        source: russh::Error,
    },
    /// An SFTP transfer failed.
    #[error("SFTP on {target}: {what}: {reason}")]
    Transfer {
        /// The node.
        target: String,
        /// What was being done.
        what: String,
        /// Why it failed.
        reason: String,
    },
    /// An error inside russh's handshake before the target is known.
    #[error("SSH error: {0}")]
    Russh(#[from] russh::Error),
}

/// How an authentication refusal reads in node reports.
const AUTH_REFUSED: &str = "refused public key authentication";

/// Whether a node failure (as reported) is the host refusing the fleet's key.
pub fn is_auth_refusal(reason: &str) -> bool {
    reason.contains(AUTH_REFUSED)
}

impl SshError {
    /// Whether trying again may help (network trouble, not a refusal).
    pub fn is_transient(&self) -> bool {
        match self {
            SshError::Connect { .. } | SshError::Timeout { .. } | SshError::Transfer { .. } => true,
            SshError::Protocol { source, .. } | SshError::Russh(source) => !matches!(
                source,
                russh::Error::NotAuthenticated | russh::Error::NoAuthMethod | russh::Error::UnknownKey
            ),
            SshError::HostKey(_) | SshError::Auth { .. } => false,
        }
    }
}

/// The private key used for every node.
pub fn load_key(path: &Path) -> Result<PrivateKey, String> {
    let key = russh::keys::load_secret_key(path, None)
        .map_err(|e| format!("cannot read the SSH private key {}: {e}", path.display()))?;
    if let Some(rsa) = key.key_data().rsa() {
        let bits = rsa.public().key_size();
        if bits < 2048 {
            return Err(format!("the RSA key {} has {bits} bits; at least 2048 are required", path.display()));
        }
    }
    Ok(key)
}

/// One connection per node, opened on first use and kept: within a round,
/// the observation and the apply share it; the daemon keeps the pool
/// across rounds. A connection found dead is replaced once.
pub struct Pool {
    key: Arc<PrivateKey>,
    known_hosts: Arc<KnownHosts>,
    settings: Settings,
    sessions: Mutex<HashMap<Target, Arc<Session>>>,
    /// The nodes' shells, kept with their connections.
    shells: conversation::Shells,
    /// File hashes each node reported, by stat key (see
    /// [`crate::lifecycle::facts`]): kept across rounds like connections.
    hashes: std::sync::Mutex<HashMap<Target, HashCache>>,
    /// SSH operations finished (the daemon's `/healthz` reads a round's progress from it).
    pub activity: Activity,
}

impl Pool {
    /// A pool that authenticates with `key` and checks `known_hosts`.
    pub fn new(key: PrivateKey, known_hosts: KnownHosts, settings: Settings) -> Self {
        Self {
            key: Arc::new(key),
            known_hosts: Arc::new(known_hosts),
            settings,
            sessions: Mutex::new(HashMap::new()),
            shells: conversation::Shells::default(),
            hashes: std::sync::Mutex::new(HashMap::new()),
            activity: Activity::default(),
        }
    }

    /// The host key `address:port` presented and had accepted (see
    /// [`KnownHosts::accepted`]).
    pub fn host_key(&self, address: &str, port: u16) -> Option<russh::keys::PublicKey> {
        self.known_hosts.accepted(address, port)
    }

    /// Runs `script` on `target`. When `idempotent` (observation), a
    /// transient failure is retried on a fresh connection; an apply is never
    /// re-sent within a round (the next round re-observes instead).
    pub async fn run(&self, target: &Target, script: &Script, idempotent: bool) -> Result<Output, SshError> {
        let timeout = self.settings.command_timeout;
        self.on_session(target, idempotent, move |session: Arc<Session>| async move {
            self.activity.channel(true);
            session.run(script, timeout).await
        })
        .await
    }

    /// A [`Conversation`] with `interpreter` (a shell reading scripts on
    /// standard input) on `target`: the shell kept from an earlier round
    /// when there is one, else a new one. Opening is idempotent: a cached
    /// connection that is gone is replaced once, as for an observation.
    pub async fn converse(&self, target: &Target, interpreter: Interpreter) -> Result<Conversation, SshError> {
        if let Some(kept) = self.shells.take(target, interpreter).await {
            return Ok(kept);
        }
        self.open_shell(target, interpreter).await
    }

    async fn open_shell(&self, target: &Target, interpreter: Interpreter) -> Result<Conversation, SshError> {
        let timeout = self.settings.command_timeout;
        self.on_session(target, true, |session| {
            self.activity.channel(false);
            Conversation::open(session, interpreter, timeout)
        })
        .await
    }

    /// Keeps a node's shell for its next round (or closes it if it is over).
    pub async fn keep(&self, conversation: Conversation) {
        self.shells.keep(conversation).await;
    }

    /// Does `work` on the node's cached connection, or on a new one. When
    /// the cached connection turns out to be gone and `reconnect` allows,
    /// `work` is done once more on a new connection; a connection that
    /// failed is dropped from the pool.
    async fn on_session<T, Fut>(
        &self,
        target: &Target,
        reconnect: bool,
        work: impl Fn(Arc<Session>) -> Fut,
    ) -> Result<T, SshError>
    where
        Fut: Future<Output = Result<T, SshError>>,
    {
        let cached = self.sessions.lock().await.get(target).cloned();
        if let Some(session) = cached {
            match self.activity.count(work(Arc::clone(&session))).await {
                Ok(done) => return Ok(done),
                Err(e) if session.is_closed() && reconnect => {
                    tracing::debug!(%target, error = %e, "cached connection is gone; reconnecting");
                    self.forget(target).await;
                }
                Err(e) => {
                    self.forget(target).await;
                    return Err(e);
                }
            }
        }
        let session = self.connect(target).await?;
        let result = self.activity.count(work(session)).await;
        if result.is_err() {
            self.forget(target).await;
        }
        result
    }

    /// One exchange of `conversation` within the command timeout; the
    /// connection is dropped from the pool when it fails. When
    /// `idempotent` (observation) and the shell was kept from an earlier
    /// exchange, a shell found gone (it ended without answering, or its
    /// channel failed) is replaced and the script sent once more, as
    /// [`Pool::run`] does with a dead connection; a timeout is not retried,
    /// and an apply is never re-sent.
    pub async fn exchange(
        &self,
        conversation: &mut Conversation,
        script: &Script,
        idempotent: bool,
    ) -> Result<Output, SshError> {
        let reused = conversation.reused();
        let result = self.exchange_once(conversation, script).await;
        let gone = match &result {
            Ok(output) => conversation.ended() && output.stdout.is_empty(),
            Err(SshError::Timeout { .. }) => false,
            Err(_) => true,
        };
        if !(idempotent && reused && gone) {
            return result;
        }
        tracing::debug!(target = %conversation.target(), "the kept shell is gone; running the script in a new one");
        let fresh = self.open_shell(conversation.target(), conversation.interpreter()).await?;
        std::mem::replace(conversation, fresh).close().await;
        self.exchange_once(conversation, script).await
    }

    async fn exchange_once(&self, conversation: &mut Conversation, script: &Script) -> Result<Output, SshError> {
        self.activity.exchange();
        let result = self.activity.count(conversation.exchange(&script.input, self.settings.command_timeout)).await;
        if result.is_err() {
            self.forget(conversation.target()).await;
        }
        result
    }

    /// Connects with retries (exponential backoff with full jitter, so
    /// nodes that failed together do not retry together), and caches the
    /// session. Only transient failures are retried.
    async fn connect(&self, target: &Target) -> Result<Arc<Session>, SshError> {
        let backoff = ExponentialBuilder::new()
            .with_min_delay(self.settings.backoff)
            .with_max_times(self.settings.retries as usize)
            .with_jitter();
        let session = (|| Session::connect(target, &self.key, &self.known_hosts, &self.settings))
            .retry(backoff)
            .when(SshError::is_transient)
            .notify(|e, delay| tracing::debug!(%target, error = %e, ?delay, "transient SSH failure; retrying"));
        let session = self.activity.count(session).await?;
        self.activity.connected();
        let session = Arc::new(session);
        self.sessions.lock().await.insert(target.clone(), Arc::clone(&session));
        Ok(session)
    }

    /// Uploads `files` to `target` over SFTP on its pooled connection
    /// (connecting if needed); returns the bytes sent. Never retried within
    /// a round: the next round observes what arrived.
    pub async fn upload<F: sftp::Outgoing>(&self, target: &Target, files: &[F]) -> Result<u64, SshError> {
        let cached = self.sessions.lock().await.get(target).cloned();
        let session = match cached {
            Some(session) if !session.is_closed() => session,
            _ => self.connect(target).await?,
        };
        self.activity.channel(false);
        let result = self.activity.count(session.upload(files, self.settings.command_timeout)).await;
        if result.is_err() && session.is_closed() {
            self.forget(target).await;
        }
        result
    }

    /// The hashes known for `target`'s files.
    pub fn known_hashes(&self, target: &Target) -> HashCache {
        self.hashes.lock().map(|h| h.get(target).cloned().unwrap_or_default()).unwrap_or_default()
    }

    /// Keeps `target`'s file hashes for the next round.
    pub fn remember_hashes(&self, target: &Target, cache: HashCache) {
        if let Ok(mut hashes) = self.hashes.lock() {
            hashes.insert(target.clone(), cache);
        }
    }

    async fn forget(&self, target: &Target) {
        self.shells.forget(target).await;
        self.sessions.lock().await.remove(target);
    }

    /// The transport settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Closes every shell and connection.
    pub async fn close(&self) {
        self.shells.close().await;
        let sessions: Vec<_> = self.sessions.lock().await.drain().map(|(_, s)| s).collect();
        for session in sessions {
            session.close().await;
        }
    }
}
