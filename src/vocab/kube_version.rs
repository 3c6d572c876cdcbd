//! Kubernetes versions as `/version` and a kubelet report them (`v1.37.2`,
//! `1.37.2+rhel`, `v1.30.0-rc.1`): only the major and minor count for the
//! version skew policy. Pure.

/// `(major, minor)` of a Kubernetes version, or `None` when it is none.
pub fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.trim().trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts.next()?.chars().take_while(char::is_ascii_digit).collect();
    Some((major, minor.parse().ok()?))
}

/// Whether a declared version (`v1.31`, `v1.31.3`, `1.31.3+rhel`) says the
/// same as one found in a binary (`v1.31.3+a80dac2`): with the leading `v`
/// and any build metadata (`+…`) left out, the declared components are the
/// first components of the found ones.
pub fn agrees(declared: &str, found: &str) -> bool {
    let parts = |v: &str| -> Vec<String> {
        let v = v.trim().trim_start_matches('v');
        v.split('+').next().unwrap_or(v).split('.').map(str::to_owned).collect()
    };
    let (declared, found) = (parts(declared), parts(found));
    !declared.is_empty() && found.starts_with(&declared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_version_agrees_with_the_found_one_it_is_a_prefix_of() {
        assert!(agrees("v1.36.2", "v1.36.2+a80dac2"));
        assert!(agrees("v1.36", "v1.36.2+a80dac2"));
        assert!(agrees("1.36.2+rhel", "v1.36.2"));
        assert!(!agrees("v1.36.3", "v1.36.2+a80dac2"));
        assert!(!agrees("v1.3", "v1.36.2"));
        assert!(!agrees("v1.36.2", "v1.36.2-rc.0"));
        assert!(!agrees("v1.36.2.1", "v1.36.2"));
    }

    #[test]
    fn major_and_minor_of_the_forms_kubernetes_reports() {
        assert_eq!(major_minor("v1.37.2"), Some((1, 37)));
        assert_eq!(major_minor("1.34.0+rhel"), Some((1, 34)));
        assert_eq!(major_minor("v1.30.0-rc.1"), Some((1, 30)));
        assert_eq!(major_minor("v1.31"), Some((1, 31)));
        for bad in ["", "v1", "latest", "v1.x.0", "1..2"] {
            assert_eq!(major_minor(bad), None, "{bad}");
        }
    }
}
