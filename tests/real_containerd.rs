//! containerd pulls through the hosts.toml trees winfleet renders (issue 28,
//! part 1): Debian's containerd 1.6 (`ctr images pull --hosts-dir`) and
//! Debian's distribution registry 2.8 as source and mirrors on loopback,
//! TLS from a throwaway CA, htpasswd on the mirror that needs the pull
//! secret. Each test renders a repository's mirror sets with the winfleet
//! binary (posix layout: `<host:port>/hosts.toml`), pulls, and asserts from
//! the registries' access logs which registry served each request and that
//! the others were never contacted (a [`Tripwire`] counts every connection
//! to a registry that is down).
//!
//! The cases follow the golden trees of tests/fixtures/render: declared
//! mirror order (decision 2), NeverContactSource (decision 3), a registry
//! with a port (decision 4), repositories sharing a registry's file
//! (decision 5), the documentation's IDMS (`override_path` with a
//! path-changing mirror) and ITMS (registry-wide) examples, and the pull
//! secret's credentials. docs/registries.md records what containerd showed.
//!
//! Without root or the programs these tests say so and pass; with CI=true
//! they fail instead (support::containerd::cannot_run).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::fs;
use std::path::PathBuf;
use std::process::Command;

use support::containerd::{Containerd, Pull, cannot_run, unavailable};
use support::registry::{Ca, Image, Login, Registry, Request, Tripwire};

/// A temporary directory with a CA, a containerd, and renders.
struct Lab {
    containerd: Containerd,
    ca: Ca,
    dir: tempfile::TempDir,
}

fn lab(test: &str) -> Option<Lab> {
    if let Some(reason) = unavailable() {
        cannot_run(test, &reason);
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path());
    match Containerd::start(&dir.path().join("containerd")) {
        Ok(containerd) => Some(Lab { containerd, ca, dir }),
        Err(reason) => {
            cannot_run(test, &reason);
            None
        }
    }
}

const NODE: &str = "linux01.corp.example";

impl Lab {
    fn registry(&self, name: &str) -> Registry {
        Registry::new(name, self.dir.path(), &self.ca, None)
    }

