//! containerd `hosts.toml`, WMCO's format byte for byte (WMCO-SPEC 1.7,
//! decision 1), with the mirror order of decision 2.

use std::fmt::Write;

use super::mirrors::RegistryMirrors;
use super::pull_secret::PullSecret;
use super::reference::{registry_host, v2_url};
use crate::vocab::file::ManagedFile;

/// What an `authorization` value is shown as wherever it could be displayed.
pub const REDACTED: &str = "<redacted>";

/// Renders one registry's hosts.toml. Credentials, when the pull secret has
/// them for a mirror's registry, go into the file and are redacted in its
/// displayed form.
pub fn render(set: &RegistryMirrors, secret: Option<&PullSecret>) -> ManagedFile {
    if set.mirrors.is_empty() {
        return ManagedFile::plain(String::new());
    }
    let server = if set.never_contact_source { &set.mirrors[0].host } else { &set.registry };
    // Rendered once with a placeholder for each credential; the exact file
    // and its displayed form differ only there.
    let mut shown = format!("server = \"{}\"\n\noverride_path = true\n", v2_url(server));
    let mut headers = Vec::new();
    for mirror in &set.mirrors {
        let url = v2_url(&mirror.host);
        let capabilities = if mirror.resolve_tags { r#"["pull", "resolve"]"# } else { r#"["pull"]"# };
        let _ = write!(shown, "\n[host.\"{url}\"]\n  capabilities = {capabilities}\n  override_path = true\n");
        if let Some(header) = secret.and_then(|s| s.authorization(registry_host(&mirror.host))) {
            let _ = write!(shown, "  [host.\"{url}\".header]\n    authorization = \"{REDACTED}\"\n");
            headers.push(header);
        }
    }
    if headers.is_empty() {
        return ManagedFile::plain(shown);
    }
    let mut exact = String::with_capacity(shown.len());
    let mut pieces = shown.split(REDACTED);
    exact.push_str(pieces.next().unwrap_or_default());
    for (piece, header) in pieces.zip(headers) {
        exact.push_str(header);
        exact.push_str(piece);
    }
    ManagedFile::with_secret(exact, shown)
}
#[cfg(test)]
mod tests {
    use super::super::mirrors::Mirror;
    use super::*;

    fn set(never: bool, mirrors: &[(&str, bool)]) -> RegistryMirrors {
        RegistryMirrors {
            registry: "registry.redhat.io".into(),
            mirrors: mirrors.iter().map(|(h, r)| Mirror { host: (*h).into(), resolve_tags: *r }).collect(),
            never_contact_source: never,
        }
    }

    #[test]
    fn wmco_format_with_org_paths_and_capabilities() {
        let file = render(&set(false, &[("m.io/org/sub", false), ("n.io:5000", true)]), None);
        assert_eq!(
            file.content(),
            "server = \"https://registry.redhat.io/v2\"\n\noverride_path = true\n\n\
             [host.\"https://m.io/v2/org/sub\"]\n  capabilities = [\"pull\"]\n  override_path = true\n\n\
             [host.\"https://n.io:5000/v2\"]\n  capabilities = [\"pull\", \"resolve\"]\n  override_path = true\n"
        );
    }

    #[test]
    fn never_contact_source_serves_from_the_first_declared_mirror() {
        let file = render(&set(true, &[("z.io/org", false), ("a.io", false)]), None);
        assert!(file.content().starts_with("server = \"https://z.io/v2/org\"\n"));
    }

    #[test]
    fn no_mirrors_is_an_empty_file() {
        assert_eq!(render(&set(false, &[]), None).content(), "");
    }

    #[test]
    fn credentials_land_in_the_file_and_never_in_its_display() {
        let secret = PullSecret::parse(br#"{"auths":{"a.io":{"username":"u","password":"hunter2"}}}"#).unwrap();
        let file = render(&set(false, &[("a.io/org", false)]), Some(&secret));
        assert!(
            file.content()
                .contains("  [host.\"https://a.io/v2/org\".header]\n    authorization = \"Basic dTpodW50ZXIy\"\n")
        );
        assert!(file.display().contains("authorization = \"<redacted>\""));
        assert!(!file.display().contains("dTpodW50ZXIy"));
        assert!(!format!("{file:?}").contains("dTpodW50ZXIy"));
    }
}
