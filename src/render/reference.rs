//! Image locations as IDMS/ITMS write them: `host[:port][/namespace…/name]`.
//!
//! Syntax checks follow OpenShift's own validation of these fields (no scheme,
//! no tag, no digest); the derivations are WMCO's (WMCO-SPEC 1.2–1.4).
//!
//! Hand-written: oci-spec's `distribution::Reference` (the parser oci-client
//! uses) reads image references, not these locations. On this module's test
//! inputs it refuses the wildcard source `*.example.com`, accepts
//! `quay.io/x:tag` and `quay.io:0/x`, and reads a bare registry as a Docker
//! Hub repository (`registry.redhat.io` → `docker.io/library/…`,
//! `mirror.corp.example:5000` → tag `5000`) (docs/dependencies.md).

use crate::diagnostic::shown;

/// The longest location accepted, registry host included (distribution's
/// `NameTotalLengthMax`).
pub const MAX_LOCATION: usize = 255;

/// Why a location is not a valid repository.
pub fn check_location(location: &str, allow_wildcard: bool) -> Result<(), String> {
    if location.chars().count() > MAX_LOCATION {
        return Err(format!(
            "is longer than {MAX_LOCATION} characters, the longest repository name a registry takes (the \
             distribution specification's limit)"
        ));
    }
    if location.contains("://") {
        return Err("must not carry a scheme (write host[:port]/path, not https://…)".into());
    }
    if location.contains('@') {
        return Err("must be a repository, without a digest (@sha256:…)".into());
    }
    let (host, path) = location.split_once('/').map_or((location, None), |(h, p)| (h, Some(p)));
    if let Some(domain) = host.strip_prefix("*.") {
        if !allow_wildcard {
            return Err("wildcard registries are only allowed as a source".into());
        }
        if path.is_some() {
            return Err("a wildcard source names a registry domain only, without a path".into());
        }
        return check_host(domain);
    }
    check_host(host)?;
    for component in path.into_iter().flat_map(|p| p.split('/')) {
        if component.contains(':') {
            return Err("must be a repository, without a tag (:tag)".into());
        }
        if !is_path_component(component) {
            return Err(format!(
                "path component {} is invalid (lower-case letters and digits, separated by '.', '_', '__' or '-')",
                shown(component)
            ));
        }
    }
    Ok(())
}

/// Whether `location` is a wildcard registry (`*.example.com`).
pub fn is_wildcard(location: &str) -> bool {
    location.starts_with("*.")
}

fn check_host(host: &str) -> Result<(), String> {
    let (name, port) = match host.rsplit_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (host, None),
    };
    if let Some(port) = port {
        match port.parse::<u16>() {
            Ok(p) if p > 0 && !port.starts_with('0') => {}
            _ => return Err(format!("port {} is not a number from 1 to 65535", shown(port))),
        }
    }
    let valid_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(valid_label) {
        return Err(format!("registry host {} is not a valid host name or IPv4 address", shown(name)));
    }
    Ok(())
}

fn is_path_component(c: &str) -> bool {
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run: ".", "_", "__" or one or more "-".
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
}

/// The registry host (with port) of a location (WMCO-SPEC 1.2).
pub fn registry_host(location: &str) -> &str {
    location.split_once('/').map_or(location, |(h, _)| h)
}

/// The path after the registry host, without its leading `/` (WMCO-SPEC 1.3).
pub fn org_path(location: &str) -> &str {
    location.split_once('/').map_or("", |(_, p)| p)
}

/// The mirror host containerd is given for one source/mirror pair: the
/// mirror without the trailing path components it shares with the source
/// (WMCO-SPEC 1.4, "the suffix rule").
pub fn mirror_host(source: &str, mirror: &str) -> String {
    if source == mirror {
        return registry_host(mirror).to_owned();
    }
    let shared = shared_suffix(source, mirror);
    let parts: Vec<&str> = mirror.split('/').collect();
    parts[..parts.len() - shared].join("/")
}

