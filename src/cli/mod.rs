//! Command-line arguments and the commands they run. Raw arguments become
//! validated settings here, at one boundary; `anyhow` lives only in the
//! binary.

mod apply;
mod colour;
mod control;
mod docs;
mod http;
mod import;
mod live;
mod load;
pub mod logging;
pub mod output;
mod payload;
mod plan;
mod post;
mod progress;
mod render;
mod run;
mod status;
mod validate;
mod verify;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

/// GitOps for the Windows worker nodes of an OpenShift/Kubernetes cluster.
#[derive(Debug, Parser)]
#[command(name = "winfleet", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log format on stderr: with json every stderr line is a JSON object (messages, progress and
    /// diagnostics included).
    #[arg(long, global = true, value_enum, env = "WINFLEET_LOG_FORMAT", default_value_t = logging::LogFormat::Text)]
    pub log_format: logging::LogFormat,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate a config repository: exit 0 when valid (warnings allowed), 1 when invalid.
    Validate(ValidateArgs),
    /// Write the files each node would get: OUT/<address>/registries/<registry>/hosts.toml and OUT/<address>/environment.
    ///
    /// They may hold pull-secret credentials and a proxy password, so the files are written 0600
    /// and OUT and every directory in it 0700 (an existing OUT is tightened).
    Render(RenderArgs),
    /// Show what merging one revision over another would change (no cluster, no SSH), or with
    /// --live what applying --head would change on the live cluster and nodes:
    /// exit 0 = no changes, 2 = changes, 1 = error.
    Plan(PlanArgs),
    /// Observe the cluster and every node and change what differs, rebooting safely where needed
    /// (one round; --once is accepted): exit 0 = done, 1 = something failed; with --dry-run 0 = in sync,
    /// 2 = changes, 1 = error.
    Apply(ApplyArgs),
    /// Run continuously: fetch or watch the repository, apply each new commit, re-check drift, and
    /// commit status back to Git. Stops gracefully on SIGTERM.
    Run(Box<run::RunArgs>),
    /// Print the fleet status the daemon committed to the status branch: a summary, then a table of
    /// instances and one of MachineSets. Exit 0 = every instance and MachineSet is Ready,
    /// 3 = one is not Ready (progressing, drifted, waiting, failed, conflict, unknown) or the newest
    /// revision is invalid, 1 = error (no repository, no status branch).
    Status(StatusArgs),
    /// Work with a payload directory (the node files WMCO ships under /payload).
    #[command(subcommand)]
    Payload(payload::PayloadCommand),
    /// Tell the running daemon to change nothing until resumed: rounds still observe and report
    /// drift; a round in progress starts no further node (emergency stop; the Fleet's
    /// spec.suspend does the same through Git).
    Suspend(control::SuspendArgs),
    /// Tell the running daemon to go on: it applies the revision in force at once.
    Resume(control::ControlArgs),
    /// Write a config repository from what WMCO runs in a cluster today: the windows-instances and
    /// windows-services ConfigMaps, the mirror sets, the Proxy and the Windows MachineSets.
    Import(import::ImportArgs),
    /// Print a shell completion script for winfleet (e.g. `winfleet completions bash > /etc/bash_completion.d/winfleet`).
    Completions(docs::CompletionsArgs),
    /// Print winfleet's man page (roff) on stdout, or a subcommand's (e.g. `winfleet man apply | man -l -`).
    Man(docs::ManArgs),
}

/// Where the repository is and which revision to read.
#[derive(Debug, clap::Args)]
struct RepoArgs {
    /// The config repository.
    #[arg(long, default_value = ".", env = "WINFLEET_REPO", help_heading = "Repository")]
    repo: PathBuf,
    /// Read the committed tree of this revision instead of the working tree.
    #[arg(long, help_heading = "Repository")]
    rev: Option<String>,
    /// Read only this directory of the repository (relative to its root), as its root.
    #[arg(long, value_name = "DIR", env = "WINFLEET_PATH", help_heading = "Repository")]
    path: Option<String>,
    #[command(flatten, next_help_heading = "Signed commits")]
    verify: verify::VerifyArgs,
}

