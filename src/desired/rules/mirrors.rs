//! Mirror rules: location syntax, wildcard sources, registry-level mirroring,
//! and the registry-wide effect of ImageTagMirrorSets (WMCO-SPEC 1.4, 1.9).

use super::names::check_object_name;
use crate::desired::Doc;
use crate::desired::kinds::mirrors::{ImageDigestMirrorSet, ImageTagMirrorSet, MirrorEntry, MirrorSourcePolicy};
use crate::diagnostic::{Diagnostic, shown, shown_bare};
use crate::render::mirrors::{Entry, RegistryMirrors, merge};
use crate::render::reference::{check_location, is_wildcard, mirror_host, unkept_source_path};

/// Checks every mirror set and merges the valid entries per registry.
pub fn collect(
    digest: &[Doc<ImageDigestMirrorSet>],
    tag: &[Doc<ImageTagMirrorSet>],
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<RegistryMirrors> {
    let mut entries = Vec::new();
    for doc in digest {
        check_name(doc, diagnostics);
        check(doc, "imageDigestMirrors", &doc.value.spec.image_digest_mirrors, false, &mut entries, diagnostics);
    }
    for doc in tag {
        check_name(doc, diagnostics);
        diagnostics.push(doc.warning(
            "/kind",
            format!(
                "ImageTagMirrorSet {}: on Windows nodes a tag mirror applies to every repository of the source's registry, \
                 and creating, changing or deleting an ImageTagMirrorSet makes the Machine Config Operator drain and reboot \
                 every Linux node; prefer an ImageDigestMirrorSet (pull by digest)",
                shown(&doc.value.metadata.name)
            ),
        ));
        check(doc, "imageTagMirrors", &doc.value.spec.image_tag_mirrors, true, &mut entries, diagnostics);
    }
    let merged = merge(entries);
    if let Some(message) = without_pause(&merged) {
        let warning = match (digest.first(), tag.first()) {
            (Some(doc), _) => Some(doc.warning("/spec", message)),
            (None, Some(doc)) => Some(doc.warning("/spec", message)),
            (None, None) => None,
        };
        diagnostics.extend(warning);
    }
    merged
}

/// The pause image every Windows pod's sandbox runs: containerd's
/// `sandbox_image` in WMCO's `pkg/internal/containerd_conf.toml`, the
/// containerd configuration of its payload.
pub const PAUSE_IMAGE: &str = "mcr.microsoft.com/oss/kubernetes/pause:3.9";

/// Why mirror sets that mirror some registries but not the pause image's
/// are worth a reviewer's look, or `None`. A warning, not an error: a node
/// that reaches the pause image's registry directly needs no mirror.
/// Windows nodes mirror a whole registry (WMCO-SPEC 1.4), so a mirror of
/// any repository of that registry covers the pause image too.
pub fn without_pause(registries: &[RegistryMirrors]) -> Option<String> {
    let pause_registry = PAUSE_IMAGE.split('/').next().unwrap_or(PAUSE_IMAGE);
    if registries.is_empty() || registries.iter().any(|r| r.registry == pause_registry) {
        return None;
    }
    let count = match registries.len() {
        1 => "1 registry".to_owned(),
        n => format!("{n} registries"),
    };
    Some(format!(
        "the mirror sets mirror {count} but not {pause_registry}, the registry of the pause image every Windows \
         pod needs ({PAUSE_IMAGE}, containerd's sandbox_image): a node that cannot reach it starts no pod; \
         mirror it too"
    ))
}

/// A mirror set's name is a Kubernetes name: it names the object on the
/// cluster and keys the mirror sets winfleet compares with the cluster's.
fn check_name<T: HasName>(doc: &Doc<T>, diagnostics: &mut Vec<Diagnostic>) {
    if let Err(reason) = check_object_name(doc.value.name()) {
        diagnostics.push(doc.error("/metadata/name", reason));
    }
}

/// The two mirror-set kinds, by their name.
trait HasName {
    fn name(&self) -> &str;
}

impl HasName for ImageDigestMirrorSet {
    fn name(&self) -> &str {
        &self.metadata.name
    }
}

impl HasName for ImageTagMirrorSet {
    fn name(&self) -> &str {
        &self.metadata.name
    }
}

fn check<'a, T>(
    doc: &Doc<T>,
    field: &str,
    list: &'a [MirrorEntry],
    resolve_tags: bool,
    entries: &mut Vec<Entry<'a>>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    for (i, entry) in list.iter().enumerate() {
        let at = format!("/spec/{field}/{i}");
        let never = entry.mirror_source_policy == Some(MirrorSourcePolicy::NeverContactSource);
        let mut ok = true;
        if is_wildcard(&entry.source) {
            diagnostics.push(doc.error(
                format!("{at}/source"),
                format!(
                    "wildcard source {} cannot be mirrored on Windows nodes: containerd looks registries up by exact \
                     host name and '*' is not valid in a Windows directory name; list each registry instead",
                    shown(&entry.source)
                ),
            ));
            ok = false;
        } else if let Err(reason) = check_location(&entry.source, true) {
            diagnostics.push(doc.error(format!("{at}/source"), format!("source {} {reason}", shown(&entry.source))));
            ok = false;
        } else if let Some(host) = entry.source.split('/').next().filter(|h| h.bytes().any(|b| b.is_ascii_uppercase()))
        {
            diagnostics.push(doc.error(
                format!("{at}/source"),
                format!(
                    "source registry {} must be written in lower case ({}): image references name registries \
                     in lower case, and containerd looks a registry's directory up by that exact name, so this \
                     mirror would never be used",
                    shown(host),
                    shown_bare(&host.to_ascii_lowercase())
                ),
            ));
            ok = false;
        }
        if never && entry.mirrors.is_empty() {
            diagnostics.push(doc.error(format!("{at}/mirrors"), "NeverContactSource needs at least one mirror"));
        }
        for (j, mirror) in entry.mirrors.iter().enumerate() {
            let pointer = format!("{at}/mirrors/{j}");
            if let Err(reason) = check_location(mirror, false) {
                diagnostics.push(doc.error(pointer, format!("mirror {} {reason}", shown(mirror))));
                ok = false;
            } else if ok && let Some(unkept) = unkept_source_path(&entry.source, mirror) {
                diagnostics.push(doc.warning(
                    pointer,
                    format!(
                        "mirror {} does not keep the source's repository path {}: Windows nodes mirror at \
                         registry level (containerd appends the whole source path to the mirror), so images of {source} are \
                         pulled from {host}/{path}; name the mirror <registry>/[<namespace>/]{path}",
                        shown(mirror),
                        shown(&unkept),
                        source = shown_bare(&entry.source),
                        host = shown_bare(&mirror_host(&entry.source, mirror)),
                        path = shown_bare(entry.source.split_once('/').map_or("", |(_, p)| p)),
                    ),
                ));
            }
        }
        if ok {
            entries.push(Entry {
                source: &entry.source,
                mirrors: &entry.mirrors,
                never_contact_source: never,
                resolve_tags,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registries(names: &[&str]) -> Vec<RegistryMirrors> {
        names
            .iter()
            .map(|r| RegistryMirrors { registry: (*r).to_owned(), mirrors: Vec::new(), never_contact_source: false })
            .collect()
    }

    #[test]
    fn mirrors_of_other_registries_without_the_pause_images_are_warned_about_by_name() {
        let warning = without_pause(&registries(&["quay.io", "registry.redhat.io"])).unwrap();
        assert!(warning.starts_with("the mirror sets mirror 2 registries but not mcr.microsoft.com"), "{warning}");
        assert!(warning.contains("mcr.microsoft.com/oss/kubernetes/pause:3.9"), "{warning}");
        assert_eq!(without_pause(&registries(&["mcr.microsoft.com", "quay.io"])), None);
        assert_eq!(without_pause(&[]), None, "no mirror at all: a connected cluster");
    }
}
