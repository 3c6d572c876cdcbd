//! Issue 23, defect 3: a services manifest's values never write the
//! structure of what they reach. Every field of the manifest is given
//! hostile strings (newlines, `%`, `$`, quotes, `[`, `]`, NUL, RTL marks, a
//! trailing backslash); what the loader accepts is planned for a posix and
//! a Windows node, every generated systemd unit is read back key by key
//! (tests/support/systemd_unit.rs) and every PowerShell script is parsed
//! with the tree-sitter-powershell grammar (tests/support/powershell.rs),
//! readable form and wrapper alike. The renderers are also given hostile
//! values directly, past validation: their escaping holds on its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use support::{powershell, systemd_unit};
use winfleet::desired::{LoadOptions, load};
use winfleet::dialect::{self, ObserveList};
use winfleet::lifecycle::change::LifecycleChange;
use winfleet::lifecycle::facts::LifecycleFacts;
use winfleet::lifecycle::manifest::{NodeJsonPath, NodeVariable, PreScript, ServiceDef, ServicesManifest};
use winfleet::lifecycle::plan::{Context, plan_lifecycle};
use winfleet::lifecycle::{LifecycleDirs, LifecycleSpec, Mode, resolve};
use winfleet::node::NodeSpec;
use winfleet::node::facts::NodeFacts;
use winfleet::source::{Snapshot, SourceFile};
use winfleet::vocab::Shell;

/// Strings that would change a unit's, a script's or a record's structure
/// if they were spliced in as they are.
const HOSTILE: &[&str] = &[
    "kubelet\nExecStartPost=/bin/sh -c id",
    "x\r\n[Service]\nExecStartPre=/bin/evil",
    "x\n[Install]\nWantedBy=evil.target",
    "50% %n %h %%",
    "$HOME ${PATH} $$",
    "it's \"quoted\" `x` $(id) ';' & | > <",
    "[Service]",
    "a]b[c*?",
    "nul\0ExecStartPost=/bin/evil",
    "rtl\u{202e}exe.txt",
    "\u{200f}mark\u{2066}",
    "tail\\",
    "tails\\\\\\",
    "; comment",
    "# comment",
    "x\u{b}y\u{c}z\u{85}w\u{2028}v",
    "é ünï 中文",
    "'); Remove-Item C:\\ -Recurse #",
    "\"+$(Stop-Computer)+\"",
    "",
    "   ",
];

const FLEET: &str = "apiVersion: winfleet.io/v1alpha1
kind: Fleet
metadata:
  name: test
spec:
  defaults:
    username: core
    shell: posix
  payload:
    digest: sha256:abababababababababababababababababababababababababababababababab
  services:
    posixDir: units
";

/// The manifest every case starts from: a bootstrap service, and a second
/// one with every field in use.
fn base() -> Value {
    json!([
        { "name": "containerd", "path": "payload/containerd --config payload/c.toml", "bootstrap": true, "priority": 0 },
        {
            "name": "hybrid-overlay-node",
            "path": "payload/hon --node NODE_NAME --ip NODE_IP",
            "nodeVariablesInCommand": [{ "name": "NODE_NAME", "nodeObjectJsonPath": "{.metadata.name}" }],
            "powershellPreScripts": [
                { "variableName": "NODE_IP", "path": "hostname -I", "NodeArgs": null },
                { "path": "payload/net-conf --node NODE_ARG", "NodeArgs": [{ "name": "NODE_ARG", "nodeObjectJsonPath": "{.metadata.name}" }] }
            ],
            "dependencies": ["containerd"],
            "bootstrap": false,
            "priority": 1
        }
    ])
}

/// Every string field of the second service, as a JSON pointer.
const FIELDS: [&str; 9] = [
    "/1/name",
    "/1/path",
    "/1/nodeVariablesInCommand/0/name",
    "/1/nodeVariablesInCommand/0/nodeObjectJsonPath",
    "/1/powershellPreScripts/0/variableName",
    "/1/powershellPreScripts/0/path",
    "/1/powershellPreScripts/1/NodeArgs/0/name",
    "/1/powershellPreScripts/1/NodeArgs/0/nodeObjectJsonPath",
    "/1/dependencies/0",
];

