//! What an untagged YAML scalar means as JSON, decided exactly as
//! serde-saphyr 2.1 decides it for `serde_json::Value` with
//! `legacy_octal_numbers` (its `deserialize_any` and `parse_scalars.rs`):
//! YAML 1.1 booleans, `0755` octal, `0x`/`0o`/`0b` radices, `_` between
//! digits, then Rust's float syntax. The reader in `yaml_value` uses it; a
//! test compares both readers on every fixture, so a change in the upstream
//! rules shows up as a failing test rather than as a silent difference.
//!
//! `None` means "serde-saphyr would reject this" (a non-finite float such as
//! `.inf` or `1e999`); the caller then lets serde-saphyr read the file so
//! the diagnostic stays upstream's.
//!
//! Kept with `yaml_value` (its speed figure is there): serde-saphyr keeps
//! these rules private to its deserializer.

use serde_json::Value;

/// ASCII padding serde-saphyr trims before converting a scalar.
fn trim(s: &str) -> &str {
    s.trim_matches([' ', '\t', '\r', '\n'])
}

/// A plain scalar that reads as null.
pub(super) fn is_null(s: &str) -> bool {
    matches!(s, "" | "~" | "null" | "Null" | "NULL")
}

/// YAML 1.1 booleans, as kubectl (go-yaml v2) reads them.
fn bool_11(s: &str) -> Option<bool> {
    let t = trim(s);
    let is = |words: [&str; 4]| words.iter().any(|w| t.eq_ignore_ascii_case(w));
    if is(["true", "yes", "y", "on"]) {
        Some(true)
    } else if is(["false", "no", "n", "off"]) {
        Some(false)
    } else {
        None
    }
}

/// The radix and digits of an unsigned spelling, with legacy octal: any
/// leading `0` makes it octal, so decimal digits never start with one.
fn radix_and_digits(rest: &str) -> (u32, &str) {
    let prefixed = |p: [&str; 2]| p.iter().find_map(|p| rest.strip_prefix(p));
    // Legacy octal also drops one `_` right after the prefix.
    let strip = |d: &str| usize::from(d.starts_with('_'));
    if let Some(d) = prefixed(["0x", "0X"]) {
        (16, &d[strip(d)..])
    } else if let Some(d) = prefixed(["0o", "0O"]) {
        (8, &d[strip(d)..])
    } else if let Some(d) = prefixed(["0b", "0B"]) {
        (2, &d[strip(d)..])
    } else if rest == "0" {
        (8, "0")
    } else if let Some(d) = rest.strip_prefix('0') {
        (8, &d[strip(d)..])
    } else {
        (10, rest)
    }
}

/// Digits in a radix, `_` allowed only between two digits.
fn digits(text: &str, radix: u32) -> Option<u128> {
    let bytes = text.as_bytes();
    let mut value: u128 = 0;
    let mut saw = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            let between = i > 0 && bytes[i - 1] != b'_' && bytes.get(i + 1).is_some_and(|&n| n != b'_');
            if !between {
                return None;
            }
            continue;
        }
        let d = char::from(b).to_digit(16).filter(|&d| d < radix)?;
        value = value.checked_mul(u128::from(radix))?.checked_add(u128::from(d))?;
        saw = true;
    }
    saw.then_some(value)
}

/// `parse_int_signed` into i128 (a leading `+` or `-`).
fn int_signed(t: &str) -> Option<i128> {
    let (negative, rest) = match t.strip_prefix('+') {
        Some(r) => (false, r),
        None => t.strip_prefix('-').map_or((false, t), |r| (true, r)),
    };
    let (radix, text) = radix_and_digits(rest);
    let magnitude = digits(text, radix)?;
    if negative {
        if magnitude == i128::MAX.unsigned_abs() + 1 {
            return Some(i128::MIN);
        }
        i128::try_from(magnitude).ok()?.checked_neg()
    } else {
        i128::try_from(magnitude).ok()
    }
}

/// `parse_int_unsigned` into u128 (no `-`).
fn int_unsigned(t: &str) -> Option<u128> {
    if t.starts_with('-') {
        return None;
    }
    let (radix, text) = radix_and_digits(t.strip_prefix('+').unwrap_or(t));
    digits(text, radix)
}

/// Whether a plain key is an integer to serde-saphyr: its duplicate check
/// compares such keys by value (`010` and `8` are the same key), which the
/// JSON string keys cannot show, so the caller leaves those files to it.
pub(super) fn is_integer_key(s: &str) -> bool {
    let t = trim(s);
    if t.starts_with('-') { int_signed(t).is_some() } else { int_unsigned(t).is_some() }
}

/// The JSON value of an untagged plain scalar; `None` when serde-saphyr
/// rejects it (non-finite floats).
pub(super) fn plain(s: &str) -> Option<Value> {
    if is_null(s) {
        return Some(Value::Null);
    }
    if let Some(b) = bool_11(s) {
        return Some(Value::Bool(b));
    }
    let t = trim(s);
    if t.starts_with('-') {
        if let Some(v) = int_signed(t).and_then(|v| i64::try_from(v).ok()) {
            return Some(Value::from(v));
        }
    } else if let Some(v) = int_unsigned(t).and_then(|v| u64::try_from(v).ok()) {
        return Some(Value::from(v));
    }
    let unsigned = t.strip_prefix(['+', '-']).unwrap_or(t);
    if matches!(unsigned, ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF") {
        return None;
    }
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Some(Value::from(v)),
        // `1e999`: a numeral that overflows, rejected as non-finite.
        Ok(_) if unsigned.as_bytes().first().is_some_and(u8::is_ascii_digit) => None,
        _ => Some(Value::String(s.to_owned())),
    }
}
