//! The remote source against real Git: bare remotes over file:// and a
//! real OpenSSH sshd (tests/support/fleet.rs) serving git-upload-pack over
//! ssh, with the deploy key and a pinned known_hosts file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use git2::{Oid, Repository};
use support::GitRepo;
use support::fleet::TestFleet;
use winfleet::source::transport::{self, GitError};
use winfleet::source::{Fetched, GitAuth, RemoteSource, only_status_changes};

/// A bare remote and a clone that pushes to its `main`.
struct Upstream {
    remote: tempfile::TempDir,
    work: GitRepo,
}

impl Upstream {
    fn new() -> Self {
        let remote = tempfile::tempdir().unwrap();
        Repository::init_bare(remote.path()).unwrap();
        Upstream { remote, work: GitRepo::new() }
    }

    fn url(&self) -> String {
        format!("file://{}", self.remote.path().display())
    }

    /// Writes the files, commits, and pushes to main (forced, so a
    /// rewritten history lands too).
    fn commit(&self, files: &[(&str, &str)], message: &str) -> Oid {
        for (rel, text) in files {
            let path = self.work.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let id = self.work.commit_all(message);
        self.push_head();
        id
    }

    fn push_head(&self) {
        let mut remote = self.work.repo.remote_anonymous(&self.url()).unwrap();
        remote.push(&["+HEAD:refs/heads/main"], None).unwrap();
    }
}

fn files(source: &RemoteSource, revision: &str) -> Vec<(String, String)> {
    let snapshot = source.snapshot(revision).unwrap();
    assert_eq!(snapshot.revision.as_deref(), Some(revision));
    snapshot.files.into_iter().map(|f| (f.path, String::from_utf8(f.bytes).unwrap())).collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(p, c)| ((*p).to_owned(), (*c).to_owned())).collect()
}

#[test]
fn the_first_fetch_brings_the_branch_head_into_a_new_cache() {
    let upstream = Upstream::new();
    let head = upstream.commit(&[("fleet.yaml", "kind: Fleet\n"), ("instances/a.yaml", "a\n")], "config");
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().join("cache");
    let source = RemoteSource::open(&upstream.url(), "main", &cache_dir, GitAuth::default()).unwrap();
    assert!(Repository::open_bare(&cache_dir).unwrap().is_bare());
    assert_eq!(source.repo(), cache_dir);
    assert_eq!(source.fetch().unwrap(), Fetched { revision: head.to_string(), fetched: true });
    assert_eq!(
        files(&source, &head.to_string()),
        pairs(&[("fleet.yaml", "kind: Fleet\n"), ("instances/a.yaml", "a\n")])
    );
    let cached = Repository::open_bare(&cache_dir).unwrap().refname_to_id("refs/winfleet/source/main").unwrap();
    assert_eq!(cached, head);
}

#[test]
fn an_unmoved_head_costs_only_an_ls_remote_and_a_moved_one_is_fetched() {
    let upstream = Upstream::new();
    let first = upstream.commit(&[("fleet.yaml", "one\n")], "one");
    let cache = tempfile::tempdir().unwrap();
    let source = RemoteSource::open(&upstream.url(), "main", cache.path(), GitAuth::default()).unwrap();
    source.fetch().unwrap();
    // Every fetch writes FETCH_HEAD; ls-remote alone does not.
    let fetch_head = cache.path().join("FETCH_HEAD");
    std::fs::remove_file(&fetch_head).unwrap();

    assert_eq!(source.fetch().unwrap(), Fetched { revision: first.to_string(), fetched: false });
    assert!(!fetch_head.exists(), "the unmoved head was fetched again");

    let second = upstream.commit(&[("fleet.yaml", "two\n")], "two");
    assert_eq!(source.fetch().unwrap(), Fetched { revision: second.to_string(), fetched: true });
    assert!(fetch_head.exists());
    assert_eq!(files(&source, &second.to_string()), pairs(&[("fleet.yaml", "two\n")]));

    // A restarted daemon reuses the cache: still nothing to fetch.
    let again = RemoteSource::open(&upstream.url(), "main", cache.path(), GitAuth::default()).unwrap();
    assert_eq!(again.fetch().unwrap(), Fetched { revision: second.to_string(), fetched: false });
}

