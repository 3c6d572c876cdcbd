//! Publishing status files to a real bare remote over file://: the first
//! commit creates the branch, identical files make no commit, the status
//! directory is replaced wholesale while other paths are kept, and a
//! branch that moved between fetch and push is fetched again and the
//! commit rebuilt on the new tip.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use git2::{Oid, Repository};
use support::GitRepo;
use support::fleet::TestFleet;
use winfleet::source::GitAuth;
use winfleet::status::publish::{
    PublishError, Published, StatusCommit, StatusTarget, publish, publish_with, read_current,
};

/// A bare remote, a clone that pushes config commits to it, and a cache.
struct World {
    remote: tempfile::TempDir,
    config: GitRepo,
    cache: tempfile::TempDir,
}

impl World {
    /// A remote whose `main` holds a config file.
    fn new() -> Self {
        let remote = tempfile::tempdir().unwrap();
        Repository::init_bare(remote.path()).unwrap();
        let world = World { remote, config: GitRepo::new(), cache: tempfile::tempdir().unwrap() };
        world.commit_config(&[("fleet.yaml", "kind: Fleet\n")], "config");
        world
    }

    fn url(&self) -> String {
        format!("file://{}", self.remote.path().display())
    }

    /// Writes files into the config clone, commits and pushes to main.
    fn commit_config(&self, files: &[(&str, &str)], message: &str) -> Oid {
        for (rel, text) in files {
            let path = self.config.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let id = self.config.commit_all(message);
        let mut remote = self.config.repo.remote_anonymous(&self.url()).unwrap();
        remote.push(&["+HEAD:refs/heads/main"], None).unwrap();
        id
    }

    fn cache(&self) -> Repository {
        Repository::init_bare(self.cache.path()).unwrap()
    }

    fn target(&self, branch: &str) -> StatusTarget {
        StatusTarget {
            url: self.url(),
            auth: GitAuth::default(),
            branch: branch.to_owned(),
            path: "status".to_owned(),
            author_name: "winfleet".to_owned(),
            author_email: "winfleet@fleet.example".to_owned(),
        }
    }

    fn remote(&self) -> Repository {
        Repository::open_bare(self.remote.path()).unwrap()
    }

    /// The parents and message of a commit on the remote.
    fn commit(&self, id: Oid) -> (Vec<Oid>, String) {
        let remote = self.remote();
        let commit = remote.find_commit(id).unwrap();
        (commit.parent_ids().collect(), commit.message().unwrap().to_owned())
    }

    fn tip(&self, branch: &str) -> Option<Oid> {
        self.remote().refname_to_id(&format!("refs/heads/{branch}")).ok()
    }

    /// Every file of the branch tip, as text.
    fn files(&self, branch: &str) -> BTreeMap<String, String> {
        let snapshot = winfleet::source::read_revision(self.remote.path(), &format!("refs/heads/{branch}")).unwrap();
        snapshot.files.into_iter().map(|f| (f.path, String::from_utf8(f.bytes).unwrap())).collect()
    }
}

fn status(files: &[(&str, &str)], message: &str) -> StatusCommit {
    StatusCommit {
        files: files.iter().map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec())).collect(),
        message: message.to_owned(),
    }
}

fn map(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    files.iter().map(|(p, c)| ((*p).to_owned(), (*c).to_owned())).collect()
}

fn committed(result: Published) -> (Oid, u32) {
    match result {
        Published::Committed { commit, attempts } => (Oid::from_str(&commit).unwrap(), attempts),
        Published::Unchanged => panic!("expected a commit"),
    }
}

const MESSAGE: &str = "status: 1a2b3c4 2 ready\n\nWinfleet-Source-Revision: 1a2b3c4d\n";

