//! The PowerShell dialect: Windows PowerShell 5.1, started from the nodes'
//! default cmd.exe shell as `powershell.exe -NoLogo -NoProfile
//! -NonInteractive -Command -` with the script on standard input.
//!
//! `-Command -` runs its input line by line, so the script travels as ONE
//! line that decodes and runs it as a script block: a line cut off in
//! transit is a parse error and runs nothing. Reports are written as raw
//! UTF-8 bytes to the standard output stream, past the console code page.
//!
//! Helper functions have Verb-Wf names: a function never shadows an alias
//! (aliases win in PowerShell: `r` is Invoke-History).
//!
//! Files go through a temporary file in the same directory and
//! `File.Replace` (or `File.Move` for a new file). Environment variables are
//! string values of `HKLM\SYSTEM\CurrentControlSet\Control\Session
//! Manager\Environment`, as WMCO's WICD writes them (WMCO-SPEC 2.4); a change
//! leaves the volatile key `HKLM\SOFTWARE\winfleet\RebootOwed`, which
//! observation reports and the next boot erases.

use std::fmt::Write;

use base64::Engine as _;

use super::{Interpreter, ObserveList, Script, b64, powershell_lifecycle, powershell_lifecycle_observe};
use crate::lifecycle::change::LifecycleChange;
use crate::node::facts::{FACTS_MARKER, FACTS_VERSION};
use crate::node::outcome::{OUTCOMES_MARKER, OUTCOMES_VERSION};
use crate::node::plan::{Change, is_entry_name};
use crate::node::{MANAGED_ENVIRONMENT, NodeSpec, REGISTRY_MARKER_TEXT};

/// The command line of both scripts.
pub const COMMAND: &str = "powershell.exe -NoLogo -NoProfile -NonInteractive -Command -";

/// The kept session: `-Command -` runs each line of its input as it
/// arrives, so one powershell.exe runs a node's scripts one after another,
/// each a line of its own ([`wrap`]) in a child scope of the session.
pub const INTERPRETER: Interpreter = Interpreter { command: COMMAND, end_line };

/// The line after each script, one line like a script: the marker as
/// base64, decoded and written to the raw standard output stream (as
/// `Write-WfToken` writes), in a script block of its own.
pub fn end_line(marker: &[u8]) -> String {
    format!(
        "& {{ $m = [Convert]::FromBase64String('{}'); $o = [Console]::OpenStandardOutput(); $o.Write($m, 0, $m.Length); $o.Flush() }}\r\n",
        base64::engine::general_purpose::STANDARD.encode(marker)
    )
}

const PRELUDE: &str = r#"$ErrorActionPreference = 'Stop'
$ProgressPreference = 'SilentlyContinue'
$enc = New-Object System.Text.UTF8Encoding $false
$out = [Console]::OpenStandardOutput()
function Write-WfToken { foreach ($s in $args) { $b = $enc.GetBytes([string]$s); $out.Write($b, 0, $b.Length); $out.WriteByte(0) }; $out.Flush() }
function ConvertFrom-WfBase64([string]$b) { $enc.GetString([Convert]::FromBase64String($b)) }
$envKeyPath = 'SYSTEM\CurrentControlSet\Control\Session Manager\Environment'
$raw = [Microsoft.Win32.RegistryValueOptions]::DoNotExpandEnvironmentNames
# A reparse point (symbolic link, junction) is never winfleet's. File.GetAttributes
# reports the link's own attributes, not its target's (GetFileAttributes: "If the path
# points to a symbolic link, the function returns attributes for the symbolic link",
# https://learn.microsoft.com/windows/win32/fileio/symbolic-link-effects-on-file-systems-functions);
# FileAttributes.ReparsePoint: https://learn.microsoft.com/dotnet/api/system.io.fileattributes
# File.Exists and Directory.Exists read the same attributes, so a dangling link exists.
function Test-WfLink([string]$p) {
  if (-not [System.IO.File]::Exists($p) -and -not [System.IO.Directory]::Exists($p)) { return $false }
  (([System.IO.File]::GetAttributes($p)) -band [System.IO.FileAttributes]::ReparsePoint) -ne 0
}
# A file winfleet creates (a marker, a temporary file) is created new or not at all
# (FileMode.CreateNew: https://learn.microsoft.com/dotnet/api/system.io.filemode).
function New-WfFile([string]$p, [byte[]]$bytes) {
  $s = [System.IO.File]::Open($p, [System.IO.FileMode]::CreateNew, [System.IO.FileAccess]::Write)
  try { $s.Write($bytes, 0, $bytes.Length) } finally { $s.Dispose() }
}
"#;