#[test]
fn a_force_pushed_history_replaces_the_cached_head() {
    let upstream = Upstream::new();
    upstream.commit(&[("fleet.yaml", "old\n")], "old");
    let cache = tempfile::tempdir().unwrap();
    let source = RemoteSource::open(&upstream.url(), "main", cache.path(), GitAuth::default()).unwrap();
    source.fetch().unwrap();

    // An unrelated history, force-pushed over main.
    let rewrite = GitRepo::new();
    std::fs::write(rewrite.path().join("fleet.yaml"), "rewritten\n").unwrap();
    let new = rewrite.commit_all("rewritten");
    let mut remote = rewrite.repo.remote_anonymous(&upstream.url()).unwrap();
    remote.push(&["+HEAD:refs/heads/main"], None).unwrap();

    assert_eq!(source.fetch().unwrap(), Fetched { revision: new.to_string(), fetched: true });
    assert_eq!(files(&source, &new.to_string()), pairs(&[("fleet.yaml", "rewritten\n")]));
}

#[test]
fn only_commits_confined_to_the_status_directory_count_as_status_changes() {
    let upstream = Upstream::new();
    let base = upstream.commit(&[("fleet.yaml", "f\n"), ("status/summary.yaml", "1\n")], "base");
    let status = upstream.commit(&[("status/summary.yaml", "2\n"), ("status/instances/a.yaml", "a\n")], "status");
    let status_again = upstream.commit(&[("status/summary.yaml", "3\n")], "status");
    let config = upstream.commit(&[("fleet.yaml", "g\n")], "config");
    let lookalike = upstream.commit(&[("status.yaml", "not status\n")], "lookalike");
    let cache = tempfile::tempdir().unwrap();
    let source = RemoteSource::open(&upstream.url(), "main", cache.path(), GitAuth::default()).unwrap();
    source.fetch().unwrap();
    let repo = Repository::open_bare(source.repo()).unwrap();
    let only = |from, to, path| only_status_changes(&repo, from, to, path).unwrap();

    assert!(only(base, status, "status"));
    assert!(only(base, status_again, "status"), "several status-only commits");
    assert!(only(status, status, "status"), "nothing changed");
    assert!(only(base, status, "status/"), "a trailing slash is the same directory");
    assert!(!only(base, config, "status"));
    assert!(!only(status_again, config, "status"));
    assert!(!only(config, lookalike, "status"), "status.yaml is not under status/");
    assert!(!only(base, status, "reports"));
    // A deleted status file is a status change too.
    std::fs::remove_file(upstream.work.path().join("status/instances/a.yaml")).unwrap();
    let removed = upstream.work.commit_all("remove");
    upstream.push_head();
    source.fetch().unwrap();
    assert!(only(lookalike, removed, "status"));
    assert!(only_status_changes(&repo, base, Oid::ZERO_SHA1, "status").is_err());
}

#[test]
fn a_branch_missing_on_the_remote_is_an_error_naming_it() {
    let upstream = Upstream::new();
    upstream.commit(&[("fleet.yaml", "f\n")], "f");
    let cache = tempfile::tempdir().unwrap();
    let source = RemoteSource::open(&upstream.url(), "production", cache.path(), GitAuth::default()).unwrap();
    let err = source.fetch().unwrap_err();
    assert!(matches!(err, GitError::BranchNotFound { .. }), "{err:?}");
    assert_eq!(err.to_string(), format!("branch production does not exist on {}", upstream.url()));
    let err = RemoteSource::open(&upstream.url(), "bad..name", cache.path(), GitAuth::default()).unwrap_err();
    assert!(err.to_string().contains("not a valid branch name"), "{err}");
}

#[test]
fn credentials_in_a_url_never_reach_a_message() {
    let cache = tempfile::tempdir().unwrap();
    let url = "https://user:s3cr3t-t0ken@127.0.0.1:1/org/fleet.git";
    let source = RemoteSource::open(url, "main", cache.path(), GitAuth::default()).unwrap();
    let err = source.fetch().unwrap_err();
    let (text, debug) = (err.to_string(), format!("{err:?} {source:?}"));
    assert!(text.contains("https://127.0.0.1:1/org/fleet.git"), "{text}");
    for shown in [&text, &debug] {
        assert!(!shown.contains("s3cr3t") && !shown.contains("user:"), "{shown}");
    }
    assert_eq!(transport::redact_url(url), "https://127.0.0.1:1/org/fleet.git");
}