/// A repository whose services manifest is `services`; the ConfigMap is
/// written as JSON (valid YAML), so every string travels escaped.
fn repository(services: &Value) -> Snapshot {
    let configmap = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": "windows-services-1.0.0", "namespace": "openshift-windows-machine-config-operator" },
        "data": { "files": "[]", "services": services.to_string() },
    });
    let file = |path: &str, text: String| SourceFile { path: path.into(), bytes: text.into_bytes() };
    Snapshot {
        revision: None,
        files: vec![file("fleet.yaml", FLEET.into()), file("services.yaml", configmap.to_string())],
        links: Vec::new(),
    }
}

/// The manifest with `value` in `field` (alone, and after a plain value).
fn cases() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for field in FIELDS {
        let plain = base().pointer(field).and_then(Value::as_str).unwrap().to_owned();
        for hostile in HOSTILE {
            for value in [hostile.to_string(), format!("{plain}{hostile}")] {
                let mut services = base();
                *services.pointer_mut(field).unwrap() = Value::String(value.clone());
                out.push((format!("{field} = {value:?}"), services));
            }
        }
    }
    out
}

/// The Node the plan sees, and facts with every pre-script variable given.
fn node() -> Value {
    json!({ "metadata": { "name": "win-1" } })
}

fn facts(manifest: &ServicesManifest, home: &str) -> NodeFacts {
    let mut lifecycle = LifecycleFacts { home: Some(home.into()), ..LifecycleFacts::default() };
    for service in &manifest.services {
        for variable in service.pre_scripts.iter().filter_map(|p| p.variable.as_ref()) {
            lifecycle.variables.insert((service.name.clone(), variable.clone()), Ok("10.0.0.5".into()));
        }
    }
    NodeFacts { lifecycle, ..NodeFacts::default() }
}

