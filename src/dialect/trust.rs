//! The trusted CA bundle's import in both dialects
//! ([`crate::lifecycle::trusted_ca`]): writing the import record imports
//! the bundle's certificates into the node's trust store and removes the
//! ones winfleet imported before that the bundle no longer holds; removing
//! the record (deconfigure) removes everything it imported.
//!
//! - Windows: `Cert:\LocalMachine\Root` through .NET's `X509Store`
//!   (`Root`, `LocalMachine`), as WICD's `certs.Reconcile` does through
//!   `CertAddCertificateContextToStore`; what was imported before is read
//!   from the record being replaced (WICD's `C:\k\imported-certs.pem`).
//! - posix: the directory holding the record stands for the store: one
//!   `winfleet-<sha256>.crt` per certificate (what `update-ca-certificates`
//!   reads from its local directory); the ones winfleet imported before are
//!   the files of that name there.
//!
//! The certificates travel as base64 DER (posix: base64 of one PEM block),
//! never as text in the script.

use super::b64;
use super::posix_lifecycle::split;
use crate::lifecycle::GeneratedFile;
use crate::lifecycle::change::LifecycleChange;
use crate::lifecycle::trusted_ca::{certificates, is_record};
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

/// posix: the line of a trust change (`None` for any other change).
pub fn posix_line(i: usize, change: &LifecycleChange<'_>) -> Option<String> {
    match change {
        LifecycleChange::WriteGenerated { file, .. } if is_record(&file.path) => {
            let list: String = certificates(file.file.content())
                .unwrap_or_default()
                .iter()
                .map(|c| format!("{}\t{}\n", c.sha256, b64(&c.pem())))
                .collect();
            Some(format!(
                "trust {i} '{}' '{}' {} '{}'\n",
                b64(&file.path),
                b64(file.file.content()),
                file.file.sha256(),
                b64(&list)
            ))
        }
        LifecycleChange::RemoveFile { path } if is_record(path) => Some(format!("untrust {i} '{}'\n", b64(path))),
        _ => None,
    }
}

/// PowerShell: the line of a trust change (`None` for any other change).
pub fn powershell_line(i: usize, change: &LifecycleChange<'_>) -> Option<String> {
    match change {
        LifecycleChange::WriteGenerated { file, .. } if is_record(&file.path) => Some(powershell_write(i, file)),
        LifecycleChange::RemoveFile { path } if is_record(path) => {
            Some(format!("Remove-WfTrust {i} (ConvertFrom-WfBase64 '{}')\n", b64(path)))
        }
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
        "Set-WfTrust {i} (ConvertFrom-WfBase64 '{}') (ConvertFrom-WfBase64 '{}') '{}' '{}' '{}'\n",
        b64(dir),
        b64(name),
        b64(file.file.content()),
        file.file.sha256(),
        ders.join(",")
    )
}

/// The helpers of the trust lines, when `changes` has any.
pub fn helpers(changes: &[(usize, &LifecycleChange<'_>)], text: &'static str) -> &'static str {
    if changes.iter().any(|(_, c)| is_trust(c)) { text } else { "" }
}

/// posix helpers (after the lifecycle's: `o`, `v`, `d`, `put`).
pub const POSIX_HELPERS: &str = r#"trust() {
  idx=$1; p=$(v "$2"); p=${p%x}; sd=${p%/*}; [ "$sd" = "$p" ] && sd=.; lst=$(v "$5"); lst=${lst%x}; keep=
  while IFS='	' read -r f c; do
    [ -n "$f" ] || continue; keep="$keep winfleet-$f.crt"
    [ -f "$sd/winfleet-$f.crt" ] && continue
    if ! err=$( { d "$c" >"$sd/winfleet-$f.crt"; } 2>&1 ); then o failed "cannot import $f: $err"; return; fi
  done <<WINFLEET_TR
$lst
WINFLEET_TR
  for x in "$sd"/winfleet-*.crt; do
    [ -f "$x" ] || continue
    case "$keep " in *" ${x##*/} "*) ;; *) if ! err=$(rm -f -- "$x" 2>&1); then o failed "$err"; return; fi ;; esac
  done
  if put "$2" "$3" "$4"; then o applied; else o failed "$err"; fi
}
untrust() {
  idx=$1; p=$(v "$2"); p=${p%x}; sd=${p%/*}; [ "$sd" = "$p" ] && sd=.; set --
  for x in "$sd"/winfleet-*.crt; do [ -f "$x" ] && set -- "$@" "$x"; done
  if [ "$#" -eq 0 ] && [ ! -e "$p" ]; then o unchanged; elif err=$(rm -f -- "$@" "$p" 2>&1); then o applied; else o failed "$err"; fi
}
"#;

/// PowerShell helpers (after the lifecycle's: `Add-WfRecord`, `Set-WfFile`,
/// `Write-WfFailure`).
pub const POWERSHELL_HELPERS: &str = r#"function Get-WfPemCerts([string]$path) {
  $certs = @()
  if (-not [System.IO.File]::Exists($path)) { return ,$certs }
  $text = [System.IO.File]::ReadAllText($path)
  foreach ($m in [regex]::Matches($text, '-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]+)-----END CERTIFICATE-----')) {
    $der = [Convert]::FromBase64String(($m.Groups[1].Value -replace '\s', ''))
    $certs += ,(New-Object System.Security.Cryptography.X509Certificates.X509Certificate2 -ArgumentList (,$der))
  }
  return ,$certs
}
function Open-WfRootStore {
  $store = New-Object System.Security.Cryptography.X509Certificates.X509Store -ArgumentList 'Root', 'LocalMachine'
  $store.Open([System.Security.Cryptography.X509Certificates.OpenFlags]::ReadWrite)
  return $store
}
function Set-WfTrust($i, [string]$dir, [string]$name, [string]$content, [string]$sum, [string]$ders) {
  $path = [System.IO.Path]::Combine($dir, $name)
  try {
    Add-WfRecord ('file ' + $sum + ' ' + $path)
    $new = @()
    foreach ($d in $ders.Split(',')) {
      if ($d) { $new += ,(New-Object System.Security.Cryptography.X509Certificates.X509Certificate2 -ArgumentList (,[Convert]::FromBase64String($d))) }
    }
    $keep = @($new | ForEach-Object { $_.Thumbprint })
    $old = Get-WfPemCerts $path
    $store = Open-WfRootStore
    try {
      foreach ($c in $new) { $store.Add($c) }
      foreach ($c in $old) { if ($keep -notcontains $c.Thumbprint) { $store.Remove($c) } }
    } finally { $store.Close() }
  } catch { Write-WfFailure $i $_.Exception.Message; return }
  Set-WfFile $i $dir $name $content
}
function Remove-WfTrust($i, [string]$path) {
  try {
    if (-not [System.IO.File]::Exists($path)) { Write-WfToken 'op' $i 'unchanged'; return }
    $old = Get-WfPemCerts $path
    $store = Open-WfRootStore
    try { foreach ($c in $old) { $store.Remove($c) } } finally { $store.Close() }
    [System.IO.File]::Delete($path)
    Write-WfToken 'op' $i 'applied'
  } catch { Write-WfFailure $i $_.Exception.Message }
}
"#;
