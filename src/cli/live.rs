//! A live round, shared by `apply --once` and `plan --live`: load the
//! revision, connect to the cluster (or say SSH-only), run the round.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;
use winfleet::cluster::connect::{Cluster, ClusterConfig, connect};
use winfleet::cluster::rollout::RolloutOptions;
use winfleet::desired::model::Instance;
use winfleet::engine::host::SshHost;
use winfleet::engine::report::{self, NodeReport};
use winfleet::reconcile::{self, Options, report::RoundReport};
use winfleet::ssh::{self, KnownHosts, Pool, Settings};

use super::{RoundArgs, load, output};

/// Runs one round; `None` when the revision is invalid (already reported).
pub fn round(
    repo: &Path,
    path: Option<&str>,
    rev: Option<&str>,
    args: &RoundArgs,
    dry_run: bool,
) -> anyhow::Result<Option<RoundReport>> {
    let secret = args.pull_secret.as_deref().map(load::pull_secret).transpose()?;
    let loaded = load::load(repo, path, rev, secret.as_ref())?;
    output::diagnostics(&loaded.diagnostics);
    let Some(desired) = loaded.desired else {
        let verb = if dry_run { "nothing was planned" } else { "nothing was applied" };
        output::error(&format!("invalid: {} error(s); {verb}", loaded.errors()));
        return Ok(None);
    };
    let instances = select(&desired.instances, args.nodes.as_deref())?;
    if desired.fleet.suspend && !dry_run {
        output::error("the Fleet says spec.suspend: true: nothing is changed; this round only observes and reports");
    }
    let options = Options {
        dry_run: dry_run || desired.fleet.suspend,
        max_parallel: args.max_parallel.unwrap_or(desired.fleet.max_parallel).max(1) as usize,
        whole_fleet: args.nodes.is_none(),
        rollout: RolloutOptions {
            max_unavailable: desired.fleet.max_unavailable.max(1) as usize,
            drain_timeout: Duration::from_secs(args.drain_timeout),
            reboot_timeout: Duration::from_secs(args.reboot_timeout),
            ..RolloutOptions::default()
        },
        stop: CancellationToken::new(),
        payload: args.payload(),
        join: args.join(),
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    let report = runtime.block_on(async {
        let pool = pool(args)?;
        let cluster = cluster(args).await?;
        let host = SshHost { pool: &pool };
        let mut progress = Progress::new(instances.len());
        let report =
            reconcile::round(cluster.as_ref(), &pool, &host, &desired, &instances, &options, |r| progress.node(r))
                .await;
        progress.finish();
        pool.close().await;
        anyhow::Ok(report)
    })?;
    Ok(Some(report))
}

/// The SSH pool `--ssh-key` and `--known-hosts` describe.
pub fn pool(args: &RoundArgs) -> anyhow::Result<Pool> {
    let (Some(key_path), Some(known_hosts_path)) = (&args.ssh_key, &args.known_hosts) else {
        bail!("--ssh-key and --known-hosts are needed to reach the nodes");
    };
    let key = ssh::load_key(key_path).map_err(anyhow::Error::msg)?;
    let known_hosts = KnownHosts::load(known_hosts_path, args.trust_on_first_use)
        .with_context(|| format!("cannot read known hosts {}", known_hosts_path.display()))?;
    let settings = Settings {
        connect_timeout: Duration::from_secs(args.connect_timeout),
        command_timeout: Duration::from_secs(args.command_timeout),
        ..Settings::default()
    };
    Ok(Pool::new(key, known_hosts, settings))
}

/// The cluster, or `None` (said on stderr) in SSH-only mode; an error with
/// `--require-cluster`.
pub async fn cluster(args: &RoundArgs) -> anyhow::Result<Option<Cluster>> {
    let config = ClusterConfig { kubeconfig: args.kubeconfig.clone(), context: args.context.clone() };
    let cluster = connect(&config).await?;
    match &cluster {
        Some(cluster) => output::error(&format!("Cluster: {}", cluster.url)),
        None if args.require_cluster => bail!(
            "no cluster is configured (no --kubeconfig, KUBECONFIG, ~/.kube/config or in-cluster service account) and --require-cluster is set"
        ),
        None => output::error(
            "SSH-only mode: no cluster configured (no --kubeconfig, KUBECONFIG, ~/.kube/config or in-cluster service account); \
                 node files and environment only, Nodes, MachineSets and reboots are left alone",
        ),
    }
    Ok(cluster)
}

/// The instances named by `--nodes` (all when absent); an unknown address
/// is an error, so a typo never silently does nothing.
fn select<'a>(
    instances: &'a std::collections::BTreeMap<String, Instance>,
    nodes: Option<&[String]>,
) -> anyhow::Result<Vec<&'a Instance>> {
    let Some(nodes) = nodes else { return Ok(instances.values().collect()) };
    let mut selected = Vec::new();
    let mut unknown = Vec::new();
    for node in nodes {
        let canonical = node.trim().trim_end_matches('.').to_ascii_lowercase();
        match instances.get(&canonical) {
            Some(instance) if selected.iter().any(|s: &&Instance| s.address == instance.address) => {}
            Some(instance) => selected.push(instance),
            None => unknown.push(node.as_str()),
        }
    }
    if !unknown.is_empty() {
        bail!("--nodes names instance(s) the repository does not list: {}", unknown.join(", "));
    }
    Ok(selected)
}

/// Progress on stderr: a counter on a terminal, a line per node otherwise.
struct Progress {
    total: usize,
    done: usize,
    failed: usize,
    terminal: bool,
}

impl Progress {
    fn new(total: usize) -> Self {
        Self { total, done: 0, failed: 0, terminal: std::io::stderr().is_terminal() }
    }

    fn node(&mut self, report: &NodeReport) {
        self.done += 1;
        if report.failed() {
            self.failed += 1;
        }
        let mut stderr = std::io::stderr().lock();
        let _ = if self.terminal {
            write!(stderr, "\r{}/{} nodes done, {} failed ", self.done, self.total, self.failed)
        } else {
            writeln!(stderr, "{}", report::node_line(report))
        };
    }

    fn finish(&self) {
        if self.terminal && self.total > 0 {
            let _ = writeln!(std::io::stderr());
        }
    }
}