#[derive(Debug, clap::Args)]
struct ValidateArgs {
    #[command(flatten)]
    repo: RepoArgs,
    /// Also check the services manifest against this payload directory (the one the Fleet's
    /// spec.payload.digest pins): every file its services name under C:\k, C:\Temp or the posix
    /// payload directory must be a payload file, a file winfleet generates, or a runtime file.
    #[arg(long, value_name = "DIR", env = "WINFLEET_PAYLOAD_DIR")]
    payload_dir: Option<PathBuf>,
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
    #[arg(long, default_value = ".", env = "WINFLEET_REPO", help_heading = "Repository")]
    repo: PathBuf,
    /// The revision the change starts from (e.g. the merge base with main).
    #[arg(long, required_unless_present = "live", help_heading = "Repository")]
    base: Option<String>,
    /// The revision with the change.
    #[arg(long, default_value = "HEAD", help_heading = "Repository")]
    head: String,
    /// Read only this directory of the repository (relative to its root), as its root.
    #[arg(long, value_name = "DIR", env = "WINFLEET_PATH", help_heading = "Repository")]
    path: Option<String>,
    /// With --output markdown: the comment's size budget; warnings and sections that do not fit are
    /// left out whole, with a note (GitHub refuses comments over 65,536 characters).
    /// At least 1000 (the marker, the summary and the note that the comment is shortened always fit).
    #[arg(long, value_name = "BYTES", default_value_t = winfleet::plan::markdown::DEFAULT_MAX_BYTES,
          value_parser = max_bytes, help_heading = "Output")]
    max_bytes: usize,
    /// Plan --head against the live fleet instead: observe the cluster and every node, change nothing
    /// (exit 0 = in sync, 2 = changes, 1 = error). Takes the node and cluster flags of `apply`.
    #[arg(long, conflicts_with = "base", help_heading = "Live plan (--live)")]
    live: bool,
    #[command(flatten)]
    round: RoundArgs,
    #[command(flatten, next_help_heading = "Signed commits")]
    verify: verify::VerifyArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text, help_heading = "Output")]
    output: Format,
    /// Also post the plan (markdown, within --max-bytes) as the request's one plan comment, created or
    /// updated in place: github (GITHUB_TOKEN or GH_TOKEN, GITHUB_REPOSITORY, the pull_request event) or
    /// gitlab (GITLAB_TOKEN or GITLAB_API_TOKEN, CI_API_V4_URL, CI_PROJECT_ID, CI_MERGE_REQUEST_IID).
    #[arg(long, value_enum, value_name = "FORGE", help_heading = "Output")]
    post: Option<post::Forge>,
}

#[derive(Debug, clap::Args)]
struct ApplyArgs {
    #[command(flatten)]
    repo: RepoArgs,
    /// Accepted and ignored: `apply` always runs one round and exits (`winfleet run` is the
    /// continuous reconciler).
    #[arg(long)]
    once: bool,
    /// Observe and print the live plan; change nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    round: RoundArgs,
    /// Output format of the summary.
    #[arg(long, value_enum, default_value_t = RoundFormat::Text)]
    output: RoundFormat,
}

#[derive(Debug, clap::Args)]
struct StatusArgs {
    /// A clone of the config repository; the status is read from its committed branch
    /// (refs/heads/BRANCH, else refs/remotes/origin/BRANCH), not from the working tree.
    #[arg(long, default_value = ".", env = "WINFLEET_REPO")]
    repo: PathBuf,
    /// Read the status branch from this remote instead of --repo (only that branch is fetched).
    #[arg(long, value_name = "URL", env = "WINFLEET_REPO_URL")]
    repo_url: Option<String>,
    #[command(flatten)]
    git: GitArgs,
    /// The status branch (the Fleet's status.branch).
    #[arg(long, default_value = "winfleet/status")]
    branch: String,
    /// The status directory inside the branch (the Fleet's status.path).
    #[arg(long, default_value = winfleet::desired::DEFAULT_STATUS_PATH)]
    path: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = status::StatusFormat::Table)]
    output: status::StatusFormat,
}

