//! `winfleet run`: the continuous GitOps loop (docs/daemon.md).
//!
//! One round at a time, so no node is ever worked on by two passes at once:
//! source → desired → observe → plan → apply → report. Every trigger (poll
//! timer, webhook, file watch, drift timer, cluster watch, per-node retry)
//! feeds one channel; whatever arrives during a round becomes exactly one
//! follow-up round ([`triggers::schedule`]).
//!
//! By responsibility, each readable alone:
//! - [`round`]: what one unit of work does (a new commit, a drift check, a
//!   retry), which instances it covers ([`round::scope`], pure), the
//!   signature check of a new head, and the record it leaves.
//! - [`triggers`]: what wakes the loop: the schedule (timers, coalescing,
//!   per-node back-off; pure), webhooks, the file watch, the cluster watch,
//!   and the git-sync nudge.
//! - [`leadership`]: leader election on a Lease (only the leader
//!   reconciles), the hand-over of webhooks to the leader, suspension.
//! - [`http`]: the operator-facing endpoints, within limits, and the metrics.
//! - [`report`]: the status files published to Git after each round.
//! - [`source`]: the remote or checkout the revisions come from.

pub mod http;
pub mod leadership;
pub mod report;
pub mod round;
pub mod source;
pub mod triggers;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::cluster::connect::Cluster;
use crate::render::pull_secret::PullSecret;
use crate::source::transport::GitAuth;
use crate::ssh::Pool;
use http::metrics::Metrics;
use round::{Daemon, RoundRecord};
use source::{Source, SourceConfig};
use triggers::Trigger;
use triggers::schedule::Schedule;

/// Everything `winfleet run` is told.
#[derive(Debug)]
pub struct Config {
    /// Where revisions come from.
    pub source: SourceConfig,
    /// Git credentials (source and status pushes).
    pub auth: GitAuth,
    /// A writable directory for the Git caches.
    pub cache_dir: PathBuf,
    /// Where status is pushed (default: the source remote, or the checkout's origin).
    pub status_url: Option<String>,
    /// Status commit author name.
    pub author_name: String,
    /// Status commit author email.
    pub author_email: String,
    /// How often the source is checked without being told.
    pub poll_interval: Duration,
    /// How long in-flight work may take to finish on shutdown.
    pub shutdown_timeout: Duration,
    /// Nodes processed at once (default: the Fleet's).
    pub max_parallel: Option<u32>,
    /// Drain timeout of a safe reboot.
    pub drain_timeout: Duration,
    /// Time a rebooting node has to come back.
    pub reboot_timeout: Duration,
    /// Registry credentials for hosts.toml.
    pub pull_secret: Option<PullSecret>,
    /// Where /healthz, /readyz and /metrics are served.
    pub metrics_addr: Option<SocketAddr>,
    /// Where the webhook is served, and its verification.
    pub webhook: Option<(SocketAddr, triggers::webhook::WebhookConfig)>,
    /// The git-sync sidecar a verified push signals (`--repo-path` mode).
    pub git_sync: Option<triggers::git_sync::GitSyncSignal>,
    /// Leader election (needs a cluster).
    pub leader_election: Option<leadership::lease::LeaseConfig>,
    /// Watch the cluster for new Windows Nodes and Machines.
    pub watch_cluster: bool,
    /// Seed of the jitter (timers and back-off).
    pub seed: u64,
    /// The payload directory for the node lifecycle (`--payload-dir`).
    pub payload_dir: Option<PathBuf>,
    /// How joins of new nodes run.
    pub join: crate::cluster::join::JoinOptions,
    /// The bearer token of `POST /suspend` and `POST /resume`; None turns them off.
    pub control_token: Option<leadership::suspend::ControlToken>,
    /// The directory of the repository that holds the configuration
    /// (`--path`; the root when None).
    pub path: Option<String>,
    /// This replica's Pod (namespace, name): what the daemon's own Events
    /// are about (a refused revision).
    pub pod: Option<(String, String)>,
    /// Apply only commits signed by these keys (and, in
    /// `all-since-last-applied` mode, where the check starts after a
    /// restart when the status branch cannot say).
    pub verify: Option<crate::source::signed::Policy>,
}

