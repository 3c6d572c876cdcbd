//! What a node was observed to have, and the pure parser of the report the
//! observation script prints.
//!
//! The report is a stream of NUL-terminated UTF-8 tokens, so that any file
//! name or value (quotes, newlines, `$()`) arrives intact without escaping:
//!
//! ```text
//! winfleet-facts 1            start marker and format version
//! hostname <name>
//! os <build>
//! boot <id>                   changes at every boot
//! dir <name>                  a subdirectory of the registries directory
//! mark <name>                 it holds winfleet's marker (winfleet created it)
//! link <name>                 it is a symbolic link (a reparse point on
//!                             Windows): never winfleet's, never written into
//! unmanaged <name> <entry>    an entry of a marked directory that winfleet
//!                             did not write (kept when the registry goes)
//! file <name> <sha256>        its hosts.toml (PowerShell dialect)
//! sums <hex  path>… end-sums  the same, as `sha256sum -z` prints it (posix)
//! env <NAME> <value>          a managed variable at Machine scope (PowerShell)
//! envfile <content>           the environment drop-in (posix)
//! reboot pending              a reboot is owed for an environment change
//! service <name> <state>
//! error <message>             the script failed (PowerShell)
//! end                         nothing was cut off
//! ```
//!
//! Anything before the start marker (a login banner) is ignored.

use std::collections::{BTreeMap, BTreeSet};

use crate::lifecycle::facts::{self as lifecycle_facts, LifecycleFacts};
use crate::node::MANAGED_ENVIRONMENT;
use crate::vocab::report::{ReportError, ServiceState, Tokens};
use crate::vocab::systemd;

/// The start marker of an observation report.
pub const FACTS_MARKER: &str = "winfleet-facts";
/// The version of the report format this parser reads.
pub const FACTS_VERSION: &str = "1";

/// What one node has, as observed in one round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// The node's host name.
    pub hostname: String,
    /// OS name and build (`10.0.20348.2700`, `Linux 6.1.0`).
    pub os: String,
    /// Windows' edition (`EditionID`: `ServerDatacenter`); empty on posix.
    pub edition: String,
    /// The Windows firewall's word on the kubelet's port 10250 (not
    /// observed on posix nodes).
    pub firewall: Firewall,
    /// An identifier that changes at every boot, when the node has one.
    pub boot_id: Option<String>,
    /// Registry directories present, each with the SHA-256 of its
    /// hosts.toml (`None`: the directory has no hosts.toml).
    pub registries: BTreeMap<String, Option<String>>,
    /// The registry directories holding winfleet's marker
    /// ([`crate::node::REGISTRY_MARKER`]): the only ones it may remove.
    pub marked: BTreeSet<String>,
    /// The registry directories that are symbolic links (reparse points on
    /// Windows): winfleet neither writes into nor removes them.
    pub links: BTreeSet<String>,
    /// For each marked registry directory, its entries that winfleet did
    /// not write (anything but a regular hosts.toml, the marker and
    /// winfleet's temporary files): they stay when the registry goes.
    pub unmanaged: BTreeMap<String, BTreeSet<String>>,
    /// Managed environment variables that are set, with their values.
    pub environment: BTreeMap<String, String>,
    /// Whether an environment change is waiting for a reboot.
    pub reboot_pending: bool,
    /// State of each observed service.
    pub services: BTreeMap<String, ServiceState>,
    /// The lifecycle's facts (empty without a lifecycle).
    pub lifecycle: LifecycleFacts,
}

/// What the Windows firewall says about inbound TCP port 10250.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Firewall {
    /// Not observed (posix nodes).
    #[default]
    NotObserved,
    /// Off in every profile: every port is open.
    Off,
    /// On: the local ports of its enabled inbound Allow rules for TCP that
    /// may cover 10250 (`Any`, `10250`, ranges such as `10000-11000`).
    On(Vec<String>),
    /// The firewall cmdlets failed: not known.
    Unknown,
}