/// What a manifest makes for a node of `shell`: the node spec, its facts
/// and its plan's changes, rendered to the scripts a round sends.
struct Rendered {
    units: Vec<String>,
    readable: Vec<(&'static str, String)>,
    wrapped: Vec<(&'static str, String)>,
    posix: Vec<(&'static str, String)>,
}

fn render(manifest: &ServicesManifest, shell: Shell, home: &str) -> Rendered {
    let dirs = LifecycleDirs { posix_payload: "payload", posix_units: "/etc/systemd/system", registries: "certs.d" };
    let lifecycle = Arc::new(LifecycleSpec::new(shell, "sha256:cd", manifest, dirs));
    let mut spec = NodeSpec::empty(shell);
    spec.lifecycle = Some(Arc::clone(&lifecycle));
    let facts = facts(manifest, home);
    let node = node();
    let plan =
        plan_lifecycle(&lifecycle, &facts.lifecycle, Context { mode: Mode::Join, node: Some(&node), disrupt: true });
    let units = plan
        .changes
        .iter()
        .filter_map(|c| match c {
            LifecycleChange::Define { unit: Some(unit), .. } => Some(unit.clone()),
            _ => None,
        })
        .collect();
    let indexed: Vec<(usize, &LifecycleChange<'_>)> = plan.changes.iter().enumerate().collect();
    let rest: Vec<(usize, &LifecycleChange<'_>)> =
        indexed.iter().filter(|(_, c)| !c.is_preparation()).copied().collect();
    let variables = lifecycle
        .services
        .iter()
        .flat_map(|s| {
            s.pre_scripts.iter().filter_map(|p| {
                let script = resolve::pre_script(p, Some(&node)).ok()?;
                Some((s.name.clone(), p.variable.clone()?, script))
            })
        })
        .collect();
    let list = ObserveList { files: vec![], variables, record: true, containers: true };
    let mut out = Rendered { units, readable: vec![], wrapped: vec![], posix: vec![] };
    let scripts = [
        ("observe", Some(dialect::observe(&spec, Some(&list)))),
        ("prepare", dialect::prepare(&spec, &indexed)),
        ("apply", Some(dialect::apply(&spec, &facts, &[], &rest))),
    ];
    for (kind, script) in scripts {
        let Some(script) = script else { continue };
        match shell {
            Shell::Powershell => out.wrapped.push((kind, script.input)),
            Shell::Posix => out.posix.push((kind, script.input)),
        }
    }
    if shell == Shell::Powershell {
        use winfleet::dialect::powershell as ps;
        out.readable.push(("observe", ps::observe_script(&spec, Some(&list))));
        if let Some(s) = ps::prepare_script(&indexed) {
            out.readable.push(("prepare", s));
        }
        out.readable.push(("apply", ps::apply_script(&spec, &[], &rest)));
    }
    out
}

/// The keys a unit has, whatever the values: `Requires=`/`After=` only
/// with dependencies.
fn expected_shape(with_dependencies: bool) -> Vec<(String, String)> {
    let mut keys = vec![("Unit", "Description")];
    if with_dependencies {
        keys.extend([("Unit", "Requires"), ("Unit", "After")]);
    }
    keys.extend([
        ("Service", "WorkingDirectory"),
        ("Service", "ExecStart"),
        ("Service", "Restart"),
        ("Service", "RestartSec"),
        ("Install", "WantedBy"),
    ]);
    keys.into_iter().map(|(s, k)| (s.to_owned(), k.to_owned())).collect()
}

/// Problems with what `manifest` renders to (empty: sound).
fn check_rendered(manifest: &ServicesManifest, home: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let posix = render(manifest, Shell::Posix, home);
    for unit in &posix.units {
        let with_deps = unit.contains("\nRequires=");
        match systemd_unit::shape(unit) {
            Ok(shape) if shape == expected_shape(with_deps) => {}
            Ok(shape) => problems.push(format!("a unit's keys are {shape:?}:\n{unit}")),
            Err(e) => problems.push(format!("a unit does not read back: {e}:\n{unit}")),
        }
        if let Err(e) = systemd_unit::read(unit) {
            problems.push(format!("a unit's value would be expanded by systemd: {e}"));
        }
    }
    for (kind, script) in &posix.posix {
        if let Err(e) = sh_syntax(script) {
            problems.push(format!("the posix {kind} script: {e}"));
        }
    }
    let windows = render(manifest, Shell::Powershell, home);
    for (kind, script) in &windows.readable {
        if let Err(e) = powershell::check(script) {
            problems.push(format!("the PowerShell {kind} script: {e}"));
        }
    }
    for (kind, input) in &windows.wrapped {
        if let Err(e) = powershell::check_wrapped(input) {
            problems.push(format!("the PowerShell {kind} script as sent: {e}"));
        }
    }
    problems
}

/// `sh -n`: the posix script parses (it is run for real elsewhere).
fn sh_syntax(script: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = std::process::Command::new("sh")
        .arg("-n")
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
}

fn has_unseen(value: &str) -> bool {
    value.chars().any(|c| {
        c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    })
}

#[test]
fn a_dependency_with_a_newline_adds_no_key_to_the_unit_issue_23() {
    let mut services = base();
    services[1]["dependencies"] = json!(["containerd\nExecStartPost=/bin/sh -c id"]);
    let loaded = load(&repository(&services), LoadOptions::default());
    let Some(desired) = loaded.desired else {
        return; // refused: nothing reaches a node
    };
    let manifest = desired.services.unwrap();
    let units = render(&manifest, Shell::Posix, "/home/core").units;
    assert!(!units.is_empty());
    for unit in units {
        let shape = systemd_unit::shape(&unit).unwrap();
        assert!(!shape.iter().any(|(_, k)| k == "ExecStartPost"), "a dependency wrote a key:\n{unit}");
    }
}

#[test]
fn hostile_values_in_any_manifest_field_are_refused_or_reach_nodes_inert() {
    let mut problems = Vec::new();
    let mut accepted = 0;
    for (case, services) in cases() {
        let loaded = load(&repository(&services), LoadOptions::default());
        let value = case.split_once(" = ").map(|(_, v)| v).unwrap_or_default();
        for d in &loaded.diagnostics {
            let text = d.to_string();
            if text.contains("\\u{") || text.chars().any(char::is_control) {
                problems.push(format!("{case}: a diagnostic shows a Rust escape or a control character: {text}"));
            }
        }
        let Some(desired) = loaded.desired else { continue };
        accepted += 1;
        let manifest = desired.services.unwrap();
        let service = &manifest.services.iter().find(|s| s.priority == 1).unwrap();
        let held: Vec<&str> = std::iter::once(service.name.as_str())
            .chain([service.command.as_str()])
            .chain(service.dependencies.iter().map(String::as_str))
            .chain(service.node_variables.iter().flat_map(|v| [v.name.as_str(), v.path.as_str()]))
            .chain(service.pre_scripts.iter().flat_map(|p| {
                p.variable
                    .iter()
                    .map(String::as_str)
                    .chain([p.path.as_str()])
                    .chain(p.node_args.iter().map(|a| a.name.as_str()))
            }))
            .collect();
        if let Some(bad) = held.iter().find(|v| has_unseen(v)) {
            problems.push(format!("{case}: accepted a value with an invisible character: {bad:?} ({value})"));
        }
        for p in check_rendered(&manifest, "/home/core") {
            problems.push(format!("{case}: {p}"));
        }
    }
    assert!(accepted > 20, "the harness must reach the renderers: only {accepted} cases were accepted");
    problems.truncate(20);
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n\n"));
}

/// Seeded: several fields at once, each a random mix of hostile fragments
/// and random characters (`FUZZ_SEED` and `FUZZ_CASES` as in
/// tests/fuzz_loader.rs).
#[test]
fn seeded_hostile_manifests_are_refused_or_reach_nodes_inert() {
    let seed = std::env::var("FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261124);
    let cases = std::env::var("FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(150);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut problems = Vec::new();
    for case in 0..cases {
        let mut services = base();
        let mut changed = Vec::new();
        for field in FIELDS {
            if rng.u8(0..3) != 0 {
                continue;
            }
            let mut value = base().pointer(field).and_then(Value::as_str).unwrap().to_owned();
            for _ in 0..rng.usize(1..4) {
                match rng.u8(0..3) {
                    0 => value.push_str(HOSTILE[rng.usize(0..HOSTILE.len())]),
                    1 => {
                        let at = rng.usize(0..=value.chars().count());
                        let at = value.char_indices().map(|(i, _)| i).chain([value.len()]).nth(at).unwrap();
                        value.insert(at, rng.char('\u{0}'..='\u{3000}'));
                    }
                    _ => value
                        .push(rng.choice(['%', '$', '"', '\'', '[', ']', '\\', '\n', '\0', '\u{202e}', '`']).unwrap()),
                }
            }
            *services.pointer_mut(field).unwrap() = Value::String(value.clone());
            changed.push(format!("{field} = {value:?}"));
        }
        let loaded = load(&repository(&services), LoadOptions::default());
        let Some(desired) = loaded.desired else { continue };
        for p in check_rendered(&desired.services.unwrap(), "/home/core") {
            problems.push(format!("case {case} (seed {seed}) {changed:?}: {p}"));
        }
    }
    problems.truncate(10);
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// A manifest built in memory, past validation, with `value` everywhere a
/// service holds a string.
fn unchecked(value: &str) -> ServicesManifest {
    let path = NodeJsonPath::parse("{.metadata.name}").unwrap();
    let service = |name: &str, priority: u32, deps: Vec<String>| ServiceDef {
        name: name.into(),
        command: format!("payload/x {value} VAR"),
        node_variables: vec![NodeVariable { name: "VAR".into(), path: path.clone() }],
        pre_scripts: vec![
            PreScript { variable: None, path: format!("echo {value}"), node_args: vec![] },
            PreScript { variable: Some(format!("V{value}")), path: format!("echo {value}"), node_args: vec![] },
        ],
        dependencies: deps,
        bootstrap: false,
        priority,
    };
    ServicesManifest {
        name: "windows-services-x".into(),
        origin: "services.yaml".into(),
        services: vec![service("base", 0, vec![]), service(&format!("svc{value}"), 1, vec![format!("base{value}")])],
        digest: "ab".repeat(32),
        canonical: String::new(),
        services_at: Default::default(),
    }
}

#[test]
fn renderers_keep_hostile_values_inert_without_validation() {
    let mut problems = Vec::new();
    for value in HOSTILE {
        for home in ["/home/core", &format!("/home/{value}")] {
            for p in check_rendered(&unchecked(value), home) {
                problems.push(format!("{value:?} (home {home:?}): {p}"));
            }
        }
    }
    problems.truncate(20);
    assert!(problems.is_empty(), "{} problem(s):\n{}", problems.len(), problems.join("\n\n"));
}

#[test]
fn units_read_back_to_the_values_they_were_given() {
    let mut manifest = unchecked("");
    manifest.services[1].name = "svc50%".into();
    manifest.services[1].command = "payload/x 50% $HOME ${PATH} tail\\ VAR".into();
    manifest.services[1].dependencies = vec!["base".into()];
    let units = render(&manifest, Shell::Posix, "/home/c%re").units;
    let unit = units.iter().find(|u| u.contains("svc")).expect("the service gets a unit");
    let entries = systemd_unit::read(unit).unwrap();
    let get = |key: &str| entries.iter().find(|(_, k, _)| k == key).map(|(_, _, v)| v.as_str()).unwrap();
    assert_eq!(get("ExecStart"), "/home/c%re/payload/x 50% $HOME ${PATH} tail\\ win-1");
    assert_eq!(get("WorkingDirectory"), "/home/c%re");
    assert_eq!(get("Description"), "OpenShift managed svc50%");
    assert_eq!(get("Requires"), "base.service");
}

#[test]
fn the_unit_reader_follows_systemds_line_rules() {
    let text = "# c\n[Unit]\nDescription=a \\\n; skipped\nb\nX=1\\\\\n[Service]\r\nExecStart=/x %%h $$HOME\0Y=2\n";
    let entries = systemd_unit::read(text).unwrap();
    let keys: Vec<&str> = entries.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(keys, ["Description", "X", "ExecStart", "Y"]);
    assert_eq!(entries[0].2, "a  b");
    assert_eq!(entries[1].2, "1\\\\");
    assert_eq!(entries[2].2, "/x %h $HOME");
    assert!(systemd_unit::read("[Unit]\nDescription=%n\n").is_err());
    assert!(systemd_unit::read("[Service]\nExecStart=$HOME\n").is_err());
    assert!(systemd_unit::parse("[Unit]\nDescription=x\\").is_err());
}

#[test]
fn the_powershell_reader_finds_what_it_must() {
    assert!(powershell::check("Write-Host 'a' + \"b").is_err(), "an unclosed string");
    assert!(powershell::check("Set-WfFile 0 QUJDRA==").is_err(), "base64 as a bare word");
    assert!(powershell::check("QUJDRA== 'x'").is_err(), "base64 in command position");
    let checked = powershell::check("Set-WfFile 0 (ConvertFrom-WfBase64 'QUJDRA==')").unwrap();
    assert_eq!(checked.decoded, ["ABCD"]);
    let wrapped = winfleet::dialect::powershell::wrap("Write-Host (ConvertFrom-WfBase64 'QUJDRA==')");
    assert_eq!(powershell::check_wrapped(&wrapped).unwrap().decoded, ["ABCD"]);
}
