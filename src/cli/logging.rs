//! Logging and progress on stderr: one tracing subscriber for every
//! command. `--log-format json` makes every stderr line a JSON object;
//! otherwise `apply` draws the round's progress ([`winfleet::progress`])
//! through [`super::progress`] and logs only errors, and colour follows the
//! terminal and `NO_COLOR`.

use std::io::IsTerminal;

use tracing_subscriber::filter::{EnvFilter, FilterExt, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

use super::progress::ProgressLayer;
use super::{colour, output};

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// What a command logs by default (`RUST_LOG` overrides the filter).
#[derive(Clone, Copy, Debug)]
pub struct Logging {
    /// The default filter.
    pub filter: &'static str,
    /// Whether the round's progress is drawn (text) rather than logged.
    pub progress: bool,
}

/// kube's own log line for a failed request, off in text mode.
const KUBE_REQUEST_LOG: &str = "kube_client::client::builder";

/// What a usage error logs (nothing parsed, so no command's own default).
pub const USAGE: Logging = Logging { filter: "error,winfleet=info", progress: false };

/// Whether the command line (or `WINFLEET_LOG_FORMAT`) asks for JSON logs,
/// read without clap: for the usage errors clap itself reports.
pub fn json_requested(args: impl IntoIterator<Item = std::ffi::OsString>) -> bool {
    let mut format = std::env::var("WINFLEET_LOG_FORMAT").ok();
    let mut args = args.into_iter().map(|a| a.to_string_lossy().into_owned());
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        } else if arg == "--log-format" {
            format = args.next();
        } else if let Some(value) = arg.strip_prefix("--log-format=") {
            format = Some(value.to_owned());
        }
    }
    format.is_some_and(|f| f.eq_ignore_ascii_case("json"))
}

/// Installs the subscriber: JSON lines, or text lines plus the progress
/// drawing when `logging.progress`.
pub fn init(format: LogFormat, logging: Logging) {
    let json = format == LogFormat::Json;
    output::set_json(json);
    // kube's client logs every failed request at ERROR itself; in text
    // the error winfleet reports says it once, in its own words.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| match json {
        true => EnvFilter::new(logging.filter),
        false => EnvFilter::new(format!("{},{KUBE_REQUEST_LOG}=off", logging.filter)),
    });
    let terminal = std::io::stderr().is_terminal();
    let logs = fmt::layer().with_writer(std::io::stderr);
    let registry = tracing_subscriber::registry();
    if json {
        // The progress events are log events like any other here.
        let _ = registry.with(logs.json().with_filter(filter)).try_init();
    } else if logging.progress {
        let not_progress = filter_fn(|m| m.target() != winfleet::progress::TARGET);
        let logs = logs.with_ansi(colour::logs(terminal));
        let _ = registry
            .with(logs.with_filter(filter.and(not_progress)))
            .with(ProgressLayer::new(terminal).with_filter(filter_fn(|m| m.target() == winfleet::progress::TARGET)))
            .try_init();
    } else {
        let logs = logs.with_ansi(colour::logs(terminal));
        let _ = registry.with(logs.with_filter(filter)).try_init();
    }
}
