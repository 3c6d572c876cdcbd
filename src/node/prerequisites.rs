//! What a host must be before winfleet configures it (issue 27, item 6, the
//! node side): a supported Windows Server build and edition, and a host
//! name the kubelet can register. Pure: the checks read what the
//! observation reported and say, in one sentence each, why a host is
//! refused. The table and its source are in docs/lifecycle.md
//! ("Prerequisites").

use super::facts::NodeFacts;
use crate::vocab::Shell;

/// The supported Windows Server builds: (build, lowest update revision,
/// name). WMCO's docs/wmco-prerequisites.md lists Windows Server 2019
/// (1809, LTSC) and 2022 (LTSC, with the container networking patch
/// KB5012637: OS build 20348.681).
pub const SUPPORTED: [(u32, u32, &str); 2] = [(17763, 0, "Windows Server 2019"), (20348, 681, "Windows Server 2022")];

/// The Windows Server release a `major.minor.build.revision` OS version
/// (what the PowerShell observation reports as `os`) is, or why it is
/// refused.
pub fn windows_build(os: &str) -> Result<&'static str, String> {
    let supported = || {
        SUPPORTED
            .iter()
            .map(|(build, ubr, name)| {
                format!("{name} (build {build}{})", if *ubr > 0 { format!(".{ubr} or later") } else { String::new() })
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let parts: Vec<u32> = match os.trim().split('.').map(str::parse).collect::<Result<_, _>>() {
        Ok(parts) => parts,
        Err(_) => return Err(format!("the OS version {os:?} is not a Windows version; supported: {}", supported())),
    };
    let [10, 0, build, ubr] = parts[..] else {
        return Err(format!("the OS version {os:?} is not a Windows version; supported: {}", supported()));
    };
    match SUPPORTED.iter().find(|(b, _, _)| *b == build) {
        Some((_, lowest, name)) if ubr >= *lowest => Ok(name),
        Some((_, lowest, name)) => Err(format!(
            "{name} build {build}.{ubr} lacks the container networking update (build {build}.{lowest}, \
             KB5012637); install it first"
        )),
        None => Err(format!("Windows build {build}.{ubr} is not supported; supported: {}", supported())),
    }
}

/// Whether a Windows edition (the registry's `EditionID`) is a Server
/// edition (Standard, Datacenter, their Core installations, Azure
/// Edition): a client build shares its build number with a Server one and
/// is refused.
pub fn windows_edition(edition: &str) -> Result<(), String> {
    if edition.starts_with("Server") {
        Ok(())
    } else {
        Err(format!("the edition {edition:?} is not Windows Server; only Windows Server runs Windows nodes"))
    }
}

/// The host name as the kubelet registers it (lowercased) must be an RFC
/// 1123 label: at most 63 lowercase letters, digits and `-`, starting and
/// ending with a letter or digit (WMCO's BYOH prerequisites).
pub fn host_name(name: &str) -> Result<(), String> {
    let lower = name.to_ascii_lowercase();
    let valid = !lower.is_empty()
        && lower.len() <= 63
        && lower.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && lower.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && lower.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    if valid {
        Ok(())
    } else {
        Err(format!(
            "the host name {name:?} is not an RFC 1123 label (at most 63 letters, digits and '-', starting and \
             ending with a letter or digit): rename the host"
        ))
    }
}

/// Why a host winfleet has not configured yet (no install record, no
/// registry directory with winfleet's marker) is refused before anything
/// is written to it, or `None`. A host winfleet configured already is never
/// refused midway: these checks guard the first write only.
pub fn refused(shell: Shell, facts: &NodeFacts) -> Option<String> {
    if facts.lifecycle.record.is_some() || !facts.marked.is_empty() {
        return None;
    }
    let mut reasons = Vec::new();
    if let Err(e) = host_name(&facts.hostname) {
        reasons.push(e);
    }
    if shell == Shell::Powershell {
        reasons.extend(windows_build(&facts.os).err());
        reasons.extend(windows_edition(&facts.edition).err());
    }
    (!reasons.is_empty()).then(|| format!("prerequisites not met, nothing written: {}", reasons.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_2019_and_2022_with_its_update_are_supported() {
        assert_eq!(windows_build("10.0.17763.1"), Ok("Windows Server 2019"));
        assert_eq!(windows_build("10.0.20348.681"), Ok("Windows Server 2022"));
        assert_eq!(windows_build("10.0.20348.2655"), Ok("Windows Server 2022"));
        assert!(windows_build("10.0.20348.680").unwrap_err().contains("KB5012637"));
        assert!(windows_build("10.0.14393.0").unwrap_err().contains("14393.0 is not supported"));
        assert!(windows_build("Linux 6.1.0").unwrap_err().contains("not a Windows version"));
        assert!(windows_build("10.0.17763").is_err());
        assert!(windows_build("").is_err());
    }

    #[test]
    fn only_a_host_winfleet_never_configured_is_refused() {
        let mut facts = NodeFacts { hostname: "bad_name".into(), os: "10.0.14393.0".into(), ..NodeFacts::default() };
        let reason = refused(Shell::Powershell, &facts).unwrap();
        assert!(reason.contains("RFC 1123") && reason.contains("14393"), "{reason}");
        assert!(reason.contains("the edition \"\" is not Windows Server"), "{reason}");
        facts.edition = "ServerDatacenter".into();
        assert!(!refused(Shell::Powershell, &facts).unwrap().contains("edition"));
        assert!(!refused(Shell::Posix, &facts).unwrap().contains("14393"), "posix nodes report no Windows build");
        facts.marked.insert("quay.io".into());
        assert_eq!(refused(Shell::Powershell, &facts), None);
    }

    #[test]
    fn only_server_editions_pass() {
        assert!(windows_edition("ServerDatacenter").is_ok());
        assert!(windows_edition("ServerStandardCor").is_ok());
        assert!(windows_edition("Professional").unwrap_err().contains("not Windows Server"));
        assert!(windows_edition("").is_err());
    }

    #[test]
    fn host_names_are_rfc_1123_labels_once_lowercased() {
        for good in ["win-node-0", "EC2AMAZ-ABC123", "a", &"a".repeat(63)] {
            assert_eq!(host_name(good), Ok(()), "{good}");
        }
        for bad in ["win_node", "-win", "win-", "win.corp", "", &"a".repeat(64), "wïn"] {
            assert!(host_name(bad).unwrap_err().contains("RFC 1123 label"), "{bad}");
        }
    }
}