/// Credentials for a Git remote.
#[derive(Debug, clap::Args)]
struct GitArgs {
    /// A file holding the https token (read at each fetch, so a rotated Secret works).
    #[arg(long, value_name = "FILE", env = "WINFLEET_GIT_TOKEN_FILE")]
    git_token_file: Option<PathBuf>,
    /// The deploy key for ssh:// repositories.
    #[arg(long, value_name = "FILE", env = "WINFLEET_GIT_SSH_KEY")]
    git_ssh_key: Option<PathBuf>,
    /// known_hosts pinning the Git server's host key (required for ssh://).
    #[arg(long, value_name = "FILE", env = "WINFLEET_GIT_KNOWN_HOSTS")]
    git_known_hosts: Option<PathBuf>,
    /// Send the Git token (--git-token-file, or credentials in the URL) over plain http://, where
    /// anyone on the path can read it; refused without this flag (use https://).
    #[arg(long, env = "WINFLEET_ALLOW_INSECURE_HTTP")]
    allow_insecure_http: bool,
}

impl GitArgs {
    fn auth(&self) -> winfleet::source::GitAuth {
        winfleet::source::GitAuth {
            token_file: self.git_token_file.clone(),
            ssh_key: self.git_ssh_key.clone(),
            known_hosts: self.git_known_hosts.clone(),
            allow_insecure_http: self.allow_insecure_http,
        }
    }
}

/// How a live round reaches the nodes and the cluster.
#[derive(Debug, clap::Args)]
struct RoundArgs {
    /// Private key for every node (OpenSSH or PEM: RSA >= 2048, ECDSA, Ed25519; WMCO's private-key.pem works as is).
    #[arg(long, value_name = "FILE", env = "WINFLEET_SSH_KEY", help_heading = "Nodes (SSH)")]
    ssh_key: Option<PathBuf>,
    /// OpenSSH known_hosts file the nodes' host keys are checked against.
    #[arg(long, value_name = "FILE", env = "WINFLEET_KNOWN_HOSTS", help_heading = "Nodes (SSH)")]
    known_hosts: Option<PathBuf>,
    /// Record the key of a node not in --known-hosts into that file, then enforce it.
    #[arg(long, help_heading = "Nodes (SSH)")]
    trust_on_first_use: bool,
    /// Only these instances (addresses, comma-separated); MachineSets are then left out.
    #[arg(long, value_name = "ADDR,...", value_delimiter = ',', help_heading = "Nodes (SSH)")]
    nodes: Option<Vec<String>>,
    /// Nodes processed at once (default: the Fleet's rollout.maxParallel, 32).
    #[arg(long, value_name = "N", help_heading = "Nodes (SSH)")]
    max_parallel: Option<u32>,
    /// A .dockerconfigjson file with registry credentials for the hosts.toml headers.
    #[arg(long, value_name = "FILE", env = "WINFLEET_PULL_SECRET", help_heading = "Nodes (SSH)")]
    pull_secret: Option<PathBuf>,
    /// Time allowed for connecting and authenticating to a node (a duration such as 15s; a bare
    /// number is seconds).
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = duration, help_heading = "Nodes (SSH)")]
    connect_timeout: Duration,
    /// Time allowed for one script on a node.
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = duration, help_heading = "Nodes (SSH)")]
    command_timeout: Duration,
    /// `run`: close the SSH connections once no round has used them for this long (0: keep them
    /// open between rounds, at the cost of memory and keepalives on both ends).
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = duration, help_heading = "Nodes (SSH)")]
    ssh_idle_timeout: Duration,
    /// kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then the pod's service account;
    /// with none of them winfleet runs SSH-only).
    #[arg(long, value_name = "FILE", env = "WINFLEET_KUBECONFIG", help_heading = "Cluster")]
    kubeconfig: Option<PathBuf>,
    /// kubeconfig context (default: the current context).
    #[arg(long, value_name = "NAME", help_heading = "Cluster")]
    context: Option<String>,
    /// Fail instead of running SSH-only when no cluster is configured.
    #[arg(long, help_heading = "Cluster")]
    require_cluster: bool,
    /// How long one node's drain may take before its safe reboot is abandoned (the node is uncordoned).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = duration, help_heading = "Rollout")]
    drain_timeout: Duration,
    /// How long a rebooting node has to answer over SSH with a new boot and be Ready; after that the
    /// rollout stops and the node stays cordoned.
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = duration, help_heading = "Rollout")]
    reboot_timeout: Duration,
    /// The payload directory (the node files WMCO ships in its image under /payload); its digest
    /// must equal the Fleet's spec.payload.digest for any node to be configured.
    #[arg(long, value_name = "DIR", env = "WINFLEET_PAYLOAD_DIR", help_heading = "Rollout")]
    payload_dir: Option<PathBuf>,
    /// How long a joining node's kubelet has to get its CSR approved and register its Node, and then
    /// to be Ready once its services run.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = duration, help_heading = "Rollout")]
    join_timeout: Duration,
}

