//! The order people read lists in: addresses numerically (`10.1.0.2`
//! before `10.1.0.10`), names naturally (`registry2` before
//! `registry10`). Plans sort nodes, instances and files this way in every
//! format. Pure.

use std::cmp::Ordering;
use std::net::IpAddr;

/// Names in natural order: runs of digits compare as numbers.
pub fn natural(a: &str, b: &str) -> Ordering {
    alphanumeric_sort::compare_str(a, b).then_with(|| a.cmp(b))
}

/// Node addresses: IPv4 numerically, then IPv6 numerically, then host
/// names naturally.
pub fn address(a: &str, b: &str) -> Ordering {
    rank(a).cmp(&rank(b)).then_with(|| natural(a, b))
}

/// Sorts `items` in [`address`] order of `key`, each address read once
/// (a plan sorts 10,000 of them: reading both at every comparison was most
/// of the sort).
pub fn sort_by_address<T>(items: &mut Vec<T>, key: impl Fn(&T) -> &str) {
    let mut ranked: Vec<((u8, Option<IpAddr>), T)> = items.drain(..).map(|t| (rank(key(&t)), t)).collect();
    ranked.sort_by(|(ra, a), (rb, b)| ra.cmp(rb).then_with(|| natural(key(a), key(b))));
    items.extend(ranked.into_iter().map(|(_, t)| t));
}

fn rank(s: &str) -> (u8, Option<IpAddr>) {
    match s.parse::<IpAddr>() {
        Ok(ip @ IpAddr::V4(_)) => (0, Some(ip)),
        Ok(ip @ IpAddr::V6(_)) => (1, Some(ip)),
        Err(_) => (2, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mut v: Vec<&str>, by: fn(&str, &str) -> Ordering) -> Vec<&str> {
        v.sort_by(|a, b| by(a, b));
        v
    }

    #[test]
    fn names_sort_with_their_numbers_as_numbers() {
        let names = vec!["registry100", "registry10", "registry2", "registry1", "mcr.microsoft.com"];
        assert_eq!(
            sorted(names, natural),
            ["mcr.microsoft.com", "registry1", "registry2", "registry10", "registry100"]
        );
    }

    #[test]
    fn addresses_sort_numerically_then_host_names_naturally() {
        let addresses = vec!["win10.corp", "10.1.0.10", "::1", "10.1.0.2", "win9.corp", "9.0.0.1", "10.1.0.1"];
        assert_eq!(
            sorted(addresses, address),
            ["9.0.0.1", "10.1.0.1", "10.1.0.2", "10.1.0.10", "::1", "win9.corp", "win10.corp"]
        );
    }

    #[test]
    fn sorting_by_address_is_sorting_with_the_comparison() {
        let addresses =
            vec!["win10.corp", "10.1.0.10", "::1", "10.1.0.2", "win9.corp", "9.0.0.1", "10.1.0.1", "a01", "a1"];
        let mut items: Vec<(usize, &str)> = addresses.iter().copied().enumerate().collect();
        sort_by_address(&mut items, |(_, a)| a);
        let ours: Vec<&str> = items.into_iter().map(|(_, a)| a).collect();
        assert_eq!(ours, sorted(addresses, address));
    }

    #[test]
    fn different_names_never_compare_equal() {
        assert_ne!(natural("a01", "a1"), Ordering::Equal);
    }
}
