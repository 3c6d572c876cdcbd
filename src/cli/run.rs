//! `winfleet run`: the daemon. Flags become a [`daemon::Config`]; SIGTERM
//! and SIGINT stop it gracefully.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use winfleet::daemon::leadership::lease::{self, LeaseConfig};
use winfleet::daemon::leadership::suspend::ControlToken;
use winfleet::daemon::source::SourceConfig;
use winfleet::daemon::triggers::git_sync::{self, GitSyncSignal};
use winfleet::daemon::triggers::webhook::WebhookConfig;
use winfleet::daemon::{self, Config};

use super::{GitArgs, RoundArgs, live, load};

/// `winfleet run` flags; each has a `WINFLEET_*` environment variable.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The config repository to fetch (file://, https with --git-token-file, ssh with --git-ssh-key).
    #[arg(long, value_name = "URL", env = "WINFLEET_REPO_URL", required_unless_present = "repo_path")]
    repo_url: Option<String>,
    /// The branch to track.
    #[arg(long, value_name = "BRANCH", env = "WINFLEET_BRANCH", default_value = "main")]
    branch: String,
    /// A checkout maintained by someone else (a git-sync link such as /git/current), watched for changes.
    #[arg(long, value_name = "DIR", env = "WINFLEET_REPO_PATH", conflicts_with = "repo_url")]
    repo_path: Option<PathBuf>,
    /// Signal the git-sync sidecar with this (its --sync-on-signal, e.g. SIGHUP) when a push
    /// arrives at the webhook, so it fetches at once; needs shareProcessNamespace in the pod.
    #[arg(long, value_name = "SIGNAL", env = "WINFLEET_GIT_SYNC_SIGNAL")]
    git_sync_signal: Option<String>,
    /// The process name --git-sync-signal looks for.
    #[arg(long, value_name = "NAME", env = "WINFLEET_GIT_SYNC_PROCESS", default_value = git_sync::DEFAULT_PROCESS)]
    git_sync_process: String,
    /// A writable directory for winfleet's Git caches.
    #[arg(long, value_name = "DIR", env = "WINFLEET_CACHE_DIR", default_value = "/var/cache/winfleet")]
    cache_dir: PathBuf,
    #[command(flatten)]
    git: GitArgs,
    /// Where status commits are pushed (default: --repo-url, or the checkout's origin).
    #[arg(long, value_name = "URL", env = "WINFLEET_STATUS_REPO_URL")]
    status_repo_url: Option<String>,
    /// How often the source is checked without a webhook or file event (±5% jitter).
    #[arg(long, value_name = "DURATION", env = "WINFLEET_POLL_INTERVAL", default_value = "1m", value_parser = poll_interval)]
    poll_interval: Duration,
    /// Serve the push webhook here (GitHub, GitLab, or a generic HMAC signature).
    #[arg(long, value_name = "ADDR", env = "WINFLEET_WEBHOOK_ADDR", requires = "webhook_secret_file")]
    webhook_addr: Option<SocketAddr>,
    /// The webhook secret.
    #[arg(long, value_name = "FILE", env = "WINFLEET_WEBHOOK_SECRET_FILE")]
    webhook_secret_file: Option<PathBuf>,
    /// Serve /healthz, /readyz and /metrics here.
    #[arg(long, value_name = "ADDR", env = "WINFLEET_METRICS_ADDR", default_value = "0.0.0.0:9090")]
    metrics_addr: SocketAddr,
    /// Elect a leader through a coordination.k8s.io Lease; only the leader reconciles.
    #[arg(long, env = "WINFLEET_LEADER_ELECT")]
    leader_elect: bool,
    /// Namespace of the Lease (default: the pod's namespace).
    #[arg(long, value_name = "NS", env = "WINFLEET_LEADER_ELECT_NAMESPACE")]
    leader_elect_namespace: Option<String>,
    /// Where the other replicas reach this one's webhook, so a follower hands
    /// the webhooks it receives to the leader (default: http://$POD_IP:<webhook port>).
    #[arg(long, value_name = "URL", env = "WINFLEET_WEBHOOK_ADVERTISE_URL")]
    webhook_advertise_url: Option<String>,
    /// Turns on `POST /suspend` and `POST /resume` on the webhook port (winfleet suspend/resume),
    /// authenticated with the bearer token in this file.
    #[arg(long, value_name = "FILE", env = "WINFLEET_CONTROL_TOKEN_FILE")]
    control_token_file: Option<PathBuf>,
    #[command(flatten)]
    verify: super::verify::VerifyArgs,
    /// Read only this directory of the repository (relative to its root), as its root.
    #[arg(long, value_name = "DIR", env = "WINFLEET_PATH")]
    path: Option<String>,
    /// How long running node scripts may take to finish after SIGTERM.
    #[arg(long, value_name = "DURATION", env = "WINFLEET_SHUTDOWN_TIMEOUT", default_value = "25s", value_parser = super::duration)]
    shutdown_timeout: Duration,
    /// Do not watch the cluster for new Windows Nodes and Machines.
    #[arg(long)]
    no_cluster_watch: bool,
    #[command(flatten)]
    round: RoundArgs,
}

pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    if args.round.nodes.is_some() {
        bail!("--nodes is for `apply` and `plan`; the daemon runs the whole fleet");
    }
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    runtime.block_on(async {
        let pool = live::pool(&args.round)?;
        let cluster = live::cluster(&args.round).await?;
        let config = config(args, cluster.is_some())?;
        if config.git_sync.is_some() {
            hide_from_the_shared_process_namespace();
        }
        let handle = daemon::start(config, cluster, pool).await?;
        if let Some(addr) = handle.metrics_addr {
            tracing::info!(%addr, "serving /healthz, /readyz and /metrics");
        }
        if let Some(addr) = handle.webhook_addr {
            tracing::info!(%addr, "serving the webhook");
        }
        let shutdown = handle.shutdown.clone();
        tokio::spawn(async move {
            signal().await;
            tracing::info!("signal received: stopping");
            shutdown.cancel();
        });
        handle.task.await.context("the daemon stopped unexpectedly")??;
        anyhow::Ok(ExitCode::SUCCESS)
    })
}

fn config(args: &RunArgs, has_cluster: bool) -> anyhow::Result<Config> {
    let source = match (&args.repo_url, &args.repo_path) {
        (Some(url), _) => SourceConfig::Remote { url: url.clone(), branch: args.branch.clone() },
        (None, Some(path)) => SourceConfig::Checkout { path: path.clone() },
        (None, None) => bail!("--repo-url or --repo-path is needed"),
    };
    let webhook = match (&args.webhook_addr, &args.webhook_secret_file) {
        (Some(addr), Some(file)) => Some((*addr, WebhookConfig::from_file(file, &args.branch)?)),
        _ => None,
    };
    let leader_election = match (args.leader_elect, has_cluster) {
        (false, _) => None,
        (true, false) => bail!("--leader-elect needs a cluster (the Lease lives there)"),
        (true, true) => Some(LeaseConfig {
            advertise: args.webhook_advertise_url.clone(),
            ..LeaseConfig::new(
                args.leader_elect_namespace.clone().unwrap_or_else(pod_namespace),
                lease::default_identity(),
            )
        }),
    };
    if args.git_sync_signal.is_some() && args.repo_path.is_none() {
        bail!(
            "--git-sync-signal wakes the git-sync that maintains --repo-path; with --repo-url winfleet fetches itself"
        );
    }
    let git_sync =
        args.git_sync_signal.as_deref().map(|signal| GitSyncSignal::new(signal, &args.git_sync_process)).transpose()?;
    let (author_name, author_email) = super::verify::author(&args.verify.status_author)?;
    let pull_secret = args.round.pull_secret.as_deref().map(load::pull_secret).transpose()?;
    let control_token = match &args.control_token_file {
        Some(file) => Some(ControlToken::from_file(file).map_err(anyhow::Error::msg)?),
        None => None,
    };
    Ok(Config {
        verify: args.verify.keys()?,
        path: args.path.clone(),
        pod: std::env::var("POD_NAME").ok().filter(|n| !n.trim().is_empty()).map(|name| (pod_namespace(), name)),
        control_token,
        source,
        auth: args.git.auth(),
        cache_dir: args.cache_dir.clone(),
        status_url: args.status_repo_url.clone(),
        author_name,
        author_email,
        poll_interval: args.poll_interval,
        shutdown_timeout: args.shutdown_timeout,
        max_parallel: args.round.max_parallel,
        drain_timeout: args.round.drain_timeout,
        reboot_timeout: args.round.reboot_timeout,
        pull_secret,
        metrics_addr: Some(args.metrics_addr),
        webhook,
        leader_election,
        watch_cluster: !args.no_cluster_watch,
        seed: fastrand::u64(..),
        payload_dir: args.round.payload_dir.clone(),
        join: args.round.join(),
        git_sync,
    })
}

/// A poll interval: a duration above zero.
fn poll_interval(text: &str) -> Result<Duration, String> {
    match super::duration(text)? {
        d if d.is_zero() => Err(format!("{text:?} is zero: the source would be polled without pause")),
        d => Ok(d),
    }
}

/// With `shareProcessNamespace` the sidecar runs as the same user and could
/// read winfleet's memory and mounted files (the fleet's SSH key) through
/// `/proc/<pid>/`; a process that is not dumpable is closed to that
/// (ptrace access mode checks; it still signals and is signalled).
fn hide_from_the_shared_process_namespace() {
    if let Err(errno) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!(error = %errno, "cannot mark the process not dumpable; the sidecar can read its /proc entries");
    }
}

/// The pod's namespace (service account mount), else `winfleet`.
fn pod_namespace() -> String {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .map(|ns| ns.trim().to_owned())
        .ok()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "winfleet".to_owned())
}

/// SIGTERM or SIGINT.
async fn signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
