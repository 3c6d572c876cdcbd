//! The `winfleet` command: argument parsing and exit codes; the work is in
//! the library (see `lib.rs` for the pipeline).

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// jemalloc, with background purging: what a round freed goes back to the
/// system while the daemon idles (glibc's malloc kept a 1,000-node round's
/// peak resident: 97 MiB idle against 36 MiB in use).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) if e.use_stderr() && cli::logging::json_requested(std::env::args_os()) => {
            // `--log-format json` (or WINFLEET_LOG_FORMAT=json) holds for
            // usage errors too: one JSON line, clap's text as the message.
            cli::logging::init(cli::logging::LogFormat::Json, cli::logging::USAGE);
            cli::output::error(e.render().to_string().trim_end());
            return ExitCode::from(1);
        }
        Err(e) => {
            let _ = e.print();
            // Usage errors exit 1, not clap's 2: for `plan`, 2 means "changes".
            return ExitCode::from(if e.use_stderr() { 1 } else { 0 });
        }
    };
    // Diagnostics for operators: RUST_LOG=winfleet=debug shows retries and
    // reconnects (see cli::logging for each command's default).
    let logging = args.logging();
    cli::logging::init(args.log_format, logging);
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            cli::output::error(&cli::output::said_once(&e));
            ExitCode::from(1)
        }
    }
}
