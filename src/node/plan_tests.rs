//! Unit tests of the pure node plan ([`super`]).

use super::*;

fn spec() -> NodeSpec {
    NodeSpec {
        shell: Shell::Posix,
        registries_dir: "/etc/containerd/certs.d".into(),
        registries: [
            ("a.io".to_owned(), ManagedFile::plain("a\n".into())),
            ("b.io".to_owned(), ManagedFile::plain("b\n".into())),
        ]
        .into(),
        environment: [("HTTP_PROXY".to_owned(), "http://p:3128".to_owned())].into(),
        environment_dir: Some("/etc/systemd/system.conf.d".into()),
        services: Vec::new(),
        lifecycle: None,
        leaving: false,
        max_removal_percent: 50,
    }
}

fn marked(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn a_node_in_sync_needs_nothing() {
    let spec = spec();
    let facts = NodeFacts {
        registries: spec.registries.iter().map(|(k, f)| (k.clone(), Some(f.sha256().to_owned()))).collect(),
        marked: marked(&["a.io", "b.io"]),
        environment: spec.environment.clone(),
        ..NodeFacts::default()
    };
    assert_eq!(plan_node(&spec, &facts), Vec::new());
}

#[test]
fn only_what_differs_is_planned() {
    let spec = spec();
    let facts = NodeFacts {
        registries: BTreeMap::from([
            ("a.io".to_owned(), Some(spec.registries["a.io"].sha256().to_owned())),
            ("b.io".to_owned(), Some("0000".to_owned())),
            ("old.io".to_owned(), None),
            ("..".to_owned(), None),
        ]),
        marked: marked(&["a.io", "b.io", "old.io", ".."]),
        environment: BTreeMap::from([
            ("HTTP_PROXY".to_owned(), "http://old:3128".to_owned()),
            ("NO_PROXY".to_owned(), ".svc".to_owned()),
        ]),
        ..NodeFacts::default()
    };
    let changes = plan_node(&spec, &facts);
    assert_eq!(
        changes,
        vec![
            Change::WriteFile {
                registry: "b.io",
                file: &spec.registries["b.io"],
                observed: Some("0000"),
                marked: true
            },
            Change::RemoveRegistry { registry: "old.io", refused: None, kept: vec![] },
            Change::SetEnv { name: "HTTP_PROXY", value: "http://p:3128", from: Some("http://old:3128") },
            Change::UnsetEnv { name: "NO_PROXY", from: ".svc" },
        ]
    );
    assert!(changes[2].needs_reboot() && !changes[0].needs_reboot());
}

#[test]
fn a_directory_winfleet_did_not_create_is_never_removed_and_a_desired_one_is_adopted() {
    // The registries directory is `/` by mistake: /bin, /etc, /home …
    // look like registries, and none holds winfleet's marker.
    let mut spec = spec();
    spec.registries_dir = "/".into();
    spec.environment.clear();
    let sum = spec.registries["a.io"].sha256().to_owned();
    let facts = NodeFacts {
        registries: BTreeMap::from([
            ("a.io".to_owned(), Some(sum.clone())),
            ("bin".to_owned(), None),
            ("etc".to_owned(), None),
            ("home".to_owned(), None),
        ]),
        ..NodeFacts::default()
    };
    let changes = plan_node(&spec, &facts);
    assert!(!changes.iter().any(|c| matches!(c, Change::RemoveRegistry { .. })), "{changes:?}");
    // a.io has the desired content but no marker: it is adopted.
    let adopt =
        Change::WriteFile { registry: "a.io", file: &spec.registries["a.io"], observed: Some(&sum), marked: false };
    assert!(changes.contains(&adopt), "{changes:?}");
    let Operation::WriteFile { diff, .. } = adopt.operation(&spec) else { unreachable!() };
    assert!(diff.contains("adopts it"), "{diff}");
}

#[test]
fn a_leaving_registry_keeps_what_winfleet_did_not_write_and_a_linked_directory_is_not_written() {
    let mut spec = spec();
    spec.environment.clear();
    let b = spec.registries["b.io"].sha256().to_owned();
    let facts = NodeFacts {
        registries: BTreeMap::from([
            ("a.io".to_owned(), None),
            ("b.io".to_owned(), Some(b)),
            ("gone.io".to_owned(), Some("00".to_owned())),
            ("elsewhere.io".to_owned(), None),
        ]),
        // a.io and elsewhere.io are links: a marker seen through one is
        // someone else's.
        marked: marked(&["a.io", "b.io", "gone.io", "elsewhere.io"]),
        links: marked(&["a.io", "elsewhere.io"]),
        unmanaged: BTreeMap::from([("gone.io".to_owned(), marked(&["client.key", "ca.crt"]))]),
        ..NodeFacts::default()
    };
    let changes = plan_node(&spec, &facts);
    assert_eq!(
        changes,
        vec![
            Change::LinkedRegistry { registry: "a.io" },
            Change::RemoveRegistry { registry: "gone.io", refused: None, kept: vec!["ca.crt", "client.key"] },
        ]
    );
    assert_eq!(
        changes[0].operation(&spec).headline(),
        "! /etc/containerd/certs.d/a.io (registry directory not written: it is a symbolic link; winfleet writes \
         only into a directory of its own)"
    );
    assert_eq!(
        changes[1].operation(&spec).headline(),
        "- /etc/containerd/certs.d/gone.io (winfleet's hosts.toml and marker removed; registry directory kept: \
         ca.crt, client.key are not winfleet's)"
    );
}

#[test]
fn the_mass_removal_guard_counts_registry_directories() {
    let mut spec = spec();
    spec.environment.clear();
    let gone = ["c.io", "d.io", "e.io"];
    let facts = NodeFacts {
        registries: spec
            .registries
            .iter()
            .map(|(k, f)| (k.clone(), Some(f.sha256().to_owned())))
            .chain(gone.iter().map(|g| ((*g).to_owned(), None)))
            .collect(),
        marked: marked(&["a.io", "b.io", "c.io", "d.io", "e.io"]),
        ..NodeFacts::default()
    };
    // 3 of 5 (60%) over a limit of 50%: every removal is held back.
    let changes = plan_node(&spec, &facts);
    assert_eq!(changes.len(), 3);
    for change in &changes {
        let Change::RemoveRegistry { refused: Some(reason), .. } = change else { panic!("{change:?}") };
        assert!(reason.contains("remove 3 of the node's 5 registry directories (60%)"), "{reason}");
    }
    spec.max_removal_percent = 60;
    assert!(plan_node(&spec, &facts).iter().all(|c| matches!(c, Change::RemoveRegistry { refused: None, .. })));
    // A leaving node loses them all: the instance guard applied already.
    spec.max_removal_percent = 0;
    spec.leaving = true;
    assert!(plan_node(&spec, &facts).iter().all(|c| matches!(c, Change::RemoveRegistry { refused: None, .. })));
    assert_eq!(registry_guard(2, 0, 0), None, "two directories are never a mass removal");
}

#[test]
fn windows_directory_names_ignore_case() {
    let mut spec = spec();
    spec.shell = Shell::Powershell;
    spec.environment.clear();
    let facts = NodeFacts {
        registries: BTreeMap::from([
            ("A.IO".to_owned(), Some(spec.registries["a.io"].sha256().to_owned())),
            ("b.io".to_owned(), Some(spec.registries["b.io"].sha256().to_owned())),
            ("bad\u{fffd}name".to_owned(), None),
        ]),
        marked: marked(&["A.IO", "b.io", "bad\u{fffd}name"]),
        ..NodeFacts::default()
    };
    assert_eq!(plan_node(&spec, &facts), Vec::new());
}