#[test]
fn the_first_publish_creates_the_branch_with_only_the_status_files_and_the_asked_message_and_author() {
    let world = World::new();
    let main = world.tip("main");
    let files = [("summary.yaml", "ready: 2\n"), ("instances/10.0.0.1.yaml", "phase: Ready\n")];
    let (id, attempts) =
        committed(publish(&world.cache(), &world.target("winfleet/status"), &status(&files, MESSAGE)).unwrap());
    assert_eq!(attempts, 1);
    assert_eq!(world.tip("winfleet/status"), Some(id));
    assert_eq!(
        world.files("winfleet/status"),
        map(&[("status/instances/10.0.0.1.yaml", "phase: Ready\n"), ("status/summary.yaml", "ready: 2\n")])
    );
    let remote = world.remote();
    let commit = remote.find_commit(id).unwrap();
    assert_eq!(commit.parent_count(), 0);
    assert_eq!(commit.message(), Ok(MESSAGE));
    assert_eq!((commit.author().name(), commit.author().email()), (Ok("winfleet"), Ok("winfleet@fleet.example")));
    assert_eq!((commit.committer().name(), commit.committer().email()), (Ok("winfleet"), Ok("winfleet@fleet.example")));
    let tree = commit.tree().unwrap();
    let entry = tree.get_path(Path::new("status/summary.yaml")).unwrap();
    assert_eq!(entry.filemode(), 0o100644);
    assert_eq!(world.tip("main"), main, "the tracked branch is untouched");
}

#[test]
fn the_same_files_again_make_no_commit() {
    let world = World::new();
    let target = world.target("winfleet/status");
    let files = [("summary.yaml", "ready: 2\n")];
    let (id, _) = committed(publish(&world.cache(), &target, &status(&files, "first")).unwrap());
    assert_eq!(publish(&world.cache(), &target, &status(&files, "second")).unwrap(), Published::Unchanged);
    // A fresh cache (a restarted daemon) sees the same.
    let other = tempfile::tempdir().unwrap();
    let fresh = Repository::init_bare(other.path()).unwrap();
    assert_eq!(publish(&fresh, &target, &status(&files, "third")).unwrap(), Published::Unchanged);
    assert_eq!(world.tip("winfleet/status"), Some(id));
}

#[test]
fn changed_files_make_one_commit_on_the_tip_and_a_file_no_longer_written_disappears() {
    let world = World::new();
    let target = world.target("winfleet/status");
    let before = [("summary.yaml", "ready: 2\n"), ("instances/a.yaml", "a\n"), ("instances/b.yaml", "b\n")];
    let (first, _) = committed(publish(&world.cache(), &target, &status(&before, "one")).unwrap());
    let after = [("summary.yaml", "ready: 1\n"), ("instances/a.yaml", "a\n")];
    let (second, attempts) = committed(publish(&world.cache(), &target, &status(&after, "two")).unwrap());
    assert_eq!(attempts, 1);
    assert_eq!(world.commit(second), (vec![first], "two".to_owned()));
    assert_eq!(
        world.files("winfleet/status"),
        map(&[("status/instances/a.yaml", "a\n"), ("status/summary.yaml", "ready: 1\n")])
    );
}

#[test]
fn on_the_tracked_branch_only_the_status_directory_is_replaced() {
    let world = World::new();
    let tip = world.commit_config(&[("status/stale.yaml", "old\n"), ("instances/payments.yaml", "p\n")], "more");
    let target = world.target("main");
    let (id, _) = committed(publish(&world.cache(), &target, &status(&[("summary.yaml", "s\n")], MESSAGE)).unwrap());
    assert_eq!(world.commit(id).0, vec![tip]);
    assert_eq!(
        world.files("main"),
        map(&[("fleet.yaml", "kind: Fleet\n"), ("instances/payments.yaml", "p\n"), ("status/summary.yaml", "s\n")])
    );
    assert_eq!(
        read_current(&world.cache(), &target).unwrap(),
        BTreeMap::from([("summary.yaml".to_owned(), b"s\n".to_vec())])
    );
}

