//! Golden scripts of the node lifecycle: what each dialect sends to a node
//! to observe, prepare and apply a configure, byte for byte. The PowerShell
//! scripts cannot run here (no Windows host); they are pinned by these
//! files, parsed with the PowerShell grammar (tests/support/powershell.rs:
//! no syntax error, every base64 value inside a string literal, as written
//! and as sent) and reviewed by hand: every repository and cluster value
//! must reach the node only inside a base64 literal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use winfleet::dialect::{self, ObserveList, powershell};
use winfleet::lifecycle::change::LifecycleChange;
use winfleet::lifecycle::containers::FeatureState;
use winfleet::lifecycle::facts::Leftover;
use winfleet::lifecycle::facts::{Definition, FileFact, LifecycleFacts, ServiceFact};
use winfleet::lifecycle::manifest::{NodeJsonPath, NodeVariable, PreScript, ServiceDef, ServicesManifest};
use winfleet::lifecycle::material::{ClusterMaterial, render};
use winfleet::lifecycle::plan::{Context, plan_lifecycle};
use winfleet::lifecycle::{LifecycleDirs, LifecycleSpec, Mode, NodeFile};
use winfleet::node::NodeSpec;
use winfleet::node::facts::NodeFacts;
use winfleet::vocab::Shell;
use winfleet::vocab::report::ServiceState;

const TOKEN: &str = "TOKEN-SENTINEL";

fn manifest(shell: Shell) -> ServicesManifest {
    let (containerd, kubelet, exclusion) = match shell {
        Shell::Powershell => (
            r"C:\k\containerd\containerd.exe --config C:\k\containerd\containerd_conf.toml --run-service",
            r"C:\k\kubelet.exe --config=C:\k\kubelet.conf --node-ip=NODE_IP --hostname-override=NODE_NAME",
            r"C:\Temp\windows-defender-exclusion.ps1 -BinPath C:\k\containerd\containerd.exe",
        ),
        Shell::Posix => (
            "payload/containerd/containerd --config payload/containerd/containerd_conf.toml",
            "payload/kube-node/kubelet --config=payload/kubelet.conf --node-ip=NODE_IP --hostname-override=NODE_NAME",
            "echo 'quoted $(not run)' >/dev/null",
        ),
    };
    let ip_script = match shell {
        Shell::Powershell => {
            "(Get-NetRoute -DestinationPrefix '0.0.0.0/0' | Get-NetIpAddress -AddressFamily IPv4 -ifIndex {$_.ifIndex}[0]).IPAddress"
        }
        Shell::Posix => "ip -4 route get 1 | sed -n 's/.* src \\([^ ]*\\).*/\\1/p'",
    };
    ServicesManifest {
        name: "windows-services-golden".into(),
        origin: "services.yaml".into(),
        services: vec![
            ServiceDef {
                name: "containerd".into(),
                command: containerd.into(),
                node_variables: vec![],
                pre_scripts: vec![PreScript { variable: None, path: exclusion.into(), node_args: vec![] }],
                dependencies: vec![],
                bootstrap: true,
                priority: 0,
            },
            ServiceDef {
                name: "kubelet".into(),
                command: kubelet.into(),
                node_variables: vec![NodeVariable {
                    name: "NODE_NAME".into(),
                    path: NodeJsonPath::parse("{.metadata.name}").unwrap(),
                }],
                pre_scripts: vec![PreScript {
                    variable: Some("NODE_IP".into()),
                    path: ip_script.into(),
                    node_args: vec![],
                }],
                dependencies: vec!["containerd".into()],
                bootstrap: false,
                priority: 1,
            },
        ],
        digest: "ab".repeat(32),
        canonical: String::new(),
        services_at: Default::default(),
    }
}

