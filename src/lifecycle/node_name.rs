//! The name a node's kubelet registers under, known before its CSRs
//! arrive (issue 36). On AWS, GCP and vSphere WMCO's services manifest
//! starts the kubelet with `--hostname-override=HOSTNAME_OVERRIDE`, the
//! variable given by a pre-script (AWS: the instance metadata's
//! `local-hostname`; GCP: the metadata host name cut to 63 characters;
//! vSphere: the FQDN), so the Node and its CSRs carry that name, not the
//! host's short name. The observation already runs the pre-scripts that
//! give variables; this reads the kubelet's command and says which name
//! follows from it. Pure.

use super::LifecycleSpec;
use super::facts::LifecycleFacts;

/// The kubelet's service name in WMCO's manifests.
pub const KUBELET: &str = "kubelet";
const FLAG: &str = "--hostname-override";

/// What the kubelet's `--hostname-override` gives: `None` when the kubelet
/// has none (it registers under the OS host name); else the name, lowered
/// as the kubelet lowers it, or why it is not known yet.
pub fn kubelet_override(spec: &LifecycleSpec, facts: &LifecycleFacts) -> Option<Result<String, String>> {
    let kubelet = spec.services.iter().find(|s| s.name == KUBELET)?;
    let value = override_value(&kubelet.command)?;
    let from_script = kubelet.pre_scripts.iter().any(|p| p.variable.as_deref() == Some(value));
    if !from_script {
        return Some(Ok(value.to_lowercase()));
    }
    Some(match facts.variables.get(&(KUBELET.to_owned(), value.to_owned())) {
        Some(Ok(name)) if !name.trim().is_empty() => Ok(name.trim().trim_end_matches('.').to_lowercase()),
        Some(Ok(_)) => Err(format!("the kubelet's {value} pre-script printed nothing")),
        Some(Err(e)) => Err(format!("the kubelet's {value} pre-script failed: {e}")),
        None => Err(format!("the kubelet's {value} pre-script has not run on the node yet")),
    })
}

/// The value of `--hostname-override=V` or `--hostname-override V` in a
/// command line.
fn override_value(command: &str) -> Option<&str> {
    let mut words = command.split_whitespace();
    while let Some(word) = words.next() {
        if let Some(value) = word.strip_prefix(FLAG).and_then(|rest| rest.strip_prefix('=')) {
            return Some(value.trim_matches(['"', '\''])).filter(|v| !v.is_empty());
        }
        if word == FLAG {
            return words.next().map(|v| v.trim_matches(['"', '\''])).filter(|v| !v.is_empty());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::manifest::{PreScript, ServiceDef};
    use crate::lifecycle::tests_support::posix_spec;

    fn with_kubelet(command: &str, variable: Option<&str>) -> LifecycleSpec {
        let mut spec = posix_spec();
        spec.services = vec![ServiceDef {
            name: KUBELET.into(),
            command: command.into(),
            node_variables: Vec::new(),
            pre_scripts: variable
                .map(|v| PreScript { variable: Some(v.into()), path: "echo name".into(), node_args: Vec::new() })
                .into_iter()
                .collect(),
            dependencies: Vec::new(),
            bootstrap: true,
            priority: 1,
        }];
        spec
    }

    fn observed(value: Result<&str, &str>) -> LifecycleFacts {
        let mut facts = LifecycleFacts::default();
        let value = value.map(str::to_owned).map_err(str::to_owned);
        facts.variables.insert((KUBELET.into(), "HOSTNAME_OVERRIDE".into()), value);
        facts
    }

    /// WMCO's AWS kubelet (`pkg/services/services.go`), shortened.
    const AWS: &str = r"C:\k\kubelet.exe --config=C:\k\kubelet.conf --cloud-provider=external --hostname-override=HOSTNAME_OVERRIDE --node-ip=NODE_IP";

    #[test]
    fn the_pre_scripts_name_is_the_nodes_name_lowered_as_the_kubelet_lowers_it() {
        let spec = with_kubelet(AWS, Some("HOSTNAME_OVERRIDE"));
        let name = kubelet_override(&spec, &observed(Ok("IP-10-0-1-23.EC2.Internal\n")));
        assert_eq!(name, Some(Ok("ip-10-0-1-23.ec2.internal".to_owned())));
    }

    #[test]
    fn without_an_override_the_os_host_name_stands() {
        let spec = with_kubelet(r"C:\k\kubelet.exe --cloud-provider=external --node-ip=NODE_IP", None);
        assert_eq!(kubelet_override(&spec, &observed(Ok("x"))), None);
    }

    #[test]
    fn a_literal_override_is_the_name_and_the_flag_may_be_two_words() {
        let spec = with_kubelet("kubelet --hostname-override Win-Node.Corp --v=2", None);
        assert_eq!(kubelet_override(&spec, &LifecycleFacts::default()), Some(Ok("win-node.corp".to_owned())));
    }

    #[test]
    fn a_failed_empty_or_missing_pre_script_says_why() {
        let spec = with_kubelet(AWS, Some("HOSTNAME_OVERRIDE"));
        let failed = kubelet_override(&spec, &observed(Err("exit status 1"))).unwrap().unwrap_err();
        assert!(failed.contains("failed: exit status 1"), "{failed}");
        let empty = kubelet_override(&spec, &observed(Ok("  \n"))).unwrap().unwrap_err();
        assert!(empty.contains("printed nothing"), "{empty}");
        let missing = kubelet_override(&spec, &LifecycleFacts::default()).unwrap().unwrap_err();
        assert!(missing.contains("has not run"), "{missing}");
    }
}
