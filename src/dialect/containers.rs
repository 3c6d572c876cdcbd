//! The Containers feature in both dialects ([`crate::lifecycle::containers`]):
//! its observation (a host being configured) and its enabling. Nothing
//! here comes from the repository: the feature's name, the modules and the
//! modules-load.d path are winfleet's constants.

use std::fmt::Write;

use super::posix_values::Part;
use crate::lifecycle::change::LifecycleChange;
use crate::lifecycle::containers::{FEATURE, POSIX_MODULES, POSIX_MODULES_FILE};

/// posix observation: `Enabled` when every module is loaded,
/// `EnablePending` when winfleet's modules-load.d file waits for a boot,
/// `Disabled` otherwise.
pub fn posix_observe() -> String {
    let mut s = "cm=Enabled\n".to_owned();
    let _ = writeln!(s, "for m in {}; do [ -d \"/sys/module/$m\" ] || cm=; done", POSIX_MODULES.join(" "));
    let _ = writeln!(
        s,
        "if [ -z \"$cm\" ]; then if [ -f '{POSIX_MODULES_FILE}' ]; then cm=EnablePending; else cm=Disabled; fi; fi"
    );
    s.push_str("t containers \"$cm\"\n");
    s
}

/// PowerShell observation: the feature's state as DISM reports it (WMCO's
/// `Get-WindowsOptionalFeature`); a query that fails reports its error as
/// the state, so the plan says why.
pub fn powershell_observe() -> String {
    format!(
        "  try {{ Write-WfToken 'containers' ([string](Get-WindowsOptionalFeature -FeatureName '{FEATURE}' -Online).State) }} \
         catch {{ Write-WfToken 'containers' ('unknown: ' + $_.Exception.Message) }}\n"
    )
}

/// posix: the line of the change into `part` (false for any other change).
pub(super) fn posix_line(i: usize, change: &LifecycleChange<'_>, part: &mut Part) -> bool {
    let line = matches!(change, LifecycleChange::EnableContainers);
    if line {
        let _ = writeln!(part.text, "containers {i}");
    }
    line
}

/// PowerShell: the line of the change (`None` for any other change).
pub fn powershell_line(i: usize, change: &LifecycleChange<'_>) -> Option<String> {
    matches!(change, LifecycleChange::EnableContainers).then(|| format!("Enable-WfContainers {i}\n"))
}

/// The helper of the lines, when `changes` has one.
pub fn helpers(changes: &[(usize, &LifecycleChange<'_>)], text: &'static str) -> &'static str {
    if changes.iter().any(|(_, c)| matches!(c, LifecycleChange::EnableContainers)) { text } else { "" }
}

/// posix helper (after the lifecycle's `o`): the modules-load.d file,
/// written whole through a temporary file; the reboot loads the modules.
pub const POSIX_HELPERS: &str = r#"containers() {
  idx=$1; f=/etc/modules-load.d/90-winfleet-containers.conf
  if [ -L "$f.winfleet-tmp" ]; then o failed "not written: $f.winfleet-tmp is a symbolic link, not winfleet's"; return; fi
  rm -f -- "$f.winfleet-tmp" 2>/dev/null
  if err=$( { set -C; printf '%s\n' overlay br_netfilter >"$f.winfleet-tmp" && mv -f -T -- "$f.winfleet-tmp" "$f"; } 2>&1 ); then o applied
  else rm -f -- "$f.winfleet-tmp" 2>/dev/null; o failed "cannot write $f: $err"; fi
}
"#;

/// PowerShell helper (after the lifecycle's `Write-WfFailure`): WMCO's
/// `Install-WindowsFeature`, its result checked.
pub const POWERSHELL_HELPERS: &str = r#"function Enable-WfContainers($i) {
  try {
    $ProgressPreference = 'SilentlyContinue'
    $r = Install-WindowsFeature -Name 'Containers'
    if ($r.Success) { Write-WfToken 'op' $i 'applied' }
    else { Write-WfFailure $i ('Install-WindowsFeature -Name Containers did not succeed (exit code ' + [string]$r.ExitCode + ')') }
  } catch { Write-WfFailure $i $_.Exception.Message }
}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helpers_name_the_constants_they_stand_for() {
        assert!(POSIX_HELPERS.contains(POSIX_MODULES_FILE));
        assert!(POSIX_HELPERS.contains(&format!("printf '%s\\n' {}", POSIX_MODULES.join(" "))));
        assert!(POWERSHELL_HELPERS.contains(&format!("-Name '{FEATURE}'")));
    }
}