/// A running daemon.
pub struct Handle {
    /// Where /healthz, /readyz and /metrics answer.
    pub metrics_addr: Option<SocketAddr>,
    /// Where the webhook answers.
    pub webhook_addr: Option<SocketAddr>,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// Every finished round, from the first one on.
    pub records: broadcast::Receiver<RoundRecord>,
    /// Cancel to stop.
    pub shutdown: CancellationToken,
    /// The loop; ends after shutdown.
    pub task: tokio::task::JoinHandle<Result<(), DaemonError>>,
}

/// Why the daemon could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The source could not be opened.
    #[error("source: {0}")]
    Source(String),
    /// An endpoint could not be served.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The checkout could not be watched.
    #[error("cannot watch the checkout: {0}")]
    Watch(String),
}

/// Starts the daemon: endpoints, leader election, watches and the loop.
pub async fn start(config: Config, cluster: Option<Cluster>, pool: Pool) -> Result<Handle, DaemonError> {
    start_with(config, cluster, pool, None).await
}

/// [`start`], with `/healthz`'s allowance (default: [`http::health::allowance`]).
pub async fn start_with(
    config: Config,
    cluster: Option<Cluster>,
    pool: Pool,
    allowance: Option<Duration>,
) -> Result<Handle, DaemonError> {
    let (join, waits) = (&config.join, [config.drain_timeout, config.reboot_timeout, source::GIT_TIMEOUT]);
    let waits = [join.register_timeout, join.ready_timeout].into_iter().chain(waits).collect::<Vec<_>>();
    let allowance = allowance.unwrap_or_else(|| http::health::allowance(pool.settings(), &waits));
    let liveness = Arc::new(http::health::Liveness::new(allowance, pool.activity.clone()));
    let shutdown = CancellationToken::new();
    let metrics = Arc::new(Metrics::new());
    let ready = Arc::new(AtomicBool::new(false));
    let (triggers, receiver) = mpsc::unbounded_channel();
    let (rounds, records) = broadcast::channel(256);
    let source = Source::open(&config.source, &config.cache_dir, &config.auth)
        .map_err(|e| DaemonError::Source(e.to_string()))?;
    // The Lease has its own token: it is released only once the loop has
    // finished its round, so no other replica starts on a node still worked on.
    let lease_stop = CancellationToken::new();
    let webhook_listener = match &config.webhook {
        Some((addr, _)) => Some(bind(*addr).await?),
        None => None,
    };
    // With leader election the Lease keeps the suspension; without, a file.
    let suspension = match (&config.leader_election, &cluster) {
        (Some(_), Some(_)) => leadership::suspend::Suspension::new(),
        _ => leadership::suspend::Suspension::persisted(&config.cache_dir.join("suspended")),
    };
    let elected = match (&config.leader_election, &cluster) {
        (Some(lease_config), Some(cluster)) => {
            let mut lease_config = lease_config.clone();
            let pod_ip = std::env::var("POD_IP").ok();
            lease_config.advertise = webhook_listener.as_ref().and_then(|(_, bound)| {
                leadership::forward::advertise(lease_config.advertise.as_deref(), *bound, pod_ip.as_deref())
            });
            if webhook_listener.is_some() && lease_config.advertise.is_none() {
                tracing::warn!(
                    "the webhook's address for the other replicas is unknown (set POD_IP or --webhook-advertise-url): a webhook a follower receives reaches the leader only at its next poll"
                );
            }
            let identity = lease_config.identity.clone();
            let own = lease_config.advertise.clone();
            let elected = leadership::lease::spawn_with(
                cluster.client.clone(),
                lease_config,
                lease_stop.clone(),
                Some(suspension.clone()),
            );
            Some((elected, identity, own))
        }
        _ => None,
    };
    let forward = elected.as_ref().map(|(e, identity, own)| {
        leadership::forward::Forwarder::new(e.leading.clone(), e.leader_webhook.clone(), own.clone(), identity.clone())
    });
    let git_sync = config.git_sync.clone().map(Arc::new);
    let state = |webhook: Option<Arc<triggers::webhook::WebhookConfig>>| http::HttpState {
        metrics: Arc::clone(&metrics),
        ready: Arc::clone(&ready),
        liveness: Arc::clone(&liveness),
        triggers: triggers.clone(),
        forward: forward.clone(),
        suspension: suspension.clone(),
        control: config.control_token.clone(),
        git_sync: webhook.as_ref().and(git_sync.clone()),
        webhook,
    };
    let metrics_addr = match config.metrics_addr {
        Some(addr) => Some(serve(bind(addr).await?, http::ops_router(state(None)), &shutdown)),
        None => None,
    };
    let webhook_addr = match (webhook_listener, &config.webhook) {
        (Some(listener), Some((_, verify))) => {
            Some(serve(listener, http::webhook_router(state(Some(Arc::new(verify.clone())))), &shutdown))
        }
        _ => None,
    };
    let watcher = match source.watch_paths() {
        paths if paths.is_empty() => None,
        paths => {
            Some(triggers::fs_watch::watch(&paths, triggers.clone()).map_err(|e| DaemonError::Watch(e.to_string()))?)
        }
    };
    let leader = elected.map(|(e, ..)| (e.leading, e.task));
    if let (true, Some(cluster)) = (config.watch_cluster, &cluster) {
        tokio::spawn(triggers::cluster_watch::run(cluster.client.clone(), triggers.clone(), shutdown.child_token()));
    }
    let shutdown_loop = shutdown.clone();
    let sender = triggers.clone();
    let now = Instant::now();
    let schedule = Schedule::new(now, config.poll_interval, Duration::from_secs(600), config.seed);
    let daemon = Daemon::new(config, source, cluster, pool, Arc::clone(&metrics), ready, rounds)
        .with_suspension(suspension.clone());
    let election = Election { leader: leader.as_ref().map(|(rx, _)| rx.clone()), stop: lease_stop };
    let lease_task = leader.map(|(_, task)| task);
    let task = tokio::spawn(async move {
        // The loop holds a sender itself: with no webhook, watch or cluster
        // watch, its timers still run (the channel never reads as closed).
        let triggers = Triggers { receiver, _sender: sender, _watcher: watcher };
        let result = run_loop(daemon, schedule, triggers, election.leader, shutdown_loop, liveness).await;
        election.stop.cancel();
        if let Some(task) = lease_task {
            // The release is a GET and a PUT: let it reach the API server.
            let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        }
        result
    });
    Ok(Handle { metrics_addr, webhook_addr, metrics, records, shutdown, task })
}