#[test]
fn an_unsupported_scheme_is_refused_before_any_network() {
    let cache = tempfile::tempdir().unwrap();
    let source = RemoteSource::open("ftp://u:pw@host/x.git", "main", cache.path(), GitAuth::default()).unwrap();
    let text = source.fetch().unwrap_err().to_string();
    assert_eq!(
        text,
        "unsupported Git URL ftp://host/x.git: the scheme ftp:// is not supported (use https://, ssh://, file:// or a path)"
    );
}

/// A bare repository the fleet's login user can read, served over ssh.
struct SshUpstream {
    fleet: TestFleet,
    upstream: Upstream,
    head: Oid,
}

impl SshUpstream {
    fn start() -> Self {
        let fleet = TestFleet::start(1);
        let upstream = Upstream::new();
        let head = upstream.commit(&[("fleet.yaml", "over ssh\n")], "ssh");
        // tempdir() is 0700; the login user (not root) must read the repo.
        std::fs::set_permissions(upstream.remote.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        // git refuses a repository owned by another user unless told.
        std::fs::write(fleet.nodes[0].path(".gitconfig"), "[safe]\n\tdirectory = *\n").unwrap();
        SshUpstream { fleet, upstream, head }
    }

    fn url(&self) -> String {
        let node = &self.fleet.nodes[0];
        format!("ssh://{}@{}:{}{}", self.fleet.user, node.address, node.port, self.upstream.remote.path().display())
    }

    fn auth(&self, known_hosts: &Path) -> GitAuth {
        GitAuth {
            ssh_key: Some(self.fleet.key.clone()),
            known_hosts: Some(known_hosts.to_owned()),
            ..GitAuth::default()
        }
    }

    fn host(&self) -> String {
        format!("[{}]:{}", self.fleet.nodes[0].address, self.fleet.port)
    }

    /// The node's real host key fingerprint, as OpenSSH prints it.
    fn fingerprint(&self) -> String {
        let text = std::fs::read_to_string(self.fleet.nodes[0].dir.join("host_ed25519.pub")).unwrap();
        winfleet::known_hosts::fingerprint(&russh::keys::PublicKey::from_openssh(text.trim()).unwrap())
    }

    /// A known_hosts file in the fleet's directory with `content`.
    fn known_hosts(&self, name: &str, content: &str) -> PathBuf {
        let path = self.fleet.dir().join(name);
        std::fs::write(&path, content).unwrap();
        path
    }
}

#[test]
fn ssh_with_the_deploy_key_and_the_pinned_host_key_fetches() {
    let ssh = SshUpstream::start();
    let cache = tempfile::tempdir().unwrap();
    let source = RemoteSource::open(&ssh.url(), "main", cache.path(), ssh.auth(&ssh.fleet.known_hosts)).unwrap();
    assert_eq!(source.fetch().unwrap(), Fetched { revision: ssh.head.to_string(), fetched: true });
    assert_eq!(files(&source, &ssh.head.to_string()), pairs(&[("fleet.yaml", "over ssh\n")]));
    assert_eq!(source.fetch().unwrap(), Fetched { revision: ssh.head.to_string(), fetched: false });

    // Hashed known_hosts entries (ssh-keygen -H) pin the same key.
    let hashed = ssh.known_hosts("hashed", &std::fs::read_to_string(&ssh.fleet.known_hosts).unwrap());
    let out = Command::new("ssh-keygen").arg("-H").arg("-f").arg(&hashed).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read_to_string(&hashed).unwrap().starts_with("|1|"));
    let repo = Repository::open_bare(cache.path()).unwrap();
    let head = transport::ls_remote(&repo, &ssh.url(), "refs/heads/main", &ssh.auth(&hashed)).unwrap();
    assert_eq!(head, Some(ssh.head));
}

