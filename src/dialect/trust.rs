//! The trusted CA bundle's import in both dialects
//! ([`crate::lifecycle::trusted_ca`]): writing the import record adds the
//! bundle's certificates the node's trust store lacks, lists them as added
//! (beside the record, [`added_path`]), and removes the ones listed as
//! added before that the bundle no longer holds; removing the record
//! (deconfigure) removes the ones listed as added. A certificate the store
//! held before the import (a root Windows ships, one the administrator or
//! WMCO put there) is never listed, so never removed; the record being
//! replaced is not read for removals (an adopted WICD record lists WMCO's
//! whole merged bundle, which proves no addition).
//!
//! - Windows: `Cert:\LocalMachine\Root` through .NET's `X509Store`
//!   (`Root`, `LocalMachine`), looked up by thumbprint, as WICD's
//!   `certs.Reconcile` does through `CertAddCertificateContextToStore`;
//!   the list holds thumbprints.
//! - posix: the directory holding the record stands for the store, one
//!   `<sha256>.crt` per certificate (what `update-ca-certificates` reads
//!   from its local directory; the name is the store's key, as the
//!   thumbprint is Windows'); the list holds SHA-256 fingerprints.
//!
//! The certificates travel as base64 DER (posix: base64 of one PEM block),
//! never as text in the script.

use std::fmt::Write;

use super::b64;
use super::posix_lifecycle::split;
use super::posix_values::Part;
use crate::lifecycle::GeneratedFile;
use crate::lifecycle::change::LifecycleChange;
use crate::lifecycle::trusted_ca::{added_path, certificates, is_record};
use crate::vocab::Shell;

/// Whether a lifecycle change is the import's (a write or removal of the
/// import record).
pub fn is_trust(change: &LifecycleChange<'_>) -> bool {
    match change {
        LifecycleChange::WriteGenerated { file, .. } => is_record(&file.path),
        LifecycleChange::RemoveFile { path } => is_record(path),
        _ => false,
    }
}

/// posix: the line of a trust change, and its values, into `part`
/// (false for any other change).
pub(super) fn posix_line(i: usize, change: &LifecycleChange<'_>, part: &mut Part) -> bool {
    match change {
        LifecycleChange::WriteGenerated { file, .. } if is_record(&file.path) => {
            let list: String = certificates(file.file.content())
                .unwrap_or_default()
                .iter()
                .map(|c| format!("{}\t{}\n", c.sha256, b64(&c.pem())))
                .collect();
            part.values.push(file.path.as_str());
            let content = part.values.content(file.file.content());
            part.values.push(list);
            part.values.push(added_path(&file.path));
            let _ = writeln!(part.text, "trust {i} {} '{content}'", file.file.sha256());
            true
        }
        LifecycleChange::RemoveFile { path } if is_record(path) => {
            part.values.push(*path);
            part.values.push(added_path(path));
            let _ = writeln!(part.text, "untrust {i}");
            true
        }
        _ => false,
    }
}

/// PowerShell: the line of a trust change (`None` for any other change).
pub fn powershell_line(i: usize, change: &LifecycleChange<'_>) -> Option<String> {
    match change {
        LifecycleChange::WriteGenerated { file, .. } if is_record(&file.path) => Some(powershell_write(i, file)),
        LifecycleChange::RemoveFile { path } if is_record(path) => Some(format!(
            "Remove-WfTrust {i} (ConvertFrom-WfBase64 '{}') (ConvertFrom-WfBase64 '{}')\n",
            b64(path),
            b64(&added_path(path))
        )),
        _ => None,
    }
}

fn powershell_write(i: usize, file: &GeneratedFile) -> String {
    let (dir, name) = split(&file.path, Shell::Powershell);
    let ders: Vec<String> = certificates(file.file.content())
        .unwrap_or_default()
        .iter()
        .map(|c| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &c.der))
        .collect();
    format!(
        "Set-WfTrust {i} (ConvertFrom-WfBase64 '{}') (ConvertFrom-WfBase64 '{}') '{}' '{}' '{}' (ConvertFrom-WfBase64 '{}')\n",
        b64(dir),
        b64(name),
        b64(file.file.content()),
        file.file.sha256(),
        ders.join(","),
        b64(&added_path(&file.path))
    )
}

