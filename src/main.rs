//! The `winfleet` command: argument parsing and exit codes; the work is in
//! the library (see `lib.rs` for the pipeline).

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            // Usage errors exit 1, not clap's 2: for `plan`, 2 means "changes".
            return ExitCode::from(if e.use_stderr() { 1 } else { 0 });
        }
    };
    // Diagnostics for operators: RUST_LOG=winfleet=debug shows retries and
    // reconnects. The one-shot commands log only errors by default (their
    // results go to stdout/stderr); the daemon logs at info.
    let (default_filter, json) = args.logging();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if json {
        logs.json().init();
    } else {
        logs.init();
    }
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            cli::output::error(&format!("{e:#}"));
            ExitCode::from(1)
        }
    }
}
