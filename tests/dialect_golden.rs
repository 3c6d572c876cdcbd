//! Golden scripts: what each dialect sends to a node, byte for byte. The
//! PowerShell dialect cannot run here (no Windows host), so its scripts are
//! pinned by these files, parsed with the PowerShell grammar
//! (tests/support/powershell.rs: no syntax error, every base64 value inside
//! a string literal, as written and as sent) and reviewed by hand: every
//! repository value must appear only as a base64 literal in single quotes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use base64::Engine;
use winfleet::dialect::{self, powershell};
use winfleet::node::facts::NodeFacts;
use winfleet::node::plan::plan_node;
use winfleet::node::{NodeSpec, OBSERVED_SERVICES};
use winfleet::vocab::Shell;
use winfleet::vocab::file::ManagedFile;

fn spec(shell: Shell, dir: &str) -> NodeSpec {
    NodeSpec {
        shell,
        registries_dir: dir.to_owned(),
        registries: [
            ("quay.io".to_owned(), ManagedFile::plain("server = \"https://quay.io/v2\"\n".into())),
            ("r.local_5000_".to_owned(), ManagedFile::plain("it's \"quoted\" $(x) `y` %PATH%\n".into())),
        ]
        .into(),
        environment: [("HTTP_PROXY".to_owned(), "http://proxy:3128".to_owned())].into(),
        environment_dir: (shell == Shell::Posix).then(|| "/etc/systemd/system.conf.d".to_owned()),
        services: OBSERVED_SERVICES.map(str::to_owned).to_vec(),
        lifecycle: None,
        leaving: false,
        max_removal_percent: 50,
    }
}

/// A node with one stale registry, one changed file and an extra variable.
fn facts(spec: &NodeSpec) -> NodeFacts {
    NodeFacts {
        hostname: "node".into(),
        os: "test".into(),
        edition: String::new(),
        firewall: Default::default(),
        boot_id: Some("boot-1".into()),
        registries: BTreeMap::from([
            ("quay.io".to_owned(), Some("00".to_owned())),
            ("old.io".to_owned(), None),
            ("r.local_5000_".to_owned(), Some(spec.registries["r.local_5000_"].sha256().to_owned())),
        ]),
        marked: ["quay.io", "old.io", "r.local_5000_"].map(str::to_owned).into(),
        links: Default::default(),
        unmanaged: BTreeMap::from([("old.io".to_owned(), ["ca.crt".to_owned()].into())]),
        environment: BTreeMap::from([("NO_PROXY".to_owned(), ".svc".to_owned())]),
        reboot_pending: false,
        services: BTreeMap::new(),
        lifecycle: Default::default(),
    }
}

#[test]
fn scripts_match_their_golden_files() {
    let mut failures = Vec::new();
    for (shell, dir, name, ext) in [
        (Shell::Powershell, r"C:\k\containerd\registries", "powershell", "ps1"),
        (Shell::Posix, "/etc/containerd/certs.d", "posix", "sh"),
    ] {
        let spec = spec(shell, dir);
        let facts = facts(&spec);
        let changes = plan_node(&spec, &facts);
        assert_eq!(changes.len(), 4, "write, remove, set, unset");
        let (observe, apply) = match shell {
            Shell::Powershell => {
                (powershell::observe_script(&spec, None), powershell::apply_script(&spec, &changes, &[]))
            }
            Shell::Posix => (dialect::observe(&spec, None).input, dialect::apply(&spec, &facts, &changes, &[]).input),
        };
        for (kind, text) in [("observe", observe), ("apply", apply)] {
            let path = support::fixture(&format!("dialect/{name}-{kind}.{ext}"));
            if let Err(e) = support::check_golden(&path, &text) {
                failures.push(e);
            }
            if shell == Shell::Powershell {
                if let Err(e) = support::powershell::check(&text) {
                    failures.push(format!("{}: {e}", path.display()));
                }
                if let Err(e) = support::powershell::check_wrapped(&powershell::wrap(&text)) {
                    failures.push(format!("{} as sent: {e}", path.display()));
                }
            }
        }
    }
    support::report(failures);
}

#[test]
fn powershell_travels_as_one_line_that_decodes_to_the_script() {
    let spec = spec(Shell::Powershell, r"C:\k\containerd\registries");
    let script = dialect::observe(&spec, None);
    assert_eq!(script.command, "powershell.exe -NoLogo -NoProfile -NonInteractive -Command -");
    assert_eq!(script.input.matches('\n').count(), 1, "one line: -Command - runs its input line by line");
    let b64 = script.input.split('\'').nth(1).unwrap();
    let decoded = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
    assert_eq!(String::from_utf8(decoded).unwrap(), powershell::observe_script(&spec, None));
}

#[test]
fn no_repository_value_appears_in_clear() {
    for shell in [Shell::Powershell, Shell::Posix] {
        let spec = spec(shell, "REGDIR-SENTINEL");
        let facts = facts(&spec);
        let changes = plan_node(&spec, &facts);
        let texts = match shell {
            Shell::Powershell => {
                [powershell::observe_script(&spec, None), powershell::apply_script(&spec, &changes, &[])]
            }
            Shell::Posix => [dialect::observe(&spec, None).input, dialect::apply(&spec, &facts, &changes, &[]).input],
        };
        for text in texts {
            for value in ["REGDIR-SENTINEL", "quay.io", "r.local_5000_", "http://proxy:3128", "quoted", "old.io"] {
                assert!(!text.contains(value), "{value} appears in clear in a {shell:?} script");
            }
        }
    }
}
