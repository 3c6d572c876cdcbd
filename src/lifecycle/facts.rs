//! What the observation script reports about the lifecycle, inside the same
//! NUL-token report as the rest of the facts ([`crate::node::facts`]):
//!
//! ```text
//! home <path>                        the SSH user's home (posix units need it)
//! ldir <path> present|absent         a directory of the spec
//! lfile <path> absent
//! lfile <path> same <key>            unchanged since winfleet hashed it (key = size, times, inode)
//! lfile <path> sum <key> <sha256>    hashed now
//! lsvc <name> <state> unit <sha256|->                          posix: the unit file
//! lsvc <name> <state> win <image> <description> <deps> <start> Windows: the service's registry values
//! lvar <service> <variable> ok <value> | err <message>          a pre-script's output
//! lrecord <content>                  winfleet's install record
//! lleft <path> staging|temp          a crash's leftover of winfleet's own ([`super::leftover`])
//! containers <state>                 the Containers feature (a host being configured; [`super::containers`])
//! ```
//!
//! Hashing every payload file in every observation would cost a node its
//! whole payload in disk reads per drift check; instead the script gets the
//! stat key winfleet saw with each known hash and hashes only files whose
//! key changed. A key that cannot change without the file changing (size,
//! modification and change times to the nanosecond, inode; on Windows size,
//! creation and write times in 100 ns ticks) makes that safe.

use std::collections::{BTreeMap, BTreeSet};

use super::containers::FeatureState;
use super::record::InstallRecord;
use crate::vocab::report::{ReportError, ServiceState, Tokens};

/// Lifecycle facts of one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LifecycleFacts {
    /// The SSH user's home directory.
    pub home: Option<String>,
    /// Directories of the spec that exist.
    pub dirs: BTreeSet<String>,
    /// Directories of the spec that were reported absent.
    pub absent_dirs: BTreeSet<String>,
    /// Files of the spec, by node path.
    pub files: BTreeMap<String, FileFact>,
    /// Services of the manifest, by name.
    pub services: BTreeMap<String, ServiceFact>,
    /// Pre-script outputs by (service, variable): the value, or why not.
    pub variables: BTreeMap<(String, String), Result<String, String>>,
    /// winfleet's install record, if the node has one (and it was asked for).
    pub record: Option<InstallRecord>,
    /// What a crash left of winfleet's own (staging directories, temporary
    /// files), by node path.
    pub leftovers: BTreeMap<String, Leftover>,
    /// The Containers feature, when it was asked about (a host being
    /// configured).
    pub containers: Option<FeatureState>,
}

/// A file as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileFact {
    /// Not there.
    Absent,
    /// There, with its stat key and its SHA-256 (`None`: unchanged since
    /// winfleet last hashed it under this key; see [`resolve_cached`]).
    Present {
        /// Stat key.
        key: String,
        /// SHA-256 when hashed now.
        sha256: Option<String>,
    },
}

impl FileFact {
    /// The SHA-256, once resolved; `None` when absent (or unresolved).
    pub fn sha256(&self) -> Option<&str> {
        match self {
            FileFact::Absent => None,
            FileFact::Present { sha256, .. } => sha256.as_deref(),
        }
    }
}

/// A service as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceFact {
    /// Running, stopped or absent.
    pub state: ServiceState,
    /// Its definition (absent services have none).
    pub definition: Option<Definition>,
}

/// A service definition, as a node holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Definition {
    /// A systemd unit file, by its SHA-256.
    Unit {
        /// Lower-case hex SHA-256 of the unit file.
        sha256: String,
    },
    /// A Windows service's configuration.
    Windows {
        /// `ImagePath` (the command line).
        image_path: String,
        /// `Description`.
        description: String,
        /// `DependOnService`, sorted.
        dependencies: Vec<String>,
        /// `Start`: 2 = automatic.
        start: String,
    },
}

