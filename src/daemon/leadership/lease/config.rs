//! What a replica brings to the election and what it writes besides the
//! spec: the Lease's name and this process's identity and periods
//! ([`LeaseConfig`]), and the webhook URL the holder advertises in the
//! Lease's annotations. Pure but for reading the host name.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The Lease's default name.
pub const DEFAULT_NAME: &str = "winfleet-leader";

/// The Lease annotation in which the holder advertises its webhook's URL.
pub const WEBHOOK_ANNOTATION: &str = "winfleet.io/webhook-url";

/// Which Lease to hold, as whom, and how often to touch it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Namespace of the Lease (the pod's own namespace).
    pub namespace: String,
    /// Name of the Lease ([`DEFAULT_NAME`] unless configured).
    pub name: String,
    /// This process's identity, unique among the replicas ([`default_identity`]).
    pub identity: String,
    /// How long the Lease stays valid without a renewal. Written as
    /// `leaseDurationSeconds`, rounded up to whole seconds, at least 1 s.
    pub lease_duration: Duration,
    /// Renew period while leading (at most a third of the lease duration).
    pub renew_every: Duration,
    /// Try period while following, and after a failed renewal.
    pub retry_every: Duration,
    /// Where this replica's webhook answers for the other replicas
    /// (`http://10.128.2.7:8080`), written into the Lease while leading.
    pub advertise: Option<String>,
}

impl LeaseConfig {
    /// The Lease [`DEFAULT_NAME`] in `namespace` with client-go's default
    /// periods: lease 15 s, renew every 5 s, retry every 2 s.
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: DEFAULT_NAME.to_string(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
            retry_every: Duration::from_secs(2),
            advertise: None,
        }
    }
}

/// `$POD_NAME` (from the downward API), else the hostname, else
/// "winfleet"; plus a random five-character suffix, so that a restarted
/// process never mistakes its predecessor's Lease for its own.
pub fn default_identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(hostname)
        .unwrap_or_else(|| "winfleet".to_string());
    format!("{base}-{}", suffix())
}

fn hostname() -> Option<String> {
    let from_env = std::env::var("HOSTNAME").ok();
    let from_file =
        || ["/proc/sys/kernel/hostname", "/etc/hostname"].iter().find_map(|p| std::fs::read_to_string(p).ok());
    from_env.or_else(from_file).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn suffix() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..5).filter_map(|_| ALPHABET.get(fastrand::usize(..ALPHABET.len())).map(|&b| char::from(b))).collect()
}

/// The Lease's annotations with the webhook URL set to `url` (removed
/// when None); None when nothing is left.
pub(super) fn advertised(
    annotations: Option<BTreeMap<String, String>>,
    url: Option<&str>,
) -> Option<BTreeMap<String, String>> {
    let mut annotations = annotations.unwrap_or_default();
    match url {
        Some(url) => annotations.insert(WEBHOOK_ANNOTATION.to_owned(), url.to_owned()),
        None => annotations.remove(WEBHOOK_ANNOTATION),
    };
    (!annotations.is_empty()).then_some(annotations)
}

/// The webhook URL a Lease's holder advertises.
pub(super) fn webhook_of(metadata: &ObjectMeta) -> Option<String> {
    metadata.annotations.as_ref()?.get(WEBHOOK_ANNOTATION).filter(|u| !u.is_empty()).cloned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn identities_carry_a_random_suffix() {
        let a = default_identity();
        let b = default_identity();
        assert_ne!(a, b);
        let (base, tail) = a.rsplit_once('-').unwrap();
        assert!(!base.is_empty());
        assert_eq!(tail.len(), 5);
        assert!(tail.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
    }
}