/// The observation script (readable form; see [`wrap`]); with a lifecycle
/// list, the lifecycle's facts too.
pub fn observe_script(spec: &NodeSpec, lifecycle: Option<&ObserveList>) -> String {
    let mut s = PRELUDE.to_owned();
    let _ = writeln!(s, "$reg = ConvertFrom-WfBase64 '{}'", b64(&spec.registries_dir));
    let services: Vec<String> =
        spec.services.iter().map(|name| format!("(ConvertFrom-WfBase64 '{}')", b64(name))).collect();
    let _ = writeln!(s, "$services = @({})", services.join(", "));
    let names: Vec<String> = MANAGED_ENVIRONMENT.iter().map(|n| format!("'{n}'")).collect();
    let _ = writeln!(s, "$names = @({})", names.join(", "));
    let _ = writeln!(s, "Write-WfToken '{FACTS_MARKER}' '{FACTS_VERSION}'");
    s.push_str(
        r#"try {
  Write-WfToken 'hostname' ([System.Net.Dns]::GetHostName())
  $cv = Get-ItemProperty -LiteralPath 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion'
  Write-WfToken 'os' ('{0}.{1}.{2}.{3}' -f $cv.CurrentMajorVersionNumber, $cv.CurrentMinorVersionNumber, $cv.CurrentBuildNumber, $cv.UBR)
  Write-WfToken 'edition' ([string]$cv.EditionID)
  # Port 10250 (the kubelet's, which the cluster reaches for logs, exec and
  # metrics): the local ports of every enabled inbound Allow rule for TCP
  # that may cover it ('Any', '10250' or a range), or the firewall off;
  # 'unknown' when the cmdlets fail (the observation goes on).
  try {
    if (@(Get-NetFirewallProfile -ErrorAction Stop | Where-Object { [string]$_.Enabled -eq 'True' }).Count -eq 0) {
      Write-WfToken 'firewall' 'off'
    } else {
      $allow = @{}
      foreach ($r in @(Get-NetFirewallRule -Enabled True -Direction Inbound -Action Allow -ErrorAction Stop)) { $allow[[string]$r.InstanceID] = $true }
      foreach ($f in @(Get-NetFirewallPortFilter -All -ErrorAction Stop)) {
        if (-not $allow.ContainsKey([string]$f.InstanceID) -or @('TCP', '6', 'Any') -notcontains [string]$f.Protocol) { continue }
        foreach ($p in @($f.LocalPort)) {
          $t = [string]$p
          if ($t -eq 'Any' -or $t -eq '10250' -or $t.Contains('-')) { Write-WfToken 'kubeletport' $t }
        }
      }
      Write-WfToken 'firewall' 'on'
    }
  } catch { Write-WfToken 'firewall' 'unknown' }
  # The boot counter the kubelet reports as its Node's bootID.
  $pf = Get-ItemProperty -LiteralPath 'HKLM:\SYSTEM\CurrentControlSet\Control\Session Manager\Memory Management\PrefetchParameters' -ErrorAction SilentlyContinue
  if ($null -ne $pf -and $null -ne $pf.BootId) { Write-WfToken 'boot' ([string]$pf.BootId) }
  $wfOwn = @('hosts.toml', '.winfleet-managed', '.hosts.toml.winfleet-tmp', 'hosts.toml.winfleet-old')
  if ([System.IO.Directory]::Exists($reg)) {
    foreach ($p in [System.IO.Directory]::GetDirectories($reg)) {
      $n = [System.IO.Path]::GetFileName($p)
      if ($n.StartsWith('.')) { continue }
      Write-WfToken 'dir' $n
      if (Test-WfLink $p) { Write-WfToken 'link' $n; continue }
      $m = [System.IO.Path]::Combine($p, '.winfleet-managed')
      if ([System.IO.File]::Exists($m) -and -not (Test-WfLink $m)) {
        Write-WfToken 'mark' $n
        foreach ($e in [System.IO.Directory]::GetFileSystemEntries($p)) {
          $en = [System.IO.Path]::GetFileName($e)
          if (($wfOwn -contains $en) -and [System.IO.File]::Exists($e) -and -not (Test-WfLink $e)) { continue }
          Write-WfToken 'unmanaged' $n $en
        }
      }
      $f = [System.IO.Path]::Combine($p, 'hosts.toml')
      if ([System.IO.File]::Exists($f)) { Write-WfToken 'file' $n (Get-FileHash -Algorithm SHA256 -LiteralPath $f).Hash }
    }
  }
  $envKey = [Microsoft.Win32.Registry]::LocalMachine.OpenSubKey($envKeyPath)
  foreach ($name in $names) {
    $v = $envKey.GetValue($name, $null, $raw)
    if ($null -ne $v) { Write-WfToken 'env' $name ([string]$v) }
  }
  if (Test-Path -LiteralPath 'HKLM:\SOFTWARE\winfleet\RebootOwed') { Write-WfToken 'reboot' 'pending' }
  foreach ($name in $services) {
    $svc = Get-Service -Name $name -ErrorAction SilentlyContinue
    if ($null -eq $svc) { Write-WfToken 'service' $name 'absent' } else { Write-WfToken 'service' $name ([string]$svc.Status) }
  }
"#,
    );
    if let (Some(spec), Some(list)) = (&spec.lifecycle, lifecycle) {
        s.push_str(&powershell_lifecycle_observe::observe(spec, list));
    }
    s.push_str("  Write-WfToken 'end'\n} catch { Write-WfToken 'error' $_.Exception.Message }\n");
    s
}

