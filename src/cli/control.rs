//! `winfleet suspend` and `winfleet resume`: tell a running daemon to stop
//! changing anything, or to go on (see `daemon::suspend`). The request goes
//! to the daemon's webhook port with the control token; a follower hands it
//! to the leader.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use axum::body::Bytes;
use http_body_util::Full;

use super::http::{Client, Failure};
use super::output;

/// Where the daemon is and how to authenticate.
#[derive(Debug, clap::Args)]
pub struct ControlArgs {
    /// The daemon's webhook address (`http://127.0.0.1:9443` inside its pod).
    #[arg(long, value_name = "URL", env = "WINFLEET_CONTROL_URL", default_value = "http://127.0.0.1:9443")]
    url: String,
    /// The control token (the file given to `winfleet run --control-token-file`).
    #[arg(long, value_name = "FILE", env = "WINFLEET_CONTROL_TOKEN_FILE")]
    token_file: PathBuf,
}

/// `winfleet suspend`: where the daemon is, and why.
#[derive(Debug, clap::Args)]
pub struct SuspendArgs {
    #[command(flatten)]
    pub control: ControlArgs,
    /// Why (recorded in status and the Lease).
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub reason: String,
}

/// Sends `/suspend` with its reason (when `suspend` is given) or `/resume`;
/// prints the daemon's answer.
pub fn run(args: &ControlArgs, suspend: Option<&str>) -> anyhow::Result<ExitCode> {
    let token = std::fs::read_to_string(&args.token_file)
        .with_context(|| format!("reading the control token file {}", args.token_file.display()))?;
    let token = token.trim();
    if token.is_empty() {
        bail!("the control token file {} is empty", args.token_file.display());
    }
    let (path, body) = match suspend {
        Some(reason) => ("/suspend", reason.to_owned()),
        None => ("/resume", String::new()),
    };
    let target = format!("{}{path}", args.url.trim_end_matches('/'));
    if !target.starts_with("http://") {
        bail!("--url {:?} must be an http:// URL (the daemon's webhook port)", args.url);
    }
    let request = axum::http::Request::post(&target)
        .header(axum::http::header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Full::new(Bytes::from(body)))
        .context("building the request")?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (status, text) = runtime.block_on(async {
        Client::http().send(request, Duration::from_secs(30)).await.map_err(|failure| match failure {
            Failure::Send(e) => anyhow::Error::new(e).context(format!("connecting to {target}")),
            Failure::Read(e) => anyhow::Error::new(e).context("reading the answer"),
            Failure::Timeout(limit) => anyhow::anyhow!("no answer within {} s", limit.as_secs()),
        })
    })?;
    let text = String::from_utf8_lossy(&text).into_owned();
    if !status.is_success() {
        bail!("the daemon answered {status}: {text}");
    }
    output::out(&format!("{text}\n"));
    Ok(ExitCode::SUCCESS)
}