#[test]
fn ssh_refuses_a_host_whose_key_is_not_the_pinned_one() {
    let ssh = SshUpstream::start();
    let cache = tempfile::tempdir().unwrap();
    // Pin another key (the client's own public key) for the host.
    let other = std::fs::read_to_string(format!("{}.pub", ssh.fleet.key.display())).unwrap();
    let wrong = ssh.known_hosts("wrong", &format!("{} {}\n", ssh.host(), other.trim()));
    let source = RemoteSource::open(&ssh.url(), "main", cache.path(), ssh.auth(&wrong)).unwrap();
    let err = source.fetch().unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, GitError::HostKey { .. }), "{err:?}");
    assert!(text.contains("host key mismatch for") && text.contains(&ssh.host()), "{text}");
    assert!(text.contains(&ssh.fingerprint()), "{text}");

    // A host missing from the file is refused too, never learned.
    let empty = ssh.known_hosts("empty", "");
    let source = RemoteSource::open(&ssh.url(), "main", cache.path(), ssh.auth(&empty)).unwrap();
    let text = source.fetch().unwrap_err().to_string();
    assert!(text.contains(&format!("host {} is not in", ssh.host())) && text.contains(&ssh.fingerprint()), "{text}");
    assert_eq!(std::fs::read_to_string(&empty).unwrap(), "");
    assert!(Repository::open_bare(cache.path()).unwrap().refname_to_id("refs/winfleet/source/main").is_err());
}

#[test]
fn ssh_reports_a_deploy_key_the_server_refuses_by_its_path() {
    let ssh = SshUpstream::start();
    let stranger = ssh.fleet.dir().join("stranger_ed25519");
    let out = Command::new("ssh-keygen").args(["-q", "-t", "ed25519", "-N", "", "-f"]).arg(&stranger).output().unwrap();
    assert!(out.status.success());
    let cache = tempfile::tempdir().unwrap();
    let auth = GitAuth { ssh_key: Some(stranger.clone()), ..ssh.auth(&ssh.fleet.known_hosts) };
    let source = RemoteSource::open(&ssh.url(), "main", cache.path(), auth).unwrap();
    let err = source.fetch().unwrap_err();
    assert!(matches!(err, GitError::AuthRejected { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("refused the SSH key {} for user {}", stranger.display(), ssh.fleet.user)),
        "{text}"
    );
    let key = std::fs::read_to_string(&stranger).unwrap();
    let body = key.lines().nth(1).unwrap();
    assert!(!text.contains(body) && !format!("{err:?}").contains(body));
}

#[test]
fn ssh_without_known_hosts_is_refused_before_connecting() {
    let cache = tempfile::tempdir().unwrap();
    let auth = GitAuth { ssh_key: Some("/nonexistent".into()), ..GitAuth::default() };
    let source = RemoteSource::open("git@github.com:org/fleet.git", "main", cache.path(), auth).unwrap();
    let err = source.fetch().unwrap_err();
    assert!(matches!(err, GitError::KnownHostsRequired { .. }), "{err:?}");
    assert!(err.to_string().starts_with("github.com:org/fleet.git is reached over ssh, which needs --git-known-hosts"));
}

/// A plain-HTTP Git server that answers every request with 401 Basic and
/// records the request line and Authorization header of each.
/// Each request's first line and Authorization header, in order.
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

fn refusing_http_server() -> (String, Seen) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("127.0.0.1:{}/org/fleet.git", listener.local_addr().unwrap().port());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let (mut request, mut authorization) = (String::new(), None);
            reader.read_line(&mut request).unwrap();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("authorization")
                {
                    authorization = Some(value.trim().to_owned());
                }
            }
            record.lock().unwrap().push((request.trim().to_owned(), authorization));
            let _ = stream.write_all(
                b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    (url, seen)
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
}

#[test]
fn https_sends_the_token_file_through_basic_auth_and_reports_a_refusal_without_it() {
    let (address, seen) = refusing_http_server();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "ghs_t0ken_one\n").unwrap();
    // The test server speaks plain http, so the token needs --allow-insecure-http.
    let auth = GitAuth { token_file: Some(token.clone()), allow_insecure_http: true, ..GitAuth::default() };
    let repo = Repository::init_bare(dir.path().join("cache")).unwrap();
    let url = format!("http://{address}");

    let err = transport::ls_remote(&repo, &url, "refs/heads/main", &auth).unwrap_err();
    assert!(matches!(err, GitError::AuthRejected { .. }), "{err:?}");
    let text = err.to_string();
    assert_eq!(text, format!("{url} refused the token from {} for user x-access-token", token.display()));
    assert!(!format!("{err:?}").contains("ghs_"));

    // The token is re-read at each operation (a rotated Secret), and a
    // user name in the URL is used with it.
    std::fs::write(&token, "ghs_t0ken_two").unwrap();
    let err = transport::ls_remote(&repo, &format!("http://oauth2@{address}"), "refs/heads/main", &auth).unwrap_err();
    assert!(err.to_string().contains("for user oauth2"), "{err}");

    let seen = seen.lock().unwrap().clone();
    let authorizations: Vec<Option<String>> = seen.iter().map(|(_, a)| a.clone()).collect();
    let expected = [
        None,
        Some(basic("x-access-token", "ghs_t0ken_one")),
        None,
        // libgit2 first tries the URL's own userinfo (no password).
        Some(basic("oauth2", "")),
        Some(basic("oauth2", "ghs_t0ken_two")),
    ];
    assert_eq!(authorizations, expected);
    assert!(seen.iter().all(|(request, _)| !request.contains("ghs_")), "{seen:?}");
}

