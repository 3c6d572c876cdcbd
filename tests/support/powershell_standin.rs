//! A posix stand-in for `powershell.exe -Command -` on the test nodes, so
//! that the PowerShell dialect's exchange pattern (its kept session, its
//! framing, its channels and round trips) runs over real SSH where no
//! Windows host can: it reads its input line by line, as `-Command -` does,
//! and knows exactly the two lines winfleet sends, taken from
//! `dialect::powershell` (whose lines the PowerShell grammar parses in
//! tests/ssh_conversation.rs):
//!
//! - a script, `& ([ScriptBlock]::Create(…FromBase64String('<b64>'))))`:
//!   the stand-in decodes it and runs it with `sh` (the tests and benches
//!   send posix bodies in the PowerShell wrapping), its standard input
//!   not the session's. A failing script is reported on stderr and the
//!   session goes on, as PowerShell goes on after an error on a line;
//! - the end line, `& { $m = [Convert]::FromBase64String('<b64>'); … }`:
//!   it writes the decoded marker.
//!
//! Any other line is an error on stderr (PowerShell would report a parse
//! error or run something else) and produces no output.

#![allow(dead_code)]

use super::fleet::TestNode;

/// The stand-in, a POSIX shell script.
pub const STAND_IN: &str = r#"#!/bin/sh
# powershell.exe stand-in: see tests/support/powershell_standin.rs.
cr=$(printf '\r')
script_head="& ([ScriptBlock]::Create([Text.Encoding]::UTF8.GetString([Convert]::FromBase64String('"
script_tail="'))))"
end_head="& { \$m = [Convert]::FromBase64String('"
end_tail="'); \$o = [Console]::OpenStandardOutput(); \$o.Write(\$m, 0, \$m.Length); \$o.Flush() }"
while IFS= read -r line; do
  line=${line%"$cr"}
  case "$line" in
    "$script_head"*"$script_tail")
      b=${line#"$script_head"}; b=${b%"$script_tail"}
      if ! printf '%s' "$b" | base64 -d | sh; then
        printf 'stand-in: the script failed\n' >&2
      fi ;;
    "$end_head"*"$end_tail")
      b=${line#"$end_head"}; b=${b%"$end_tail"}
      printf '%s' "$b" | base64 -d ;;
    '') ;;
    *) printf 'stand-in: not a line winfleet sends: %.60s\n' "$line" >&2 ;;
  esac
done
"#;

/// Installs the stand-in as `powershell.exe` on `node` (first on its PATH).
pub fn install(node: &TestNode) {
    node.shim("powershell.exe", STAND_IN);
}
