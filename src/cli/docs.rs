//! `winfleet completions SHELL` and `winfleet man`: generated from the
//! same clap definition as the arguments, so they cannot drift.

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::CommandFactory;
use clap_complete::Shell;

use super::{Cli, output};

/// `winfleet completions` flags.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: Shell,
}

/// Prints the completion script for the shell.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "winfleet", &mut script);
    output::out(&String::from_utf8_lossy(&script));
    Ok(ExitCode::SUCCESS)
}

/// `winfleet man` flags.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// The subcommand whose page to print (e.g. `apply`, `payload digest`); none: winfleet(1).
    #[arg(value_name = "SUBCOMMAND")]
    command: Vec<String>,
}

/// Prints a man page: winfleet(1), or winfleet-SUBCOMMAND(1).
pub fn man(args: &ManArgs) -> anyhow::Result<ExitCode> {
    let mut command = Cli::command().disable_help_subcommand(true);
    // Propagates the global flags and names the pages winfleet-apply etc.
    command.build();
    for name in &args.command {
        let Some(sub) = command.find_subcommand(name).cloned() else {
            bail!("no such subcommand: {}", args.command.join(" "));
        };
        command = sub;
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .source(concat!("winfleet ", env!("CARGO_PKG_VERSION")))
        .render(&mut page)
        .context("cannot render the man page")?;
    output::out(&String::from_utf8_lossy(&page));
    Ok(ExitCode::SUCCESS)
}