/// The preparation script of the lifecycle (readable form; see [`wrap`]),
/// when there is anything to prepare.
pub fn prepare_script(lifecycle: &[(usize, &LifecycleChange<'_>)]) -> Option<String> {
    let body = powershell_lifecycle::prepare(lifecycle)?;
    let mut s = PRELUDE.to_owned();
    let _ = writeln!(s, "Write-WfToken '{OUTCOMES_MARKER}' '{OUTCOMES_VERSION}'");
    s.push_str(&body);
    s.push_str("Write-WfToken 'end'\n");
    Some(s)
}

/// The apply script (readable form; see [`wrap`]).
pub fn apply_script(spec: &NodeSpec, changes: &[Change<'_>], lifecycle: &[(usize, &LifecycleChange<'_>)]) -> String {
    let mut s = PRELUDE.to_owned();
    s.push_str(
        r#"function Set-WfFile($i, [string]$dir, [string]$name, [string]$content) {
  try {
    [void][System.IO.Directory]::CreateDirectory($dir)
    $target = [System.IO.Path]::Combine($dir, $name)
    $tmp = [System.IO.Path]::Combine($dir, '.' + $name + '.winfleet-tmp')
    if ([System.IO.File]::Exists($target) -and [Convert]::ToBase64String([System.IO.File]::ReadAllBytes($target)) -ceq $content) {
      Write-WfToken 'op' $i 'unchanged'; return
    }
    if (Test-WfLink $tmp) { Write-WfToken 'op' $i 'failed' ('not written: ' + $tmp + ' is a reparse point (a link), not winfleet''s'); return }
    if ([System.IO.File]::Exists($tmp)) { [System.IO.File]::Delete($tmp) }
    New-WfFile $tmp ([Convert]::FromBase64String($content))
    if ([System.IO.File]::Exists($target)) {
      $old = $target + '.winfleet-old'
      [System.IO.File]::Replace($tmp, $target, $old)
      [System.IO.File]::Delete($old)
    } else { [System.IO.File]::Move($tmp, $target) }
    Write-WfToken 'op' $i 'applied'
  } catch { Write-WfToken 'op' $i 'failed' $_.Exception.Message }
}
function Set-WfRegistry($i, [string]$dir, [string]$content) {
  try {
    if (Test-WfLink $dir) { Write-WfToken 'op' $i 'failed' ('not written: ' + $dir + ' is a reparse point (a link), not winfleet''s'); return }
    [void][System.IO.Directory]::CreateDirectory($dir)
    $mark = [System.IO.Path]::Combine($dir, '.winfleet-managed')
    if (Test-WfLink $mark) { Write-WfToken 'op' $i 'failed' ('not written: ' + $mark + ' is a reparse point (a link), not winfleet''s marker'); return }
    if (-not [System.IO.File]::Exists($mark)) { New-WfFile $mark ($enc.GetBytes($markText)) }
  } catch { Write-WfToken 'op' $i 'failed' $_.Exception.Message; return }
  Set-WfFile $i $dir 'hosts.toml' $content
}
function Remove-WfRegistry($i, [string]$path) {
  try {
    if (-not [System.IO.Directory]::Exists($path)) { Write-WfToken 'op' $i 'unchanged'; return }
    if (Test-WfLink $path) { Write-WfToken 'op' $i 'failed' ('not removed: ' + $path + ' is a reparse point (a link), not winfleet''s'); return }
    $mark = [System.IO.Path]::Combine($path, '.winfleet-managed')
    if (-not [System.IO.File]::Exists($mark) -or (Test-WfLink $mark)) {
      Write-WfToken 'op' $i 'failed' ('not removed: ' + $path + ' holds no winfleet marker'); return
    }
    # Only what winfleet wrote, the marker last; the directory when nothing else is left.
    foreach ($n in @('.hosts.toml.winfleet-tmp', 'hosts.toml.winfleet-old', 'hosts.toml', '.winfleet-managed')) {
      $f = [System.IO.Path]::Combine($path, $n)
      if ([System.IO.File]::Exists($f) -and -not (Test-WfLink $f)) { [System.IO.File]::Delete($f) }
    }
    if (@([System.IO.Directory]::EnumerateFileSystemEntries($path)).Count -eq 0) { [System.IO.Directory]::Delete($path) }
    Write-WfToken 'op' $i 'applied'
  } catch { Write-WfToken 'op' $i 'failed' $_.Exception.Message }
}
function Set-WfEnvironment($i, [string]$name, $value) {
  try {
    $key = [Microsoft.Win32.Registry]::LocalMachine.OpenSubKey($envKeyPath, $true)
    $cur = $key.GetValue($name, $null, $raw)
    if ($null -eq $value -and $null -eq $cur) { Write-WfToken 'op' $i 'unchanged'; return }
    if ($null -ne $value -and $cur -is [string] -and $cur -ceq $value) { Write-WfToken 'op' $i 'unchanged'; return }
    # The reboot is owed before the value changes: a script cut off after
    # the change must not lose it.
    [void][Microsoft.Win32.Registry]::LocalMachine.CreateSubKey('SOFTWARE\winfleet\RebootOwed', [Microsoft.Win32.RegistryKeyPermissionCheck]::ReadWriteSubTree, [Microsoft.Win32.RegistryOptions]::Volatile)
    if ($null -eq $value) { $key.DeleteValue($name) } else { $key.SetValue($name, [string]$value, [Microsoft.Win32.RegistryValueKind]::String) }
    Write-WfToken 'op' $i 'applied'
  } catch { Write-WfToken 'op' $i 'failed' $_.Exception.Message }
}
"#,
    );
    let _ = writeln!(s, "$markText = ConvertFrom-WfBase64 '{}'", b64(REGISTRY_MARKER_TEXT));
    let _ = writeln!(s, "Write-WfToken '{OUTCOMES_MARKER}' '{OUTCOMES_VERSION}'");
    for (i, change) in changes.iter().enumerate() {
        let _ = match change {
            Change::WriteFile { registry, file, .. } if is_entry_name(registry) => {
                let dir = format!("{}\\{registry}", spec.registries_dir.trim_end_matches('\\'));
                writeln!(s, "Set-WfRegistry {i} (ConvertFrom-WfBase64 '{}') '{}'", b64(&dir), b64(file.content()))
            }
            Change::RemoveRegistry { refused: Some(reason), .. } => {
                writeln!(s, "Write-WfToken 'op' {i} 'failed' (ConvertFrom-WfBase64 '{}')", b64(reason))
            }
            Change::RemoveRegistry { registry, refused: None, .. } if is_entry_name(registry) => {
                let path = format!("{}\\{registry}", spec.registries_dir.trim_end_matches('\\'));
                writeln!(s, "Remove-WfRegistry {i} (ConvertFrom-WfBase64 '{}')", b64(&path))
            }
            Change::LinkedRegistry { .. } => {
                let reason = crate::node::plan::linked_reason(spec.shell);
                writeln!(s, "Write-WfToken 'op' {i} 'failed' 'not written: {reason}'")
            }
            Change::WriteFile { .. } | Change::RemoveRegistry { .. } => {
                writeln!(s, "Write-WfToken 'op' {i} 'failed' 'not a plain directory name'")
            }
            Change::SetEnv { name, value, .. } => {
                writeln!(s, "Set-WfEnvironment {i} '{name}' (ConvertFrom-WfBase64 '{}')", b64(value))
            }
            Change::UnsetEnv { name, .. } => writeln!(s, "Set-WfEnvironment {i} '{name}' $null"),
        };
    }
    if spec.lifecycle.is_some() && !lifecycle.is_empty() {
        s.push_str(&powershell_lifecycle::apply(lifecycle));
    }
    s.push_str("Write-WfToken 'end'\n");
    s
}

/// The one line sent on standard input: the script, base64-encoded,
/// decoded and run as a script block.
pub fn wrap(script: &str) -> String {
    format!(
        "& ([ScriptBlock]::Create([Text.Encoding]::UTF8.GetString([Convert]::FromBase64String('{}'))))\r\n",
        b64(script)
    )
}

/// The observation [`Script`].
pub fn observe(spec: &NodeSpec, lifecycle: Option<&ObserveList>) -> Script {
    Script { command: COMMAND, input: wrap(&observe_script(spec, lifecycle)) }
}

/// The preparation [`Script`] of the lifecycle changes.
pub fn prepare(spec: &NodeSpec, lifecycle: &[(usize, &LifecycleChange<'_>)]) -> Option<Script> {
    spec.lifecycle.as_ref()?;
    Some(Script { command: COMMAND, input: wrap(&prepare_script(lifecycle)?) })
}

/// The apply [`Script`].
pub fn apply(spec: &NodeSpec, changes: &[Change<'_>], lifecycle: &[(usize, &LifecycleChange<'_>)]) -> Script {
    Script { command: COMMAND, input: wrap(&apply_script(spec, changes, lifecycle)) }
}