#[test]
fn a_nested_status_path_keeps_its_siblings() {
    let world = World::new();
    world.commit_config(&[("ops/README.md", "r\n")], "ops");
    let target = StatusTarget { path: "ops/status".to_owned(), ..world.target("main") };
    committed(publish(&world.cache(), &target, &status(&[("summary.yaml", "s\n")], "status")).unwrap());
    assert_eq!(
        world.files("main"),
        map(&[("fleet.yaml", "kind: Fleet\n"), ("ops/README.md", "r\n"), ("ops/status/summary.yaml", "s\n")])
    );
}

#[test]
fn a_branch_that_moved_before_the_push_is_fetched_again_and_the_commit_rebuilt_on_it() {
    let world = World::new();
    let target = world.target("main");
    let mut theirs = None;
    let mut hook = |attempt: u32| {
        if attempt == 1 {
            // Someone merges a config change between our fetch and our push.
            theirs = Some(world.commit_config(&[("instances/new.yaml", "n\n")], "add an instance"));
        }
    };
    let (id, attempts) = committed(
        publish_with(&world.cache(), &target, &status(&[("summary.yaml", "s\n")], MESSAGE), &mut hook).unwrap(),
    );
    assert_eq!(attempts, 2);
    assert_eq!(world.commit(id), (vec![theirs.unwrap()], MESSAGE.to_owned()));
    assert_eq!(
        world.files("main"),
        map(&[("fleet.yaml", "kind: Fleet\n"), ("instances/new.yaml", "n\n"), ("status/summary.yaml", "s\n")])
    );
}

#[test]
fn two_caches_publishing_alternately_each_build_on_the_others_tip() {
    let world = World::new();
    let target = world.target("winfleet/status");
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (Repository::init_bare(a_dir.path()).unwrap(), Repository::init_bare(b_dir.path()).unwrap());
    let (first, _) = committed(publish(&a, &target, &status(&[("summary.yaml", "1\n")], "a1")).unwrap());
    let (second, _) = committed(publish(&b, &target, &status(&[("summary.yaml", "2\n")], "b1")).unwrap());
    let (third, _) = committed(publish(&a, &target, &status(&[("summary.yaml", "3\n")], "a2")).unwrap());
    assert_eq!(world.commit(second).0, vec![first]);
    assert_eq!(world.commit(third).0, vec![second]);
    assert_eq!(world.files("winfleet/status"), map(&[("status/summary.yaml", "3\n")]));
}

#[test]
fn a_branch_that_never_stops_moving_is_given_up_after_five_attempts() {
    let world = World::new();
    let target = world.target("main");
    let mut n = 0;
    let mut hook = |_attempt: u32| {
        n += 1;
        world.commit_config(&[("churn.yaml", &format!("{n}\n"))], "churn");
    };
    let err = publish_with(&world.cache(), &target, &status(&[("summary.yaml", "s\n")], "s"), &mut hook).unwrap_err();
    assert!(matches!(err, PublishError::Contended { attempts: 5, .. }), "{err}");
    assert_eq!(n, 5);
    assert!(!world.files("main").contains_key("status/summary.yaml"));
}

#[test]
fn unsafe_status_paths_are_refused_and_nothing_is_pushed() {
    let world = World::new();
    let target = world.target("winfleet/status");
    for bad in ["../escape.yaml", "/etc/passwd", "instances//a.yaml", "instances/", ""] {
        let err = publish(&world.cache(), &target, &status(&[("summary.yaml", "s"), (bad, "x")], "m")).unwrap_err();
        assert!(matches!(&err, PublishError::Path { path, .. } if path == bad), "{bad:?}: {err}");
    }
    for bad in ["../status", "/status", ""] {
        let target = StatusTarget { path: bad.to_owned(), ..world.target("winfleet/status") };
        let err = publish(&world.cache(), &target, &status(&[("summary.yaml", "s")], "m")).unwrap_err();
        assert!(matches!(&err, PublishError::Path { .. }), "{bad:?}: {err}");
    }
    assert_eq!(world.tip("winfleet/status"), None);
}

