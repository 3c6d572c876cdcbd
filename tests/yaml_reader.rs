//! The fast YAML reader (src/desired/yaml_value.rs) reads exactly what
//! serde-saphyr reads: the same values, and for whatever it leaves to
//! serde-saphyr, the same diagnostics. Compared on every YAML file of the
//! project, on generated tricky inputs and on seeded mutations of the
//! fixtures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};

use winfleet::desired::yaml::{parse_documents, parse_documents_fast, parse_documents_upstream};

/// Compares both readers on one text; true when the fast reader read it
/// itself. Panics with the input on any difference.
fn same_reading(name: &str, text: &str) -> bool {
    let upstream = parse_documents_upstream(name, text);
    let fast = parse_documents_fast(text);
    if let Some(fast) = &fast {
        match &upstream {
            Ok(values) => {
                assert_eq!(fast, values, "{name}: values differ for {text:?}");
                // Number kinds too (1 and 1.0 are equal Values only if same kind).
                assert_eq!(
                    serde_json::to_string(fast).unwrap(),
                    serde_json::to_string(values).unwrap(),
                    "{name}: {text:?}"
                );
            }
            Err(e) => panic!("{name}: serde-saphyr rejects ({e}) what the fast reader accepts: {text:?}"),
        }
    }
    let combined = parse_documents(name, text);
    match (&combined, &upstream) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{name}: {text:?}"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{name}: {text:?}"),
        _ => panic!("{name}: accepted by one reader only: {combined:?} / {upstream:?} for {text:?}"),
    }
    fast.is_some()
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

#[test]
fn every_yaml_file_of_the_project_reads_the_same_as_with_serde_saphyr() {
    let root = support::root();
    let mut files = Vec::new();
    for dir in ["tests/fixtures", "examples-repo", "deploy", "examples", "docs"] {
        yaml_files(&root.join(dir), &mut files);
    }
    files.sort();
    assert!(files.len() > 200, "found only {} files", files.len());
    let mut left = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        let name = file.strip_prefix(&root).unwrap().display().to_string();
        if !same_reading(&name, &text) {
            left.push(name);
        }
    }
    // What a valid repository is made of must take the fast path: a file left
    // to serde-saphyr there would mean the speed-up silently went away.
    let slow_valid: Vec<&String> = left
        .iter()
        .filter(|n| n.starts_with("tests/fixtures/valid/") || n.starts_with("examples-repo/"))
        .filter(|n| {
            // Files a valid repository carries but winfleet does not read
            // (a status report left in the tree) may be anything.
            let text = std::fs::read_to_string(root.join(n)).unwrap();
            parse_documents_upstream(n, &text).is_ok()
        })
        .collect();
    assert!(slow_valid.is_empty(), "valid files left to serde-saphyr: {slow_valid:?}");
}

/// Scalars in every spelling the YAML 1.1/1.2 rules treat differently.
const SCALARS: &[&str] = &[
    "",
    "~",
    "null",
    "Null",
    "NULL",
    "nULL",
    "true",
    "True",
    "TRUE",
    "tRuE",
    "false",
    "yes",
    "Yes",
    "YES",
    "no",
    "No",
    "y",
    "Y",
    "n",
    "N",
    "on",
    "On",
    "ON",
    "off",
    "Off",
    "OFF",
    "0",
    "-0",
    "+0",
    "00",
    "0755",
    "-0755",
    "+0755",
    "0o755",
    "0O17",
    "0x1F",
    "0X1f",
    "-0x10",
    "0b101",
    "0B11",
    "0_755",
    "0x_1F",
    "0o_7",
    "0b_1",
    "078",
    "0789",
    "09",
    "1_000",
    "1__0",
    "_1",
    "1_",
    "-1_000",
    "12",
    "-12",
    "+12",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "1.5",
    "-1.5",
    "+1.5",
    ".5",
    "-.5",
    "5.",
    "1e3",
    "1E3",
    "1e+3",
    "1.5e-3",
    "1e999",
    "-1e999",
    ".5e999",
    "1_0.5",
    "0.1",
    "00.5",
    "0755.0",
    ".inf",
    "-.inf",
    "+.Inf",
    ".INF",
    ".nan",
    ".NaN",
    "inf",
    "-inf",
    "infinity",
    "nan",
    "NaN",
    "1.0",
    "1.",
    "3.14159",
    "0x",
    "0o",
    "0b",
    "-",
    "+",
    ".",
    "1:2",
    "12:30:00",
    "2026-11-24",
    "2026-11-24T10:00:00Z",
    "<<",
    "=",
    "a b",
    "10.0.0.1",
    "::1",
    "0.0.0.0",
    "1,000",
    "$serde_json::private::RawValue",
    "é",
    "日本",
    "x\u{feff}y",
];

fn quoted(s: &str, style: usize) -> String {
    match style {
        0 => s.to_owned(),
        1 => format!("'{}'", s.replace('\'', "''")),
        2 => format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")),
        _ => format!("!!str {s}"),
    }
}

#[test]
fn scalars_in_every_style_and_position_read_the_same() {
    let mut fast = 0;
    for s in SCALARS {
        for style in 0..4 {
            let q = quoted(s, style);
            let texts = [
                format!("v: {q}\n"),
                format!("{q}: v\n"),
                format!("[{q}, {q}]\n"),
                format!("{{{q}: 1, k: {q}}}\n"),
                format!("- {q}\n- x: {q}\n"),
                format!("{q}\n"),
                format!("---\n{q}\n---\na: {q}\n"),
                format!("a: |\n  {s}\nb: >-\n  {s}\n  {s}\n"),
                format!("a: &x {q}\nb: *x\n"),
            ];
            for text in texts {
                fast += usize::from(same_reading("scalar.yaml", &text));
            }
        }
    }
    assert!(fast > 500, "only {fast} inputs took the fast path");
}

