//! The lifecycle in the PowerShell dialect, its observation part:
//! directories, payload files (a stat key first, a SHA-256 only when the
//! key changed), services and their registry values, the pre-scripts'
//! variables, the Containers feature of a host being configured, and the
//! install record. The preparation and apply parts are
//! [`super::powershell_lifecycle`]'s.
//!
//! The observation also looks for what a crash left of winfleet's own next
//! to the files winfleet writes (the spec's, then the install record's): a
//! staging directory, a `.<name>.winfleet-tmp` temporary file, a
//! `<path>.winfleet-old` backup of `File.Replace`
//! ([`crate::lifecycle::leftover`]); a reparse point is never winfleet's.

use std::fmt::Write;

use serde_json::json;

use super::b64;
use super::posix_lifecycle::ObserveList;
use crate::lifecycle::LifecycleSpec;
use crate::lifecycle::record::record_path;
use crate::vocab::Shell;

/// The observation part (inside the observation's `try`).
pub fn observe(spec: &LifecycleSpec, list: &ObserveList) -> String {
    let input = json!({
        "dirs": spec.directories,
        "files": list.files.iter().map(|(p, k)| json!({ "p": p, "k": k })).collect::<Vec<_>>(),
        "services": spec.services.iter().map(|s| &s.name).collect::<Vec<_>>(),
        "vars": list.variables.iter().map(|(s, v, script)| json!({ "s": s, "v": v, "script": script })).collect::<Vec<_>>(),
    });
    let mut s = String::new();
    let _ = writeln!(s, "  $lc = ConvertFrom-WfBase64 '{}' | ConvertFrom-Json", b64(&input.to_string()));
    s.push_str(OBSERVE);
    if list.containers {
        s.push_str(&super::containers::powershell_observe());
    }
    if list.record {
        let _ = writeln!(s, "  $rec = ConvertFrom-WfBase64 '{}'", b64(record_path(Shell::Powershell)));
        s.push_str(RECORD_OBSERVE);
    }
    s
}

/// The install record, and the leftovers next to what it names (a
/// recorded staging directory counts as its parent's).
const RECORD_OBSERVE: &str = r#"  if ([System.IO.File]::Exists($rec)) {
    Write-WfToken 'lrecord' ([System.IO.File]::ReadAllText($rec))
    foreach ($l in [System.IO.File]::ReadAllLines($rec)) {
      if ($l.StartsWith('dir ', [System.StringComparison]::Ordinal)) {
        $p = $l.Substring(4)
        if ([System.IO.Path]::GetFileName($p) -eq '.winfleet-staging') { $p = [System.IO.Path]::GetDirectoryName($p) }
        Find-WfStaging $p
      } elseif ($l.StartsWith('file ', [System.StringComparison]::Ordinal)) {
        $r = $l.Substring(5); $j = $r.IndexOf(' ')
        if ($j -ge 0) { Find-WfLeftovers ($r.Substring($j + 1)) }
      }
    }
  }
"#;

/// `Find-WfStaging DIR`: DIR's staging directory, once per directory;
/// `Find-WfLeftovers PATH`: the staging directory, temporary file and
/// backup of a file winfleet writes. A check that fails reports nothing.
const OBSERVE: &str = r#"  Set-ExecutionPolicy -Scope Process -ExecutionPolicy Bypass -Force
  Write-WfToken 'home' ([string]$env:USERPROFILE)
  $wfSeen = @{}
  function Test-WfOwn([string]$p) { (([int][System.IO.File]::GetAttributes($p)) -band 1024) -eq 0 }
  function Find-WfStaging([string]$dir) {
    if ([string]::IsNullOrEmpty($dir) -or $wfSeen.ContainsKey($dir)) { return }
    $wfSeen[$dir] = $true
    try {
      $p = [System.IO.Path]::Combine($dir, '.winfleet-staging')
      if ([System.IO.Directory]::Exists($p) -and (Test-WfOwn $p)) { Write-WfToken 'lleft' $p 'staging' }
    } catch {}
  }
  function Find-WfLeftovers([string]$path) {
    try {
      $dir = [System.IO.Path]::GetDirectoryName($path)
      Find-WfStaging $dir
      foreach ($p in @([System.IO.Path]::Combine($dir, '.' + [System.IO.Path]::GetFileName($path) + '.winfleet-tmp'), ($path + '.winfleet-old'))) {
        if ([System.IO.File]::Exists($p) -and (Test-WfOwn $p)) { Write-WfToken 'lleft' $p 'temp' }
      }
    } catch {}
  }
  foreach ($d in @($lc.dirs)) {
    if ([System.IO.Directory]::Exists($d)) { Write-WfToken 'ldir' $d 'present' } else { Write-WfToken 'ldir' $d 'absent' }
  }
  foreach ($f in @($lc.files)) {
    Find-WfLeftovers $f.p
    $fi = New-Object System.IO.FileInfo $f.p
    if (-not $fi.Exists) { Write-WfToken 'lfile' $f.p 'absent'; continue }
    $key = '{0}:{1}:{2}' -f $fi.Length, $fi.CreationTimeUtc.Ticks, $fi.LastWriteTimeUtc.Ticks
    if ($key -ceq [string]$f.k) { Write-WfToken 'lfile' $f.p 'same' $key; continue }
    try { Write-WfToken 'lfile' $f.p 'sum' $key (Get-FileHash -Algorithm SHA256 -LiteralPath $f.p).Hash }
    catch { Write-WfToken 'lfile' $f.p 'key' $key }
  }
  foreach ($n in @($lc.services)) {
    $svc = Get-Service -Name $n -ErrorAction SilentlyContinue
    if ($null -eq $svc) { Write-WfToken 'lsvc' $n 'absent' 'win' '' '' '' ''; continue }
    $k = [Microsoft.Win32.Registry]::LocalMachine.OpenSubKey('SYSTEM\CurrentControlSet\Services\' + $n)
    $deps = @($k.GetValue('DependOnService', @())) -join "`n"
    Write-WfToken 'lsvc' $n ([string]$svc.Status) 'win' ([string]$k.GetValue('ImagePath', '', $raw)) ([string]$k.GetValue('Description', '', $raw)) $deps ([string]$k.GetValue('Start', ''))
  }
  foreach ($v in @($lc.vars)) {
    try { Write-WfToken 'lvar' $v.s $v.v 'ok' ((& ([ScriptBlock]::Create($v.script)) | Out-String).Trim()) }
    catch { Write-WfToken 'lvar' $v.s $v.v 'err' $_.Exception.Message }
  }
"#;
