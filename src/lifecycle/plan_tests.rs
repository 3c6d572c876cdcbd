//! Tests of the lifecycle plan.

use std::path::PathBuf;

use super::*;
use crate::lifecycle::NodeFile;
use crate::lifecycle::containers::FeatureState;
use crate::lifecycle::facts::{FileFact, ServiceFact};
use crate::lifecycle::material::{ClusterMaterial, render};
use crate::lifecycle::tests_support::posix_spec;

fn spec() -> LifecycleSpec {
    let mut spec = posix_spec();
    spec.files = vec![
        NodeFile {
            path: "payload/kube-node/kubelet".into(),
            rel: "kube-node/kubelet".into(),
            sha256: "11".repeat(32),
            size: 3,
            mode: 0o755,
            source: PathBuf::new(),
        },
        NodeFile {
            path: "payload/hon".into(),
            rel: "hon".into(),
            sha256: "22".repeat(32),
            size: 3,
            mode: 0o755,
            source: PathBuf::new(),
        },
    ];
    let material = ClusterMaterial {
        api_server_url: "http://127.0.0.1:1".into(),
        bootstrap_token: "t".into(),
        bootstrap_ca: "ca".into(),
        kubelet_ca: "kca".into(),
        cluster_dns: "172.30.0.10".into(),
        network: Err("no operator.openshift.io Network".into()),
        trusted_ca: Default::default(),
        platform: Default::default(),
        rendered_worker: None,
        node_manager_token: None,
        exporter_tls: Err("no Secret".into()),
    };
    let generated = render(&spec, &material);
    spec.with_generated(generated)
}

fn fresh() -> LifecycleFacts {
    let mut facts = LifecycleFacts { home: Some("/home/n".into()), ..LifecycleFacts::default() };
    facts.variables.insert(("kubelet".into(), "NODE_IP".into()), Ok("127.0.0.7".into()));
    facts
}