/// Where triggers arrive, and what keeps their sources alive.
struct Triggers {
    receiver: mpsc::UnboundedReceiver<Trigger>,
    _sender: triggers::TriggerSender,
    _watcher: Option<notify::RecommendedWatcher>,
}

/// The leadership the loop follows, and the token that releases the Lease.
struct Election {
    leader: Option<watch::Receiver<bool>>,
    stop: CancellationToken,
}

async fn bind(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), DaemonError> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|source| DaemonError::Listen { addr, source })?;
    let bound = listener.local_addr().map_err(|source| DaemonError::Listen { addr, source })?;
    Ok((listener, bound))
}

fn serve(
    (listener, bound): (tokio::net::TcpListener, SocketAddr),
    router: axum::Router,
    shutdown: &CancellationToken,
) -> SocketAddr {
    let token = shutdown.clone();
    tokio::spawn(async move {
        if let Err(e) = http::serve(listener, router, token).await {
            tracing::error!(error = %e, "endpoint stopped");
        }
    });
    bound
}

/// Rounds until shutdown: wait for work (and leadership), run it, repeat.
async fn run_loop(
    mut daemon: Daemon,
    mut schedule: Schedule,
    triggers: Triggers,
    mut leader: Option<watch::Receiver<bool>>,
    shutdown: CancellationToken,
    liveness: Arc<http::health::Liveness>,
) -> Result<(), DaemonError> {
    let mut receiver = triggers.receiver;
    // When the pooled connections are closed, if no round uses them first.
    let mut close_at: Option<Instant> = None;
    let idle_timeout = daemon.pool().settings().idle_timeout;
    loop {
        while let Ok(trigger) = receiver.try_recv() {
            schedule.trigger(trigger);
        }
        let now = Instant::now();
        liveness.working();
        let leading = leader.as_mut().is_none_or(|l| *l.borrow_and_update());
        daemon.metrics().set_leader(leading);
        daemon.metrics().set_suspended(daemon.suspended_by().is_some());
        if !leading {
            // A follower keeps its source fresh (and /readyz honest) and
            // runs no round; on taking over it checks the source at once.
            if let Some(work) = schedule.take(now)
                && work.check_source
            {
                daemon.probe_source().await;
            }
            let Some(l) = leader.as_mut() else { continue };
            liveness.waiting_until(schedule.next_wake(now));
            tokio::select! {
                () = shutdown.cancelled() => break,
                changed = l.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    schedule.trigger(Trigger::Poll);
                }
                trigger = receiver.recv() => match trigger {
                    Some(trigger) => schedule.trigger(trigger),
                    None => break,
                },
                () = tokio::time::sleep_until(schedule.next_wake(now)) => {}
            }
            continue;
        }
        if let Some(work) = schedule.take(now) {
            // Losing leadership stops taking work like a shutdown does.
            let stop = shutdown.child_token();
            let lost = leader.clone().map(|mut l| {
                let stop = stop.clone();
                tokio::spawn(async move {
                    let _ = l.wait_for(|leading| !*leading).await;
                    stop.cancel();
                })
            });
            // Suspending stops taking work too: the node scripts running
            // finish, no new node is started.
            let suspended = (daemon.suspension().reason().is_none()).then(|| {
                let mut suspension = daemon.suspension().subscribe();
                let stop = stop.clone();
                tokio::spawn(async move {
                    let _ = suspension.wait_for(Option::is_some).await;
                    stop.cancel();
                })
            });
            let grace = daemon.shutdown_timeout();
            let round = daemon.run(work, &mut schedule, &stop);
            tokio::pin!(round);
            tokio::select! {
                () = &mut round => {}
                () = shutdown.cancelled() => {
                    tracing::info!("stopping: no new node is started; waiting up to {}s for running ones", grace.as_secs());
                    if tokio::time::timeout(grace, &mut round).await.is_err() {
                        tracing::warn!("stopping with work unfinished; the next start re-observes and converges");
                    }
                }
            }
            for task in [lost, suspended].into_iter().flatten() {
                task.abort();
            }
            close_at = idle_timeout.map(|idle| Instant::now() + idle);
            if shutdown.is_cancelled() {
                break;
            }
            continue;
        }
        let wake = schedule.next_wake(now);
        liveness.waiting_until(close_at.map_or(wake, |close| close.min(wake)));
        tokio::select! {
            () = shutdown.cancelled() => break,
            trigger = receiver.recv() => match trigger {
                Some(trigger) => schedule.trigger(trigger),
                None => break,
            },
            () = tokio::time::sleep_until(schedule.next_wake(now)) => {}
            () = async { tokio::time::sleep_until(close_at.unwrap_or(now)).await }, if close_at.is_some() => {
                close_at = None;
                tracing::debug!("no round for a while: closing the SSH connections");
                daemon.pool().close().await;
            }
        }
    }
    tracing::info!("stopped");
    Ok(())
}