/// Every duration flag: `90s`, `10m`, `1h30m`, or a bare number of seconds.
/// `--max-bytes`: a number of bytes, at least the comment's minimum.
fn max_bytes(text: &str) -> Result<usize, String> {
    let min = winfleet::plan::markdown::MIN_MAX_BYTES;
    let bytes: usize = text.parse().map_err(|e| format!("not a number of bytes: {e}"))?;
    if bytes < min {
        return Err(format!(
            "must be at least {min} bytes: the marker, the summary and the note that the comment is shortened always fit"
        ));
    }
    Ok(bytes)
}

pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    winfleet::duration::parse_flag(text)
}

impl RoundArgs {
    /// The join settings these flags give.
    fn join(&self) -> winfleet::cluster::join::JoinOptions {
        let timeout = self.join_timeout;
        winfleet::cluster::join::JoinOptions {
            register_timeout: timeout,
            ready_timeout: timeout,
            ..winfleet::cluster::join::JoinOptions::default()
        }
    }

    /// The payload these flags name, read (a failure is carried, not
    /// fatal: nodes report it, mirrors and proxy still converge).
    fn payload(&self) -> winfleet::lifecycle::PayloadState {
        use winfleet::lifecycle::PayloadState;
        match &self.payload_dir {
            None => PayloadState::Missing,
            Some(dir) => match winfleet::payload::Payload::load(dir) {
                Ok(payload) => PayloadState::Loaded(std::sync::Arc::new(payload)),
                Err(e) => PayloadState::Failed(e.to_string()),
            },
        }
    }
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
        Command::Run(args) => run::run(&args),
        Command::Status(args) => status::run(&args),
        Command::Payload(command) => payload::run(&command),
        Command::Suspend(args) => control::run(&args.control, Some(&args.reason)),
        Command::Resume(args) => control::run(&args, None),
        Command::Import(args) => import::run(&args),
        Command::Completions(args) => docs::completions(&args),
        Command::Man(args) => docs::man(&args),
    }
}

impl Cli {
    /// What the command logs: the daemon at info; the one-shot commands
    /// only errors in text (their output is the result, their messages
    /// plain lines, a live round's progress drawn), and their messages and
    /// progress too in JSON.
    pub fn logging(&self) -> logging::Logging {
        let json = self.log_format == logging::LogFormat::Json;
        let filter = match (&self.command, json) {
            (Command::Run(_), _) => "info,kube_client=warn",
            (_, true) => "error,winfleet=info",
            (_, false) => "error",
        };
        let progress = matches!(self.command, Command::Apply(_) | Command::Plan(_));
        logging::Logging { filter, progress }
    }
}
