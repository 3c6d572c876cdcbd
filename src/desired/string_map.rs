//! [`StringMap`]: an instance's labels or annotations, a sorted list of
//! pairs read like a `BTreeMap<String, String>`.
//!
//! Most instances have none to three of each. A `BTreeMap` allocates a whole
//! node for its first entry (540 bytes for `String` pairs), and a
//! 10,000-instance plan held about 15,000 of them (its two revisions' models
//! and the typed lists they move out of): 9 MiB and 2,300 page faults of a
//! fresh process (docs/performance.md).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Keys in order, each once; look-ups by binary search.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StringMap(Vec<(String, String)>);

impl StringMap {
    /// An empty map (allocates nothing).
    pub const fn new() -> Self {
        StringMap(Vec::new())
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&String> {
        self.position(key).ok().map(|i| &self.0[i].1)
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Pairs in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&String, &String)> + Clone {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// Keys in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &String> + Clone {
        self.0.iter().map(|(k, _)| k)
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }
}

/// As a `BTreeMap` collects: in key order, the last value of a key kept.
impl FromIterator<(String, String)> for StringMap {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        let mut pairs: Vec<(String, String)> = pairs.into_iter().collect();
        // Stable: equal keys keep their order, and the last one wins below.
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, String)> = Vec::with_capacity(pairs.len());
        for (key, value) in pairs {
            match out.last_mut() {
                Some(last) if last.0 == key => last.1 = value,
                _ => out.push((key, value)),
            }
        }
        out.shrink_to_fit();
        StringMap(out)
    }
}

impl From<BTreeMap<String, String>> for StringMap {
    fn from(map: BTreeMap<String, String>) -> Self {
        StringMap(map.into_iter().collect())
    }
}

impl<'m> IntoIterator for &'m StringMap {
    type Item = (&'m String, &'m String);
    type IntoIter = std::iter::Map<std::slice::Iter<'m, (String, String)>, fn(&'m (String, String)) -> Self::Item>;

    fn into_iter(self) -> Self::IntoIter {
        fn pair((k, v): &(String, String)) -> (&String, &String) {
            (k, v)
        }
        self.0.iter().map(pair as fn(&'m (String, String)) -> Self::Item)
    }
}

impl fmt::Debug for StringMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for StringMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

/// Read as a `BTreeMap` is (the same errors), then kept compact.
impl<'de> Deserialize<'de> for StringMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        BTreeMap::<String, String>::deserialize(deserializer).map(StringMap::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn it_reads_as_the_btree_map_of_the_same_pairs() {
        let written = pairs(&[("b", "1"), ("a", "2"), ("c", "3"), ("a", "4")]);
        let map: StringMap = written.clone().into_iter().collect();
        let btree: BTreeMap<String, String> = written.into_iter().collect();
        assert!(map.iter().eq(btree.iter()));
        assert!(map.keys().eq(btree.keys()));
        assert_eq!((map.len(), map.is_empty()), (3, false));
        for key in ["a", "b", "c", "d", ""] {
            assert_eq!(map.get(key), btree.get(key), "{key}");
            assert_eq!(map.contains_key(key), btree.contains_key(key), "{key}");
        }
        assert_eq!(format!("{map:?}"), format!("{btree:?}"));
        assert_eq!(serde_json::to_value(&map).unwrap(), serde_json::to_value(&btree).unwrap());
        assert_eq!(StringMap::from(btree.clone()), map);
    }

    #[test]
    fn it_deserializes_as_a_btree_map_does() {
        let map: StringMap = serde_json::from_str(r#"{"z": "1", "a": "2"}"#).unwrap();
        assert!(map.keys().eq(["a", "z"].iter()));
        let wrong = serde_json::from_str::<StringMap>(r#"{"a": 1}"#).unwrap_err().to_string();
        let btree = serde_json::from_str::<BTreeMap<String, String>>(r#"{"a": 1}"#).unwrap_err().to_string();
        assert_eq!(wrong, btree);
    }
}
