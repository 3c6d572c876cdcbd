//! Grouping IDMS/ITMS entries into one mirror list per source registry
//! (WMCO-SPEC 1.5–1.6 with winfleet's decisions 2 and 3).

use std::collections::BTreeMap;

use super::reference::{mirror_host, registry_host};

/// One IDMS/ITMS entry, in declaration order.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    /// The source repository or registry.
    pub source: &'a str,
    /// Mirror locations, most preferred first.
    pub mirrors: &'a [String],
    /// Whether `NeverContactSource` was set.
    pub never_contact_source: bool,
    /// True for ITMS entries (mirrors may resolve tags).
    pub resolve_tags: bool,
}

/// One mirror of a registry, as containerd is told about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirror {
    /// Mirror host with optional org path (the suffix rule applied).
    pub host: String,
    /// `["pull", "resolve"]` rather than `["pull"]`.
    pub resolve_tags: bool,
}

/// Everything one source registry's hosts.toml says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryMirrors {
    /// The source registry host (with port): the key of the set.
    pub registry: String,
    /// Mirrors in declared order, first occurrence of each host kept.
    pub mirrors: Vec<Mirror>,
    /// Whether any contributing entry said `NeverContactSource`.
    pub never_contact_source: bool,
}

/// Merges entries (IDMS entries first, then ITMS, each in document order)
/// into one set per source registry, sorted by registry.
///
/// Unlike WMCO, mirror order is the declared order (decision 2),
/// `NeverContactSource` wins whatever the order (decision 3), and duplicates
/// are always removed — a later tag-resolving duplicate upgrades the
/// capabilities of the first occurrence in place.
pub fn merge<'a>(entries: impl IntoIterator<Item = Entry<'a>>) -> Vec<RegistryMirrors> {
    let mut sets: BTreeMap<&str, RegistryMirrors> = BTreeMap::new();
    for entry in entries {
        let registry = registry_host(entry.source);
        let set = sets.entry(registry).or_insert_with(|| RegistryMirrors {
            registry: registry.to_owned(),
            mirrors: Vec::new(),
            never_contact_source: false,
        });
        set.never_contact_source |= entry.never_contact_source;
        for location in entry.mirrors {
            let host = mirror_host(entry.source, location);
            match set.mirrors.iter_mut().find(|m| m.host == host) {
                Some(existing) => existing.resolve_tags |= entry.resolve_tags,
                None => set.mirrors.push(Mirror { host, resolve_tags: entry.resolve_tags }),
            }
        }
    }
    sets.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry<'a>(source: &'a str, mirrors: &'a [String], never: bool, resolve: bool) -> Entry<'a> {
        Entry { source, mirrors, never_contact_source: never, resolve_tags: resolve }
    }

    #[test]
    fn declared_order_is_kept_and_duplicates_merge_upgrading_capabilities() {
        let a = vec!["z.io/x".to_owned(), "a.io/x".to_owned(), "z.io/x".to_owned()];
        let b = vec!["a.io/x".to_owned(), "m.io/x".to_owned()];
        let sets = merge([entry("r.io/x", &a, false, false), entry("r.io/x", &b, false, true)]);
        assert_eq!(sets.len(), 1);
        let hosts: Vec<_> = sets[0].mirrors.iter().map(|m| (m.host.as_str(), m.resolve_tags)).collect();
        assert_eq!(hosts, [("z.io", false), ("a.io", true), ("m.io", true)]);
    }

    #[test]
    fn never_contact_source_wins_in_any_order() {
        let m = vec!["m.io".to_owned()];
        for order in [[true, false], [false, true]] {
            let sets = merge([entry("r.io", &m, order[0], false), entry("r.io/y", &m, order[1], false)]);
            assert!(sets[0].never_contact_source);
        }
    }

    #[test]
    fn sets_are_keyed_by_source_registry_and_sorted() {
        let m = vec!["m.io".to_owned()];
        let sets = merge([
            entry("b.io/x", &m, false, false),
            entry("a.io/y", &m, false, false),
            entry("b.io/z", &m, false, false),
        ]);
        let keys: Vec<_> = sets.iter().map(|s| s.registry.as_str()).collect();
        assert_eq!(keys, ["a.io", "b.io"]);
    }
}
