//! The lifecycle's changes in the posix dialect: the preparation script
//! (directories, recorded in the install record before they are created,
//! and the uploads' staging directories) and the apply part (stops,
//! leftovers removed, uploads finished, generated files, systemd units,
//! starts, removals).
//!
//! Cost matters here: a payload has hundreds of files, so the scripts work
//! on whole lists with one process each (one `sha256sum` and one `mv -t`
//! per directory, one `systemctl` per verb) and loop over lines with shell
//! builtins. Every repository value arrives base64-encoded, in one list per
//! step; lists are tab-separated lines.
//!
//! Uploads land in `<dir>/.winfleet-staging/<name>` ([`staged`]), or
//! gzip-encoded as `<name>.winfleet-gz` (`ssh::sftp::wire`): the apply
//! part decodes those with one `gzip -d` per directory (a file that fails
//! to decode is removed, the others decoded one by one), then checks each
//! staged file's SHA-256, records it, and moves the good ones into place
//! together.
//!
//! [`staged`]: super::posix_lifecycle::staged

use std::collections::BTreeMap;
use std::fmt::Write;

use super::b64;
use super::posix_lifecycle::{STAGING, split};
use crate::lifecycle::LifecycleSpec;
use crate::lifecycle::change::LifecycleChange;
use crate::lifecycle::facts::Leftover;
use crate::lifecycle::record::{HEADER, record_path};
use crate::vocab::Shell;

const RECORD: &str = r#"nl='
'
rec() { [ -d "$recd" ] || mkdir -p -- "$recd" || return 1
  [ -f "$recf" ] || printf '%s\n' "$rech" >"$recf" || return 1
  printf '%s\n' "$1" >>"$recf"; }
"#;

fn record_setup() -> String {
    let path = record_path(Shell::Posix);
    let (dir, _) = split(path, Shell::Posix);
    format!(
        "recf=$(v '{}'); recf=${{recf%x}}; recd=$(v '{}'); recd=${{recd%x}}; rech=$(v '{}'); rech=${{rech%x}}\n{RECORD}",
        b64(path),
        b64(dir),
        b64(HEADER)
    )
}