/// Reads one lifecycle token (after its keyword); `Ok(false)` when the
/// keyword is not a lifecycle one.
pub(crate) fn read_token<'a>(
    keyword: &str,
    tokens: &mut Tokens<'a>,
    facts: &mut LifecycleFacts,
) -> Result<bool, ReportError> {
    match keyword {
        "home" => facts.home = Some(tokens.next()?.to_owned()),
        "containers" => facts.containers = Some(FeatureState::parse(tokens.next()?)),
        "ldir" => {
            let path = tokens.next()?.to_owned();
            match tokens.next()? {
                "present" => facts.dirs.insert(path),
                _ => facts.absent_dirs.insert(path),
            };
        }
        "lfile" => {
            let path = tokens.next()?.to_owned();
            let fact = match tokens.next()? {
                "absent" => FileFact::Absent,
                "same" | "key" => FileFact::Present { key: tokens.next()?.to_owned(), sha256: None },
                "sum" => {
                    let key = tokens.next()?.to_owned();
                    FileFact::Present { key, sha256: Some(tokens.next()?.trim().to_ascii_lowercase()) }
                }
                other => return Err(ReportError::Unexpected(other.to_owned())),
            };
            facts.files.insert(path, fact);
        }
        "lsvc" => {
            let name = tokens.next()?.to_owned();
            let state = ServiceState::parse(tokens.next()?);
            let definition = match tokens.next()? {
                "unit" => Some(tokens.next()?)
                    .filter(|s| *s != "-")
                    .map(|s| Definition::Unit { sha256: s.to_ascii_lowercase() }),
                "win" => {
                    let image_path = tokens.next()?.to_owned();
                    let description = tokens.next()?.to_owned();
                    let mut dependencies: Vec<String> =
                        tokens.next()?.split('\n').filter(|d| !d.is_empty()).map(str::to_owned).collect();
                    dependencies.sort_by_key(|d| d.to_lowercase());
                    let start = tokens.next()?.to_owned();
                    (state != ServiceState::Absent).then_some(Definition::Windows {
                        image_path,
                        description,
                        dependencies,
                        start,
                    })
                }
                other => return Err(ReportError::Unexpected(other.to_owned())),
            };
            facts.services.insert(name, ServiceFact { state, definition });
        }
        "lsums" => loop {
            let token = tokens.next()?;
            if token == "end-lsums" {
                break;
            }
            let (sum, path) = token.split_once("  ").ok_or_else(|| ReportError::Unexpected(token.to_owned()))?;
            if let Some(FileFact::Present { sha256, .. }) = facts.files.get_mut(path) {
                *sha256 = Some(sum.to_ascii_lowercase());
            }
        },
        "lsvcstate" => {
            let name = tokens.next()?.to_owned();
            let state = ServiceState::parse(tokens.next()?);
            facts.services.insert(name, ServiceFact { state, definition: None });
        }
        "lusums" => loop {
            let token = tokens.next()?;
            if token == "end-lusums" {
                break;
            }
            let (sum, path) = token.split_once("  ").ok_or_else(|| ReportError::Unexpected(token.to_owned()))?;
            let name = path.rsplit('/').next().and_then(|f| f.strip_suffix(".service")).unwrap_or_default();
            if let Some(service) = facts.services.get_mut(name) {
                service.definition = Some(Definition::Unit { sha256: sum.to_ascii_lowercase() });
            }
        },
        "lvar" => {
            let service = tokens.next()?.to_owned();
            let variable = tokens.next()?.to_owned();
            let value = match tokens.next()? {
                "ok" => Ok(tokens.next()?.trim().to_owned()),
                _ => Err(tokens.next()?.trim().to_owned()),
            };
            facts.variables.insert((service, variable), value);
        }
        "lrecord" => facts.record = Some(super::record::parse(tokens.next()?)),
        "lleft" => {
            let path = tokens.next()?.to_owned();
            facts.leftovers.insert(path, Leftover::parse(tokens.next()?));
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Settles what the tokens leave open: a posix service without a unit
/// file is absent whatever `systemctl` says of the name.
pub(crate) fn finish(facts: &mut LifecycleFacts) {
    for service in facts.services.values_mut() {
        if service.definition.is_none() && service.state != ServiceState::Running {
            service.state = ServiceState::Absent;
        }
    }
}

/// Hashes winfleet already knows, by node path: (stat key, SHA-256).
pub type HashCache = BTreeMap<String, (String, String)>;

/// Fills in the SHA-256 of files reported unchanged from `cache`, and
/// records the freshly hashed ones into it. A file reported unchanged that
/// the cache does not hold (it was evicted) stays unresolved: the plan
/// treats it as different and the next observation hashes it.
pub fn resolve_cached(facts: &mut LifecycleFacts, cache: &mut HashCache) {
    for (path, fact) in &mut facts.files {
        match fact {
            FileFact::Present { key, sha256: Some(sum) } => {
                cache.insert(path.clone(), (key.clone(), sum.clone()));
            }
            FileFact::Present { key, sha256: sha @ None } => {
                *sha = cache.get(path).filter(|(k, _)| k == key).map(|(_, s)| s.clone());
            }
            FileFact::Absent => {
                cache.remove(path);
            }
        }
    }
}

/// What kind of leftover a path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Leftover {
    /// An upload's staging directory (empty, or holding partial uploads).
    Staging,
    /// A write's temporary file (or, on Windows, a replaced file's backup).
    Temporary,
}

impl Leftover {
    /// The word the observation reports it with.
    pub fn parse(word: &str) -> Self {
        match word {
            "staging" => Leftover::Staging,
            _ => Leftover::Temporary,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_hashes_fill_in_unchanged_files_and_fresh_ones_are_remembered() {
        let mut cache = HashCache::new();
        cache.insert("/a".into(), ("k1".into(), "aa".into()));
        cache.insert("/gone".into(), ("k".into(), "gg".into()));
        let mut facts = LifecycleFacts::default();
        facts.files.insert("/a".into(), FileFact::Present { key: "k1".into(), sha256: None });
        facts.files.insert("/b".into(), FileFact::Present { key: "k2".into(), sha256: Some("bb".into()) });
        facts.files.insert("/c".into(), FileFact::Present { key: "k3".into(), sha256: None });
        facts.files.insert("/gone".into(), FileFact::Absent);
        resolve_cached(&mut facts, &mut cache);
        assert_eq!(facts.files["/a"].sha256(), Some("aa"));
        assert_eq!(facts.files["/c"].sha256(), None, "unknown to the cache: unresolved, never guessed");
        assert_eq!(cache.get("/b"), Some(&("k2".to_owned(), "bb".to_owned())));
        assert!(!cache.contains_key("/gone"));
    }
}
