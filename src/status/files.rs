//! The status as files, and back. Paths are relative to the status
//! directory: `summary.yaml`, `instances/<address>.yaml`,
//! `machinesets/<name>.yaml`. The YAML is deterministic (struct field
//! order, maps sorted, one scalar per line, no block styles), so an
//! unchanged status gives byte-identical files. Pure.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::model::{InstanceStatus, MachineSetStatus, Status, Summary};

/// The summary file.
pub const SUMMARY_FILE: &str = "summary.yaml";
/// The directory of the instance files.
pub const INSTANCES_DIR: &str = "instances";
/// The directory of the MachineSet files.
pub const MACHINE_SETS_DIR: &str = "machinesets";

/// Every file of `status`, by path relative to the status directory.
pub fn to_files(status: &Status) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    files.insert(SUMMARY_FILE.to_owned(), yaml(&status.summary));
    for (address, instance) in &status.instances {
        files.insert(file_name(INSTANCES_DIR, address), yaml(instance));
    }
    for (name, machine_set) in &status.machine_sets {
        files.insert(file_name(MACHINE_SETS_DIR, name), yaml(machine_set));
    }
    files
}

/// The status the files describe. Tolerant: a file that is not UTF-8 or
/// not the YAML winfleet writes (a human may have edited it) is skipped,
/// and so are files it does not know.
pub fn from_files(files: &BTreeMap<String, Vec<u8>>) -> Status {
    let mut status = Status::default();
    for (path, bytes) in files {
        let Ok(text) = std::str::from_utf8(bytes) else { continue };
        if path == SUMMARY_FILE {
            if let Some(summary) = parse::<Summary>(text) {
                status.summary = summary;
            }
        } else if let Some(stem) = stem(path, INSTANCES_DIR) {
            if let Some(mut instance) = parse::<InstanceStatus>(text) {
                if instance.address.is_empty() {
                    instance.address = stem.to_owned();
                }
                status.instances.insert(instance.address.clone(), instance);
            }
        } else if let Some(stem) = stem(path, MACHINE_SETS_DIR)
            && let Some(mut machine_set) = parse::<MachineSetStatus>(text)
        {
            if machine_set.name.is_empty() {
                machine_set.name = stem.to_owned();
            }
            status.machine_sets.insert(machine_set.name.clone(), machine_set);
        }
    }
    status
}

/// `dir/<key>.yaml`, with any character a file name should not carry
/// replaced by `_` (addresses and names are validated DNS names already;
/// this only keeps an odd one inside the directory).
fn file_name(dir: &str, key: &str) -> String {
    let mut stem: String =
        key.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' }).collect();
    if stem.is_empty() || stem.starts_with('.') {
        stem.insert(0, '_');
    }
    format!("{dir}/{stem}.yaml")
}

fn stem<'p>(path: &'p str, dir: &str) -> Option<&'p str> {
    let stem = path.strip_prefix(dir)?.strip_prefix('/')?.strip_suffix(".yaml")?;
    (!stem.is_empty() && !stem.contains('/')).then_some(stem)
}

fn yaml<T: Serialize>(value: &T) -> Vec<u8> {
    // Block scalars would fold long messages over several lines; one
    // quoted line per value keeps diffs and greps simple.
    let options = serde_saphyr::ser_options! { prefer_block_scalars: false };
    match serde_saphyr::to_string_with_options(value, options) {
        Ok(text) => text.into_bytes(),
        // Not expected for these types; JSON is YAML too, and nothing is lost.
        Err(_) => serde_json::to_vec_pretty(value).unwrap_or_default(),
    }
}

fn parse<T: DeserializeOwned>(text: &str) -> Option<T> {
    serde_saphyr::from_str(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_keys_stay_inside_their_directory() {
        assert_eq!(file_name("instances", "10.0.0.1"), "instances/10.0.0.1.yaml");
        assert_eq!(file_name("instances", "../x"), "instances/_.._x.yaml");
        assert_eq!(file_name("instances", "fe80::1"), "instances/fe80__1.yaml");
        assert_eq!(file_name("instances", ""), "instances/_.yaml");
    }

    #[test]
    fn unknown_and_broken_files_are_skipped() {
        let files = BTreeMap::from([
            ("instances/a.yaml".to_owned(), b"address: [unclosed".to_vec()),
            ("instances/b.yaml".to_owned(), vec![0xff, 0xfe]),
            ("instances/sub/c.yaml".to_owned(), b"address: c\n".to_vec()),
            ("notes.txt".to_owned(), b"hello".to_vec()),
            ("instances/d.yaml".to_owned(), b"phase: Ready\nconditions: []\n".to_vec()),
        ]);
        let status = from_files(&files);
        assert_eq!(status.instances.keys().collect::<Vec<_>>(), vec!["d"]);
        assert_eq!(status.instances["d"].address, "d");
    }
}
