//! Issue 39, item 11: the demo installs only what is missing and never
//! upgrades what the host has. scripts/demo-packages.sh prints the packages
//! `apt-get install` gets, one a line; run here with this machine's real
//! dpkg, with the programs it looks for pointed at paths that do not exist.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;

fn packages(env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new("bash");
    cmd.arg(support::root().join("scripts/demo-packages.sh"));
    for (key, value) in env {
        cmd.env(key, value);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn installed(package: &str) -> Option<String> {
    let out = Command::new("dpkg-query").args(["-W", "-f=${Version}", package]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned()).filter(|v| !v.is_empty())
}

#[test]
fn a_missing_sshd_is_installed_at_the_version_of_the_hosts_openssh_client() {
    let client = installed("openssh-client").expect("this machine has openssh-client (ssh-keygen)");
    let (code, out, err) =
        packages(&[("WINFLEET_DEMO_SSHD", "/nonexistent/sshd"), ("WINFLEET_DEMO_SFTP_SERVER", "/nonexistent/sftp")]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, format!("openssh-server={client}\nopenssh-sftp-server={client}\n").as_str(), "")
    );
}

#[test]
fn nothing_missing_installs_nothing() {
    let (code, out, err) = packages(&[]);
    assert_eq!((code, out.as_str(), err.as_str()), (0, "", ""));
}
