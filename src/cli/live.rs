//! A live round, shared by `apply --once` and `plan --live`: load the
//! revision, connect to the cluster (or say SSH-only), run the round.

use std::path::Path;

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;
use winfleet::cluster::connect::{Cluster, ClusterConfig, connect};
use winfleet::cluster::rollout::RolloutOptions;
use winfleet::desired::model::Instance;
use winfleet::engine::host::SshHost;
use winfleet::engine::report::{self, NodeReport};
use winfleet::progress::{self, Phase};
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
            drain_timeout: args.drain_timeout,
            reboot_timeout: args.reboot_timeout,
            ..RolloutOptions::default()
        },
        stop: CancellationToken::new(),
        payload: args.payload(),
        join: args.join(),
        events: Default::default(),
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    let report = runtime.block_on(async {
        let pool = pool(args)?;
        let cluster = cluster(args).await?;
        let host = SshHost { pool: &pool };
        let report = reconcile::round(cluster.as_ref(), &pool, &host, &desired, &instances, &options, node_done).await;
        pool.close().await;
        anyhow::Ok(report)
    })?;
    Ok(Some(report))
}

/// Reports a node's result as a progress event (a failure at WARN).
fn node_done(report: &NodeReport) {
    let phase = if report.failed() { Phase::Failed } else { Phase::Done };
    progress::step(&report::node_who(report), phase, &report::node_outcome(report));
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
        connect_timeout: args.connect_timeout,
        command_timeout: args.command_timeout,
        idle_timeout: Some(args.ssh_idle_timeout).filter(|t| !t.is_zero()),
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
        Some(cluster) => output::info(&format!("Cluster: {}", cluster.url)),
        None if args.require_cluster => bail!(
            "no cluster is configured (no --kubeconfig, KUBECONFIG, ~/.kube/config or in-cluster service account) and --require-cluster is set"
        ),
        None => output::warn(
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
