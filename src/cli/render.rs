//! `winfleet render`: the exact files each node would get.

use std::fs;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use winfleet::desired::Desired;
use winfleet::node::HOSTS_TOML;

use super::{RenderArgs, load, output};

/// Marks a directory as winfleet's render output, so a later render may
/// replace it (and never a directory that holds anything else).
const MARKER: &str = ".winfleet-render";

pub fn run(args: &RenderArgs) -> anyhow::Result<ExitCode> {
    if let Err(why) = args.repo.verify.check(&args.repo.repo, args.repo.rev.as_deref())? {
        output::error(&format!("untrusted: {why}"));
        return Ok(ExitCode::from(1));
    }
    let secret = args.pull_secret.as_deref().map(load::pull_secret).transpose()?;
    let loaded = load::load(&args.repo.repo, args.repo.path.as_deref(), args.repo.rev.as_deref(), secret.as_ref())?;
    output::diagnostics(&loaded.diagnostics);
    let Some(desired) = &loaded.desired else {
        output::error(&format!("invalid: {} error(s); nothing rendered", loaded.errors()));
        return Ok(ExitCode::from(1));
    };
    prepare(&args.output)?;
    write_nodes(desired, &args.output)?;
    output::out(&format!("rendered {} node(s) into {}\n", desired.instances.len(), args.output.display()));
    Ok(ExitCode::SUCCESS)
}

fn prepare(out: &Path) -> anyhow::Result<()> {
    if out.exists() {
        let mut entries = fs::read_dir(out).with_context(|| format!("reading {}", out.display()))?;
        if entries.next().is_some() {
            if !out.join(MARKER).is_file() {
                bail!("{} is not empty and not a previous render output; refusing to replace it", out.display());
            }
            fs::remove_dir_all(out).with_context(|| format!("removing the previous render in {}", out.display()))?;
        }
    }
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    fs::write(out.join(MARKER), "rendered by winfleet; replaced by the next render\n")
        .with_context(|| format!("writing {}", out.display()))
}

fn write_nodes(desired: &Desired, out: &Path) -> anyhow::Result<()> {
    for (address, instance) in &desired.instances {
        let node = out.join(address);
        let registries = node.join("registries");
        fs::create_dir_all(&registries).with_context(|| format!("creating {}", registries.display()))?;
        for (dir, file) in &instance.spec.registries {
            let path = registries.join(dir);
            fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
            fs::write(path.join(HOSTS_TOML), file.content()).with_context(|| format!("writing {}", path.display()))?;
        }
        let environment: String = instance.spec.environment.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        fs::write(node.join("environment"), environment)
            .with_context(|| format!("writing {}/environment", node.display()))?;
    }
    Ok(())
}