#[test]
fn structures_read_the_same() {
    let cases = [
        "",
        "\n",
        "# only a comment\n",
        "---\n",
        "---\n---\n...\n",
        "---\n# c\n---\na: 1\n---\n",
        "a: 1\n...\n---\nb: 2\n",
        "\u{feff}a: 1\n",
        "\u{feff}---\na: 1\n---\nb: 2\n",
        "a: 1\r\nb:\r\n  - x\r\n  - y\r\nc: |\r\n  line\r\n  two\r\n",
        "a: 1 # trailing\n# between\nb: [1, 2] # more\n",
        "a:\n  b:\n    c:\n      d: [1, {e: f}]\n",
        "a: {}\nb: []\nc: {x: []}\n",
        "- - - 1\n    - 2\n  - 3\n- []\n",
        "a: &m {x: 1, y: [1, 2]}\nb: *m\nc: [*m, *m]\n",
        "a: &s [1, 2]\nb: &s [3]\nc: *s\n",
        "base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n",
        "base: &b {x: 1}\nother: &o {z: 2}\nd:\n  <<: [*b, *o]\n  w: 4\n",
        "d:\n  <<: {x: 1}\n  x: 2\n",
        "a: 1\na: 2\n",
        "a: 1\n'a': 2\n",
        "1: a\n01: b\n",
        "0x10: a\n16: b\n",
        "yes: a\ntrue: b\n",
        "? [a, b]\n: c\n",
        "? |\n  block key\n: v\n",
        "~: a\n",
        "'': a\n\"\": b\n",
        "a: !!int 12\n",
        "a: !!str 12\n",
        "a: !custom {x: 1}\n",
        "a: !!binary aGk=\n",
        "!!map {a: 1}\n",
        "--- !tagged\na: 1\n",
        "%YAML 1.1\n---\na: 0755\n",
        "a: &x\nb: *x\n",
        "a: *missing\n",
        "&k key: v\nother: *k\n",
        "a: [1, 2\n",
        "a: 'unterminated\n",
        "a:\n\t- tab\n",
        "a: b: c\n",
        "a: \"\\u00e9\\t\\x41\\n\"\n",
        "a: 'it''s'\nb: \"multi\n  line\"\nc: plain\n  continued\n",
        "a: >\n  folded\n  text\n\n  para\nb: |+\n  keep\n\nc: |2\n    indented\n",
        "a: |\n  no newline at end",
        "key with spaces: value with spaces\n",
        "list:\n- a\n- b\n",
        "data:\n  10.0.0.1: |-\n    username=Administrator\n",
        "a: -\nb: - x\n",
        "a: 12 # c\nb: \"12\"\n",
    ];
    for (i, text) in cases.iter().enumerate() {
        same_reading(&format!("case{i}.yaml"), text);
    }
    // Anchors and aliases take the fast path; merge keys and duplicates do not.
    assert!(parse_documents_fast("a: &m {x: 1}\nb: *m\n").is_some());
    assert!(parse_documents_fast("a: &m {x: 1}\nb:\n  <<: *m\n").is_none());
    assert!(parse_documents_fast("a: 1\na: 2\n").is_none());
}

#[test]
fn an_alias_bomb_and_a_huge_file_are_refused_with_the_same_messages() {
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        bomb.push_str(&format!("a{i}: &a{i} [{}]\n", vec![format!("*a{}", i - 1); 10].join(", ")));
    }
    let error = parse_documents("bomb.yaml", &bomb).unwrap_err();
    assert_eq!(error.to_string(), parse_documents_upstream("bomb.yaml", &bomb).unwrap_err().to_string());
    assert!(error.message.starts_with("YAML limit: "), "{error}");

    let many = format!("a: &a x\nb: [{}]\n", vec!["*a"; 120].join(", "));
    let error = parse_documents("many.yaml", &many).unwrap_err();
    assert_eq!(
        error.message,
        "YAML limit: 120 aliases for 1 anchor(s), more than 10 uses per anchor (an alias bomb); \
         write the values out instead of aliasing them"
    );

    // Past the fast reader's size limit, serde-saphyr reads it.
    let huge = format!("kind: Fleet\nx: {}\n", "y".repeat(17 << 20));
    assert!(parse_documents_fast(&huge).is_none());
    assert_eq!(parse_documents("huge.yaml", &huge).unwrap()[0]["x"].as_str().map(str::len), Some(17 << 20));
}

#[test]
fn mutated_fixtures_read_the_same() {
    let mut rng = fastrand::Rng::with_seed(20261124);
    let corpus = support::fuzz::corpus();
    let files: Vec<(String, Vec<u8>)> = corpus
        .iter()
        .flat_map(|(_, snapshot)| snapshot.files.iter())
        .filter(|f| f.path.ends_with(".yaml") || f.path.ends_with(".yml"))
        .map(|f| (f.path.clone(), f.bytes.clone()))
        .collect();
    assert!(!files.is_empty());
    let mut fast = 0;
    for case in 0..1500 {
        let (name, bytes) = &files[rng.usize(0..files.len())];
        let kind = rng.usize(0..support::fuzz::KINDS.len());
        // Alias bombs, huge scalars and 10^5 documents are slow in a debug
        // build and covered above: a few cases of each.
        if matches!(kind, 5 | 6 | 12) && case > 40 {
            continue;
        }
        let mutated = support::fuzz::mutate(&mut rng, kind, bytes, false);
        if let Ok(text) = String::from_utf8(mutated) {
            fast += usize::from(same_reading(name, &text));
        }
    }
    assert!(fast > 100, "only {fast} mutated files took the fast path");
}
