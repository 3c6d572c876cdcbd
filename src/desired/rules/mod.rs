//! The fourth stage: semantic rules across documents, and assembly of the
//! [`Desired`] state from documents that passed them.

pub mod dirs;
pub mod fleet;
pub mod instances;
pub mod machinesets;
pub mod mirrors;
pub mod names;
pub mod proxy;
pub mod services;
pub mod sources;

use std::collections::BTreeMap;
use std::sync::Arc;

use super::model::{Desired, Instance};
use super::{Documents, LoadOptions};
use crate::diagnostic::Diagnostic;
use crate::lifecycle::{LifecycleDirs, LifecycleSpec};
use crate::render;
use crate::vocab::Shell;

/// Runs every rule; returns the desired state (callers drop it when any
/// error was reported).
pub fn check(mut docs: Documents, options: LoadOptions<'_>, diagnostics: &mut Vec<Diagnostic>) -> Option<Desired> {
    let fleet = fleet::settings(&docs.fleets, diagnostics);
    let drafts = instances::collect(&docs.configmaps, &mut docs.instance_lists, &fleet, diagnostics);
    // The drafts hold all the lists say; free them before the model is built.
    docs.instance_lists = Vec::new();
    let machine_sets = machinesets::collect(&docs.machine_sets, diagnostics);
    sources::check(&docs, &fleet, docs.fleets.first(), diagnostics);
    let registries = mirrors::collect(&docs.digest_mirrors, &docs.tag_mirrors, diagnostics);
    let environment = proxy::environment(&docs.proxies, diagnostics);
    let manifest = services::in_force(&docs.services, &fleet, docs.fleets.first(), diagnostics);
    if let (None, Some(digest), Some(doc)) = (&manifest, &fleet.payload_digest, docs.fleets.first())
        && docs.services.is_empty()
    {
        diagnostics.push(doc.error(
            "/spec/payload/digest",
            format!("pins payload {digest}, but no windows-services-* ConfigMap says how to run it: add the services manifest, or remove the pin"),
        ));
    }
    let specs: BTreeMap<Shell, Arc<_>> = [Shell::Powershell, Shell::Posix]
        .into_iter()
        .map(|shell| {
            let dirs = render::NodeDirs {
                registries: fleet.registries_dir(shell),
                environment: fleet.environment_dir(shell),
                max_removal_percent: fleet.max_removal_percent,
            };
            let mut spec = render::node_spec(shell, dirs, &registries, &environment, options.pull_secret);
            if let (Some(manifest), Some(digest)) = (&manifest, &fleet.payload_digest) {
                let dirs = LifecycleDirs {
                    posix_payload: &fleet.payload_posix_dir,
                    posix_units: &fleet.services_posix_dir,
                    registries: fleet.registries_dir(shell),
                };
                spec.lifecycle = Some(Arc::new(LifecycleSpec::new(shell, digest, manifest, dirs)));
            }
            (shell, Arc::new(spec))
        })
        .collect();
    let instances = drafts
        .into_iter()
        .filter_map(|d| {
            let spec = Arc::clone(specs.get(&d.shell)?);
            let instance = Instance {
                address: d.address,
                username: d.username,
                port: d.port,
                shell: d.shell,
                labels: d.labels,
                annotations: d.annotations,
                taints: d.taints,
                origin: d.origin,
                spec,
            };
            Some((instance.address.clone(), instance))
        })
        .collect();
    let digest =
        docs.digest_mirrors.iter().map(|d| (format!("ImageDigestMirrorSet/{}", d.value.metadata.name), &d.raw));
    let tag = docs.tag_mirrors.iter().map(|d| (format!("ImageTagMirrorSet/{}", d.value.metadata.name), &d.raw));
    let mirror_sets = digest.chain(tag).map(|(k, raw)| (k, raw.get("spec").cloned().unwrap_or_default())).collect();
    let proxy = docs.proxies.first().map(|d| d.raw.get("spec").cloned().unwrap_or_default());
    Some(Desired { fleet, instances, machine_sets, registries, mirror_sets, specs, services: manifest, proxy })
}
