//! Issue 35, item 8: no generated script can retry forever. Every
//! PowerShell script winfleet generates (the dialects' goldens, with the
//! trust store's and Containers' lines, network-conf.ps1, and the
//! Machines' user data, rendered here) is read with the PowerShell grammar
//! and each `while`/`do`/`for` loop must be bounded by a counter stepped
//! on every try and sleep on every try ([`support::powershell::unbounded_loops`]).
//! The posix scripts' loops must read a list (`while … read`, or a list
//! variable the body shortens) or be bounded and sleep likewise.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

#[test]
fn every_retry_loop_of_a_generated_powershell_script_is_bounded_and_sleeps() {
    let scripts = support::ps_scripts::all();
    for kind in ["network-conf.ps1", "trusted-ca", "containers", "user data", "powershell-apply.ps1"] {
        assert!(scripts.iter().any(|(p, _)| p.contains(kind)), "{kind} is among the scripts walked");
    }
    let mut failures = Vec::new();
    for (path, script) in &scripts {
        support::powershell::check(script).unwrap_or_else(|e| panic!("{path} does not parse: {e}"));
        for problem in support::powershell::unbounded_loops(script) {
            failures.push(format!("{path}: {problem}"));
        }
    }
    support::report(failures);
}

#[test]
fn the_powershell_loop_check_finds_a_loop_that_counts_only_failures() {
    let unbounded = "$attempt = 0\nwhile (($null -eq (Get-Service sshd)) -and ($attempt -lt 10)) {\n  try { Add-WindowsCapability -Online -Name x } catch { $attempt++; Start-Sleep -Seconds 5 }\n}\n";
    assert_eq!(support::powershell::unbounded_loops(unbounded).len(), 1);
    let no_sleep = "$n = 0\nwhile ($n -lt 3) {\n  $n++\n  if ($x) { Start-Sleep 1 }\n}\n";
    assert_eq!(support::powershell::unbounded_loops(no_sleep).len(), 1);
    let no_bound = "do {\n  Start-Sleep 1\n} until (Test-Path x)\n";
    assert_eq!(support::powershell::unbounded_loops(no_bound).len(), 1);
    let bounded = "$n = 0\nwhile ($n -lt 3) {\n  $n++\n  try { x } catch { }\n  Start-Sleep -Seconds 1\n}\nfor ($i = 0; $i -lt 3; $i++) { Start-Sleep 1 }\n";
    assert!(
        support::powershell::unbounded_loops(bounded).is_empty(),
        "{:?}",
        support::powershell::unbounded_loops(bounded)
    );
}

/// posix: the `while`/`until` loops of `script` that neither read a list
/// nor are bounded by a stepped counter and sleep.
fn posix_unbounded_loops(script: &str) -> Vec<String> {
    let lines: Vec<&str> = script.lines().collect();
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        if code.starts_with('#') {
            continue;
        }
        for start in loop_starts(code) {
            let head = &code[start..];
            let condition = head.split("; do").next().unwrap_or(head);
            if condition.contains(" read ") {
                continue;
            }
            let body = loop_body(&lines[n..]);
            if shortened_list(condition).is_some_and(|list| body.contains(&format!("{list}=${{{list}#"))) {
                continue;
            }
            let counter = ["-lt", "-le", "-gt", "-ge"].iter().filter(|op| condition.contains(*op)).find_map(|op| {
                condition.split(op).next().and_then(|l| l.rsplit("\"$").next()).map(|v| v.trim_end_matches(['"', ' ']))
            });
            let stepped = counter.is_some_and(|v| !v.is_empty() && body.contains(&format!("{v}=$(({v} + 1))")));
            let sleeps = body.split(['\n', ';']).any(|s| s.trim_start().starts_with("sleep "));
            if !(stepped && sleeps) {
                found.push(format!("line {}: {}", n + 1, line.trim()));
            }
        }
    }
    found
}

/// Where `while`/`until` loops start in a line of code (as commands).
fn loop_starts(code: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for kw in ["while ", "until "] {
        let mut from = 0;
        while let Some(i) = code[from..].find(kw).map(|i| i + from) {
            let before = code[..i].trim_end();
            if before.is_empty() || before.ends_with(';') || before.ends_with("then") || before.ends_with("do") {
                out.push(i);
            }
            from = i + kw.len();
        }
    }
    out
}

/// The text from a loop's line to its `done`, nested loops counted.
fn loop_body(lines: &[&str]) -> String {
    let (mut depth, mut opened, mut body) = (0i32, false, String::new());
    for line in lines {
        body.push_str(line);
        body.push('\n');
        for word in line.split(|c: char| c.is_whitespace() || c == ';') {
            if word == "do" {
                depth += 1;
                opened = true;
            } else if word == "done" || word.starts_with("done<") {
                depth -= 1;
            }
        }
        if opened && depth <= 0 {
            break;
        }
    }
    body
}

/// `X` of a condition `[ -n "$X" ]`.
fn shortened_list(condition: &str) -> Option<&str> {
    condition.split("[ -n \"$").nth(1)?.split('"').next()
}

#[test]
fn every_loop_of_a_generated_posix_script_reads_a_list_or_is_bounded_and_sleeps() {
    let mut all = Vec::new();
    support::ps_scripts::files(&support::fixture(""), &mut all);
    let scripts: Vec<_> = all.into_iter().filter(|(p, _)| p.ends_with(".sh")).collect();
    assert!(scripts.iter().any(|(p, _)| p.contains("trusted-ca")), "the trust scripts are walked");
    let mut failures = Vec::new();
    for (path, script) in &scripts {
        for problem in posix_unbounded_loops(script) {
            failures.push(format!("{path}: {problem}"));
        }
    }
    support::report(failures);
}

#[test]
fn the_posix_loop_check_finds_a_retry_without_a_bound_or_a_sleep() {
    assert_eq!(posix_unbounded_loops("while ! systemctl is-active x; do\n  sleep 1\ndone\n").len(), 1);
    assert_eq!(posix_unbounded_loops("n=0\nwhile [ \"$n\" -lt 5 ]; do\n  n=$((n + 1))\ndone\n").len(), 1);
    let bounded = "n=0\nwhile [ \"$n\" -lt 5 ] && ! true; do\n  n=$((n + 1)); sleep 1\ndone\n";
    assert!(posix_unbounded_loops(bounded).is_empty(), "{:?}", posix_unbounded_loops(bounded));
    assert!(posix_unbounded_loops("while IFS= read -r l; do :; done <f\n").is_empty());
    assert!(posix_unbounded_loops("while [ -n \"$inp\" ]; do\n  inp=${inp#*x}\ndone\n").is_empty());
}