/// The part of the source's repository path that the mirror does not keep,
/// or None when the mirror keeps it all (so containerd's registry-level
/// mirroring finds the image).
pub fn unkept_source_path(source: &str, mirror: &str) -> Option<String> {
    if source == mirror {
        return None;
    }
    let parts: Vec<&str> = source.split('/').collect();
    let kept_from = parts.len() - shared_suffix(source, mirror);
    (kept_from > 1).then(|| parts[1..kept_from].join("/"))
}

/// How many trailing `/`-components two locations share, stopping at the
/// first difference; a mirror always keeps at least its registry host.
fn shared_suffix(source: &str, mirror: &str) -> usize {
    let (s, m): (Vec<&str>, Vec<&str>) = (source.split('/').collect(), mirror.split('/').collect());
    let limit = s.len().min(m.len() - 1);
    s.iter().rev().zip(m.iter().rev()).take(limit).take_while(|(a, b)| a == b).count()
}

/// The `https://<host>/v2[/<org>]` URL containerd uses for a location.
pub fn v2_url(location: &str) -> String {
    match org_path(location) {
        "" => format!("https://{}/v2", registry_host(location)),
        org => format!("https://{}/v2/{org}", registry_host(location)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wmco_unit_test_examples_of_the_suffix_rule() {
        assert_eq!(
            mirror_host(
                "mcr.microsoft.com/windows/servercore:ltsc2022",
                "quay.io/mohashai/random_namespace/windows/servercore:ltsc2022"
            ),
            "quay.io/mohashai/random_namespace"
        );
        assert_eq!(
            mirror_host("mcr.microsoft.com/powershell:lts-nanoserver-ltsc2022", "quay.io/powershell:23"),
            "quay.io/powershell:23"
        );
    }

    #[test]
    fn a_mirror_keeps_its_registry_even_when_everything_else_matches() {
        assert_eq!(mirror_host("a.io/x/y", "x/y"), "x");
        assert_eq!(mirror_host("src.io/oss/pause", "m.io/oss/pause"), "m.io");
        assert_eq!(mirror_host("src.io", "src.io"), "src.io");
    }

    #[test]
    fn unkept_source_paths_are_what_registry_level_mirroring_breaks() {
        assert_eq!(unkept_source_path("r.io/ubi9/ubi-minimal", "m.io/example/ubi-minimal").as_deref(), Some("ubi9"));
        assert_eq!(
            unkept_source_path("mcr.microsoft.com/oss/kubernetes/pause", "m.io/custom/oss/kubernetes/pause"),
            None
        );
        assert_eq!(unkept_source_path("registry.redhat.io", "mirror.example.com"), None);
    }

    #[test]
    fn locations_are_checked_like_openshift_does() {
        assert!(check_location("registry.access.redhat.com/ubi9/ubi-minimal", false).is_ok());
        assert!(check_location("localhost:5000/a__b/c-d.e", false).is_ok());
        assert!(check_location("*.example.com", true).is_ok());
        assert!(check_location("*.example.com", false).is_err());
        assert!(check_location("https://quay.io/x", false).is_err());
        assert!(check_location("quay.io/x:tag", false).unwrap_err().contains("tag"));
        assert!(check_location("quay.io/x@sha256:00", false).unwrap_err().contains("digest"));
        assert!(check_location("quay.io/Upper", false).is_err());
        assert!(check_location("quay.io:0/x", false).is_err());
        assert!(check_location("quay.io/../x", false).is_err());
        assert!(check_location("qu\"ay.io", false).is_err());
        assert!(check_location("", false).is_err());
    }

    #[test]
    fn v2_urls_carry_the_org_path() {
        assert_eq!(v2_url("quay.io/my-org"), "https://quay.io/v2/my-org");
        assert_eq!(v2_url("mirror.corp.example:5000"), "https://mirror.corp.example:5000/v2");
    }
}
