use git2::Signature;

use super::*;

/// A repository whose commits each hold `files` (a flat tree), the last one at HEAD.
fn repository(commits: &[&[(&str, &str)]]) -> (tempfile::TempDir, Repository) {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init(dir.path()).unwrap();
    for files in commits {
        let mut builder = repo.treebuilder(None).unwrap();
        for (name, text) in *files {
            builder.insert(name, repo.blob(text.as_bytes()).unwrap(), 0o100644).unwrap();
        }
        let tree = repo.find_tree(builder.write().unwrap()).unwrap();
        let sig = Signature::new("t", "t@example.invalid", &git2::Time::new(1_700_000_000, 0)).unwrap();
        let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, &parents).unwrap();
    }
    (dir, repo)
}

fn files(snapshot: &Snapshot) -> Vec<(String, Vec<u8>)> {
    snapshot.files.iter().map(|f| (f.path.clone(), f.bytes.clone())).collect()
}

#[test]
fn two_revisions_read_together_read_a_blob_they_share_once() {
    let base: &[(&str, &str)] = &[("a.yaml", "a: 1\n"), ("b.yaml", "b: 1\n"), ("c.yaml", "c: 1\n")];
    let head: &[(&str, &str)] = &[("a.yaml", "a: 1\n"), ("b.yaml", "b: 2\n"), ("c.yaml", "c: 1\n")];
    let (dir, repo) = repository(&[base, head]);
    let mut blobs = Blobs::kept();
    let read: Vec<Snapshot> = ["HEAD~1", "HEAD"]
        .iter()
        .map(|rev| read_with(&repo, find_commit(&repo, rev).unwrap().id(), &mut blobs).unwrap())
        .collect();
    // Three blobs in base, and the one head changed: not six.
    assert_eq!(blobs.read, 4);
    let together = read_revisions(dir.path(), &["HEAD~1", "HEAD"]).unwrap();
    for ((rev, snapshot), together) in ["HEAD~1", "HEAD"].iter().zip(&read).zip(together) {
        let alone = read_revision(dir.path(), rev).unwrap();
        let together = together.unwrap();
        assert_eq!(files(snapshot), files(&alone), "{rev}");
        assert_eq!(files(&together), files(&alone), "{rev}");
        assert_eq!((&together.revision, &together.links), (&alone.revision, &alone.links), "{rev}");
    }
}

#[test]
fn a_revision_that_cannot_be_resolved_fails_alone() {
    let (dir, _repo) = repository(&[&[("a.yaml", "a: 1\n")]]);
    let read = read_revisions(dir.path(), &["no-such-branch", "HEAD"]).unwrap();
    let [missing, head]: [Result<Snapshot, SourceError>; 2] = read.try_into().unwrap();
    let message = missing.unwrap_err().to_string();
    assert!(message.starts_with("resolving revision no-such-branch:"), "{message}");
    assert_eq!(head.unwrap().files.len(), 1);
}

#[test]
fn a_directory_that_is_no_repository_fails_once() {
    let dir = tempfile::tempdir().unwrap();
    let message = read_revisions(dir.path(), &["HEAD", "HEAD"]).unwrap_err().to_string();
    assert!(message.starts_with("opening a Git repository at"), "{message}");
}
