//! Issue 39, item 9: each error is said once, in winfleet's words, with its
//! cause: no library's own log line, no cause repeated by its wrapper.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

/// A loopback port nothing listens on (bound, then released).
fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn validate_of_a_missing_repository_names_the_path_once() {
    let (code, _, err) = support::winfleet(&["validate", "--repo", "/nonexistent"]);
    assert_eq!(
        (code, err.as_str()),
        (1, "winfleet: cannot read /nonexistent: No such file or directory (os error 2)\n")
    );
}

#[test]
fn payload_digest_of_a_missing_directory_says_the_cause_once() {
    let (code, _, err) = support::winfleet(&["payload", "digest", "/nonexistent"]);
    assert_eq!((code, err.as_str()), (1, "winfleet: payload /nonexistent: No such file or directory (os error 2)\n"));
}

#[test]
fn import_from_a_dead_api_server_says_once_that_nothing_answered() {
    let dir = tempfile::tempdir().unwrap();
    let port = dead_port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://127.0.0.1:{port}\"}}\n\
             users:\n- name: u\n  user: {{token: abc}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\n\
             current-context: x\n"
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_winfleet"))
        .args(["import", "--output"])
        .arg(dir.path().join("repo"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        (out.status.code(), err.as_ref()),
        (
            Some(1),
            format!(
                "winfleet: listing WMCO's ConfigMaps: no answer from the API server https://127.0.0.1:{port}: Connection refused (os error 111)\n"
            )
            .as_str()
        )
    );
}
