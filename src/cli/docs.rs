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
    clap_mangen::Man::new(command.clone())
        .source(concat!("winfleet ", env!("CARGO_PKG_VERSION")))
        .render(&mut page)
        .context("cannot render the man page")?;
    let mut page = String::from_utf8_lossy(&page).into_owned();
    page.push_str(EXIT_STATUS);
    page.push_str(&environment(&command));
    output::out(&page);
    Ok(ExitCode::SUCCESS)
}

/// The exit codes every command keeps (roff).
const EXIT_STATUS: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
Success: valid, no changes, the round applied, in sync, all Ready.
.TP
\fB1\fR
An error, a usage error, an invalid repository, or a round in which something failed.
.TP
\fB2\fR
\fBplan\fR and \fBapply \-\-dry\-run\fR: there are changes to apply.
.TP
\fB3\fR
\fBstatus\fR: something is not Ready, the last round failed, the head revision is invalid,
or the mass\-removal guard holds a deconfigure back.
.TP
\fB4\fR
\fBvalidate\fR, \fBplan\fR, \fBrender\fR and \fBapply\fR with \fB\-\-trusted\-keys\fR and
\fB\-\-verify\-mode all\-since\-last\-applied\fR but no \fB\-\-verify\-since\fR: the head is signed,
the commits before it were not checked (the daemon reads the last applied revision back from its
status branch; this command does not). An unsigned or untrusted commit exits 1.
"#;

/// The ENVIRONMENT section: every flag of `command` (and of its
/// subcommands) that an environment variable sets, from the same
/// definition as the flags.
fn environment(command: &clap::Command) -> String {
    let mut vars = std::collections::BTreeMap::new();
    collect_env(command, &mut vars);
    let mut section = String::from(".SH ENVIRONMENT\n");
    for (var, (flag, help)) in vars {
        section.push_str(&format!(".TP\n\\fB{}\\fR\n{}: {}\n", roff(&var), roff(&flag), roff(&help)));
    }
    section.push_str(".TP\n\\fBRUST_LOG\\fR\nThe log filter (e.g. winfleet=debug).\n");
    for (var, help) in MORE_ENVIRONMENT {
        section.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", roff(var), roff(help)));
    }
    section
}

/// Colour (src/cli/colour.rs) and what `plan --post` reads from the CI
/// (src/cli/post/forge.rs).
const MORE_ENVIRONMENT: [(&str, &str); 11] = [
    ("NO_COLOR", "set and not empty: no colour, even on a terminal"),
    ("CLICOLOR_FORCE", "set and not 0: colour without a terminal (NO_COLOR still wins)"),
    ("GITHUB_TOKEN, GH_TOKEN", "plan --post github: the token (pull-requests: write)"),
    ("GITHUB_API_URL", "plan --post github: the API (default https://api.github.com)"),
    ("GITHUB_REPOSITORY", "plan --post github: owner/repository"),
    ("GITHUB_EVENT_PATH, GITHUB_REF", "plan --post github: the pull request (its event, or refs/pull/N/...)"),
    ("WINFLEET_PULL_REQUEST", "plan --post github: the pull request number, when the event does not say"),
    ("GITLAB_TOKEN, GITLAB_API_TOKEN", "plan --post gitlab: a token with the api scope"),
    ("CI_API_V4_URL", "plan --post gitlab: the API"),
    ("CI_PROJECT_ID", "plan --post gitlab: the project"),
    ("CI_MERGE_REQUEST_IID", "plan --post gitlab: the merge request"),
];

fn collect_env(command: &clap::Command, vars: &mut std::collections::BTreeMap<String, (String, String)>) {
    for arg in command.get_arguments() {
        if let (Some(var), Some(long)) = (arg.get_env(), arg.get_long()) {
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let first = help.split(". ").next().unwrap_or_default().trim_end_matches('.').to_owned();
            vars.entry(var.to_string_lossy().into_owned()).or_insert((format!("--{long}"), first));
        }
    }
    for sub in command.get_subcommands() {
        collect_env(sub, vars);
    }
}

/// Escapes roff's hyphen and backslash, and a leading dot or quote.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    match escaped.chars().next() {
        Some('.' | '\'') => format!("\\&{escaped}"),
        _ => escaped,
    }
}
