//! `winfleet apply --once`: one round over the fleet's nodes over SSH.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use winfleet::desired::model::Instance;
use winfleet::engine::{self, RoundOptions, report};
use winfleet::ssh::{self, KnownHosts, Pool, Settings};

use super::{ApplyArgs, RoundFormat, load, output};

pub fn run(args: &ApplyArgs) -> anyhow::Result<ExitCode> {
    let secret = args.pull_secret.as_deref().map(load::pull_secret).transpose()?;
    let loaded = load::load(&args.repo.repo, args.repo.rev.as_deref(), secret.as_ref())?;
    output::diagnostics(&loaded.diagnostics);
    let Some(desired) = loaded.desired else {
        output::error(&format!("invalid: {} error(s); nothing was applied", loaded.errors()));
        return Ok(ExitCode::from(1));
    };
    let instances = select(&desired.instances, args.nodes.as_deref())?;
    let key = ssh::load_key(&args.ssh_key).map_err(anyhow::Error::msg)?;
    let known_hosts = KnownHosts::load(&args.known_hosts, args.trust_on_first_use)
        .with_context(|| format!("cannot read known hosts {}", args.known_hosts.display()))?;
    let settings = Settings {
        connect_timeout: Duration::from_secs(args.connect_timeout),
        command_timeout: Duration::from_secs(args.command_timeout),
        ..Settings::default()
    };
    let options = RoundOptions {
        dry_run: args.dry_run,
        max_parallel: args.max_parallel.unwrap_or(desired.fleet.max_parallel).max(1) as usize,
    };
    output::error(
        "SSH-only mode (no cluster side yet): node files and environment only; reboots are reported, not performed",
    );
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the runtime")?;
    let reports = runtime.block_on(async {
        let pool = Pool::new(key, known_hosts, settings);
        let mut progress = Progress::new(instances.len());
        let reports = engine::round(&pool, instances.iter().copied(), options, |r| progress.node(r)).await;
        progress.finish();
        pool.close().await;
        reports
    });
    output::out(&match args.output {
        RoundFormat::Json => report::render_json(&reports, args.dry_run),
        RoundFormat::Text => report::render_text(&reports, args.dry_run),
    });
    let failed = reports.iter().any(report::NodeReport::failed);
    let changes = reports.iter().any(report::NodeReport::has_changes);
    Ok(ExitCode::from(match (failed, args.dry_run && changes) {
        (true, _) => 1,
        (false, true) => 2,
        (false, false) => 0,
    }))
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

    fn node(&mut self, report: &report::NodeReport) {
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