/// Parses an observation report.
pub fn parse_facts(output: &[u8]) -> Result<NodeFacts, ReportError> {
    let text = String::from_utf8_lossy(output);
    let mut tokens = Tokens::after_marker(&text, FACTS_MARKER, FACTS_VERSION)?;
    let mut facts = NodeFacts::default();
    let mut env_file = None;
    let mut ports = Vec::new();
    loop {
        match tokens.next()? {
            "end" => break,
            "error" => return Err(ReportError::Node(tokens.next()?.trim().to_owned())),
            "hostname" => facts.hostname = tokens.next()?.to_owned(),
            "os" => facts.os = tokens.next()?.to_owned(),
            "edition" => facts.edition = tokens.next()?.to_owned(),
            "kubeletport" => ports.push(tokens.next()?.to_owned()),
            "firewall" => {
                facts.firewall = match tokens.next()? {
                    "off" => Firewall::Off,
                    "on" => Firewall::On(std::mem::take(&mut ports)),
                    _ => Firewall::Unknown,
                }
            }
            "boot" => facts.boot_id = Some(tokens.next()?.to_owned()).filter(|b| !b.is_empty()),
            "dir" => {
                facts.registries.insert(tokens.next()?.to_owned(), None);
            }
            "mark" => {
                facts.marked.insert(tokens.next()?.to_owned());
            }
            "link" => {
                facts.links.insert(tokens.next()?.to_owned());
            }
            "unmanaged" => {
                let name = tokens.next()?;
                let entry = tokens.next()?;
                facts.unmanaged.entry(name.to_owned()).or_default().insert(entry.to_owned());
            }
            "file" => {
                let name = tokens.next()?;
                let sum = tokens.next()?.to_ascii_lowercase();
                facts.registries.insert(name.to_owned(), Some(sum));
            }
            "sums" => loop {
                let token = tokens.next()?;
                if token == "end-sums" {
                    break;
                }
                let (sum, path) = token.split_once("  ").ok_or_else(|| ReportError::Unexpected(token.to_owned()))?;
                if let Some(name) = registry_of(path) {
                    facts.registries.insert(name.to_owned(), Some(sum.to_ascii_lowercase()));
                }
            },
            "env" => {
                let name = tokens.next()?;
                let value = tokens.next()?;
                if MANAGED_ENVIRONMENT.contains(&name) {
                    facts.environment.insert(name.to_owned(), value.to_owned());
                }
            }
            "envfile" => env_file = Some(tokens.next()?.to_owned()),
            "reboot" => facts.reboot_pending = tokens.next()? == "pending",
            "service" => {
                let name = tokens.next()?;
                let state = ServiceState::parse(tokens.next()?);
                facts.services.insert(name.to_owned(), state);
            }
            other => {
                if !lifecycle_facts::read_token(other, &mut tokens, &mut facts.lifecycle)? {
                    return Err(ReportError::Unexpected(other.to_owned()));
                }
            }
        }
    }
    lifecycle_facts::finish(&mut facts.lifecycle);
    if let Some(content) = env_file {
        let parsed = systemd::parse_drop_in(&content);
        facts.environment =
            parsed.environment.into_iter().filter(|(name, _)| MANAGED_ENVIRONMENT.contains(&name.as_str())).collect();
        facts.reboot_pending |= parsed.reboot_owed_since.is_some_and(|boot| facts.boot_id.as_deref() == Some(&boot));
    }
    Ok(facts)
}