#[test]
fn https_without_a_token_file_says_which_option_is_missing() {
    let (address, _seen) = refusing_http_server();
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init_bare(dir.path()).unwrap();
    let url = format!("http://{address}");
    let err = transport::ls_remote(&repo, &url, "refs/heads/main", &GitAuth::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{url} asks for a user name and password, and none is configured (set --git-token-file)")
    );
}

#[test]
fn issue_23_a_token_or_password_is_not_sent_over_plain_http_unless_allowed() {
    let (address, seen) = refusing_http_server();
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "ghs_t0ken_one\n").unwrap();
    let repo = Repository::init_bare(dir.path().join("cache")).unwrap();
    let url = format!("http://{address}");
    let with_file = GitAuth { token_file: Some(token.clone()), ..GitAuth::default() };

    let err = transport::ls_remote(&repo, &url, "refs/heads/main", &with_file).unwrap_err();
    assert!(matches!(err, GitError::InsecureHttp { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to send the token from {} to {url} over plain http, where anyone on the path reads it: use https://, or pass --allow-insecure-http",
            token.display()
        )
    );
    // Credentials in the URL: a password, or a token as the user name
    // (GitHub's form); the message shows neither.
    for userinfo in ["bot:ghs_in_url", "ghs_as_user", "bot:p%40ss"] {
        let in_url = format!("HTTP://{userinfo}@{address}");
        let err = transport::ls_remote(&repo, &in_url, "refs/heads/main", &GitAuth::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "refusing to send the credentials in the URL to HTTP://{address} over plain http, where anyone on the path reads it: use https://, or pass --allow-insecure-http"
            )
        );
    }
    assert!(seen.lock().unwrap().is_empty(), "nothing reached the server: {seen:?}");

    // Without any credential, plain http is used (a public mirror).
    let err = transport::ls_remote(&repo, &url, "refs/heads/main", &GitAuth::default()).unwrap_err();
    assert!(matches!(err, GitError::MissingCredential { .. }), "{err:?}");

    // Allowed: the token goes, as before.
    let allowed = GitAuth { allow_insecure_http: true, ..with_file };
    let err = transport::ls_remote(&repo, &url, "refs/heads/main", &allowed).unwrap_err();
    assert!(matches!(err, GitError::AuthRejected { .. }), "{err:?}");
    let sent = seen.lock().unwrap().iter().filter_map(|(_, a)| a.clone()).collect::<Vec<_>>();
    assert_eq!(sent, [basic("x-access-token", "ghs_t0ken_one")]);
}

#[test]
fn issue_23_a_refused_token_in_the_url_is_not_reported_as_missing() {
    let (address, seen) = refusing_http_server();
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init_bare(dir.path()).unwrap();
    let allowed = GitAuth { allow_insecure_http: true, ..GitAuth::default() };
    for (userinfo, user, password) in [("bot:ghs_in_url", "bot", "ghs_in_url"), ("ghs_as_user", "ghs_as_user", "")] {
        let url = format!("http://{userinfo}@{address}");
        let err = transport::ls_remote(&repo, &url, "refs/heads/main", &allowed).unwrap_err();
        assert!(matches!(err, GitError::AuthRejected { .. }), "{err:?}");
        let text = err.to_string();
        assert_eq!(text, format!("http://{address} refused the credentials in the URL"));
        assert!(!format!("{err:?}").contains("ghs_"), "{err:?}");
        let last = seen.lock().unwrap().last().cloned().unwrap();
        assert_eq!(last.1, Some(basic(user, password)), "the URL's credentials were the ones sent");
    }
}
