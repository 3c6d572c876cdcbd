//! Git over https through libgit2 and its OpenSSL (built from source,
//! openssl-src, since issue 39): `winfleet status --repo-url` fetches the
//! status branch from a real smart-HTTP server (`git http-backend` behind
//! rustls, tests/support/https_git.rs) only when the server's certificate
//! chains to a CA that OpenSSL trusts and names the host. The CA is given
//! the way an operator would, through `SSL_CERT_FILE`; without it OpenSSL
//! trusts the system's bundle, which git2's start-up finds (openssl-probe)
//! because a vendored OpenSSL's own directory (/usr/local/ssl) holds none.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::https_git::{HttpsGit, TestCa};
use winfleet::desired::DEFAULT_STATUS_PATH;
use winfleet::status::{Status, to_files};

/// A repository `fleet` under `root` whose `winfleet/status` branch holds
/// an empty fleet's status; returns that commit.
fn fleet_repository(root: &Path) -> String {
    let work = root.join("fleet");
    let repo = git2::Repository::init(&work).unwrap();
    for (rel, bytes) in to_files(&Status::default()) {
        let path = work.join(DEFAULT_STATUS_PATH).join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let mut index = repo.index().unwrap();
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None).unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::new("winfleet", "winfleet@test.invalid", &git2::Time::new(1_700_000_000, 0)).unwrap();
    repo.commit(Some("refs/heads/winfleet/status"), &sig, &sig, "status", &tree, &[]).unwrap().to_string()
}

/// `winfleet status --repo-url URL --output json`, with `SSL_CERT_FILE` set
/// to `ca` or, for None, unset (OpenSSL then trusts the system's bundle).
fn status_over_https(url: &str, ca: Option<&Path>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_winfleet"));
    cmd.args(["status", "--repo-url", url, "--output", "json"]);
    cmd.env_remove("SSL_CERT_FILE").env_remove("SSL_CERT_DIR");
    if let Some(ca) = ca {
        cmd.env("SSL_CERT_FILE", ca);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A server for `san` signed by a fresh CA, the CA's PEM file, and the
/// commit of the status branch it serves.
struct Served {
    _dir: tempfile::TempDir,
    server: HttpsGit,
    ca: PathBuf,
    commit: String,
}

fn serve(san: &str) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repos");
    let commit = fleet_repository(&root);
    let ca = TestCa::new("winfleet git-https test CA");
    let server = HttpsGit::start(&root, ca.server(san));
    let ca = ca.write_pem(&dir.path().join("ca.pem"));
    Served { _dir: dir, server, ca, commit }
}

#[test]
fn https_fetches_from_a_server_whose_certificate_chains_to_the_trusted_ca() {
    let served = serve("127.0.0.1");
    let (code, out, err) = status_over_https(&served.server.url("fleet"), Some(&served.ca));
    assert_ne!(code, 1, "{out}{err}");
    let json: serde_json::Value = serde_json::from_str(&out).expect(&err);
    assert_eq!(json["source"]["commit"], served.commit.as_str(), "{out}");
    assert!(served.server.requests() >= 2, "ref advertisement and pack: {}", served.server.requests());
}

#[test]
fn https_refuses_a_server_whose_ca_is_not_trusted() {
    let served = serve("127.0.0.1");
    let url = served.server.url("fleet");
    let other = TestCa::new("another CA").write_pem(&served._dir.path().join("other-ca.pem"));
    // Another CA's file, then the system's bundle alone.
    for ca in [Some(other.as_path()), None] {
        let (code, out, err) = status_over_https(&url, ca);
        assert_eq!((code, out.as_str()), (1, ""), "trusting {ca:?}: {err}");
        assert!(err.contains("cannot fetch winfleet/status"), "{err}");
        assert!(err.to_lowercase().contains("certificate"), "trusting {ca:?}: {err}");
    }
    assert_eq!(served.server.requests(), 0, "nothing is asked of an untrusted server");
}

#[test]
fn https_refuses_a_trusted_certificate_issued_for_another_host() {
    // The server is reached as localhost; its certificate names only
    // git.example.invalid.
    let served = serve("git.example.invalid");
    let url = served.server.url("fleet").replace("://127.0.0.1:", "://localhost:");
    let (code, out, err) = status_over_https(&url, Some(&served.ca));
    assert_eq!((code, out.as_str()), (1, ""), "{err}");
    assert!(err.contains("hostname does not match certificate"), "{err}");
    assert_eq!(served.server.requests(), 0);
}

/// The vendored OpenSSL looks for CAs under its own build-time directory
/// (/usr/local/ssl), which no system fills; git2's start-up (openssl-probe)
/// sets `SSL_CERT_FILE` to the system's bundle when the environment does
/// not. Seen in a child process of this test binary (the same git2 build as
/// winfleet's) started without the variables; the child prints what git2's
/// first use left in its environment.
#[test]
fn git2s_start_up_points_openssl_at_the_systems_ca_bundle() {
    const CHILD: &str = "WINFLEET_TEST_CA_PROBE_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let dir = tempfile::tempdir().unwrap();
        git2::Repository::init(dir.path()).unwrap();
        let file = std::env::var("SSL_CERT_FILE").unwrap_or_default();
        println!("\nSSL_CERT_FILE={file}");
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "git2s_start_up_points_openssl_at_the_systems_ca_bundle", "--nocapture", "--test-threads=1"])
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .env(CHILD, "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let file = text.lines().find_map(|l| l.strip_prefix("SSL_CERT_FILE=")).expect(&text);
    assert!(!file.is_empty(), "git2 set no SSL_CERT_FILE: {text}");
    let bundle = std::fs::read_to_string(file).unwrap();
    assert!(bundle.matches("BEGIN CERTIFICATE").count() > 10, "{file} is not the system's CA bundle");
}
