//! The values a posix apply or preparation script carries (paths, names,
//! lists, file contents: the repository's and the cluster's), all in one
//! base64 literal that one `base64 -d` decodes. The shell's field
//! splitting then cuts them at a control character that none of them
//! holds, into `_v1`, `_v2`, …, and `n` takes the next one into `$val`.
//! Every helper takes its values with `n` first thing, before any early
//! return, so that the order the script reads them in is the order they
//! were pushed in.
//!
//! Why so: a process costs more than anything else a script does on a node
//! (a `base64 -d` per value was most of a join's processes), and cutting
//! with the shell's pattern removal (`${vals#*"$sep"}`) takes time in the
//! square of a value's length in dash (a 30 kB value: 1.5 s). Field
//! splitting is linear. Should every control character be taken (no
//! real value holds them), the values are cut at a separator line instead,
//! still correct, slower on long values.
//!
//! A value holding NUL cannot live in a shell variable: callers pass such
//! a content as a base64 argument of its own ([`Values::content`]).

use std::fmt::Write;

use super::b64;

/// The values of one script, in the order its lines take them.
#[derive(Debug, Default)]
pub struct Values {
    values: Vec<String>,
}

/// Lines of a script and the values they take, in order.
#[derive(Default)]
pub struct Part {
    /// The lines.
    pub text: String,
    /// Their values.
    pub values: Values,
}

impl Part {
    /// Adds `other`'s lines and values after these.
    pub fn append(&mut self, other: Part) {
        self.text.push_str(&other.text);
        self.values.append(other.values);
    }
}

/// The control characters the values may be cut at, tab, newline and
/// carriage return excepted (field splitting merges runs of the first
/// two, and the last is common in text).
const SEPARATORS: [u8; 26] =
    [1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29];

impl Values {
    /// Adds a value (never holding NUL: paths, names, lists).
    pub fn push(&mut self, value: impl Into<String>) {
        self.values.push(value.into());
    }

    /// A content: added to the values and "" returned, or, when it holds
    /// NUL, not added and its base64 returned, for the line to carry.
    pub fn content(&mut self, content: &str) -> String {
        if content.contains('\0') {
            return b64(content);
        }
        self.push(content);
        String::new()
    }

    /// Adds another part's values after these.
    pub fn append(&mut self, other: Values) {
        self.values.extend(other.values);
    }

    /// The lines that decode the values and define `n` (nothing when there
    /// are none). They go before the first `n`.
    pub fn render(&self) -> String {
        if self.values.is_empty() {
            return String::new();
        }
        let mut s = String::new();
        match SEPARATORS.iter().find(|&&b| !self.values.iter().any(|v| v.as_bytes().contains(&b))) {
            Some(&byte) => {
                // `x` ends the list, so the command substitution keeps
                // every trailing newline of the last value.
                let blob = self.joined(&char::from(byte).to_string());
                let _ = writeln!(
                    s,
                    "sep=$(printf '\\{byte:03o}'); vals=$(base64 -d <<WINFLEET_B64\n{}\nWINFLEET_B64\n)",
                    b64(&blob)
                );
                s.push_str(SPLIT);
            }
            None => {
                let separator = self.separator_line();
                let blob = self.joined(&separator);
                let _ =
                    writeln!(s, "sep='{separator}'; vals=$(base64 -d <<WINFLEET_B64\n{}\nWINFLEET_B64\n)", b64(&blob));
                s.push_str("n() { val=${vals%%\"$sep\"*}; vals=${vals#*\"$sep\"}; }\n");
            }
        }
        s
    }

    /// Each value followed by `separator`, then `x`.
    fn joined(&self, separator: &str) -> String {
        let mut all = String::new();
        for value in &self.values {
            all.push_str(value);
            all.push_str(separator);
        }
        all.push('x');
        all
    }

    /// A separator none of the values holds.
    fn separator_line(&self) -> String {
        (0..)
            .map(|k| format!("--winfleet-value-{k}--"))
            .find(|candidate| !self.values.iter().any(|v| v.contains(candidate.as_str())))
            .unwrap_or_default()
    }
}

/// Cuts `$vals` at `$sep` (no pathname expansion of the pieces) into
/// `_v1`…; `n` takes the next. `eval` sees only `_v` and a number.
const SPLIT: &str = r#"IFS=$sep; set -f; set -- $vals; unset IFS; set +f
_k=0; for _a; do _k=$((_k+1)); eval "_v$_k=\$_a"; done; set --; vals=; _c=0
n() { _c=$((_c+1)); eval "val=\$_v$_c"; }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_cut_at_the_first_control_character_none_of_them_holds() {
        let mut values = Values::default();
        values.push("a\u{1}b");
        values.push("");
        values.push("c\n\n");
        let script = values.render();
        assert!(script.starts_with("sep=$(printf '\\002'); vals=$(base64 -d <<WINFLEET_B64\n"), "{script}");
        assert!(script.contains(SPLIT));
    }

    #[test]
    fn values_holding_every_control_character_are_cut_at_a_separator_line() {
        let mut values = Values::default();
        values.push(SEPARATORS.iter().map(|&b| char::from(b)).collect::<String>());
        values.push("--winfleet-value-0--");
        let script = values.render();
        assert!(script.starts_with("sep='--winfleet-value-1--'; vals=$(base64 -d <<WINFLEET_B64\n"), "{script}");
    }

    #[test]
    fn a_content_holding_nul_travels_on_its_own() {
        let mut values = Values::default();
        assert_eq!(values.content("text"), "");
        assert_eq!(values.content("a\0b"), b64("a\0b"));
        assert_eq!(values.values, ["text"]);
        assert!(Values::default().render().is_empty());
    }
}
