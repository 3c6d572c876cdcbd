//! systemd unit files read back the way systemd's own parser reads them
//! (`src/shared/conf-parser.c`: `config_parse` and `parse_line`), key by
//! key, so a test can prove that no value added a key or a section:
//!
//! - a line ends at `\n`, `\r`, `\r\n` or NUL (`read_line`);
//! - a line whose last character is an unescaped backslash continues on
//!   the next one (the backslash becomes a space), and comment lines inside
//!   a continuation are skipped;
//! - blank lines and lines starting with `#` or `;` are comments;
//! - `[name]` starts a section; anything else is `Key=Value`, both sides
//!   trimmed.
//!
//! [`expand`] then undoes the escaping winfleet writes: `%%` is `%` (a
//! specifier otherwise) and, in `Exec*=` lines, `$$` is `$` (a variable
//! otherwise); any other `%` or `$` is reported, since systemd would
//! replace it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

/// One `Key=Value` line, with its section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The section it is in.
    pub section: String,
    /// The key.
    pub key: String,
    /// The value as written (escapes kept).
    pub raw: String,
}

/// Parses a unit file into its entries, in order.
pub fn parse(text: &str) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    let mut section: Option<String> = None;
    let mut continuation: Option<String> = None;
    for line in text.split(['\n', '\r', '\0']) {
        if continuation.is_some() && matches!(line.trim_start().chars().next(), Some('#' | ';')) {
            // A comment inside a continuation is skipped; the line goes on.
            continue;
        }
        let joined = match continuation.take() {
            Some(start) => start + line,
            None => line.to_owned(),
        };
        if ends_escaped(&joined) {
            let mut cut = joined;
            cut.pop();
            cut.push(' ');
            continuation = Some(cut);
            continue;
        }
        let l = joined.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(name) = l.strip_prefix('[') {
            let name = name.strip_suffix(']').ok_or_else(|| format!("an invalid section header: {l:?}"))?;
            section = Some(name.to_owned());
            continue;
        }
        let Some((key, value)) = l.split_once('=') else {
            return Err(format!("a line without '=': {l:?}"));
        };
        let section = section.clone().ok_or_else(|| format!("an assignment outside a section: {l:?}"))?;
        entries.push(Entry { section, key: key.trim().to_owned(), raw: value.trim().to_owned() });
    }
    if let Some(rest) = continuation {
        return Err(format!("the file ends inside a continued line: {rest:?}"));
    }
    Ok(entries)
}

/// Whether a line ends in an unescaped backslash (systemd's `escaped`
/// walk over the whole line).
fn ends_escaped(line: &str) -> bool {
    let mut escaped = false;
    for c in line.chars() {
        escaped = !escaped && c == '\\';
    }
    escaped
}

/// A value with winfleet's escapes undone: `%%` is `%` everywhere, `$$`
/// is `$` in `Exec*=` values. A lone `%` or `$` would be expanded by
/// systemd, so it is an error here.
pub fn expand(key: &str, raw: &str) -> Result<String, String> {
    let exec = key.starts_with("Exec");
    let mut out = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '%' => match chars.next() {
                Some('%') => out.push('%'),
                other => {
                    return Err(format!("{key}={raw}: systemd would expand the specifier %{}", other.unwrap_or(' ')));
                }
            },
            '$' if exec => match chars.next() {
                Some('$') => out.push('$'),
                _ => return Err(format!("{key}={raw}: systemd would expand a variable there")),
            },
            c => out.push(c),
        }
    }
    Ok(out)
}

/// The unit's entries as `(section, key, expanded value)`.
pub fn read(text: &str) -> Result<Vec<(String, String, String)>, String> {
    parse(text)?.into_iter().map(|e| Ok((e.section, e.key.clone(), expand(&e.key, &e.raw)?))).collect()
}

/// The sections and keys of the unit, in order: what a value must never
/// change.
pub fn shape(text: &str) -> Result<Vec<(String, String)>, String> {
    Ok(parse(text)?.into_iter().map(|e| (e.section, e.key)).collect())
}
