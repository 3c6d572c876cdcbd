//! systemd reads every unit the posix dialect writes (issue 28, part 2):
//! `systemd-analyze verify` (Debian's systemd 252; no running systemd is
//! needed) on the service units and the environment drop-in that the
//! golden scripts of tests/fixtures/dialect send to a node, and on the
//! drop-in rendered for each render fixture's environment.
//!
//! How it checks without false failures: verify runs with `--root` in a
//! temporary tree holding a copy of the system's unit directory (so the
//! default dependencies, `sysinit.target` and the rest, resolve), the units
//! under `etc/systemd/system/`, and an empty executable at each
//! `ExecStart=` program (verify refuses a command that does not exist).
//! verify's exit code stays 0 for an unknown key or section, a value it
//! cannot parse and ignores, so any output at all is a failure.
//!
//! The environment drop-in is a manager drop-in (`system.conf.d`), which
//! verify does not read: its keys are checked here (only
//! `DefaultEnvironment=` in `[Manager]`), and each value goes through
//! systemd as the `Environment=` of a probe unit: both keys are read by the
//! same parser (`config_parse_environ`: quotes, backslash escapes, one
//! assignment per word); only a unit expands `%` specifiers, so the probe
//! doubles `%`.
//!
//! The values themselves are read back key by key by
//! tests/services_hostile.rs (tests/support/systemd_unit.rs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;

/// The files a posix script carries, decoded from its base64 literals
/// (several values in one literal are joined by a control character, or by
/// `--winfleet-value-N--`: `winfleet::dialect::posix_values`).
fn carried_files(script: &str) -> Vec<String> {
    let mut values = Vec::new();
    let is_b64 = |c: char| c.is_ascii_alphanumeric() || "+/=".contains(c);
    for token in script.split(|c: char| !is_b64(c)).filter(|t| t.len() >= 16) {
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(token) else { continue };
        let Ok(text) = String::from_utf8(bytes) else { continue };
        for part in text.split(|c: char| c.is_ascii_control() && !"\t\n\r".contains(c)) {
            values.extend(split_values(part));
        }
    }
    values
}

fn split_values(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("--winfleet-value-") {
        let after = &rest[start + "--winfleet-value-".len()..];
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 || !after[digits..].starts_with("--") {
            break;
        }
        out.push(rest[..start].to_owned());
        rest = &after[digits + 2..];
    }
    out.push(rest.to_owned());
    out
}

/// The golden posix scripts: (file, text).
fn golden_scripts() -> Vec<(String, String)> {
    let mut scripts = Vec::new();
    let mut dirs = vec![support::fixture("dialect")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().unwrap().to_string_lossy().starts_with("posix-") {
                let name = path.strip_prefix(support::root()).unwrap().display().to_string();
                scripts.push((name, fs::read_to_string(&path).unwrap()));
            }
        }
    }
    scripts.sort();
    scripts
}

fn is_service_unit(text: &str) -> bool {
    text.contains("[Service]\n") && text.contains("[Unit]\n")
}

fn is_drop_in(text: &str) -> bool {
    text.contains("[Manager]\n")
}

/// The unit's name: WMCO's description is "OpenShift managed <name>", and
/// other units name this one by `<name>.service`.
fn unit_name(unit: &str, index: usize) -> String {
    unit.lines()
        .find_map(|l| l.strip_prefix("Description=OpenShift managed "))
        .map_or_else(|| format!("winfleet-{index}"), str::to_owned)
}

/// A root for `systemd-analyze verify --root`, with the system's units.
struct VerifyRoot {
    dir: tempfile::TempDir,
}