fn spec(shell: Shell) -> NodeSpec {
    let dirs = LifecycleDirs { posix_payload: "payload", posix_units: "/etc/systemd/system", registries: "certs.d" };
    let mut lifecycle = LifecycleSpec::new(shell, &format!("sha256:{}", "cd".repeat(32)), &manifest(shell), dirs);
    let file = |rel: &str, path: &str, sha: char| NodeFile {
        path: path.into(),
        rel: rel.into(),
        sha256: sha.to_string().repeat(64),
        size: 1024,
        mode: 0o755,
        source: PathBuf::from("/unused"),
    };
    lifecycle.files = match shell {
        Shell::Powershell => vec![
            file("containerd/containerd.exe", r"C:\k\containerd\containerd.exe", 'a'),
            file("kube-node/kubelet.exe", r"C:\k\kubelet.exe", 'b'),
            file("powershell/windows-defender-exclusion.ps1", r"C:\Temp\windows-defender-exclusion.ps1", 'c'),
        ],
        Shell::Posix => vec![
            file("containerd/containerd", "payload/containerd/containerd", 'a'),
            file("kube-node/kubelet", "payload/kube-node/kubelet", 'b'),
        ],
    };
    let material = ClusterMaterial {
        api_server_url: "https://api-int.example.corp:6443".into(),
        bootstrap_token: TOKEN.into(),
        bootstrap_ca: "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n".into(),
        kubelet_ca: "-----BEGIN CERTIFICATE-----\nKCA\n-----END CERTIFICATE-----\n".into(),
        cluster_dns: "172.30.0.10".into(),
        network: Err("no operator.openshift.io Network".into()),
        trusted_ca: Default::default(),
        platform: Default::default(),
        rendered_worker: None,
        node_manager_token: None,
        exporter_tls: Err("no Secret".into()),
    };
    let generated = render(&lifecycle, &material);
    lifecycle = lifecycle.with_generated(generated);
    let mut spec = NodeSpec::empty(shell);
    spec.registries_dir = "certs.d".into();
    spec.lifecycle = Some(Arc::new(lifecycle));
    spec
}

/// containerd runs with an old definition; everything else is missing.
fn facts(shell: Shell) -> NodeFacts {
    let mut lifecycle = LifecycleFacts { home: Some("/home/node".into()), ..LifecycleFacts::default() };
    let old = match shell {
        Shell::Powershell => Definition::Windows {
            image_path: r"C:\k\containerd\containerd.exe --old".into(),
            description: "OpenShift managed containerd".into(),
            dependencies: vec![],
            start: "2".into(),
        },
        Shell::Posix => Definition::Unit { sha256: "0".repeat(64) },
    };
    lifecycle.services.insert("containerd".into(), ServiceFact { state: ServiceState::Running, definition: Some(old) });
    lifecycle.variables.insert(("kubelet".into(), "NODE_IP".into()), Ok("10.0.0.5".into()));
    lifecycle.files.insert("ignored".into(), FileFact::Absent);
    // What a crash left: a staging directory no upload of the round goes
    // through, and a write's temporary file.
    let (staging, temporary) = match shell {
        Shell::Powershell => (r"C:\k\cni\.winfleet-staging", r"C:\k\.kubelet.conf.winfleet-tmp"),
        Shell::Posix => ("payload/.winfleet-staging", "/etc/systemd/system/.kubelet.service.winfleet-tmp"),
    };
    lifecycle.leftovers.insert(staging.into(), Leftover::Staging);
    lifecycle.leftovers.insert(temporary.into(), Leftover::Temporary);
    NodeFacts { lifecycle, ..NodeFacts::default() }
}

