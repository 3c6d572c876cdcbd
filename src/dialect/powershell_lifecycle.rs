//! The lifecycle in the PowerShell dialect: the preparation script
//! (directories and upload staging) and the apply part (finishing uploads,
//! generated files, Windows services, stops and starts); the observation
//! part is [`super::powershell_lifecycle_observe`]'s.
//!
//! Every repository and cluster value arrives in one base64 JSON document
//! per step (`ConvertFrom-Json`) or as a base64 literal: nothing is spliced
//! into code. Services are created with `New-Service` and changed through
//! the service manager (`Win32_Service.Change`), whose parameters are bound,
//! not parsed from a command line; the description is WMCO's
//! `OpenShift managed <name>` and the start type automatic. Pre-scripts run
//! in this PowerShell session with the process execution policy set to
//! Bypass, as WMCO's WICD runs them (`-ExecutionPolicy Bypass`).

use std::fmt::Write;

use serde_json::json;

use super::b64;
use super::posix_lifecycle::{STAGING, split};
use crate::lifecycle::change::LifecycleChange;
use crate::lifecycle::facts::Definition;
use crate::lifecycle::facts::Leftover;
use crate::lifecycle::record::{HEADER, record_path};
use crate::vocab::Shell;

fn record_setup() -> String {
    let mut s = String::new();
    let _ = writeln!(s, "$rec = ConvertFrom-WfBase64 '{}'", b64(record_path(Shell::Powershell)));
    let _ = writeln!(s, "$recHeader = ConvertFrom-WfBase64 '{}'", b64(HEADER));
    s.push_str(
        r#"function Add-WfRecord([string]$line) {
  [void][System.IO.Directory]::CreateDirectory([System.IO.Path]::GetDirectoryName($rec))
  if (-not [System.IO.File]::Exists($rec)) { [System.IO.File]::WriteAllText($rec, $recHeader + "`n", $enc) }
  [System.IO.File]::AppendAllText($rec, $line + "`n", $enc)
}
function New-WfDirectory($i, [string]$p) {
  try {
    if ([System.IO.Directory]::Exists($p)) { if ($null -ne $i) { Write-WfToken 'op' $i 'unchanged' }; return }
    Add-WfRecord ('dir ' + $p)
    [void][System.IO.Directory]::CreateDirectory($p)
    if ($null -ne $i) { Write-WfToken 'op' $i 'applied' }
  } catch { if ($null -ne $i) { Write-WfToken 'op' $i 'failed' $_.Exception.Message } }
}
"#,
    );
    s
}