/// The facts of a node that got everything `changes` says.
fn after(spec: &LifecycleSpec, facts: &LifecycleFacts, changes: &[LifecycleChange<'_>]) -> LifecycleFacts {
    let mut facts = facts.clone();
    for change in changes {
        match change {
            LifecycleChange::CreateDir { path } => {
                facts.dirs.insert((*path).to_owned());
            }
            LifecycleChange::Upload { file, .. } => {
                facts.files.insert(
                    file.path.clone(),
                    FileFact::Present { key: "k".into(), sha256: Some(file.sha256.clone()) },
                );
            }
            LifecycleChange::WriteGenerated { file, .. } => {
                let sha = Some(file.file.sha256().to_owned());
                facts.files.insert(file.path.clone(), FileFact::Present { key: "k".into(), sha256: sha });
            }
            LifecycleChange::Define { service, definition, .. } => {
                let state = facts.services.get(&service.name).map_or(ServiceState::Stopped, |s| s.state.clone());
                let state = if state == ServiceState::Absent { ServiceState::Stopped } else { state };
                facts
                    .services
                    .insert(service.name.clone(), ServiceFact { state, definition: Some(definition.clone()) });
            }
            LifecycleChange::Stop { service } => {
                if let Some(s) = facts.services.get_mut(&service.name) {
                    s.state = ServiceState::Stopped;
                }
            }
            LifecycleChange::Start { service, .. } => {
                if let Some(s) = facts.services.get_mut(&service.name) {
                    s.state = ServiceState::Running;
                }
            }
            LifecycleChange::RemoveService { name } => {
                facts.services.remove(*name);
            }
            LifecycleChange::RemoveFile { path } => {
                facts.files.remove(*path);
            }
            LifecycleChange::RemoveDir { path } => {
                facts.dirs.remove(*path);
            }
            LifecycleChange::RemoveCerts { .. } => {}
            LifecycleChange::RemoveLeftover { path, .. } => {
                facts.leftovers.remove(*path);
            }
            LifecycleChange::ForgetRecord => facts.record = None,
            LifecycleChange::EnableContainers => facts.containers = Some(FeatureState::EnablePending),
        }
    }
    let _ = spec;
    facts
}

/// The facts of a host after three rounds of `spec` in `ctx` from fresh: everything applied.
fn converged(spec: &LifecycleSpec, ctx: Context<'_>) -> LifecycleFacts {
    let mut facts = fresh();
    for _ in 0..3 {
        let plan = plan_lifecycle(spec, &facts, ctx);
        facts = after(spec, &facts, &plan.changes);
    }
    facts
}

fn names(changes: &[LifecycleChange<'_>]) -> Vec<String> {
    changes
        .iter()
        .map(|c| match c {
            LifecycleChange::Stop { service } => format!("stop {}", service.name),
            LifecycleChange::CreateDir { path } => format!("mkdir {path}"),
            LifecycleChange::Upload { file, .. } => format!("upload {}", file.path),
            LifecycleChange::WriteGenerated { file, .. } => format!("write {}", file.path),
            LifecycleChange::Define { service, created, .. } => {
                format!("{} {}", if *created { "create" } else { "update" }, service.name)
            }
            LifecycleChange::Start { service, .. } => format!("start {}", service.name),
            LifecycleChange::RemoveService { name } => format!("remove service {name}"),
            LifecycleChange::RemoveFile { path } => format!("remove {path}"),
            LifecycleChange::RemoveCerts { dir } => format!("remove certificates in {dir}"),
            LifecycleChange::RemoveDir { path } => format!("rmdir {path}"),
            LifecycleChange::RemoveLeftover { path, .. } => format!("remove leftover {path}"),
            LifecycleChange::ForgetRecord => "forget the record".to_owned(),
            LifecycleChange::EnableContainers => "enable Containers".to_owned(),
        })
        .collect()
}

const JOIN: Context<'static> = Context { mode: Mode::Join, node: None, disrupt: false };

#[test]
fn deconfigure_removes_exactly_the_record_then_forgets_it_and_is_then_done() {
    let spec = spec();
    let facts = LifecycleFacts {
        record: Some(crate::lifecycle::record::parse(
            "dir payload\ndir payload/kube-node\nfile aa payload/kube-node/kubelet\nfile bb units/kubelet.service\n\
             service kubelet\nstate payload/kubeconfig\ncerts payload/pki\n",
        )),
        ..LifecycleFacts::default()
    };
    let deconfigure = Context { mode: Mode::Deconfigure, node: None, disrupt: true };
    let plan = plan_lifecycle(&spec, &facts, deconfigure);
    assert_eq!(
        names(&plan.changes),
        [
            "remove service kubelet",
            "remove payload/kube-node/kubelet",
            "remove payload/kubeconfig",
            "remove certificates in payload/pki",
            "rmdir payload/kube-node",
            "rmdir payload",
            "forget the record",
        ],
        "the unit file goes with its service; innermost directories first"
    );
    let done = after(&spec, &facts, &plan.changes);
    assert!(plan_lifecycle(&spec, &done, deconfigure).changes.is_empty(), "nothing without a record");
}

#[test]
fn a_fresh_host_gets_everything_and_starts_its_bootstrap_services() {
    let spec = spec();
    let facts = fresh();
    let plan = plan_lifecycle(&spec, &facts, JOIN);
    let names = names(&plan.changes);
    assert_eq!(&names[..3], ["mkdir payload", "mkdir units", "mkdir certs.d"], "{names:?}");
    assert!(names.contains(&"upload payload/kube-node/kubelet".to_owned()));
    assert!(names.contains(&"write payload/kubelet.conf".to_owned()));
    assert_eq!(&names[names.len() - 2..], ["create kubelet", "start kubelet"]);
    assert!(plan.waiting.iter().any(|w| w.contains("hybrid-overlay-node waits for its Node")), "{:?}", plan.waiting);
}

#[test]
fn once_the_node_exists_the_rest_starts_and_then_nothing_is_left() {
    let spec = spec();
    let start = fresh();
    let first = plan_lifecycle(&spec, &start, JOIN);
    let facts = after(&spec, &start, &first.changes);
    let node = serde_json::json!({"metadata": {"name": "win-1"}});
    let ctx = Context { mode: Mode::Join, node: Some(&node), disrupt: false };
    let second = plan_lifecycle(&spec, &facts, ctx);
    assert_eq!(names(&second.changes), ["create hybrid-overlay-node", "start hybrid-overlay-node"]);
    let facts = after(&spec, &facts, &second.changes);
    let third = plan_lifecycle(&spec, &facts, Context { mode: Mode::Maintain, ..ctx });
    assert_eq!(third.changes, Vec::new(), "{:?}", names(&third.changes));
    assert!(third.waiting.is_empty(), "{:?}", third.waiting);
}

#[test]
fn a_corrupted_binary_is_replaced_with_its_service_and_dependents_restarted() {
    let spec = spec();
    let node = serde_json::json!({"metadata": {"name": "win-1"}});
    let maintain = Context { mode: Mode::Maintain, node: Some(&node), disrupt: true };
    let mut facts = converged(&spec, maintain);
    facts.files.insert(
        "payload/kube-node/kubelet".into(),
        FileFact::Present { key: "k2".into(), sha256: Some("ee".repeat(32)) },
    );
    let plan = plan_lifecycle(&spec, &facts, maintain);
    assert_eq!(
        names(&plan.changes),
        [
            "stop hybrid-overlay-node",
            "stop kubelet",
            "upload payload/kube-node/kubelet",
            "start kubelet",
            "start hybrid-overlay-node"
        ]
    );
}

#[test]
fn a_running_service_is_not_restarted_before_the_cordon() {
    let spec = spec();
    let node = serde_json::json!({"metadata": {"name": "win-1"}});
    let maintain = Context { mode: Mode::Maintain, node: Some(&node), disrupt: true };
    let mut facts = converged(&spec, maintain);
    facts.files.insert(
        "payload/kube-node/kubelet".into(),
        FileFact::Present { key: "k2".into(), sha256: Some("ee".repeat(32)) },
    );
    let plan = plan_lifecycle(&spec, &facts, Context { mode: Mode::Join, node: Some(&node), disrupt: false });
    assert_eq!(plan.changes, Vec::new(), "{:?}", names(&plan.changes));
    assert!(plan.waiting.iter().any(|w| w.contains("kubelet runs and would restart")), "{:?}", plan.waiting);
}

#[test]
fn ssh_only_mode_prepares_files_and_definitions_and_starts_nothing() {
    let spec = spec();
    let facts = fresh();
    let plan = plan_lifecycle(&spec, &facts, Context { mode: Mode::Prepare, node: None, disrupt: false });
    let names = names(&plan.changes);
    assert!(names.contains(&"create kubelet".to_owned()));
    assert!(!names.iter().any(|n| n.starts_with("start") || n.starts_with("write")), "{names:?}");
}

#[test]
fn an_older_winfleet_version_waits_for_the_upgrade() {
    let spec = spec();
    let facts = fresh();
    let plan = plan_lifecycle(&spec, &facts, Context { mode: Mode::UpgradePending, node: None, disrupt: false });
    assert!(plan.changes.is_empty());
    assert_eq!(plan.waiting.len(), 1);
}

#[test]
fn an_unresolved_variable_holds_only_its_service() {
    let spec = spec();
    let mut facts = fresh();
    facts.variables.insert(("kubelet".into(), "NODE_IP".into()), Err("no route".into()));
    let plan = plan_lifecycle(&spec, &facts, JOIN);
    assert!(!names(&plan.changes).iter().any(|n| n.contains("kubelet") && !n.contains('/')));
    assert!(plan.waiting.iter().any(|w| w.contains("NODE_IP failed on the node: no route")), "{:?}", plan.waiting);
}

/// Issue 23: what a crash left goes in the next round, except a staging
/// directory this round's uploads go through (they are in it when the
/// apply script runs); that one goes in the round after.
#[test]
fn a_crashs_leftovers_go_except_a_staging_directory_an_upload_uses_this_round() {
    use crate::lifecycle::facts::Leftover;

    let spec = spec();
    let node = serde_json::json!({"metadata": {"name": "win-1"}});
    let maintain = Context { mode: Mode::Maintain, node: Some(&node), disrupt: true };
    let mut facts = converged(&spec, maintain);
    facts.files.insert("payload/hon".into(), FileFact::Present { key: "k2".into(), sha256: Some("ee".repeat(32)) });
    facts.leftovers.insert("payload/.winfleet-staging".into(), Leftover::Staging);
    facts.leftovers.insert("payload/kube-node/.winfleet-staging".into(), Leftover::Staging);
    facts.leftovers.insert("payload/.kubelet.conf.winfleet-tmp".into(), Leftover::Temporary);
    let plan = plan_lifecycle(&spec, &facts, maintain);
    assert_eq!(
        names(&plan.changes),
        [
            "stop hybrid-overlay-node",
            "remove leftover payload/.kubelet.conf.winfleet-tmp",
            "remove leftover payload/kube-node/.winfleet-staging",
            "upload payload/hon",
            "start hybrid-overlay-node"
        ]
    );
    let first = plan.changes.iter().find(|c| matches!(c, LifecycleChange::RemoveLeftover { .. }));
    assert_eq!(
        first.map(|c| c.operation().headline()),
        Some("- payload/.kubelet.conf.winfleet-tmp (temporary file left by an interrupted write)".to_owned())
    );
    let facts = after(&spec, &facts, &plan.changes);
    assert_eq!(
        names(&plan_lifecycle(&spec, &facts, maintain).changes),
        ["remove leftover payload/.winfleet-staging"],
        "the next round"
    );
}

#[test]
fn deconfigure_removes_a_crashs_leftovers_before_the_directories_holding_them() {
    use crate::lifecycle::facts::Leftover;

    let spec = spec();
    let mut facts = LifecycleFacts {
        record: Some(crate::lifecycle::record::parse("dir payload\ndir payload/kube-node\n")),
        ..LifecycleFacts::default()
    };
    facts.leftovers.insert("payload/kube-node/.winfleet-staging".into(), Leftover::Staging);
    let plan = plan_lifecycle(&spec, &facts, Context { mode: Mode::Deconfigure, node: None, disrupt: true });
    assert_eq!(
        names(&plan.changes),
        [
            "remove leftover payload/kube-node/.winfleet-staging",
            "rmdir payload/kube-node",
            "rmdir payload",
            "forget the record"
        ]
    );
}

#[test]
fn a_host_without_the_containers_feature_gets_it_and_a_reboot_before_anything_else() {
    let spec = spec();
    let mut facts = fresh();
    facts.containers = Some(FeatureState::Disabled("Disabled".into()));
    let plan = plan_lifecycle(&spec, &facts, JOIN);
    assert_eq!(names(&plan.changes), ["enable Containers"]);
    assert!(plan.reboot && plan.waiting[0].contains("not enabled (Disabled): it is enabled"), "{plan:?}");
    // Enabled, the reboot still owed: nothing else is done yet.
    let pending = after(&spec, &facts, &plan.changes);
    let plan = plan_lifecycle(&spec, &pending, JOIN);
    assert!(plan.changes.is_empty() && plan.reboot && plan.waiting[0].contains("next boot"), "{plan:?}");
    // After the reboot the configuration goes on.
    let mut back = pending.clone();
    back.containers = Some(FeatureState::Enabled);
    let plan = plan_lifecycle(&spec, &back, JOIN);
    assert!(!plan.reboot && plan.changes.len() > 3, "{plan:?}");
    // A node already joined is not asked (WMCO checks at configure only).
    let maintain = Context { mode: Mode::Maintain, node: None, disrupt: false };
    assert!(!plan_lifecycle(&spec, &facts, maintain).reboot);
}

/// The spec with a windows_exporter naming its web config, and the
/// exporter's certificate `cert`.
fn exporter_spec(cert: &str) -> LifecycleSpec {
    use crate::lifecycle::exporter_tls::{ExporterTls, render};
    let mut spec = spec();
    let mut exporter = spec.services[1].clone();
    exporter.name = "windows_exporter".into();
    exporter.command = "payload/hon --web.config.file=payload/tls/windows-exporter-webconfig.yaml".into();
    exporter.node_variables.clear();
    exporter.dependencies.clear();
    spec.services.push(exporter);
    let tls = ExporterTls { cert: cert.into(), key: format!("key of {cert}") };
    let mut generated = spec.generated.clone();
    generated.extend(render(&spec, Some(&tls)));
    spec.with_generated(generated)
}

#[test]
fn a_rotated_exporter_certificate_is_rewritten_and_restarts_only_windows_exporter() {
    let spec = exporter_spec("CERT-1");
    let node = serde_json::json!({"metadata": {"name": "win-1"}});
    let maintain = Context { mode: Mode::Maintain, node: Some(&node), disrupt: true };
    let facts = converged(&spec, maintain);
    assert!(plan_lifecycle(&spec, &facts, maintain).changes.is_empty());
    let rotated = exporter_spec("CERT-2");
    let plan = plan_lifecycle(&rotated, &facts, maintain);
    assert_eq!(
        names(&plan.changes),
        [
            "stop windows_exporter",
            "write payload/tls/certs/tls.crt",
            "write payload/tls/certs/tls.key",
            "start windows_exporter"
        ]
    );
    let why = plan.changes.iter().find_map(|c| match c {
        LifecycleChange::Start { why, .. } => Some(why.as_str()),
        _ => None,
    });
    assert_eq!(why, Some("restart: payload/tls/certs/tls.crt, payload/tls/certs/tls.key changed"));
    let before_cordon = Context { mode: Mode::Join, node: Some(&node), disrupt: false };
    let held = plan_lifecycle(&rotated, &facts, before_cordon);
    assert_eq!(held.changes, Vec::new(), "the certificate waits with its service: {:?}", names(&held.changes));
}
