//! The values of a posix script (`winfleet::dialect::posix_values`), read
//! back by the real `/bin/sh` (dash here, as on Debian and Ubuntu nodes):
//! every value arrives byte for byte, whatever it holds (blanks, glob
//! characters, quotes, trailing newlines, control characters), in the
//! order pushed, cut at a free control character or, when every one is
//! taken, at a separator line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Stdio};

use winfleet::dialect::posix_values::Values;

/// Runs the values' lines, then `n` and a NUL-ended print of `$val` once
/// per value, in `/bin/sh`; returns what it printed, split at NUL.
fn read_back(values: &[&str]) -> Vec<String> {
    let mut carried = Values::default();
    for value in values {
        carried.push(*value);
    }
    let mut script = String::from("main() {\n");
    script.push_str(&carried.render());
    for _ in values {
        script.push_str("n; printf '%s\\0' \"$val\"\n");
    }
    // The glob must be back on after the split: `*` here matches a file.
    script.push_str("set -- /bin/s*; [ \"$1\" != '/bin/s*' ] || printf 'globbing left off\\0'\n}\n(main) </dev/null\n");
    let mut shell = Command::new("/bin/sh")
        .arg("-s")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("/bin/sh");
    shell.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    let out = shell.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut got: Vec<String> = text.split('\0').map(str::to_owned).collect();
    assert_eq!(got.pop().as_deref(), Some(""), "every print ends with NUL");
    got
}

#[test]
fn every_value_arrives_byte_for_byte_in_order() {
    let values = [
        "/etc/containerd/certs.d/registry.example.com/hosts.toml",
        "",
        "  leading and trailing blanks  ",
        "* ? [a-z] ~ $HOME `uname` $(uname) \\ \\n ' \" ; & | < >",
        "/bin/s*",
        "*",
        "three trailing newlines\n\n\n",
        "\n\nleading newlines",
        "tab\tseparated\tline\nand another\t\n",
        "control \u{1} and \u{7f} and é ü",
        "",
        "server = \"https://mirror.example.com\"\n[host.\"https://m\"]\n  capabilities = [\"pull\"]\n",
    ];
    same(&read_back(&values), &values);
}

#[test]
fn values_holding_every_control_character_are_still_cut_right() {
    let every: String = (1u8..32).filter(|b| ![9, 10, 13].contains(b)).map(char::from).collect();
    let values = [every.as_str(), "--winfleet-value-0--", "", "last\n"];
    same(&read_back(&values), &values);
}

#[test]
fn a_long_value_and_many_values_arrive_whole() {
    let long = "0123456789abcdef\n".repeat(4096);
    let many: Vec<String> = (0..500).map(|i| format!("value {i}")).collect();
    let mut values: Vec<&str> = vec![long.as_str()];
    values.extend(many.iter().map(String::as_str));
    values.push(long.as_str());
    same(&read_back(&values), &values);
}

/// Each value as pushed, named by its place when one differs.
fn same(got: &[String], want: &[&str]) {
    for (i, (got, want)) in got.iter().zip(want).enumerate() {
        assert!(
            got == want,
            "value {i}: got {} bytes {:?}…, want {} bytes {:?}…",
            got.len(),
            got.chars().take(60).collect::<String>(),
            want.len(),
            want.chars().take(60).collect::<String>()
        );
    }
    assert_eq!(got.len(), want.len(), "values read back: {got:?}");
}