/// The preparation script's body: directories (recorded before they are
/// created) and the staging directories of the uploads. `None` when there
/// is nothing to prepare.
pub fn prepare(spec: &LifecycleSpec, changes: &[(usize, &LifecycleChange<'_>)]) -> Option<String> {
    let mut dirs = String::new();
    let mut staging: Vec<String> = Vec::new();
    for (i, change) in changes {
        match change {
            LifecycleChange::CreateDir { path } => {
                let _ = writeln!(dirs, "{i}\t{path}");
            }
            LifecycleChange::Upload { file, .. } => {
                let stage = format!("{}/{STAGING}", split(&file.path, spec.shell).0);
                if !staging.contains(&stage) {
                    staging.push(stage);
                }
            }
            _ => {}
        }
    }
    for stage in &staging {
        let _ = writeln!(dirs, "-\t{stage}");
    }
    if dirs.is_empty() {
        return None;
    }
    let mut s = record_setup();
    let _ = writeln!(s, "lst=$(v '{}'); lst=${{lst%x}}", b64(&dirs));
    s.push_str(
        r#"while IFS='	' read -r i p; do
  [ -n "$i" ] || continue
  idx=$i; [ "$i" = - ] && idx=
  if [ -d "$p" ]; then o unchanged; continue; fi
  if ! rec "dir $p"; then o failed "cannot write the install record $recf"; continue; fi
  if err=$(mkdir -- "$p" 2>&1); then o applied; else o failed "$err"; fi
done <<WINFLEET_MD
$lst
WINFLEET_MD
"#,
    );
    Some(s)
}

/// The apply part of the lifecycle changes (inside `main`), in the
/// plan's order by kind: stops, uploads finished, generated files, units
/// (then one daemon-reload and enable), starts.
pub fn apply(spec: &LifecycleSpec, changes: &[(usize, &LifecycleChange<'_>)]) -> String {
    let (mut stops, mut files, mut units, mut starts) = (String::new(), String::new(), String::new(), String::new());
    let mut leftovers = String::new();
    let mut uploads: BTreeMap<&str, String> = BTreeMap::new();
    for (i, change) in changes {
        if let Some(line) = super::trust::posix_line(*i, change).or_else(|| super::containers::posix_line(*i, change)) {
            files.push_str(&line);
            continue;
        }
        match change {
            LifecycleChange::Stop { service } => {
                let _ = writeln!(stops, "sv {i} stop '{}'", b64(&service.name));
            }
            LifecycleChange::Upload { file, .. } => {
                let (dir, name) = split(&file.path, Shell::Posix);
                let _ = writeln!(uploads.entry(dir).or_default(), "{i}\t{name}\t{}", file.sha256);
            }
            LifecycleChange::WriteGenerated { file, .. } => {
                let _ = writeln!(
                    files,
                    "wr {i} '{}' '{}' {}",
                    b64(&file.path),
                    b64(file.file.content()),
                    file.file.sha256()
                );
            }
            LifecycleChange::Define { service, unit: Some(unit), .. } => {
                let path = format!("{}/{}.service", spec.units_dir.as_deref().unwrap_or("."), service.name);
                let sha = crate::vocab::file::sha256_hex(unit.as_bytes());
                let (state, certs) = service.state();
                let lines: Vec<String> = state
                    .iter()
                    .map(|p| format!("state {p}"))
                    .chain(certs.iter().map(|d| format!("certs {d}")))
                    .collect();
                let _ = writeln!(
                    units,
                    "un {i} '{}' '{}' {sha} '{}' '{}'",
                    b64(&path),
                    b64(unit),
                    b64(&service.name),
                    b64(&lines.join("\n"))
                );
            }
            LifecycleChange::Define { .. } => {
                let _ = writeln!(units, "idx={i}; o failed 'a posix node needs a unit file'");
            }
            LifecycleChange::Start { service, pre_scripts, .. } => {
                for script in pre_scripts {
                    let _ = writeln!(starts, "pre '{}'", b64(script));
                }
                let _ = writeln!(starts, "sv {i} start '{}'", b64(&service.name));
            }
            LifecycleChange::RemoveService { name } => {
                let _ = writeln!(stops, "rmsvc {i} '{}'", b64(name));
            }
            LifecycleChange::RemoveFile { path } => {
                let _ = writeln!(files, "rmf {i} '{}'", b64(path));
            }
            LifecycleChange::RemoveCerts { dir } => {
                let _ = writeln!(files, "rmcerts {i} '{}'", b64(dir));
            }
            LifecycleChange::RemoveDir { path } => {
                let _ = writeln!(files, "rmd {i} '{}'", b64(path));
            }
            LifecycleChange::RemoveLeftover { path, kind } => {
                let kind = match kind {
                    Leftover::Staging => "staging",
                    Leftover::Temporary => "temp",
                };
                let _ = writeln!(leftovers, "rmleft {i} '{}' {kind}", b64(path));
            }
            LifecycleChange::ForgetRecord => {
                let _ = writeln!(files, "forget {i}");
            }
            LifecycleChange::CreateDir { .. } | LifecycleChange::EnableContainers => {}
        }
    }
    let mut s = record_setup();
    let _ = writeln!(s, "unitsdir=$(v '{}'); unitsdir=${{unitsdir%x}}", b64(spec.units_dir.as_deref().unwrap_or(".")));
    s.push_str(HELPERS);
    s.push_str(super::trust::helpers(changes, super::trust::POSIX_HELPERS));
    s.push_str(super::containers::helpers(changes, super::containers::POSIX_HELPERS));
    s.push_str(&stops);
    s.push_str(&leftovers);
    for (dir, list) in &uploads {
        let _ = writeln!(s, "fin '{}' '{}'", b64(dir), b64(list));
    }
    s.push_str(&files);
    if !units.is_empty() {
        s.push_str("unok=; unn=\n");
        s.push_str(&units);
        s.push_str("reload\n");
    }
    s.push_str(&starts);
    s
}

const HELPERS: &str = r#"o() { [ "$1" = failed ] && anyfail=1; for j in $idx; do t op "$j" "$@"; done; }
rmsvc() {
  idx=$1; n=$(v "$2"); n=${n%x}
  systemctl stop -- "$n.service" >/dev/null 2>&1; systemctl disable -- "$n.service" >/dev/null 2>&1
  if err=$(rm -f -- "$unitsdir/$n.service" 2>&1); then systemctl daemon-reload >/dev/null 2>&1; o applied; else o failed "$err"; fi
}
rmf() {
  idx=$1; p=$(v "$2"); p=${p%x}
  if [ ! -e "$p" ] || [ -L "$p" ]; then o unchanged; elif err=$(rm -f -- "$p" 2>&1); then o applied; else o failed "$err"; fi
}
rmcerts() {
  idx=$1; p=$(v "$2"); p=${p%x}; set --
  for f in "$p"/kubelet-*.pem; do [ -e "$f" ] || [ -L "$f" ] && set -- "$@" "$f"; done
  if [ "$#" -eq 0 ]; then o unchanged; elif err=$(rm -f -- "$@" 2>&1); then o applied; else o failed "$err"; fi
}
rmd() {
  idx=$1; p=$(v "$2"); p=${p%x}
  if [ ! -d "$p" ] || [ -L "$p" ]; then o unchanged; elif [ -n "$(ls -A -- "$p" 2>/dev/null)" ]; then o unchanged
  elif err=$(rmdir -- "$p" 2>&1); then o applied; else o failed "$err"; fi
}
rmleft() {
  idx=$1; p=$(v "$2"); p=${p%x}
  if [ -L "$p" ]; then o failed "not removed: $p is a symbolic link, not winfleet's"; return; fi
  if [ "$3" = temp ]; then
    if [ ! -f "$p" ]; then o unchanged; elif err=$(rm -f -- "$p" 2>&1); then o applied; else o failed "$err"; fi
    return
  fi
  if [ ! -d "$p" ]; then o unchanged; return; fi
  set --
  for f in "$p"/* "$p"/.[!.]* "$p"/..?*; do if [ -f "$f" ] || [ -L "$f" ]; then set -- "$@" "$f"; fi; done
  if [ "$#" -gt 0 ] && ! err=$(rm -f -- "$@" 2>&1); then o failed "$err"; return; fi
  if err=$(rmdir -- "$p" 2>&1); then o applied; else o failed "$err"; fi
}
forget() {
  idx=$1
  if [ -n "$anyfail" ]; then o failed "kept the install record: a removal above failed; the next round tries again"; return; fi
  if err=$(rm -f -- "$recf" 2>&1); then rmdir -- "$recd" 2>/dev/null; o applied; else o failed "$err"; fi
}
put() {
  target=$(v "$1"); target=${target%x}
  dir=${target%/*}; [ "$dir" = "$target" ] && dir=.; tmp="$dir/.${target##*/}.winfleet-tmp"
  if [ -L "$tmp" ]; then err="not written: $tmp is a symbolic link, not winfleet's"; return 1; fi
  rec "file $3 $target" || { err="cannot write the install record $recf"; return 1; }
  if [ -f "$tmp" ]; then err=$(rm -f -- "$tmp" 2>&1) || return 1; fi
  err=$( { set -C; d "$2" >"$tmp"; } 2>&1 ) || return 1
  err=$(mv -f -T -- "$tmp" "$target" 2>&1)
}
wr() { idx=$1; if put "$2" "$3" "$4"; then o applied; else o failed "$err"; fi; }
un() {
  idx=$1; n=$(v "$5"); n=${n%x}; st=$(v "$6"); st=${st%x}
  if ! rec "service $n${st:+$nl$st}"; then o failed "cannot write the install record $recf"; return; fi
  if put "$2" "$3" "$4"; then unok="$unok $1"; unn="$unn $n.service"; else o failed "$err"; fi
}
reload() {
  idx=$unok; [ -n "$idx" ] || return
  if ! err=$(systemctl daemon-reload 2>&1); then o failed "systemctl daemon-reload: $err"; return; fi
  if err=$(systemctl enable -- $unn 2>&1); then o applied; else o failed "systemctl enable: $err"; fi
}
pre() { if ! err=$( { d "$1" | /bin/sh; } 2>&1 ); then prefail="a pre-script failed: $err"; fi; }
sv() {
  idx=$1; n=$(v "$3"); n=${n%x}
  if [ "$2" = start ] && [ -n "$prefail" ]; then o failed "$prefail"; prefail=; return; fi
  if err=$(systemctl "$2" -- "$n.service" 2>&1); then o applied; else o failed "systemctl $2 $n: $err"; fi
}
fin() {
  dir=$(v "$1"); dir=${dir%x}; lst=$(v "$2"); lst=${lst%x}; stg="$dir/.winfleet-staging"
  set --
  for f in "$stg"/*.winfleet-gz; do [ -f "$f" ] && set -- "$@" "$f"; done
  if [ "$#" -gt 0 ]; then
    gzip -d -f -q -S .winfleet-gz -- "$@" >/dev/null 2>&1 ||
      for f; do [ -f "$f" ] && { gzip -d -f -q -S .winfleet-gz -- "$f" >/dev/null 2>&1 || rm -f -- "${f%.winfleet-gz}"; }; done
    rm -f -- "$@"
  fi
  set --
  while IFS='	' read -r i n s; do [ -n "$i" ] && set -- "$@" "$n"; done <<WINFLEET_FL
$lst
WINFLEET_FL
  sums=$nl$(cd -- "$stg" 2>/dev/null && sha256sum -- "$@" 2>/dev/null)$nl; good=
  while IFS='	' read -r i n s; do
    [ -n "$i" ] || continue; idx=$i
    case $sums in
    *"  $n$nl"*) x=${sums%%"  $n$nl"*}; x=${x##*"$nl"} ;;
    *) x= ;;
    esac
    if [ "$x" != "$s" ]; then
      rm -f -- "$stg/$n"; o failed "the upload arrived with SHA-256 ${x:-none}, expected $s"
    elif ! rec "file $s $dir/$n"; then o failed "cannot write the install record $recf"
    else good="$good$i	$n$nl"; fi
  done <<WINFLEET_FL
$lst
WINFLEET_FL
  set --; idx=
  while IFS='	' read -r i n; do [ -n "$i" ] && { set -- "$@" "$stg/$n"; idx="$idx $i"; }; done <<WINFLEET_FG
$good
WINFLEET_FG
  if [ "$#" -gt 0 ]; then
    if err=$(mv -f -t "$dir" -- "$@" 2>&1); then o applied; else o failed "$err"; return; fi
    set --
    while IFS='	' read -r i n; do [ -n "$i" ] && set -- "$@" "$dir/$n"; done <<WINFLEET_FG
$good
WINFLEET_FG
    ks=$(stat -c '%s:%.9Y:%.9Z:%i' -- "$@" 2>/dev/null)$nl
    for p in "$@"; do k=${ks%%"$nl"*}; ks=${ks#*"$nl"}; [ -n "$k" ] && t lkey "$p" "$k"; done
  fi
  rmdir -- "$stg" 2>/dev/null
}
"#;