/// `…/<registry>/hosts.toml` → `<registry>` (posix paths: a backslash is
/// an ordinary character of a name there).
fn registry_of(path: &str) -> Option<&str> {
    let mut parts = path.rsplit('/');
    let _file = parts.next()?;
    parts.next().filter(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(tokens: &[&str]) -> Vec<u8> {
        let mut out = b"Welcome banner\n".to_vec();
        for t in tokens {
            out.extend_from_slice(t.as_bytes());
            out.push(0);
        }
        out
    }

    #[test]
    fn a_powershell_report_becomes_facts() {
        let facts = parse_facts(&report(&[
            "winfleet-facts",
            "1",
            "hostname",
            "WIN-1",
            "os",
            "10.0.20348.2700",
            "edition",
            "ServerDatacenter",
            "kubeletport",
            "10000-11000",
            "firewall",
            "on",
            "dir",
            "quay.io",
            "file",
            "quay.io",
            "ABCDEF",
            "dir",
            "empty.io",
            "env",
            "HTTP_PROXY",
            "http://p:3128",
            "env",
            "PATH",
            "ignored",
            "reboot",
            "pending",
            "service",
            "kubelet",
            "Running",
            "end",
        ]))
        .unwrap();
        assert_eq!((facts.hostname.as_str(), facts.edition.as_str()), ("WIN-1", "ServerDatacenter"));
        assert_eq!(facts.firewall, Firewall::On(vec!["10000-11000".to_owned()]));
        assert_eq!(facts.registries.get("quay.io"), Some(&Some("abcdef".to_owned())));
        assert_eq!(facts.registries.get("empty.io"), Some(&None));
        assert_eq!(facts.environment.len(), 1);
        assert!(facts.reboot_pending);
        assert_eq!(facts.services.get("kubelet"), Some(&ServiceState::Running));
    }

    #[test]
    fn posix_sums_and_the_drop_in_become_facts() {
        let drop_in = "# winfleet: reboot owed since boot b-1\n[Manager]\nDefaultEnvironment=\"NO_PROXY=a,b\"\n";
        let facts = parse_facts(&report(&[
            "winfleet-facts",
            "1",
            "boot",
            "b-1",
            "dir",
            "we\nird",
            "sums",
            "00ff  certs.d/we\nird/hosts.toml",
            "0a0a  certs.d/back\\slash/hosts.toml",
            "end-sums",
            "envfile",
            drop_in,
            "end",
        ]))
        .unwrap();
        assert_eq!(facts.registries.get("we\nird"), Some(&Some("00ff".to_owned())));
        assert_eq!(facts.registries.get("back\\slash"), Some(&Some("0a0a".to_owned())));
        assert_eq!(facts.environment.get("NO_PROXY").map(String::as_str), Some("a,b"));
        assert!(facts.reboot_pending, "owed since this boot");
    }

    #[test]
    fn links_and_the_entries_winfleet_did_not_write_become_facts() {
        let facts = parse_facts(&report(&[
            "winfleet-facts",
            "1",
            "dir",
            "linked.io",
            "link",
            "linked.io",
            "dir",
            "quay.io",
            "mark",
            "quay.io",
            "unmanaged",
            "quay.io",
            "client.key",
            "unmanaged",
            "quay.io",
            "ca.crt",
            "end",
        ]))
        .unwrap();
        assert!(facts.links.contains("linked.io") && !facts.marked.contains("linked.io"));
        let kept: Vec<&str> = facts.unmanaged["quay.io"].iter().map(String::as_str).collect();
        assert_eq!(kept, ["ca.crt", "client.key"]);
    }

    #[test]
    fn a_reboot_since_the_change_settles_it() {
        let drop_in = "# winfleet: reboot owed since boot b-1\n[Manager]\n";
        let facts = parse_facts(&report(&["winfleet-facts", "1", "boot", "b-2", "envfile", drop_in, "end"])).unwrap();
        assert!(!facts.reboot_pending);
    }

    #[test]
    fn cut_off_and_foreign_output_are_errors() {
        assert_eq!(parse_facts(&report(&["winfleet-facts", "1", "hostname", "x"])), Err(ReportError::Truncated));
        assert_eq!(parse_facts(&report(&["winfleet-facts", "1", "dir"])), Err(ReportError::Truncated));
        assert!(matches!(parse_facts(b"bash: sh: not found\n"), Err(ReportError::NoMarker(..))));
        assert_eq!(parse_facts(&report(&["winfleet-facts", "9", "end"])), Err(ReportError::Version("9".into())));
        assert_eq!(
            parse_facts(&report(&["winfleet-facts", "1", "bogus", "end"])),
            Err(ReportError::Unexpected("bogus".into()))
        );
    }
}
