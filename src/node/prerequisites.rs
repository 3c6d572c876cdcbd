//! What a host must be before winfleet configures it (issue 27, item 6, the
//! node side): a supported Windows Server build and edition, and a host
//! name the kubelet can register. Pure: the checks read what the
//! observation reported and say, in one sentence each, why a host is
//! refused. The table and its source are in docs/lifecycle.md
//! ("Prerequisites").

use super::facts::{Firewall, NodeFacts};
use crate::vocab::Shell;
use crate::vocab::platform::Platform;

/// A Windows Server release: its build, the lowest update revision (UBR)
/// it needs, its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    /// The OS build (`10.0.BUILD.UBR`).
    pub build: u32,
    /// The lowest update revision accepted.
    pub lowest_ubr: u32,
    /// What users call it.
    pub name: &'static str,
}

/// Windows Server 2019 (1809, LTSC). WMCO 10.21's release notes call it
/// the last release to support 2019; WMCO's docs/wmco-prerequisites.md
/// still lists it for AWS, Azure and platform None (docs/lifecycle.md).
pub const WS2019: Release = Release { build: 17763, lowest_ubr: 0, name: "Windows Server 2019" };
/// Windows Server 2022 (LTSC) with the container networking update
/// KB5012637 (OS build 20348.681).
pub const WS2022: Release = Release { build: 20348, lowest_ubr: 681, name: "Windows Server 2022" };
/// Windows Server 2025 (LTSC), supported on every platform from WMCO 10.22.
pub const WS2025: Release = Release { build: 26100, lowest_ubr: 0, name: "Windows Server 2025" };

/// The Windows Server releases a platform supports: WMCO's
/// docs/wmco-prerequisites.md ("Supported Windows Server versions", WMCO
/// 10.22 and later; facts and commits in docs/platforms-research.md, 6).
/// vSphere, GCP and Nutanix never had 2019 (on vSphere it lacks KB4565351,
/// the custom VXLAN port). A platform WMCO does not serve is taken as
/// platform None (a BYOH host).
pub fn supported(platform: Platform) -> &'static [Release] {
    match platform {
        Platform::Aws | Platform::Azure | Platform::None | Platform::Other => &[WS2019, WS2022, WS2025],
        Platform::Gcp | Platform::VSphere | Platform::Nutanix => &[WS2022, WS2025],
    }
}

