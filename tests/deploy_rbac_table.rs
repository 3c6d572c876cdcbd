//! Issue 39, item 8: deploy/README.md's table "Every rule" is what deploy/
//! grants. deploy/ is rendered with `kubectl kustomize`; every rule of every
//! Role and ClusterRole, expanded to (role, namespace, apiGroup, resource,
//! verb, resourceNames), must be a row of the table with a reason, and the
//! table must name nothing deploy/ does not grant. The top-level README
//! points to this table instead of keeping a list of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

/// (role kind and name, namespace or "(cluster)", apiGroup or "core", resource, verb, resourceNames or "—").
type Grant = (String, String, String, String, String, String);

fn render(dir: &str) -> Vec<Value> {
    let path = support::root().join(dir);
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(&path)
        .output()
        .unwrap_or_else(|error| panic!("kubectl kustomize {dir}: {error} (scripts/test.sh installs kubectl)"));
    assert!(output.status.success(), "kubectl kustomize {dir}: {}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    serde_saphyr::from_multiple::<Value>(&text).unwrap().into_iter().filter(|doc| !doc.is_null()).collect()
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect()).unwrap_or_default()
}

fn names(mut names: Vec<String>) -> String {
    if names.is_empty() {
        return "—".to_owned();
    }
    names.sort();
    names.join(",")
}

fn granted(objects: &[Value]) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for role in objects.iter().filter(|o| o["kind"] == "Role" || o["kind"] == "ClusterRole") {
        let who = format!("{} {}", role["kind"].as_str().unwrap(), role["metadata"]["name"].as_str().unwrap());
        let ns = role["metadata"]["namespace"].as_str().unwrap_or("(cluster)").to_owned();
        for rule in role["rules"].as_array().unwrap() {
            let resource_names = names(strings(&rule["resourceNames"]));
            for group in strings(&rule["apiGroups"]) {
                let group = if group.is_empty() { "core".to_owned() } else { group };
                for resource in strings(&rule["resources"]) {
                    for verb in strings(&rule["verbs"]) {
                        out.insert((
                            who.clone(),
                            ns.clone(),
                            group.clone(),
                            resource.clone(),
                            verb,
                            resource_names.clone(),
                        ));
                    }
                }
            }
        }
    }
    out
}

fn cells(cell: &str) -> Vec<String> {
    cell.replace('`', "").split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect()
}

/// The rows of the table under "### Every rule", expanded; each row's reason must not be empty.
fn table() -> BTreeSet<Grant> {
    let text = std::fs::read_to_string(support::root().join("deploy/README.md")).unwrap();
    let section = text.split_once("### Every rule").expect("deploy/README.md has a section \"### Every rule\"").1;
    let mut out = BTreeSet::new();
    let mut rows = 0;
    for line in section.lines().skip_while(|l| !l.starts_with('|')).take_while(|l| l.starts_with('|')).skip(2) {
        let cols: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(
            cols.len(),
            7,
            "a row has 7 columns (role, namespace, apiGroup, resources, verbs, resourceNames, why): {line}"
        );
        assert!(cols[6].len() > 10, "a row without its reason: {line}");
        rows += 1;
        let who = cols[0].replace('`', "");
        let ns = cols[1].replace('`', "");
        let resource_names = names(cells(cols[5]).into_iter().filter(|n| n != "—").collect());
        for group in cells(cols[2]) {
            for resource in cells(cols[3]) {
                for verb in cells(cols[4]) {
                    let grant =
                        (who.clone(), ns.clone(), group.clone(), resource.clone(), verb, resource_names.clone());
                    assert!(out.insert(grant.clone()), "named twice in the table: {grant:?}");
                }
            }
        }
    }
    assert!(rows > 20, "the table was read: {rows} rows");
    out
}

#[ignore = "needs kubectl: scripts/test.sh runs it"]
#[test]
fn deploy_readme_rbac_table_names_exactly_every_rule_deploy_grants() {
    let granted = granted(&render("deploy"));
    let table = table();
    let unexplained: Vec<_> = granted.difference(&table).collect();
    assert!(unexplained.is_empty(), "granted by deploy/ with no row in deploy/README.md's table: {unexplained:#?}");
    let not_granted: Vec<_> = table.difference(&granted).collect();
    assert!(not_granted.is_empty(), "in deploy/README.md's table but not granted by deploy/: {not_granted:#?}");
}