fn scripts(shell: Shell) -> Vec<(&'static str, String)> {
    let spec = spec(shell);
    let facts = facts(shell);
    let lifecycle = spec.lifecycle.as_deref().unwrap();
    let node = serde_json::json!({ "metadata": { "name": "win-1" } });
    let plan =
        plan_lifecycle(lifecycle, &facts.lifecycle, Context { mode: Mode::Join, node: Some(&node), disrupt: true });
    let kinds: Vec<&str> = plan
        .changes
        .iter()
        .map(|c| match c {
            LifecycleChange::Stop { .. } => "stop",
            LifecycleChange::CreateDir { .. } => "mkdir",
            LifecycleChange::Upload { .. } => "upload",
            LifecycleChange::WriteGenerated { .. } => "generated",
            LifecycleChange::Define { .. } => "define",
            LifecycleChange::Start { .. } => "start",
            LifecycleChange::RemoveLeftover { .. } => "leftover",
            _ => "remove",
        })
        .collect();
    for kind in ["stop", "mkdir", "upload", "generated", "define", "start", "leftover"] {
        assert!(kinds.contains(&kind), "the golden plan covers {kind}: {kinds:?}");
    }
    let indexed: Vec<(usize, &LifecycleChange<'_>)> = plan.changes.iter().enumerate().collect();
    let rest: Vec<(usize, &LifecycleChange<'_>)> =
        indexed.iter().filter(|(_, c)| !c.is_preparation()).copied().collect();
    let list = ObserveList {
        files: lifecycle.files.iter().map(|f| (f.path.clone(), "1024:1:2:3".to_owned())).collect(),
        variables: vec![("kubelet".into(), "NODE_IP".into(), "hostname -I".into())],
        record: true,
        containers: true,
    };
    match shell {
        Shell::Powershell => vec![
            ("observe", powershell::observe_script(&spec, Some(&list))),
            ("prepare", powershell::prepare_script(&indexed).unwrap()),
            ("apply", powershell::apply_script(&spec, &[], &rest)),
        ],
        Shell::Posix => vec![
            ("observe", dialect::observe(&spec, Some(&list)).input),
            ("prepare", dialect::prepare(&spec, &indexed).unwrap().input),
            ("apply", dialect::apply(&spec, &facts, &[], &rest).input),
        ],
    }
}

/// An upgrade: a service and a file an older version installed go.
fn upgrade_script(shell: Shell) -> String {
    let spec = spec(shell);
    let mut facts = facts(shell);
    let (old_file, old_service) = match shell {
        Shell::Powershell => (r"C:\k\old-tool.exe", "old-exporter"),
        Shell::Posix => ("payload/old-tool", "old-exporter"),
    };
    facts.lifecycle.record = Some(winfleet::lifecycle::record::parse(&format!(
        "service {old_service}\nfile {} {old_file}\n",
        "0".repeat(64)
    )));
    let lifecycle = spec.lifecycle.as_deref().unwrap();
    let node = serde_json::json!({ "metadata": { "name": "win-1" } });
    let plan =
        plan_lifecycle(lifecycle, &facts.lifecycle, Context { mode: Mode::Upgrade, node: Some(&node), disrupt: true });
    assert!(plan.changes.iter().any(|c| matches!(c, LifecycleChange::RemoveService { name } if *name == old_service)));
    assert!(plan.changes.iter().any(|c| matches!(c, LifecycleChange::RemoveFile { path } if *path == old_file)));
    let indexed: Vec<(usize, &LifecycleChange<'_>)> =
        plan.changes.iter().enumerate().filter(|(_, c)| !c.is_preparation()).collect();
    match shell {
        Shell::Powershell => powershell::apply_script(&spec, &[], &indexed),
        Shell::Posix => dialect::apply(&spec, &facts, &[], &indexed).input,
    }
}

/// A host without the Containers feature: it is enabled, and nothing else
/// is done before the reboot.
fn containers_script(shell: Shell) -> String {
    let spec = spec(shell);
    let mut facts = facts(shell);
    facts.lifecycle.containers = Some(FeatureState::Disabled("Disabled".into()));
    let lifecycle = spec.lifecycle.as_deref().unwrap();
    let plan = plan_lifecycle(lifecycle, &facts.lifecycle, Context { mode: Mode::Join, node: None, disrupt: false });
    assert_eq!(plan.changes, [LifecycleChange::EnableContainers]);
    let indexed: Vec<(usize, &LifecycleChange<'_>)> = plan.changes.iter().enumerate().collect();
    match shell {
        Shell::Powershell => powershell::apply_script(&spec, &[], &indexed),
        Shell::Posix => dialect::apply(&spec, &facts, &[], &indexed).input,
    }
}

/// A deconfigure: the record's services, files, kubelet credentials and
/// directories go, the registry entry and the proxy variable too, then the
/// record.
fn deconfigure_script(shell: Shell) -> String {
    let mut spec = spec(shell);
    spec.registries.clear();
    spec.environment.clear();
    spec.leaving = true;
    if shell == Shell::Posix {
        spec.environment_dir = Some("/etc/systemd/system.conf.d".into());
    }
    let lifecycle = Arc::new(spec.lifecycle.as_deref().unwrap().for_deconfigure());
    spec.lifecycle = Some(Arc::clone(&lifecycle));
    let mut facts = facts(shell);
    facts.registries.insert("quay.io".into(), Some("1".repeat(64)));
    facts.environment.insert("HTTP_PROXY".into(), "http://proxy.corp:3128".into());
    let record = match shell {
        Shell::Powershell => format!(
            "dir C:\\k\ndir C:\\k\\cni\nfile {0} C:\\k\\kubelet.exe\nservice kubelet\nstate C:\\k\\kubeconfig\n\
             certs c:\\var\\lib\\kubelet\\pki\n",
            "0".repeat(64)
        ),
        Shell::Posix => format!(
            "dir payload\nfile {0} payload/kube-node/kubelet\nfile {0} /etc/systemd/system/kubelet.service\n\
             service kubelet\nstate payload/kubeconfig\n",
            "0".repeat(64)
        ),
    };
    facts.lifecycle.record = Some(winfleet::lifecycle::record::parse(&record));
    let changes = winfleet::node::plan::plan_node(&spec, &facts);
    assert!(!changes.is_empty(), "the registry and the variable go");
    let plan =
        plan_lifecycle(&lifecycle, &facts.lifecycle, Context { mode: Mode::Deconfigure, node: None, disrupt: true });
    let base = changes.len();
    let indexed: Vec<(usize, &LifecycleChange<'_>)> =
        plan.changes.iter().enumerate().map(|(i, c)| (base + i, c)).collect();
    match shell {
        Shell::Powershell => powershell::apply_script(&spec, &changes, &indexed),
        Shell::Posix => dialect::apply(&spec, &facts, &changes, &indexed).input,
    }
}

#[test]
fn lifecycle_scripts_match_their_golden_files() {
    let mut failures = Vec::new();
    for (shell, name, ext) in [(Shell::Powershell, "powershell", "ps1"), (Shell::Posix, "posix", "sh")] {
        let mut texts =
            vec![("upgrade-apply", upgrade_script(shell)), ("deconfigure-apply", deconfigure_script(shell))];
        texts.push(("containers-apply", containers_script(shell)));
        texts.extend(scripts(shell));
        for (kind, text) in texts {
            let path = support::fixture(&format!("dialect/lifecycle/{name}-{kind}.{ext}"));
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
fn no_repository_or_cluster_value_appears_in_clear() {
    for shell in [Shell::Powershell, Shell::Posix] {
        for (kind, text) in scripts(shell) {
            for value in [
                TOKEN,
                "api-int.example.corp",
                "kubelet.conf",
                "NODE_IP",
                "win-1",
                "10.0.0.5",
                "containerd.exe",
                "Get-NetRoute",
                "not run",
                "hostname -I",
                "OpenShift managed",
            ] {
                assert!(!text.contains(value), "{value} appears in clear in the {shell:?} {kind} script");
            }
        }
    }
}

/// A Windows host WMCO configured (no install record) leaves: its manifest's
/// services that are there and its payload files go, and only directories
/// inside C:\k; C:\Temp and C:\var\log are never removed (decision 10).
#[test]
fn a_host_without_a_record_loses_only_what_its_manifest_and_payload_name() {
    let spec = spec(Shell::Powershell);
    let lifecycle = spec.lifecycle.as_deref().unwrap().for_deconfigure();
    let mut facts = facts(Shell::Powershell).lifecycle;
    facts.dirs = lifecycle.directories.iter().cloned().collect();
    for file in &lifecycle.files {
        facts.files.insert(file.path.clone(), FileFact::Present { key: "k".into(), sha256: None });
    }
    let plan = plan_lifecycle(&lifecycle, &facts, Context { mode: Mode::Deconfigure, node: None, disrupt: true });
    let removed: Vec<String> = plan.changes.iter().map(|c| c.operation().headline()).collect();
    assert!(removed.contains(&"- service containerd (installed for the node)".to_owned()), "{removed:#?}");
    assert!(!removed.iter().any(|r| r.contains("service kubelet")), "only services that are there: {removed:#?}");
    assert!(removed.contains(&r"- C:\k\kubelet.exe (installed for the node)".to_owned()), "{removed:#?}");
    assert!(removed.contains(&r"- C:\k/ (created for the node; kept if not empty)".to_owned()), "{removed:#?}");
    for shared in [r"C:\Temp", r"C:\var\log", r"C:\var"] {
        let dir = format!("- {shared}/ ");
        assert!(!removed.iter().any(|r| r.starts_with(&dir)), "{shared} stays: {removed:#?}");
    }
    assert!(!removed.iter().any(|r| r.contains("install record")), "there is none to forget");
}
