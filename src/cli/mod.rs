//! Command-line arguments and the commands they run. Raw arguments become
//! validated settings here, at one boundary; `anyhow` lives only in the
//! binary.

mod apply;
mod load;
pub mod output;
mod plan;
mod render;
mod validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// GitOps for the Windows worker nodes of an OpenShift/Kubernetes cluster.
#[derive(Debug, Parser)]
#[command(name = "winfleet", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a config repository: exit 0 when valid (warnings allowed), 1 when invalid.
    Validate(RepoArgs),
    /// Write the files each node would get: OUT/<address>/registries/<registry>/hosts.toml and OUT/<address>/environment.
    Render(RenderArgs),
    /// Show what merging one revision over another would change (no cluster, no SSH):
    /// exit 0 = no changes, 2 = changes, 1 = error.
    Plan(PlanArgs),
    /// Observe every node over SSH and change what differs (one round with --once):
    /// exit 0 = done, 1 = a node or operation failed; with --dry-run 0 = in sync, 2 = changes, 1 = error.
    Apply(ApplyArgs),
}

/// Where the repository is and which revision to read.
#[derive(Debug, clap::Args)]
struct RepoArgs {
    /// The config repository.
    #[arg(long, default_value = ".", env = "WINFLEET_REPO")]
    repo: PathBuf,
    /// Read the committed tree of this revision instead of the working tree.
    #[arg(long)]
    rev: Option<String>,
}

#[derive(Debug, clap::Args)]
struct RenderArgs {
    #[command(flatten)]
    repo: RepoArgs,
    /// A .dockerconfigjson file with registry credentials for the hosts.toml headers.
    #[arg(long, value_name = "FILE")]
    pull_secret: Option<PathBuf>,
    /// Directory to write into (created; a previous render there is replaced).
    #[arg(long, value_name = "OUT")]
    output: PathBuf,
}

#[derive(Debug, clap::Args)]
struct PlanArgs {
    /// The config repository (a Git checkout).
    #[arg(long, default_value = ".", env = "WINFLEET_REPO")]
    repo: PathBuf,
    /// The revision the change starts from (e.g. the merge base with main).
    #[arg(long)]
    base: String,
    /// The revision with the change.
    #[arg(long, default_value = "HEAD")]
    head: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Debug, clap::Args)]
struct ApplyArgs {
    #[command(flatten)]
    repo: RepoArgs,
    /// Run one round and exit (the continuous daemon comes later).
    #[arg(long, required = true)]
    once: bool,
    /// Private key for every node (OpenSSH or PEM: RSA >= 2048, ECDSA, Ed25519; WMCO's private-key.pem works as is).
    #[arg(long, value_name = "FILE", env = "WINFLEET_SSH_KEY")]
    ssh_key: PathBuf,
    /// OpenSSH known_hosts file the nodes' host keys are checked against.
    #[arg(long, value_name = "FILE", env = "WINFLEET_KNOWN_HOSTS")]
    known_hosts: PathBuf,
    /// Record the key of a node not in --known-hosts into that file, then enforce it.
    #[arg(long)]
    trust_on_first_use: bool,
    /// Observe and print the live plan; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Only these instances (addresses, comma-separated).
    #[arg(long, value_name = "ADDR,...", value_delimiter = ',')]
    nodes: Option<Vec<String>>,
    /// Nodes processed at once (default: the Fleet's rollout.maxParallel, 32).
    #[arg(long, value_name = "N")]
    max_parallel: Option<u32>,
    /// A .dockerconfigjson file with registry credentials for the hosts.toml headers.
    #[arg(long, value_name = "FILE")]
    pull_secret: Option<PathBuf>,
    /// Seconds allowed for connecting and authenticating to a node.
    #[arg(long, value_name = "SECS", default_value_t = 15)]
    connect_timeout: u64,
    /// Seconds allowed for one script on a node.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    command_timeout: u64,
    /// Output format of the summary.
    #[arg(long, value_enum, default_value_t = RoundFormat::Text)]
    output: RoundFormat,
}

/// How a round's summary is printed.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum RoundFormat {
    /// A line per node and its operations.
    Text,
    /// Versioned JSON (`formatVersion`, `nodes`, `totals`).
    Json,
}

/// How a plan is printed.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Format {
    /// For terminals and CI logs.
    Text,
    /// For a pull-request comment.
    Markdown,
    /// The versioned JSON format (docs/plan-format.md).
    Json,
}

/// Runs a command; the exit code is the command's verdict.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Validate(args) => validate::run(&args),
        Command::Render(args) => render::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Apply(args) => apply::run(&args),
    }
}
