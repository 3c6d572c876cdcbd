//! `winfleet render`: the exact files each node would get.
//!
//! hosts.toml files may carry a pull secret's `authorization` headers and the
//! environment file a proxy password, so everything render writes is its
//! owner's alone (files 0600, directories 0700; issue 23).

use std::fs;
use std::io::Write;
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
    let repo = &args.repo;
    if let Err(refused) = repo.verify.check(&repo.repo, repo.path.as_deref(), repo.rev.as_deref())? {
        return Ok(refused.report(""));
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
    private_dir(out)?;
    private_file(&out.join(MARKER), b"rendered by winfleet; replaced by the next render\n")
}

fn write_nodes(desired: &Desired, out: &Path) -> anyhow::Result<()> {
    for (address, instance) in &desired.instances {
        let node = out.join(address);
        let registries = node.join("registries");
        private_dir(&node)?;
        private_dir(&registries)?;
        for (dir, file) in &instance.spec.registries {
            let path = registries.join(dir);
            private_dir(&path)?;
            private_file(&path.join(HOSTS_TOML), file.content().as_bytes())?;
        }
        let environment: String = instance.spec.environment.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        private_file(&node.join("environment"), environment.as_bytes())?;
    }
    Ok(())
}

/// Creates `dir` and its missing parents 0700, and tightens `dir` itself to
/// 0700 when it already existed (an empty OUT the user made).
fn private_dir(dir: &Path) -> anyhow::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).with_context(|| format!("creating {}", dir.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .with_context(|| format!("restricting {} to its owner", dir.display()))?;
    }
    Ok(())
}

/// Writes `path` 0600: created with that mode, so its content is never
/// readable by others, and an existing file is tightened before it is
/// rewritten (the mode of `open` only applies to a file it creates).
fn private_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let context = || format!("writing {}", path.display());
    let mut options = fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).with_context(context)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(fs::Permissions::from_mode(0o600)).with_context(context)?;
    }
    file.write_all(bytes).with_context(context)
}