impl VerifyRoot {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let system = ["/usr/lib/systemd/system", "/lib/systemd/system"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.join("sysinit.target").exists())
            .expect("the system's unit directory (systemd is installed)");
        let to = dir.path().join("usr/lib/systemd");
        fs::create_dir_all(&to).unwrap();
        let copied = Command::new("cp").arg("-a").arg(system).arg(&to).status().unwrap();
        assert!(copied.success(), "copying {}", system.display());
        fs::create_dir_all(dir.path().join("etc/systemd/system")).unwrap();
        Self { dir }
    }

    /// Writes `unit` as `<name>.service`, with an empty executable at its
    /// `ExecStart=` program.
    fn add(&self, name: &str, unit: &str) -> String {
        for line in unit.lines() {
            if let Some(program) = line.strip_prefix("ExecStart=").and_then(|c| c.split_whitespace().next()) {
                let program = program.trim_start_matches(['-', '@', ':', '+', '!']);
                assert!(program.starts_with('/'), "ExecStart is absolute: {line}");
                let path = self.dir.path().join(program.trim_start_matches('/'));
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(&path, "").unwrap();
                fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        let file = format!("{name}.service");
        fs::write(self.dir.path().join("etc/systemd/system").join(&file), unit).unwrap();
        file
    }

    /// `systemd-analyze verify`: Ok only with exit code 0 and no output.
    fn verify(&self, units: &[String]) -> Result<(), String> {
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg("--man=no")
            .arg(format!("--root={}", self.dir.path().display()))
            .args(units)
            .output()
            .unwrap();
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if out.status.success() && said.trim().is_empty() {
            Ok(())
        } else {
            Err(format!("systemd-analyze verify {units:?} ({}):\n{said}", out.status))
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().to_owned()
    }
}

/// Problems with a manager drop-in: keys other than `DefaultEnvironment=`
/// in `[Manager]`, and values systemd does not read as environment
/// assignments (through a probe unit's `Environment=`).
fn check_drop_in(root: &VerifyRoot, origin: &str, drop_in: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut section = String::new();
    let mut values = Vec::new();
    for line in drop_in.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
        } else if let (Some(value), "Manager") = (line.strip_prefix("DefaultEnvironment="), section.as_str()) {
            values.push(value.to_owned());
        } else {
            problems.push(format!("{origin}: the drop-in has a line systemd would not read as intended: {line:?}"));
        }
    }
    if values.is_empty() {
        problems.push(format!("{origin}: the drop-in sets no DefaultEnvironment=:\n{drop_in}"));
    }
    let mut probe = String::from("[Unit]\nDescription=winfleet environment probe\n\n[Service]\nType=oneshot\n");
    // A unit's Environment= also expands specifiers, which the manager's
    // DefaultEnvironment= does not (system.conf is parsed without a unit):
    // `%` is doubled in the probe so that only the shared syntax is tested.
    for value in &values {
        probe.push_str(&format!("Environment={}\n", value.replace('%', "%%")));
    }
    probe.push_str("ExecStart=/usr/bin/true\n");
    let unit = root.add("winfleet-environment-probe", &probe);
    if let Err(e) = root.verify(&[unit]) {
        problems.push(format!("{origin}: {e}\nthe drop-in:\n{drop_in}"));
    }
    problems
}

fn systemd_analyze_or_say_why(test: &str) -> bool {
    let found = Command::new("systemd-analyze").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        support::containerd::cannot_run(test, "systemd-analyze is not installed (Debian: apt-get install systemd)");
    }
    found
}

#[ignore = "needs systemd-analyze: scripts/test.sh runs it"]
#[test]
fn systemd_reads_every_unit_and_drop_in_of_the_golden_posix_scripts() {
    if !systemd_analyze_or_say_why("systemd_reads_every_unit_and_drop_in_of_the_golden_posix_scripts") {
        return;
    }
    let mut problems = Vec::new();
    let (mut units_seen, mut drop_ins_seen) = (0, 0);
    for (origin, script) in golden_scripts() {
        let root = VerifyRoot::new();
        let mut units = Vec::new();
        for (i, file) in carried_files(&script).iter().enumerate() {
            if is_service_unit(file) {
                units.push(root.add(&unit_name(file, i), file));
            } else if is_drop_in(file) {
                drop_ins_seen += 1;
                problems.extend(check_drop_in(&root, &origin, file));
            }
        }
        units_seen += units.len();
        if !units.is_empty()
            && let Err(e) = root.verify(&units)
        {
            problems.push(format!("{origin}: {e}"));
        }
    }
    assert!(units_seen >= 2, "the golden scripts carry service units ({units_seen} found)");
    assert!(drop_ins_seen >= 1, "the golden scripts carry an environment drop-in ({drop_ins_seen} found)");
    support::report(problems);
}

