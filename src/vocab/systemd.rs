//! The environment drop-in of posix nodes: a systemd manager drop-in
//! (`system.conf.d`) with one `DefaultEnvironment=` line per variable, the
//! Linux counterpart of Windows' Machine scope: every service sees the values
//! after the safe reboot. Rendering and parsing are pure and inverse.

use std::collections::BTreeMap;
use std::fmt::Write;

const HEADER: &str = "# Managed by winfleet: the proxy variables for every service. Changes are overwritten.\n";
const OWED: &str = "# winfleet: reboot owed since boot ";

/// A parsed drop-in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropIn {
    /// Variables assigned by `DefaultEnvironment=` lines.
    pub environment: BTreeMap<String, String>,
    /// The boot during which the variables were changed, if recorded: the
    /// reboot is owed while the node still runs that boot.
    pub reboot_owed_since: Option<String>,
}

/// Renders the drop-in for `environment`; `boot_id` is the node's current
/// boot, recorded so that observation can tell whether it rebooted since.
pub fn render_drop_in(environment: &BTreeMap<String, String>, boot_id: Option<&str>) -> String {
    let mut out = HEADER.to_owned();
    if let Some(boot) = boot_id.filter(|b| !b.is_empty() && !b.contains(['\n', '\r'])) {
        let _ = writeln!(out, "{OWED}{boot}");
    }
    out.push_str("[Manager]\n");
    for (name, value) in environment {
        let _ = writeln!(out, "DefaultEnvironment=\"{}\"", escape(&format!("{name}={value}")));
    }
    out
}

/// Parses a drop-in; lines it does not know are ignored.
pub fn parse_drop_in(content: &str) -> DropIn {
    let mut drop_in = DropIn::default();
    for line in content.lines() {
        let line = line.trim();
        if let Some(boot) = line.strip_prefix(OWED) {
            drop_in.reboot_owed_since = Some(boot.trim().to_owned());
        } else if let Some(words) = line.strip_prefix("DefaultEnvironment=") {
            for word in split_words(words) {
                if let Some((name, value)) = word.split_once('=') {
                    drop_in.environment.insert(name.to_owned(), value.to_owned());
                }
            }
        }
    }
    drop_in
}

/// systemd's C-style escaping inside double quotes.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// Splits a value into words the way systemd's `extract_first_word` does
/// with unquoting and C unescaping.
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return words;
        }
        let mut word = String::new();
        let mut quote = None;
        while let Some(c) = chars.next() {
            match (c, quote) {
                ('\\', _) => unescape(&mut chars, &mut word),
                ('"' | '\'', None) => quote = Some(c),
                (c, Some(q)) if c == q => quote = None,
                (c, None) if c.is_whitespace() => break,
                (c, _) => word.push(c),
            }
        }
        words.push(word);
    }
}

fn unescape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, word: &mut String) {
    match chars.next() {
        Some('n') => word.push('\n'),
        Some('t') => word.push('\t'),
        Some('r') => word.push('\r'),
        Some('x') => {
            let hex: String = [chars.next(), chars.next()].into_iter().flatten().collect();
            match u8::from_str_radix(&hex, 16) {
                Ok(b) => word.push(char::from(b)),
                Err(_) => word.push_str(&hex),
            }
        }
        Some(c) => word.push(c),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_values_survive_a_round_trip() {
        let env: BTreeMap<String, String> = [
            ("HTTP_PROXY".to_owned(), "http://u:p\"a\\ss'@proxy:3128".to_owned()),
            ("NO_PROXY".to_owned(), "a b,$(id),`x`;&&|\n%PATH%,ünï,../x".to_owned()),
        ]
        .into();
        let text = render_drop_in(&env, Some("boot-1"));
        assert_eq!(text.lines().count(), 5, "one line per variable:\n{text}");
        let parsed = parse_drop_in(&text);
        assert_eq!(parsed.environment, env);
        assert_eq!(parsed.reboot_owed_since.as_deref(), Some("boot-1"));
    }

    #[test]
    fn the_rendered_form_is_stable() {
        let env: BTreeMap<String, String> = [("NO_PROXY".to_owned(), ".svc,10.0.0.0/16".to_owned())].into();
        assert_eq!(
            render_drop_in(&env, None),
            format!("{HEADER}[Manager]\nDefaultEnvironment=\"NO_PROXY=.svc,10.0.0.0/16\"\n")
        );
    }

    #[test]
    fn several_assignments_on_one_line_are_read() {
        let parsed = parse_drop_in("DefaultEnvironment=A=1 \"B=2 3\" 'C=4'\n");
        assert_eq!(parsed.environment.len(), 3);
        assert_eq!(parsed.environment["B"], "2 3");
    }
}
