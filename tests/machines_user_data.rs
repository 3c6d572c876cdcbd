//! The `windows-user-data` Secret's script (issue 26, point 1): a golden
//! file, read by a real PowerShell grammar, carrying the fleet's public key
//! only, base64-encoded, and readable by the test cloud (the Machine
//! provider reads the key out of it as cloud-init would).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use winfleet::render::user_data::{Platform, render};

const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

fn inner(tagged: &str) -> &str {
    tagged
        .strip_prefix("<powershell>\n")
        .and_then(|s| s.strip_suffix("</powershell>\n<persist>true</persist>\n"))
        .unwrap()
}

#[test]
fn the_user_data_matches_its_golden_file_and_parses_as_powershell() {
    let mut failures = Vec::new();
    for (platform, name) in [(Platform::None, "tagged"), (Platform::Gcp, "gcp"), (Platform::Aws, "aws")] {
        let text = render(KEY, platform).unwrap();
        let path = support::fixture(&format!("machines/windows-user-data-{name}.txt"));
        if let Err(e) = support::check_golden(&path, &text) {
            failures.push(e);
        }
        let script = if platform == Platform::Gcp { text.as_str() } else { inner(&text) };
        match support::powershell::check(script) {
            Ok(checked) => {
                if !checked.carries(KEY) {
                    failures.push(format!("{name}: the key is not in a base64 literal"));
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    support::report(failures);
}

#[test]
fn the_script_turns_password_authentication_off_and_holds_no_private_key() {
    let script = render(KEY, Platform::None).unwrap();
    assert!(script.contains("'PasswordAuthentication no'"));
    assert!(script.contains("'PubkeyAuthentication yes'"));
    assert!(!script.contains("PRIVATE KEY"));
}

#[test]
fn the_test_cloud_reads_the_authorized_key_out_of_the_script() {
    let script = render(&format!("{KEY} comment"), Platform::None).unwrap();
    assert_eq!(support::machine_provider::authorized_key(&script).as_deref(), Some(KEY));
    assert_eq!(support::machine_provider::authorized_key("<powershell>\nStart-Service sshd\n</powershell>"), None);
}