/// The preparation script's body (after the outcomes marker): directories
/// (recorded before they are created) and the staging directories of the
/// uploads. `None` when there is nothing to prepare.
pub fn prepare(changes: &[(usize, &LifecycleChange<'_>)]) -> Option<String> {
    let mut dirs: Vec<serde_json::Value> = Vec::new();
    let mut staging: Vec<String> = Vec::new();
    for (i, change) in changes {
        match change {
            LifecycleChange::CreateDir { path } => dirs.push(json!({ "i": i, "p": path })),
            LifecycleChange::Upload { file, .. } => {
                let stage = format!("{}\\{STAGING}", split(&file.path, Shell::Powershell).0);
                if !staging.contains(&stage) {
                    staging.push(stage);
                }
            }
            _ => {}
        }
    }
    dirs.extend(staging.iter().map(|p| json!({ "i": null, "p": p })));
    if dirs.is_empty() {
        return None;
    }
    let mut s = record_setup();
    // `ConvertFrom-Json` of an array, as an expression: Windows PowerShell
    // 5.1 writes a JSON array to the pipeline as one object, so `@(… |
    // ConvertFrom-Json)` would be an array holding the array.
    let _ = writeln!(
        s,
        "foreach ($d in (ConvertFrom-Json (ConvertFrom-WfBase64 '{}'))) {{ New-WfDirectory $d.i $d.p }}",
        b64(&serde_json::Value::Array(dirs).to_string())
    );
    Some(s)
}

/// The apply part of the lifecycle changes (after the outcomes marker), in
/// the plan's order by kind: stops, uploads finished, generated files,
/// service definitions, starts.
pub fn apply(changes: &[(usize, &LifecycleChange<'_>)]) -> String {
    let (mut stops, mut files, mut services, mut starts) = (String::new(), String::new(), String::new(), String::new());
    let mut leftovers = String::new();
    let mut uploads: Vec<serde_json::Value> = Vec::new();
    for (i, change) in changes {
        if let Some(line) =
            super::trust::powershell_line(*i, change).or_else(|| super::containers::powershell_line(*i, change))
        {
            files.push_str(&line);
            continue;
        }
        match change {
            LifecycleChange::Stop { service } => {
                let _ = writeln!(stops, "Stop-WfService {i} (ConvertFrom-WfBase64 '{}')", b64(&service.name));
            }
            LifecycleChange::Upload { file, .. } => {
                let (dir, name) = split(&file.path, Shell::Powershell);
                uploads.push(json!({ "i": i, "d": dir, "n": name, "s": file.sha256 }));
            }
            LifecycleChange::WriteGenerated { file, .. } => {
                let (dir, name) = split(&file.path, Shell::Powershell);
                let _ = writeln!(
                    files,
                    "Set-WfGenerated {i} (ConvertFrom-WfBase64 '{}') (ConvertFrom-WfBase64 '{}') '{}' '{}'",
                    b64(dir),
                    b64(name),
                    b64(file.file.content()),
                    file.file.sha256()
                );
            }
            LifecycleChange::Define {
                service,
                definition: Definition::Windows { image_path, description, dependencies, .. },
                ..
            } => {
                let (state, certs) = service.state();
                let input = json!({
                    "n": service.name, "p": image_path, "d": description, "deps": dependencies,
                    "state": state, "certs": certs,
                });
                let _ = writeln!(
                    services,
                    "Set-WfService {i} (ConvertFrom-WfBase64 '{}' | ConvertFrom-Json)",
                    b64(&input.to_string())
                );
            }
            LifecycleChange::Define { .. } => {
                let _ =
                    writeln!(services, "Write-WfToken 'op' {i} 'failed' 'a Windows node needs a service definition'");
            }
            LifecycleChange::Start { service, pre_scripts, .. } => {
                let scripts: Vec<String> = pre_scripts.iter().map(|p| b64(p)).collect();
                let input = json!({ "n": service.name, "pre": scripts });
                let _ = writeln!(
                    starts,
                    "Start-WfService {i} (ConvertFrom-WfBase64 '{}' | ConvertFrom-Json)",
                    b64(&input.to_string())
                );
            }
            LifecycleChange::RemoveService { name } => {
                let _ = writeln!(stops, "Remove-WfService {i} (ConvertFrom-WfBase64 '{}')", b64(name));
            }
            LifecycleChange::RemoveFile { path } => {
                let _ = writeln!(files, "Remove-WfFile {i} (ConvertFrom-WfBase64 '{}')", b64(path));
            }
            LifecycleChange::RemoveCerts { dir } => {
                let _ = writeln!(files, "Remove-WfCerts {i} (ConvertFrom-WfBase64 '{}')", b64(dir));
            }
            LifecycleChange::RemoveDir { path } => {
                let _ = writeln!(files, "Remove-WfEmptyDirectory {i} (ConvertFrom-WfBase64 '{}')", b64(path));
            }
            LifecycleChange::RemoveLeftover { path, kind } => {
                let kind = match kind {
                    Leftover::Staging => "staging",
                    Leftover::Temporary => "temp",
                };
                let _ = writeln!(leftovers, "Remove-WfLeftover {i} (ConvertFrom-WfBase64 '{}') '{kind}'", b64(path));
            }
            LifecycleChange::ForgetRecord => {
                let _ = writeln!(files, "Remove-WfRecord {i}");
            }
            LifecycleChange::CreateDir { .. } | LifecycleChange::EnableContainers => {}
        }
    }
    let mut s = record_setup();
    s.push_str(HELPERS);
    s.push_str(super::trust::helpers(changes, super::trust::POWERSHELL_HELPERS));
    s.push_str(super::containers::helpers(changes, super::containers::POWERSHELL_HELPERS));
    s.push_str(&stops);
    s.push_str(&leftovers);
    if !uploads.is_empty() {
        let _ = writeln!(
            s,
            "Complete-WfUploads (ConvertFrom-Json (ConvertFrom-WfBase64 '{}'))",
            b64(&serde_json::Value::Array(uploads).to_string())
        );
    }
    s.push_str(&files);
    s.push_str(&services);
    s.push_str(&starts);
    s
}

const HELPERS: &str = r#"Set-ExecutionPolicy -Scope Process -ExecutionPolicy Bypass -Force
$script:wfFailed = $false
function Write-WfFailure($i, [string]$why) { $script:wfFailed = $true; Write-WfToken 'op' $i 'failed' $why }
function Stop-WfService($i, [string]$name) {
  try { Stop-Service -Name $name -Force -ErrorAction Stop; Write-WfToken 'op' $i 'applied' }
  catch { Write-WfToken 'op' $i 'failed' $_.Exception.Message }
}
function Remove-WfService($i, [string]$name) {
  try {
    if ($null -eq (Get-Service -Name $name -ErrorAction SilentlyContinue)) { Write-WfToken 'op' $i 'unchanged'; return }
    Stop-Service -Name $name -Force -ErrorAction Stop
    $w = Get-CimInstance -ClassName Win32_Service | Where-Object { $_.Name -eq $name }
    $r = Invoke-CimMethod -InputObject $w -MethodName Delete
    if ($r.ReturnValue -ne 0) { throw ('the service manager refused to delete it (Win32_Service.Delete returned ' + $r.ReturnValue + ')') }
    Write-WfToken 'op' $i 'applied'
  } catch { Write-WfFailure $i $_.Exception.Message }
}
function Remove-WfFile($i, [string]$path) {
  try {
    if ([System.IO.File]::Exists($path) -and -not (Test-WfLink $path)) { [System.IO.File]::Delete($path); Write-WfToken 'op' $i 'applied' } else { Write-WfToken 'op' $i 'unchanged' }
  } catch { Write-WfFailure $i $_.Exception.Message }
}
function Remove-WfCerts($i, [string]$dir) {
  try {
    $certs = @()
    if ([System.IO.Directory]::Exists($dir)) { $certs = @([System.IO.Directory]::GetFiles($dir, 'kubelet-*.pem')) }
    if ($certs.Count -eq 0) { Write-WfToken 'op' $i 'unchanged'; return }
    foreach ($c in $certs) { [System.IO.File]::Delete($c) }
    Write-WfToken 'op' $i 'applied'
  } catch { Write-WfFailure $i $_.Exception.Message }
}
function Remove-WfEmptyDirectory($i, [string]$path) {
  try {
    if (-not [System.IO.Directory]::Exists($path) -or (Test-WfLink $path)) { Write-WfToken 'op' $i 'unchanged'; return }
    if (@([System.IO.Directory]::EnumerateFileSystemEntries($path)).Count -gt 0) { Write-WfToken 'op' $i 'unchanged'; return }
    [System.IO.Directory]::Delete($path)
    Write-WfToken 'op' $i 'applied'
  } catch { Write-WfFailure $i $_.Exception.Message }
}
function Remove-WfLeftover($i, [string]$path, [string]$kind) {
  try {
    if ($kind -eq 'staging') { $there = [System.IO.Directory]::Exists($path) } else { $there = [System.IO.File]::Exists($path) }
    if (-not $there) { Write-WfToken 'op' $i 'unchanged'; return }
    if ((([int][System.IO.File]::GetAttributes($path)) -band 1024) -ne 0) { throw ('not removed: ' + $path + ' is a reparse point, not winfleet''s') }
    if ($kind -eq 'staging') {
      foreach ($f in [System.IO.Directory]::GetFiles($path)) { [System.IO.File]::Delete($f) }
      [System.IO.Directory]::Delete($path)
    } else { [System.IO.File]::Delete($path) }
    Write-WfToken 'op' $i 'applied'
  } catch { Write-WfFailure $i $_.Exception.Message }
}
function Remove-WfRecord($i) {
  if ($script:wfFailed) { Write-WfToken 'op' $i 'failed' 'kept the install record: a removal above failed; the next round tries again'; return }
  try {
    if ([System.IO.File]::Exists($rec)) { [System.IO.File]::Delete($rec) }
    $d = [System.IO.Path]::GetDirectoryName($rec)
    if ([System.IO.Directory]::Exists($d) -and @([System.IO.Directory]::EnumerateFileSystemEntries($d)).Count -eq 0) { [System.IO.Directory]::Delete($d) }
    Write-WfToken 'op' $i 'applied'
  } catch { Write-WfToken 'op' $i 'failed' $_.Exception.Message }
}
function Expand-WfUpload([string]$staged) { $packed = $staged + '.winfleet-gz'; if (-not [System.IO.File]::Exists($packed)) { return }; $in = $null; $out = $null
  try { $in = [System.IO.File]::OpenRead($packed); $out = [System.IO.File]::Create($staged); (New-Object System.IO.Compression.GZipStream($in, [System.IO.Compression.CompressionMode]::Decompress)).CopyTo($out); $out.Dispose(); $out = $null }
  catch { if ($null -ne $out) { $out.Dispose() }; [System.IO.File]::Delete($staged) } finally { if ($null -ne $in) { $in.Dispose() }; [System.IO.File]::Delete($packed) } }
function Complete-WfUploads($list) {
  foreach ($u in $list) {
    try {
      $staged = [System.IO.Path]::Combine($u.d, '.winfleet-staging', $u.n); $target = [System.IO.Path]::Combine($u.d, $u.n); Expand-WfUpload $staged
      if (-not [System.IO.File]::Exists($staged)) { Write-WfToken 'op' $u.i 'failed' 'the upload did not arrive'; continue }
      $sum = (Get-FileHash -Algorithm SHA256 -LiteralPath $staged).Hash.ToLowerInvariant()
      if ($sum -cne $u.s) {
        [System.IO.File]::Delete($staged)
        Write-WfToken 'op' $u.i 'failed' ('the upload arrived with SHA-256 ' + $sum + ', expected ' + $u.s)
        continue
      }
      Add-WfRecord ('file ' + $u.s + ' ' + $target)
      if ([System.IO.File]::Exists($target)) {
        $old = $target + '.winfleet-old'
        [System.IO.File]::Replace($staged, $target, $old)
        [System.IO.File]::Delete($old)
      } else { [System.IO.File]::Move($staged, $target) }
      Write-WfToken 'op' $u.i 'applied'
      $fi = New-Object System.IO.FileInfo $target
      Write-WfToken 'lkey' $target ('{0}:{1}:{2}' -f $fi.Length, $fi.CreationTimeUtc.Ticks, $fi.LastWriteTimeUtc.Ticks)
    } catch { Write-WfToken 'op' $u.i 'failed' $_.Exception.Message }
  }
  foreach ($d in @($list | ForEach-Object { $_.d } | Sort-Object -Unique)) {
    $stage = [System.IO.Path]::Combine($d, '.winfleet-staging')
    try { if (@(Get-ChildItem -LiteralPath $stage -Force).Count -eq 0) { [System.IO.Directory]::Delete($stage) } } catch {}
  }
}
function Set-WfGenerated($i, [string]$dir, [string]$name, [string]$content, [string]$sum) {
  try { Add-WfRecord ('file ' + $sum + ' ' + [System.IO.Path]::Combine($dir, $name)) }
  catch { Write-WfToken 'op' $i 'failed' $_.Exception.Message; return }
  Set-WfFile $i $dir $name $content
}
function Set-WfService($i, $s) {
  try {
    $deps = [string[]]@($s.deps)
    $svc = Get-Service -Name $s.n -ErrorAction SilentlyContinue
    if ($null -eq $svc) {
      Add-WfRecord ('service ' + $s.n)
      foreach ($p in @($s.state)) { Add-WfRecord ('state ' + $p) }
      foreach ($p in @($s.certs)) { Add-WfRecord ('certs ' + $p) }
      $p = @{ Name = $s.n; BinaryPathName = $s.p; Description = $s.d; StartupType = 'Automatic' }
      if ($deps.Count -gt 0) { $p.DependsOn = $deps }
      [void](New-Service @p)
    } else {
      $w = Get-CimInstance -ClassName Win32_Service | Where-Object { $_.Name -eq $s.n }
      $r = Invoke-CimMethod -InputObject $w -MethodName Change -Arguments @{ PathName = $s.p; StartMode = 'Automatic'; ServiceDependencies = $deps }
      if ($r.ReturnValue -ne 0) { throw ('the service manager refused the change (Win32_Service.Change returned ' + $r.ReturnValue + ')') }
      Set-ItemProperty -LiteralPath ('HKLM:\SYSTEM\CurrentControlSet\Services\' + $s.n) -Name 'Description' -Value $s.d
    }
    Write-WfToken 'op' $i 'applied'
  } catch { Write-WfToken 'op' $i 'failed' $_.Exception.Message }
}
function Start-WfService($i, $s) {
  try {
    foreach ($pre in @($s.pre)) { [void](& ([ScriptBlock]::Create((ConvertFrom-WfBase64 $pre)))) }
  } catch { Write-WfToken 'op' $i 'failed' ('a pre-script failed: ' + $_.Exception.Message); return }
  try { Start-Service -Name $s.n -ErrorAction Stop; Write-WfToken 'op' $i 'applied' }
  catch { Write-WfToken 'op' $i 'failed' $_.Exception.Message }
}
"#;
