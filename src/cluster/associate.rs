//! Instance ↔ Node association, as WMCO does it (WMCO-SPEC 3.2): the
//! instance address resolved to IPv4 (a literal is itself, a DNS name its
//! first A record) equals any entry of the Node's `status.addresses`.
//! Nothing is guessed: an instance that matches no Node, or more than one, is
//! reported as unassociated with the reason.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use super::NodeObs;

/// Where an instance stands in the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Association {
    /// The instance is this Node.
    Node(String),
    /// No Node (or no single Node) is this instance.
    Unassociated(String),
}

impl Association {
    /// The Node name, when associated.
    pub fn node(&self) -> Option<&str> {
        match self {
            Association::Node(name) => Some(name),
            Association::Unassociated(_) => None,
        }
    }
}

/// Resolves every address to IPv4 (IPv4-only lookups, as WMCO).
pub async fn resolve_all<'a>(
    addresses: impl IntoIterator<Item = &'a str>,
) -> BTreeMap<String, Result<Ipv4Addr, String>> {
    let lookups = addresses.into_iter().map(|address| async move { (address.to_owned(), resolve(address).await) });
    futures::future::join_all(lookups).await.into_iter().collect()
}

async fn resolve(address: &str) -> Result<Ipv4Addr, String> {
    if let Ok(ip) = address.parse::<Ipv4Addr>() {
        return Ok(ip);
    }
    let found = tokio::net::lookup_host((address, 0)).await.map_err(|e| format!("cannot resolve {address}: {e}"))?;
    found
        .filter_map(|a| match a.ip() {
            IpAddr::V4(ip) => Some(ip),
            IpAddr::V6(_) => None,
        })
        .next()
        .ok_or_else(|| format!("{address} has no IPv4 address"))
}

/// Associates each resolved instance with the Node whose addresses contain
/// its IPv4. Pure.
pub fn associate(
    resolved: &BTreeMap<String, Result<Ipv4Addr, String>>,
    nodes: &BTreeMap<String, NodeObs>,
) -> BTreeMap<String, Association> {
    let mut out = BTreeMap::new();
    let mut claimed: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (address, ip) in resolved {
        let association = match ip {
            Err(reason) => Association::Unassociated(reason.clone()),
            Ok(ip) => {
                let matches: Vec<&str> = nodes
                    .values()
                    .filter(|n| n.addresses.iter().any(|a| a.parse::<Ipv4Addr>().is_ok_and(|a| a == *ip)))
                    .map(|n| n.name.as_str())
                    .collect();
                match matches.as_slice() {
                    [] => Association::Unassociated(format!("no Windows Node has address {ip} (not joined yet?)")),
                    [one] => {
                        claimed.entry(one).or_default().push(address);
                        Association::Node((*one).to_owned())
                    }
                    many => Association::Unassociated(format!(
                        "address {ip} belongs to more than one Node ({}); winfleet does not guess",
                        many.join(", ")
                    )),
                }
            }
        };
        out.insert(address.clone(), association);
    }
    for (node, addresses) in claimed.into_iter().filter(|(_, a)| a.len() > 1) {
        for address in &addresses {
            let others: Vec<&str> = addresses.iter().copied().filter(|a| a != address).collect();
            out.insert(
                (*address).to_owned(),
                Association::Unassociated(format!(
                    "Node {node} is also the instance {}; list each host once",
                    others.join(", ")
                )),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, addresses: &[&str]) -> (String, NodeObs) {
        let addresses = addresses.iter().map(|a| (*a).to_owned()).collect();
        (name.to_owned(), NodeObs { name: name.into(), addresses, ..NodeObs::default() })
    }

    #[test]
    fn exact_ipv4_match_on_any_address_and_nothing_guessed() {
        let nodes: BTreeMap<_, _> = [
            node("win-a", &["win-a.corp", "10.0.0.1"]),
            node("win-b", &["10.0.0.2", "10.0.0.20"]),
            node("win-c", &["10.0.0.3"]),
            node("win-d", &["10.0.0.3"]),
        ]
        .into();
        let resolved: BTreeMap<String, Result<Ipv4Addr, String>> = [
            ("10.0.0.1".to_owned(), Ok(Ipv4Addr::new(10, 0, 0, 1))),
            ("b.corp".to_owned(), Ok(Ipv4Addr::new(10, 0, 0, 20))),
            ("10.0.0.10".to_owned(), Ok(Ipv4Addr::new(10, 0, 0, 10))),
            ("10.0.0.3".to_owned(), Ok(Ipv4Addr::new(10, 0, 0, 3))),
            ("gone.corp".to_owned(), Err("cannot resolve gone.corp".to_owned())),
        ]
        .into();
        let a = associate(&resolved, &nodes);
        assert_eq!(a["10.0.0.1"], Association::Node("win-a".into()));
        assert_eq!(a["b.corp"], Association::Node("win-b".into()));
        assert!(
            matches!(&a["10.0.0.10"], Association::Unassociated(r) if r.contains("no Windows Node has address 10.0.0.10"))
        );
        assert!(matches!(&a["10.0.0.3"], Association::Unassociated(r) if r.contains("win-c, win-d")));
        assert!(matches!(&a["gone.corp"], Association::Unassociated(r) if r.contains("cannot resolve")));
    }

    #[test]
    fn two_instances_on_one_node_are_both_reported() {
        let nodes: BTreeMap<_, _> = [node("win-a", &["10.0.0.1"])].into();
        let resolved: BTreeMap<String, Result<Ipv4Addr, String>> = [
            ("10.0.0.1".to_owned(), Ok(Ipv4Addr::new(10, 0, 0, 1))),
            ("a.corp".to_owned(), Ok(Ipv4Addr::new(10, 0, 0, 1))),
        ]
        .into();
        let a = associate(&resolved, &nodes);
        assert!(matches!(&a["10.0.0.1"], Association::Unassociated(r) if r.contains("also the instance a.corp")));
        assert!(matches!(&a["a.corp"], Association::Unassociated(r) if r.contains("also the instance 10.0.0.1")));
    }
}