#[test]
fn reading_the_current_status_of_a_missing_branch_or_directory_is_empty() {
    let world = World::new();
    assert!(read_current(&world.cache(), &world.target("winfleet/status")).unwrap().is_empty());
    assert!(read_current(&world.cache(), &world.target("main")).unwrap().is_empty());
    let files = [("summary.yaml", "s\n"), ("instances/10.0.0.1.yaml", "i\n")];
    committed(publish(&world.cache(), &world.target("winfleet/status"), &status(&files, "m")).unwrap());
    // Read through another cache, as a restarted daemon would.
    let other = tempfile::tempdir().unwrap();
    let fresh = Repository::init_bare(other.path()).unwrap();
    let current = read_current(&fresh, &world.target("winfleet/status")).unwrap();
    let current: BTreeMap<String, String> =
        current.into_iter().map(|(p, c)| (p, String::from_utf8(c).unwrap())).collect();
    assert_eq!(current, map(&[("instances/10.0.0.1.yaml", "i\n"), ("summary.yaml", "s\n")]));
}

#[test]
fn an_unreachable_remote_is_an_error_without_the_urls_credentials() {
    let world = World::new();
    let target = StatusTarget { url: "https://bot:hunter2@127.0.0.1:1/fleet.git".to_owned(), ..world.target("main") };
    let err = publish(&world.cache(), &target, &status(&[("summary.yaml", "s")], "m")).unwrap_err();
    let (text, debug) = (err.to_string(), format!("{err:?} {target:?}"));
    assert!(text.contains("https://127.0.0.1:1/fleet.git"), "{text}");
    assert!(!text.contains("hunter2") && !debug.contains("hunter2") && !text.contains("bot:"), "{text}\n{debug}");
}

#[test]
fn publishing_over_ssh_with_the_deploy_key_lands_and_retries_on_a_moved_branch() {
    let fleet = TestFleet::start(1);
    let world = World::new();
    // The login user (not root, when the tests run as root) must write to
    // the remote, which the test itself (root) also writes to: share it.
    let mut config = world.remote().config().unwrap();
    config.set_str("core.sharedRepository", "0777").unwrap();
    config.set_i32("receive.unpackLimit", 1).unwrap();
    let out = std::process::Command::new("chmod").arg("-R").arg("a+rwX").arg(world.remote.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(fleet.nodes[0].path(".gitconfig"), "[safe]\n\tdirectory = *\n").unwrap();
    let node = &fleet.nodes[0];
    let target = StatusTarget {
        url: format!("ssh://{}@{}:{}{}", fleet.user, node.address, node.port, world.remote.path().display()),
        auth: GitAuth {
            ssh_key: Some(fleet.key.clone()),
            known_hosts: Some(fleet.known_hosts.clone()),
            ..GitAuth::default()
        },
        ..world.target("main")
    };
    let mut hook = |attempt: u32| {
        if attempt == 1 {
            world.commit_config(&[("instances/new.yaml", "n\n")], "add an instance");
        }
    };
    let (id, attempts) = committed(
        publish_with(&world.cache(), &target, &status(&[("summary.yaml", "s\n")], MESSAGE), &mut hook).unwrap(),
    );
    assert_eq!(attempts, 2);
    assert_eq!(world.tip("main"), Some(id));
    assert_eq!(
        world.files("main"),
        map(&[("fleet.yaml", "kind: Fleet\n"), ("instances/new.yaml", "n\n"), ("status/summary.yaml", "s\n")])
    );
    assert_eq!(
        publish(&world.cache(), &target, &status(&[("summary.yaml", "s\n")], "again")).unwrap(),
        Published::Unchanged
    );
}