/// The helpers of the trust lines, when `changes` has any.
pub fn helpers(changes: &[(usize, &LifecycleChange<'_>)], text: &'static str) -> &'static str {
    if changes.iter().any(|(_, c)| is_trust(c)) { text } else { "" }
}

/// posix helpers (after the lifecycle's: `o`, `n`, `d`, `take`, `put`). `added`
/// reads the list of what winfleet added (fingerprints only: any other
/// line is ignored) into `$was`.
pub const POSIX_HELPERS: &str = r#"added() {
  was=; [ -f "$1" ] || return 0
  while IFS= read -r f; do case $f in ''|*[!0-9a-f]*) ;; *) was="$was $f" ;; esac; done <"$1"
}
trust() {
  idx=$1; take "$3"; p=$target; n; lst=$val; n; ad=$val; sd=${p%/*}; [ "$sd" = "$p" ] && sd=.
  added "$ad"; keep= now=
  while IFS='	' read -r f c; do
    [ -n "$f" ] || continue; keep="$keep $f"
    if [ -f "$sd/$f.crt" ]; then case "$was " in *" $f "*) now="$now $f" ;; esac; continue; fi
    if ! err=$( { d "$c" >"$sd/.$f.winfleet-tmp" && mv -f -- "$sd/.$f.winfleet-tmp" "$sd/$f.crt"; } 2>&1 ); then o failed "cannot import $f: $err"; return; fi
    now="$now $f"
  done <<WINFLEET_TR
$lst
WINFLEET_TR
  if ! err=$( { printf '%s\n' $was $now >"$ad"; } 2>&1 ); then o failed "cannot write $ad: $err"; return; fi
  for f in $was; do
    case "$keep " in *" $f "*) ;; *) if ! err=$(rm -f -- "$sd/$f.crt" 2>&1); then o failed "$err"; return; fi ;; esac
  done
  if ! err=$( { printf '%s\n' $now >"$ad"; } 2>&1 ); then o failed "cannot write $ad: $err"; return; fi
  if put "$2"; then o applied; else o failed "$err"; fi
}
untrust() {
  idx=$1; n; p=$val; n; ad=$val; sd=${p%/*}; [ "$sd" = "$p" ] && sd=.; added "$ad"; set --
  for f in $was; do [ -f "$sd/$f.crt" ] && set -- "$@" "$sd/$f.crt"; done
  if [ "$#" -eq 0 ] && [ ! -e "$p" ] && [ ! -e "$ad" ]; then o unchanged; elif err=$(rm -f -- "$@" "$ad" "$p" 2>&1); then o applied; else o failed "$err"; fi
}
"#;

/// PowerShell helpers (after the lifecycle's: `Add-WfRecord`, `Set-WfFile`,
/// `Write-WfFailure`). `Read-WfAdded` reads the list of what winfleet added
/// (thumbprints only: any other line is ignored).
pub const POWERSHELL_HELPERS: &str = r#"function Read-WfAdded([string]$path) {
  $keys = @()
  if (-not [System.IO.File]::Exists($path)) { return ,$keys }
  foreach ($l in [System.IO.File]::ReadAllLines($path)) { if ($l -match '^[0-9A-Fa-f]{40}$') { $keys += $l.ToUpperInvariant() } }
  return ,$keys
}
function Write-WfAdded([string]$path, $keys) {
  [System.IO.File]::WriteAllLines($path, [string[]]@($keys | Select-Object -Unique))
}
function Open-WfRootStore {
  $store = New-Object System.Security.Cryptography.X509Certificates.X509Store -ArgumentList 'Root', 'LocalMachine'
  $store.Open([System.Security.Cryptography.X509Certificates.OpenFlags]::ReadWrite)
  return $store
}
function Find-WfRootCert($store, [string]$thumbprint) {
  return ,$store.Certificates.Find([System.Security.Cryptography.X509Certificates.X509FindType]::FindByThumbprint, $thumbprint, $false)
}
function Set-WfTrust($i, [string]$dir, [string]$name, [string]$content, [string]$sum, [string]$ders, [string]$addedPath) {
  $path = [System.IO.Path]::Combine($dir, $name)
  try {
    Add-WfRecord ('file ' + $sum + ' ' + $path)
    $new = @()
    foreach ($d in $ders.Split(',')) {
      if ($d) { $new += ,(New-Object System.Security.Cryptography.X509Certificates.X509Certificate2 -ArgumentList (,[Convert]::FromBase64String($d))) }
    }
    $keep = @($new | ForEach-Object { $_.Thumbprint })
    $was = Read-WfAdded $addedPath
    $now = @()
    $store = Open-WfRootStore
    try {
      foreach ($c in $new) {
        if ((Find-WfRootCert $store $c.Thumbprint).Count -eq 0) { $store.Add($c); $now += $c.Thumbprint }
        elseif ($was -contains $c.Thumbprint) { $now += $c.Thumbprint }
      }
      Write-WfAdded $addedPath (@($was) + @($now))
      foreach ($t in $was) {
        if ($keep -notcontains $t) { foreach ($c in (Find-WfRootCert $store $t)) { $store.Remove($c) } }
      }
      Write-WfAdded $addedPath $now
    } finally { $store.Close() }
  } catch { Write-WfFailure $i $_.Exception.Message; return }
  Set-WfFile $i $dir $name $content
}
function Remove-WfTrust($i, [string]$path, [string]$addedPath) {
  try {
    if (-not [System.IO.File]::Exists($path) -and -not [System.IO.File]::Exists($addedPath)) { Write-WfToken 'op' $i 'unchanged'; return }
    $was = Read-WfAdded $addedPath
    $store = Open-WfRootStore
    try { foreach ($t in $was) { foreach ($c in (Find-WfRootCert $store $t)) { $store.Remove($c) } } } finally { $store.Close() }
    [System.IO.File]::Delete($addedPath)
    [System.IO.File]::Delete($path)
    Write-WfToken 'op' $i 'applied'
  } catch { Write-WfFailure $i $_.Exception.Message }
}
"#;