fn listed(releases: &[Release]) -> String {
    releases
        .iter()
        .map(|r| {
            let ubr = if r.lowest_ubr > 0 { format!(".{} or later", r.lowest_ubr) } else { String::new() };
            format!("{} (build {}{ubr})", r.name, r.build)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The Windows Server release a `major.minor.build.revision` OS version
/// (what the PowerShell observation reports as `os`) is, or why it is
/// refused on `platform`.
pub fn windows_build(os: &str, platform: Platform) -> Result<&'static str, String> {
    let releases = supported(platform);
    let supported = || format!("supported on platform {platform}: {}", listed(releases));
    let parts: Vec<u32> = match os.trim().split('.').map(str::parse).collect::<Result<_, _>>() {
        Ok(parts) => parts,
        Err(_) => return Err(format!("the OS version {os:?} is not a Windows version; {}", supported())),
    };
    let [10, 0, build, ubr] = parts[..] else {
        return Err(format!("the OS version {os:?} is not a Windows version; {}", supported()));
    };
    let known = [WS2019, WS2022, WS2025];
    match (releases.iter().find(|r| r.build == build), known.iter().find(|r| r.build == build)) {
        (Some(r), _) if ubr >= r.lowest_ubr => Ok(r.name),
        (Some(r), _) => Err(format!(
            "{} build {build}.{ubr} lacks the container networking update (build {build}.{}, KB5012637); install \
             it first",
            r.name, r.lowest_ubr
        )),
        (None, Some(r)) => Err(format!("{} is not supported on platform {platform}; {}", r.name, supported())),
        (None, None) => Err(format!("Windows build {build}.{ubr} is not supported; {}", supported())),
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

/// The kubelet's port, which the cluster reaches for logs, exec and
/// metrics (WMCO's BYOH prerequisites: "Port 10250 must allow inbound TCP
/// traffic").
pub const KUBELET_PORT: u16 = 10250;

/// Whether the Windows firewall lets the cluster reach the kubelet's port:
/// off, or an enabled inbound Allow rule for TCP whose local ports cover
/// 10250 (`Any`, `10250`, a range). A rule is taken as it is: its profiles
/// and remote addresses are not judged. Not observed (posix nodes, where
/// nothing listens before the kubelet runs) or not known (the cmdlets
/// failed): not refused.
pub fn kubelet_port(firewall: &Firewall) -> Result<(), String> {
    let covers = |port: &str| {
        let port = port.trim();
        port.eq_ignore_ascii_case("any")
            || port.parse::<u16>().is_ok_and(|p| p == KUBELET_PORT)
            || port.split_once('-').is_some_and(|(low, high)| {
                matches!((low.trim().parse::<u16>(), high.trim().parse::<u16>()), (Ok(l), Ok(h)) if (l..=h).contains(&KUBELET_PORT))
            })
    };
    match firewall {
        Firewall::On(ports) if !ports.iter().any(|p| covers(p)) => Err(format!(
            "no enabled inbound firewall rule allows TCP port {KUBELET_PORT}, the kubelet's, which the cluster \
             reaches for logs, exec and metrics: allow it, as WMCO's user data does (New-NetFirewallRule \
             -DisplayName ContainerLogsPort -Direction Inbound -Action Allow -Protocol TCP -LocalPort {KUBELET_PORT})"
        )),
        _ => Ok(()),
    }
}

/// Why a host winfleet has not configured yet (no install record, no
/// registry directory with winfleet's marker) is refused before anything
/// is written to it on `platform`, or `None`. A host winfleet configured
/// already is never refused midway: these checks guard the first write only.
pub fn refused(shell: Shell, facts: &NodeFacts, platform: Platform) -> Option<String> {
    if facts.lifecycle.record.is_some() || !facts.marked.is_empty() {
        return None;
    }
    let mut reasons = Vec::new();
    if let Err(e) = host_name(&facts.hostname) {
        reasons.push(e);
    }
    if shell == Shell::Powershell {
        reasons.extend(windows_build(&facts.os, platform).err());
        reasons.extend(windows_edition(&facts.edition).err());
        reasons.extend(kubelet_port(&facts.firewall).err());
    }
    (!reasons.is_empty()).then(|| format!("prerequisites not met, nothing written: {}", reasons.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_2019_and_2022_with_its_update_and_2025_are_supported_on_platform_none() {
        assert_eq!(windows_build("10.0.17763.1", Platform::None), Ok("Windows Server 2019"));
        assert_eq!(windows_build("10.0.20348.681", Platform::None), Ok("Windows Server 2022"));
        assert_eq!(windows_build("10.0.20348.2655", Platform::None), Ok("Windows Server 2022"));
        assert_eq!(windows_build("10.0.26100.1742", Platform::None), Ok("Windows Server 2025"));
        assert!(windows_build("10.0.20348.680", Platform::None).unwrap_err().contains("KB5012637"));
        assert!(windows_build("10.0.14393.0", Platform::None).unwrap_err().contains("14393.0 is not supported"));
        assert!(windows_build("Linux 6.1.0", Platform::None).unwrap_err().contains("not a Windows version"));
        assert!(windows_build("10.0.17763", Platform::None).is_err());
        assert!(windows_build("", Platform::None).is_err());
    }

    /// WMCO's "Supported Windows Server versions" table (10.22 and later),
    /// platform by platform: 2019 only where WMCO lists it.
    #[test]
    fn each_platform_supports_the_releases_wmco_lists_for_it() {
        let (ws2019, ws2022, ws2025, ws2022_unpatched) =
            ("10.0.17763.6532", "10.0.20348.2849", "10.0.26100.2314", "10.0.20348.300");
        let table = [
            (Platform::Aws, [true, true, true]),
            (Platform::Azure, [true, true, true]),
            (Platform::Gcp, [false, true, true]),
            (Platform::VSphere, [false, true, true]),
            (Platform::Nutanix, [false, true, true]),
            (Platform::None, [true, true, true]),
        ];
        for (platform, expected) in table {
            for (os, accepted) in [ws2019, ws2022, ws2025].into_iter().zip(expected) {
                let verdict = windows_build(os, platform);
                assert_eq!(verdict.is_ok(), accepted, "{platform} {os}: {verdict:?}");
            }
            assert!(windows_build(ws2022_unpatched, platform).unwrap_err().contains("KB5012637"), "{platform}");
        }
        let refused = windows_build(ws2019, Platform::VSphere).unwrap_err();
        assert!(refused.contains("Windows Server 2019 is not supported on platform VSphere"), "{refused}");
        assert!(refused.contains("Windows Server 2022 (build 20348.681 or later), Windows Server 2025"), "{refused}");
    }

    #[test]
    fn only_a_host_winfleet_never_configured_is_refused() {
        let mut facts = NodeFacts { hostname: "bad_name".into(), os: "10.0.14393.0".into(), ..NodeFacts::default() };
        let reason = refused(Shell::Powershell, &facts, Platform::None).unwrap();
        assert!(reason.contains("RFC 1123") && reason.contains("14393"), "{reason}");
        assert!(reason.contains("the edition \"\" is not Windows Server"), "{reason}");
        facts.edition = "ServerDatacenter".into();
        assert!(!refused(Shell::Powershell, &facts, Platform::None).unwrap().contains("edition"));
        assert!(
            !refused(Shell::Posix, &facts, Platform::None).unwrap().contains("14393"),
            "posix nodes report no Windows build"
        );
        facts.marked.insert("quay.io".into());
        assert_eq!(refused(Shell::Powershell, &facts, Platform::None), None);
    }

    #[test]
    fn the_kubelets_port_must_be_allowed_by_a_rule_or_the_firewall_off() {
        for open in [&["10250"][..], &["Any"], &["10000-11000"], &["445-445", "10250"]] {
            let firewall = Firewall::On(open.iter().map(|p| (*p).to_owned()).collect());
            assert_eq!(kubelet_port(&firewall), Ok(()), "{open:?}");
        }
        for closed in [&[][..], &["10251-11000"], &["1-10249"], &["nonsense"]] {
            let firewall = Firewall::On(closed.iter().map(|p| (*p).to_owned()).collect());
            assert!(kubelet_port(&firewall).unwrap_err().contains("allows TCP port 10250"), "{closed:?}");
        }
        for unjudged in [Firewall::Off, Firewall::Unknown, Firewall::NotObserved] {
            assert_eq!(kubelet_port(&unjudged), Ok(()));
        }
    }

    #[test]
    fn a_windows_host_whose_firewall_closes_the_kubelets_port_is_refused_before_the_first_write() {
        let mut facts = NodeFacts {
            hostname: "win-1".into(),
            os: "10.0.20348.2700".into(),
            edition: "ServerDatacenter".into(),
            firewall: Firewall::On(vec!["445-445".into()]),
            ..NodeFacts::default()
        };
        let reason = refused(Shell::Powershell, &facts, Platform::None).unwrap();
        assert!(reason.contains("no enabled inbound firewall rule allows TCP port 10250"), "{reason}");
        facts.firewall = Firewall::On(vec!["10250".into()]);
        assert_eq!(refused(Shell::Powershell, &facts, Platform::None), None);
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
