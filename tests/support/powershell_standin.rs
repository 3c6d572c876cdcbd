//! A posix stand-in for `powershell.exe -Command -` on the test nodes, so
//! that the PowerShell dialect's exchange pattern (its kept session, its
//! framing, its channels and round trips) runs over real SSH where no
//! Windows host can: it reads its input line by line, as `-Command -` does,
//! and knows exactly the two lines winfleet sends, taken from
//! `dialect::powershell` (whose lines the PowerShell grammar parses in
//! tests/ssh_conversation.rs), byte for byte:
//!
//! - a script, `& ([ScriptBlock]::Create(…FromBase64String('<b64>'))))`:
//!   the stand-in decodes it and runs it with `sh` (the tests and benches
//!   send posix bodies in the PowerShell wrapping) from a temporary file,
//!   with the session's standard input inherited, as PowerShell gives it
//!   to a native command that has no pipeline input (docs/powershell-session.md):
//!   a body that reads stdin gets what the stand-in has not buffered. A
//!   failing script is reported on stderr and the session goes on, as
//!   PowerShell goes on after an error on a line;
//! - the end line, `& { $m = [Convert]::FromBase64String('<b64>'); … }`:
//!   it writes the decoded marker.
//!
//! Any other line is an error on stderr (PowerShell would report a parse
//! error or run something else) and produces no output.

#![allow(dead_code)]

use super::fleet::TestNode;

/// The stand-in, a Python script (Debian's python3: a shell's `read`
/// takes a byte at a time, which on 200 nodes would make the stand-in's
/// CPU, not the exchange pattern, the figure).
pub const STAND_IN: &str = r#"#!/usr/bin/python3
# powershell.exe stand-in: see tests/support/powershell_standin.rs.
import base64, binascii, os, subprocess, sys, tempfile
SCRIPT = ("& ([ScriptBlock]::Create([Text.Encoding]::UTF8.GetString([Convert]::FromBase64String('", "'))))")
END = ("& { $m = [Convert]::FromBase64String('",
       "'); $o = [Console]::OpenStandardOutput(); $o.Write($m, 0, $m.Length); $o.Flush() }")

def inside(line, frame):
    head, tail = frame
    if line.startswith(head) and line.endswith(tail) and len(line) >= len(head) + len(tail):
        try:
            return base64.b64decode(line[len(head):len(line) - len(tail)], validate=True)
        except binascii.Error:
            return None
    return None

for raw in sys.stdin.buffer:
    line = raw.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
    script, end = inside(line, SCRIPT), inside(line, END)
    if script is not None:
        with tempfile.NamedTemporaryFile(prefix="standin-", suffix=".sh") as body:
            body.write(script)
            body.flush()
            if subprocess.run(["sh", body.name]).returncode != 0:
                os.write(2, b"stand-in: the script failed\n")
    elif end is not None:
        os.write(1, end)
    elif line:
        os.write(2, ("stand-in: not a line winfleet sends: %.60s\n" % line).encode())
"#;

/// Installs the stand-in as `powershell.exe` on `node` (first on its PATH).
pub fn install(node: &TestNode) {
    node.shim("powershell.exe", STAND_IN);
}