#[ignore = "needs systemd-analyze: scripts/test.sh runs it"]
#[test]
fn systemd_reads_the_drop_in_of_every_render_fixtures_environment_and_of_awkward_values() {
    if !systemd_analyze_or_say_why(
        "systemd_reads_the_drop_in_of_every_render_fixtures_environment_and_of_awkward_values",
    ) {
        return;
    }
    let mut environments: Vec<(String, BTreeMap<String, String>)> = Vec::new();
    for case in support::cases("render") {
        for (path, bytes) in support::tree(&case.join("expected")) {
            if path.ends_with("/environment") {
                let text = String::from_utf8(bytes).unwrap();
                let variables: BTreeMap<String, String> =
                    text.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
                if !variables.is_empty() {
                    environments.push((format!("{}/{path}", case.display()), variables));
                }
            }
        }
    }
    assert!(!environments.is_empty(), "a render fixture has proxy variables");
    // Values a proxy setting may hold that systemd's syntax gives meaning
    // to: quotes, backslashes, specifiers, variables, spaces.
    let awkward = [
        ("HTTP_PROXY", r#"http://us"er:p%40ss$word@proxy:3128"#),
        ("HTTPS_PROXY", r"http://dom\user:a b@proxy:3129"),
        ("NO_PROXY", ".svc,%h,${HOME},'quoted',localhost"),
    ];
    environments
        .push(("awkward values".into(), awkward.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()));
    let mut problems = Vec::new();
    for (origin, variables) in &environments {
        let root = VerifyRoot::new();
        let drop_in = winfleet::vocab::systemd::render_drop_in(variables, Some("boot-1"));
        problems.extend(check_drop_in(&root, origin, &drop_in));
    }
    support::report(problems);
}

#[ignore = "needs systemd-analyze: scripts/test.sh runs it"]
#[test]
fn the_check_reports_what_systemd_would_ignore() {
    if !systemd_analyze_or_say_why("the_check_reports_what_systemd_would_ignore") {
        return;
    }
    let root = VerifyRoot::new();
    let good = root.add("good", "[Unit]\nDescription=g\n\n[Service]\nExecStart=/opt/x/good --flag\n");
    assert_eq!(root.verify(std::slice::from_ref(&good)), Ok(()), "{}", root.path().display());
    for (name, unit) in [
        ("unknown-key", "[Unit]\nDescription=u\n\n[Service]\nExecStart=/opt/x/u\nExecStartPost2=/x\n"),
        ("unknown-section", "[Unit]\nDescription=s\n\n[Service]\nExecStart=/opt/x/s\n\n[Evil]\nA=1\n"),
        ("bad-value", "[Unit]\nDescription=v\n\n[Service]\nExecStart=/opt/x/v\nRestart=sometimes\n"),
        ("bad-quoting", "[Unit]\nDescription=q\n\n[Service]\nExecStart=/opt/x/q \"open\n"),
    ] {
        let file = root.add(name, unit);
        assert!(root.verify(&[file]).is_err(), "{name} must be reported");
    }
    let problems = check_drop_in(&root, "bad drop-in", "[Manager]\nDefaultEnvironment=\"A=1\nDefaultLimitNOFILE=1\n");
    assert_eq!(problems.len(), 2, "an unbalanced quote and a foreign key are both reported: {problems:?}");
}
