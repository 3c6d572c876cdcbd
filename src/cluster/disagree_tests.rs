//! Unit tests of the comparison and the memory of what was reported.

use serde_json::json;

use super::*;
use crate::cluster::sources::ConfigObject;
use crate::source::{Snapshot, SourceFile};

fn desired(files: &[(&str, &str)]) -> Desired {
    let files = files.iter().map(|(p, t)| SourceFile { path: (*p).into(), bytes: t.as_bytes().to_vec() }).collect();
    let loaded = crate::desired::load(&Snapshot { revision: None, files, links: Vec::new() }, Default::default());
    loaded.desired.unwrap_or_else(|| panic!("{:?}", loaded.diagnostics))
}

const PROXY: &str = "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: http://user:hunter2@proxy.corp:3128\n";
const IDMS: &str = "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata:\n  name: corp\nspec:\n  imageDigestMirrors:\n  - source: quay.io/org\n    mirrors: [m.corp:5000/org]\n";

fn cluster(proxy: serde_json::Value, sets: &[(&str, serde_json::Value)]) -> ClusterConfig {
    ClusterConfig {
        proxy: Some(ConfigObject { uid: "p".into(), spec: proxy }),
        mirror_sets: sets
            .iter()
            .map(|(k, s)| ((*k).to_owned(), ConfigObject { uid: "m".into(), spec: s.clone() }))
            .collect(),
    }
}

#[test]
fn each_differing_field_is_listed_with_passwords_redacted() {
    let desired = desired(&[("proxy.yaml", PROXY), ("mirrors.yaml", IDMS)]);
    let observed = cluster(
        json!({"httpProxy": "http://proxy.corp:3128", "trustedCA": {"name": "user-ca-bundle"}}),
        &[
            (
                "ImageDigestMirrorSet/corp",
                json!({"imageDigestMirrors": [{"source": "quay.io/org", "mirrors": ["other:5000/org"]}]}),
            ),
            ("ImageTagMirrorSet/linux-only", json!({})),
        ],
    );
    let found = compare(&desired, &observed);
    let lines: Vec<String> = found.iter().map(Disagreement::line).collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert!(lines[0].starts_with("Proxy/cluster spec.httpProxy: repository \"http://user:"), "{}", lines[0]);
    assert!(!lines.join("\n").contains("hunter2"), "{lines:#?}");
    assert_eq!(lines[1], "Proxy/cluster spec.trustedCA.name: repository (none), cluster \"user-ca-bundle\"");
    assert_eq!(
        lines[2],
        "ImageDigestMirrorSet/corp spec.imageDigestMirrors[source=quay.io/org]: repository mirrors [m.corp:5000/org], cluster mirrors [other:5000/org]"
    );
    assert_eq!(lines[3], "ImageTagMirrorSet/linux-only (object): repository absent, cluster present");
    assert_eq!(fields(&found[..1]), "Proxy/cluster spec.httpProxy");
}

#[test]
fn agreeing_objects_and_sources_followed_from_the_cluster_give_nothing() {
    let desired_repo = desired(&[("mirrors.yaml", IDMS)]);
    let idms = json!({"imageDigestMirrors": [{"source": "quay.io/org", "mirrors": ["m.corp:5000/org"]}]});
    // An empty cluster Proxy equals no repository Proxy.
    assert!(compare(&desired_repo, &cluster(json!({}), &[("ImageDigestMirrorSet/corp", idms)])).is_empty());
    let fleet = "apiVersion: winfleet.io/v1alpha1\nkind: Fleet\nmetadata:\n  name: f\nspec:\n  sources:\n    proxy: cluster\n    mirrors: cluster\n";
    let followed = desired(&[("fleet.yaml", fleet)]);
    let observed = cluster(json!({"httpProxy": "http://p:1"}), &[("ImageTagMirrorSet/x", json!({}))]);
    assert!(compare(&followed, &observed).is_empty());
}

#[test]
fn a_change_is_reported_once_and_its_end_once() {
    let d = |field: &str| Disagreement {
        object: "Proxy/cluster".into(),
        field: field.into(),
        repository: "a".into(),
        cluster: "b".into(),
    };
    let first = hashes(&[d("spec.httpProxy")]);
    let nothing = BTreeMap::new();
    let (new, gone) = changes(&nothing, &first);
    assert_eq!((new, gone), (vec!["Proxy/cluster"], vec![]));
    let remembered = parse_memory(&memory_text(&first));
    assert_eq!(remembered, first);
    assert_eq!(changes(&remembered, &first), (vec![], vec![]), "the same differences: nothing new");
    let second = hashes(&[d("spec.httpProxy"), d("spec.noProxy")]);
    assert_eq!(changes(&remembered, &second).0, vec!["Proxy/cluster"], "another field: reported again");
    assert_eq!(changes(&remembered, &nothing), (vec![], vec!["Proxy/cluster"]));
    assert!(parse_memory("").is_empty());
}

#[test]
fn a_new_difference_is_a_warning_listing_its_fields_and_a_gone_one_a_normal_event() {
    let d = |object: &str, field: &str| Disagreement {
        object: object.into(),
        field: field.into(),
        repository: "\"a\"".into(),
        cluster: "(none)".into(),
    };
    let found = [d("Proxy/cluster", "spec.httpProxy"), d("Proxy/cluster", "spec.noProxy")];
    let reported = parse_memory("ImageTagMirrorSet/x=0123456789ab");
    let notes = notes(&reported, &found);
    assert_eq!(notes.len(), 2, "{notes:#?}");
    assert_eq!((notes[0].0.as_str(), notes[0].1), ("Proxy/cluster", Reason::ClusterDisagrees));
    assert!(
        notes[0].2.contains(
            "do not agree: Proxy/cluster spec.httpProxy: repository \"a\", cluster (none); Proxy/cluster spec.noProxy"
        ),
        "{}",
        notes[0].2
    );
    assert_eq!((notes[1].0.as_str(), notes[1].1), ("ImageTagMirrorSet/x", Reason::ClusterAgrees));
    assert!(super::notes(&hashes(&found), &found).is_empty(), "reported already: nothing");
}

#[test]
fn the_namespace_is_written_only_when_it_holds_something_else() {
    let now = hashes(&[Disagreement {
        object: "Proxy/cluster".into(),
        field: "spec.httpProxy".into(),
        repository: "a".into(),
        cluster: "b".into(),
    }]);
    assert_eq!(memory_patch(None, &now), None, "no Namespace: nothing to write");
    assert_eq!(memory_patch(Some(&now), &now), None, "the same: nothing to write");
    let written = memory_patch(Some(&BTreeMap::new()), &now).unwrap();
    assert_eq!(written["metadata"]["annotations"][REPORTED_ANNOTATION], memory_text(&now));
    let cleared = memory_patch(Some(&now), &BTreeMap::new()).unwrap();
    assert!(cleared["metadata"]["annotations"][REPORTED_ANNOTATION].is_null(), "{cleared}");
}