    /// Renders `mirrors` (YAML documents) for one posix node with
    /// `winfleet render`; returns the node's registries directory, the
    /// tree containerd reads as its hosts directory.
    fn render(&self, name: &str, mirrors: &str, pull_secret: Option<&str>) -> PathBuf {
        let repo = self.dir.path().join(format!("{name}-repo"));
        fs::create_dir_all(&repo).unwrap();
        fs::write(
            repo.join("instances.yaml"),
            format!(
                "apiVersion: winfleet.io/v1alpha1\nkind: WindowsInstanceList\nmetadata:\n  name: lab\nspec:\n  \
                 instances:\n  - address: {NODE}\n    username: core\n    shell: posix\n"
            ),
        )
        .unwrap();
        fs::write(repo.join("mirrors.yaml"), mirrors).unwrap();
        let out = self.dir.path().join(format!("{name}-render"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_winfleet"));
        cmd.arg("render").arg("--repo").arg(&repo).arg("--output").arg(&out);
        if let Some(secret) = pull_secret {
            let path = self.dir.path().join(format!("{name}-pull-secret.json"));
            fs::write(&path, secret).unwrap();
            cmd.arg("--pull-secret").arg(path);
        }
        let run = cmd.output().unwrap();
        assert!(run.status.success(), "winfleet render: {}", String::from_utf8_lossy(&run.stderr));
        out.join(NODE).join("registries")
    }

    fn pull(&self, hosts: &std::path::Path, reference: &str) -> Pull {
        self.containerd.pull(hosts, &self.ca.cert, reference)
    }

    fn expect_pulled(&self, pull: &Pull, hosts: &std::path::Path) {
        assert!(
            pull.success,
            "ctr images pull {} failed:\n{}\nhosts directory:\n{}\ncontainerd log:\n{}",
            pull.reference,
            pull.output,
            show_tree(hosts),
            self.containerd.log()
        );
    }
}

/// Every hosts.toml under `hosts`, for failure messages.
fn show_tree(hosts: &std::path::Path) -> String {
    let mut text = String::new();
    for (path, bytes) in support::tree(hosts) {
        text.push_str(&format!("--- {path}\n{}", String::from_utf8_lossy(&bytes)));
    }
    text
}

fn idms(name: &str, source: &str, mirrors: &[String], policy: Option<&str>) -> String {
    set("ImageDigestMirrorSet", "imageDigestMirrors", name, source, mirrors, policy)
}

fn itms(name: &str, source: &str, mirrors: &[String]) -> String {
    set("ImageTagMirrorSet", "imageTagMirrors", name, source, mirrors, None)
}

fn set(kind: &str, list: &str, name: &str, source: &str, mirrors: &[String], policy: Option<&str>) -> String {
    let mut yaml = format!(
        "apiVersion: config.openshift.io/v1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n  {list}:\n  \
         - source: {source}\n    mirrors:\n"
    );
    for mirror in mirrors {
        yaml.push_str(&format!("    - {mirror}\n"));
    }
    if let Some(policy) = policy {
        yaml.push_str(&format!("    mirrorSourcePolicy: {policy}\n"));
    }
    yaml
}

/// Asserts that `requests` fetched the whole image under `/v2/<repo>`:
/// its manifest (by `reference`) and both blobs, each answered 200, and
/// that every request was for that repository.
fn assert_served(who: &str, requests: &[Request], repo: &str, reference: &str, image: &Image) {
    let shown = || requests.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
    let mut wanted = vec![format!("/v2/{repo}/manifests/{reference}")];
    wanted.extend(image.blobs().iter().map(|blob| format!("/v2/{repo}/blobs/{blob}")));
    for path in &wanted {
        assert!(
            requests.iter().any(|r| &r.path == path && r.status == 200),
            "{who} should have served {path} (200); its log:\n{}",
            shown()
        );
    }
    assert!(
        requests.iter().all(|r| r.path.starts_with(&format!("/v2/{repo}/"))),
        "{who} was asked for another repository than /v2/{repo}:\n{}",
        shown()
    );
}

fn assert_untouched(who: &str, requests: &[Request]) {
    assert!(
        requests.is_empty(),
        "{who} must not be contacted, but logged:\n{}",
        requests.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    );
}

#[ignore = "needs containerd, a registry and root: scripts/test.sh runs it"]
#[test]
fn an_idms_digest_pull_is_served_by_a_path_changing_mirror_while_the_source_is_down() {
    let Some(lab) = lab("an_idms_digest_pull_is_served_by_a_path_changing_mirror_while_the_source_is_down") else {
        return;
    };
    let image = Image::tiny("digest pull");
    let source = Tripwire::new();
    let mut mirror = lab.registry("mirror");
    mirror.seed("mirror/team/app", &image, None);
    mirror.start();
    // The docs-idms-example shape: the mirror adds an org path, so the
    // mirror host is <mirror>/mirror and override_path keeps it.
    let hosts = lab.render(
        "idms",
        &idms("app", &format!("{}/team/app", source.host()), &[format!("{}/mirror/team/app", mirror.host())], None),
        None,
    );

    let pull = lab.pull(&hosts, &format!("{}/team/app@{}", source.host(), image.digest()));
    lab.expect_pulled(&pull, &hosts);

    assert_served("the mirror", &mirror.requests(), "mirror/team/app", &image.digest(), &image);
    assert_eq!(source.connections(), 0, "the source (down) must not be contacted");
}

#[ignore = "needs containerd, a registry and root: scripts/test.sh runs it"]
#[test]
fn mirrors_are_tried_in_declared_order_and_a_down_first_mirror_is_passed_over() {
    let Some(lab) = lab("mirrors_are_tried_in_declared_order_and_a_down_first_mirror_is_passed_over") else {
        return;
    };
    let image = Image::tiny("declared order");
    let source = Tripwire::new();
    let down = Tripwire::new();
    let (mut second, mut third) = (lab.registry("second"), lab.registry("third"));
    for registry in [&mut second, &mut third] {
        registry.seed("team/app", &image, None);
        registry.start();
    }
    // decision-2-declared-mirror-order: the order written is the order
    // tried (WMCO would sort the hosts).
    let mirrors = [
        format!("{}/team/app", down.host()),
        format!("{}/team/app", second.host()),
        format!("{}/team/app", third.host()),
    ];
    let hosts = lab.render("order", &idms("app", &format!("{}/team/app", source.host()), &mirrors, None), None);

    let pull = lab.pull(&hosts, &format!("{}/team/app@{}", source.host(), image.digest()));
    lab.expect_pulled(&pull, &hosts);

    assert!(down.connections() > 0, "the first mirror (down) is tried first");
    assert_served("the second mirror", &second.requests(), "team/app", &image.digest(), &image);
    assert_untouched("the third mirror", &third.requests());
    assert_eq!(source.connections(), 0, "the source must not be contacted");
}

#[ignore = "needs containerd, a registry and root: scripts/test.sh runs it"]
#[test]
fn never_contact_source_never_touches_the_source_even_when_the_mirror_lacks_the_image() {
    let Some(lab) = lab("never_contact_source_never_touches_the_source_even_when_the_mirror_lacks_the_image") else {
        return;
    };
    let image = Image::tiny("never contact source");
    let only_at_source = Image::tiny("only at the source");
    let mut source = lab.registry("source");
    source.seed("team/app", &image, Some("v1"));
    source.seed("team/app", &only_at_source, Some("only-at-source"));
    source.start();
    let mut mirror = lab.registry("mirror");
    mirror.seed("mirror/team/app", &image, Some("v1"));
    mirror.start();
    // decision-3-never-contact-source-wins: server is the first mirror.
    let hosts = lab.render(
        "never",
        &idms(
            "app",
            &format!("{}/team/app", source.host()),
            &[format!("{}/mirror/team/app", mirror.host())],
            Some("NeverContactSource"),
        ),
        None,
    );

    let by_digest = lab.pull(&hosts, &format!("{}/team/app@{}", source.host(), image.digest()));
    lab.expect_pulled(&by_digest, &hosts);
    // The mirror is the `server`, which containerd lets resolve tags: an
    // IDMS with NeverContactSource serves tags from its first mirror.
    let by_tag = lab.pull(&hosts, &format!("{}/team/app:v1", source.host()));
    lab.expect_pulled(&by_tag, &hosts);
    let missing = lab.pull(&hosts, &format!("{}/team/app:only-at-source", source.host()));
    assert!(!missing.success, "a tag only the source has must not be pulled:\n{}", missing.output);

    let served = mirror.requests();
    assert_served("the mirror", &served, "mirror/team/app", &image.digest(), &image);
    assert!(
        served.iter().any(|r| r.path == "/v2/mirror/team/app/manifests/v1" && r.status == 200),
        "the mirror resolves v1 (top-level override_path keeps the server's path): {served:?}"
    );
    assert_untouched("the source (NeverContactSource)", &source.requests());
}

#[ignore = "needs containerd, a registry and root: scripts/test.sh runs it"]
#[test]
fn an_idms_mirror_resolves_no_tag_so_the_source_resolves_it_and_the_mirror_serves_the_content() {
    let Some(lab) = lab("an_idms_mirror_resolves_no_tag_so_the_source_resolves_it_and_the_mirror_serves_the_content")
    else {
        return;
    };
    let image = Image::tiny("idms tag pull");
    let mut source = lab.registry("source");
    source.seed("team/app", &image, Some("v1"));
    source.start();
    let mut mirror = lab.registry("mirror");
    mirror.seed("mirror/team/app", &image, None);
    mirror.start();
    let hosts = lab.render(
        "allow",
        &idms("app", &format!("{}/team/app", source.host()), &[format!("{}/mirror/team/app", mirror.host())], None),
        None,
    );

    let pull = lab.pull(&hosts, &format!("{}/team/app:v1", source.host()));
    lab.expect_pulled(&pull, &hosts);

    let at_source = source.requests();
    assert!(
        !at_source.is_empty() && at_source.iter().all(|r| r.path == "/v2/team/app/manifests/v1" && r.status == 200),
        "the source (AllowContactingSource) only resolves the tag: {at_source:?}"
    );
    assert_served("the mirror", &mirror.requests(), "mirror/team/app", &image.digest(), &image);
}

#[ignore = "needs containerd, a registry and root: scripts/test.sh runs it"]
#[test]
fn an_itms_tag_pull_is_resolved_by_the_mirror() {
    let Some(lab) = lab("an_itms_tag_pull_is_resolved_by_the_mirror") else {
        return;
    };
    let image = Image::tiny("itms tag pull");
    let source = Tripwire::new();
    let mut mirror = lab.registry("mirror");
    mirror.seed("team/app", &image, Some("v1"));
    mirror.start();
    let hosts = lab.render(
        "itms",
        &itms("app", &format!("{}/team/app", source.host()), &[format!("{}/team/app", mirror.host())]),
        None,
    );

    let pull = lab.pull(&hosts, &format!("{}/team/app:v1", source.host()));
    lab.expect_pulled(&pull, &hosts);

    let served = mirror.requests();
    assert!(
        served.iter().any(|r| r.path == "/v2/team/app/manifests/v1" && r.status == 200),
        "the mirror resolves the tag: {served:?}"
    );
    assert_served("the mirror", &served, "team/app", &image.digest(), &image);
    assert_eq!(source.connections(), 0, "the source must not be contacted");
}

#[ignore = "needs containerd, a registry and root: scripts/test.sh runs it"]
#[test]
fn the_documentations_itms_example_asks_the_mirror_for_the_sources_whole_repository_path() {
    let Some(lab) = lab("the_documentations_itms_example_asks_the_mirror_for_the_sources_whole_repository_path") else {
        return;
    };
    // docs-itms-example: quay.io/remote-org/image mirrored to
    // quay.io/my-org/image gives the mirror host quay.io/my-org, and
    // containerd appends the source's whole repository path to it
    // (WMCO-SPEC 1.4, "registry-level mirroring"): the image must be at
    // my-org/remote-org/image, not where the ITMS names it.
    let image = Image::tiny("registry-wide itms");
    let source = Tripwire::new();
    let mut mirror = lab.registry("mirror");
    mirror.seed("my-org/remote-org/image", &image, Some("v1"));
    mirror.seed("my-org/image", &Image::tiny("where the ITMS names it"), Some("v1"));
    mirror.start();
    let hosts = lab.render(
        "itms-docs",
        &itms(
            "remote-org",
            &format!("{}/remote-org/image", source.host()),
            &[format!("{}/my-org/image", mirror.host())],
        ),
        None,
    );

    let pull = lab.pull(&hosts, &format!("{}/remote-org/image:v1", source.host()));
    lab.expect_pulled(&pull, &hosts);

    assert_served("the mirror", &mirror.requests(), "my-org/remote-org/image", &image.digest(), &image);
    assert_eq!(source.connections(), 0, "the source must not be contacted");
}

#[ignore = "needs containerd, a registry and root: scripts/test.sh runs it"]
#[test]
fn two_repositories_of_one_source_registry_pull_through_its_one_file() {
    let Some(lab) = lab("two_repositories_of_one_source_registry_pull_through_its_one_file") else {
        return;
    };
    // decision-5-only-desired-registries: ubi9 and ubi8 collapse into one
    // registry file whose mirror host is the bare mirror registry.
    let (ubi9, ubi8) = (Image::tiny("ubi9"), Image::tiny("ubi8"));
    let source = Tripwire::new();
    let mut mirror = lab.registry("mirror");
    mirror.seed("ubi9/ubi-minimal", &ubi9, None);
    mirror.seed("ubi8/ubi-minimal", &ubi8, None);
    mirror.start();
    let mirrors = format!(
        "{}---\n{}",
        idms(
            "ubi9",
            &format!("{}/ubi9/ubi-minimal", source.host()),
            &[format!("{}/ubi9/ubi-minimal", mirror.host())],
            None
        ),
        idms(
            "ubi8",
            &format!("{}/ubi8/ubi-minimal", source.host()),
            &[format!("{}/ubi8/ubi-minimal", mirror.host())],
            None
        ),
    );
    let hosts = lab.render("shared", &mirrors, None);
    assert_eq!(support::tree(&hosts).len(), 1, "one file for the source registry:\n{}", show_tree(&hosts));

    for (repo, image) in [("ubi9/ubi-minimal", &ubi9), ("ubi8/ubi-minimal", &ubi8)] {
        let pull = lab.pull(&hosts, &format!("{}/{repo}@{}", source.host(), image.digest()));
        lab.expect_pulled(&pull, &hosts);
    }

    let served = mirror.requests();
    for (repo, image) in [("ubi9/ubi-minimal", &ubi9), ("ubi8/ubi-minimal", &ubi8)] {
        let of_repo: Vec<Request> =
            served.iter().filter(|r| r.path.starts_with(&format!("/v2/{repo}/"))).cloned().collect();
        assert_served("the mirror", &of_repo, repo, &image.digest(), image);
    }
    assert_eq!(source.connections(), 0, "the source must not be contacted");
}

#[ignore = "needs containerd, a registry and root: scripts/test.sh runs it"]
#[test]
fn a_mirror_requiring_a_login_is_pulled_from_with_the_pull_secrets_credentials() {
    let Some(lab) = lab("a_mirror_requiring_a_login_is_pulled_from_with_the_pull_secrets_credentials") else {
        return;
    };
    let image = Image::tiny("pull secret");
    let source = Tripwire::new();
    let login = Login { user: "puller".into(), password: "not-a-real-password".into() };
    let mut mirror = Registry::new("private", lab.dir.path(), &lab.ca, Some(login.clone()));
    mirror.seed("oss/kubernetes/pause", &image, None);
    mirror.start();
    let mirrors = idms(
        "private",
        &format!("{}/oss/kubernetes/pause", source.host()),
        &[format!("{}/oss/kubernetes/pause", mirror.host())],
        None,
    );
    // pull-secret-credentials: the `auth` form, keyed by host:port.
    let auth = base64_encode(&format!("{}:{}", login.user, login.password));
    let secret = format!(r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#, mirror.host());
    let with_secret = lab.render("secret", &mirrors, Some(&secret));
    let without_secret = lab.render("no-secret", &mirrors, None);
    let reference = format!("{}/oss/kubernetes/pause@{}", source.host(), image.digest());

    let pull = lab.pull(&with_secret, &reference);
    lab.expect_pulled(&pull, &with_secret);
    assert_eq!(source.connections(), 0, "the source must not be contacted");
    // The control: the same mirror without the header refuses the pull.
    let refused = lab.pull(&without_secret, &reference);
    assert!(!refused.success, "without the pull secret the mirror must refuse:\n{}", refused.output);

    let logged = mirror.requests();
    let first_refusal = logged.iter().position(|r| r.status == 401).unwrap_or(logged.len());
    let (authorized, control) = logged.split_at(first_refusal);
    assert_served("the mirror (with the pull secret)", authorized, "oss/kubernetes/pause", &image.digest(), &image);
    assert!(
        !control.is_empty() && control.iter().all(|r| r.status == 401),
        "without credentials every request is refused (401): {control:?}"
    );
}

#[ignore = "needs containerd, a registry and root: scripts/test.sh runs it"]
#[test]
fn a_host_port_source_is_read_from_its_host_port_directory() {
    let Some(lab) = lab("a_host_port_source_is_read_from_its_host_port_directory") else {
        return;
    };
    let image = Image::tiny("host port");
    let source = Tripwire::new();
    let mut mirror = lab.registry("mirror");
    mirror.seed("team/app", &image, None);
    mirror.start();
    // decision-4-registry-with-port, posix side: the directory is host:port.
    let hosts = lab.render(
        "port",
        &idms("app", &format!("{}/team/app", source.host()), &[format!("{}/team/app", mirror.host())], None),
        None,
    );
    let names: Vec<String> =
        fs::read_dir(&hosts).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, vec![source.host()]);
    let reference = format!("{}/team/app@{}", source.host(), image.digest());

    let pull = lab.pull(&hosts, &reference);
    lab.expect_pulled(&pull, &hosts);
    assert_eq!(source.connections(), 0, "the mirror serves; the source must not be contacted");

    // containerd 1.6 on Linux also reads the Windows name, host_port_
    // (and looks there first: docs/registries.md).
    let windows = lab.dir.path().join("windows-layout");
    fs::create_dir_all(&windows).unwrap();
    fs::rename(hosts.join(source.host()), windows.join(source.host().replace(':', "_") + "_")).unwrap();
    let pull = lab.pull(&windows, &reference);
    lab.expect_pulled(&pull, &windows);
    assert_eq!(source.connections(), 0, "the mirror serves; the source must not be contacted");

    // The control: with no directory for the source, the pull goes there.
    let unmirrored = lab.pull(&hosts, &reference);
    assert!(!unmirrored.success, "the source is down:\n{}", unmirrored.output);
    assert!(source.connections() > 0, "without its directory, containerd goes to the source");
    assert_served("the mirror", &mirror.requests(), "team/app", &image.digest(), &image);
}

fn base64_encode(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}
