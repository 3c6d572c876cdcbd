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

#[cfg(test)]
mod tests {
    use super::*;

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
