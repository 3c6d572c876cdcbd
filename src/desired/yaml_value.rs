//! The fast YAML reader: documents straight from the event stream of
//! serde-saphyr's own parser (granit) into `serde_json::Value`s, without
//! going through serde. It reads what repositories are made of (mappings,
//! sequences, untagged scalars, anchors and aliases) the way serde-saphyr
//! reads it ([`yaml_scalar`](super::yaml_scalar) holds the scalar rules), in
//! less than half the time (benches/pipeline.rs; the parser's own events
//! are most of what remains).
//!
//! It never reports an error of its own: whenever a file holds something it
//! does not reproduce exactly — a syntax error, a duplicate or merge (`<<`)
//! key, a tag, a complex or null key, a non-finite float — or comes near one
//! of serde-saphyr's budgets, it answers `None` and
//! [`parse_documents`](super::yaml::parse_documents) lets serde-saphyr read
//! the file, so every value and every diagnostic stays upstream's. The test
//! `tests/yaml_reader.rs` compares both readers on every fixture.
//!
//! Kept for speed: one revision (19 files, 1.0 MB) reads in 23.5 ms here
//! against 46.6 ms with serde-saphyr, the parser's events alone taking
//! 22.7 ms (docs/performance.md, `cargo bench --bench pipeline`).

use std::collections::HashMap;

use serde_json::{Map, Value};
use serde_saphyr::granit_parser::{Event, Options, Parser, ScalarStyle};

use super::yaml_scalar;

/// Files larger than this go to serde-saphyr: its scalar and comment byte
/// budgets (64 MiB each) cannot be reached below it.
const MAX_TEXT: usize = 16 << 20;
/// Well inside serde-saphyr's budgets (1,000,000 events, 250,000 nodes,
/// depth 64, 1,024 documents), so that a file accepted here would be
/// accepted there.
const MAX_EVENTS: usize = 900_000;
const MAX_NODES: usize = 200_000;
const MAX_DEPTH: usize = 48;
const MAX_DOCUMENTS: usize = 1_000;
/// Aliases are rare in manifests, and serde-saphyr's alias-bomb ratio only
/// applies from 100 aliases on.
const MAX_ALIASES: usize = 50;
/// Node clones kept for anchors (serde-saphyr records up to 1,000,000
/// events of anchored nodes).
const MAX_ANCHORED_NODES: usize = 400_000;

/// Every non-null document of `text`, or `None` when serde-saphyr must
/// decide (see the module documentation).
pub(super) fn read(text: &str) -> Option<Vec<Value>> {
    if text.len() > MAX_TEXT {
        return None;
    }
    let mut reader = Reader::default();
    for item in Parser::new_from_str_with_options(text, parser_options()) {
        let (event, _) = item.ok()?;
        reader.event(event)?;
    }
    Some(reader.documents)
}

/// The parser options serde-saphyr 2.1 uses with its default budget (its
/// `Budget::parser_options`): granit's defaults, comments emitted, at most
/// 32 of them buffered.
fn parser_options() -> Options {
    let mut options = Options::default();
    options.emit_comments = true;
    options.max_buffered_comment_events = 32;
    options
}

enum Node {
    Seq(Vec<Value>),
    Map(Map<String, Value>, Option<String>),
}

struct Frame {
    node: Node,
    anchor: usize,
    nodes_before: usize,
}

/// A value kept for later aliases, with the nodes it counts again.
struct Anchored {
    value: Value,
    nodes: usize,
    depth: usize,
}

#[derive(Default)]
struct Reader {
    documents: Vec<Value>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Anchored>,
    root: Option<Value>,
    events: usize,
    nodes: usize,
    document_count: usize,
    aliases: usize,
    anchored_nodes: usize,
}

impl Reader {
    /// Takes one event; `None` to give up.
    fn event(&mut self, event: Event<'_>) -> Option<()> {
        self.events += 1;
        if self.events > MAX_EVENTS {
            return None;
        }
        match event {
            Event::DocumentStart(..) => {
                self.document_count += 1;
                self.anchors.clear();
                self.root = None;
                (self.document_count <= MAX_DOCUMENTS).then_some(())
            }
            Event::DocumentEnd => {
                match self.root.take() {
                    Some(Value::Null) | None => {}
                    Some(value) => self.documents.push(value),
                }
                Some(())
            }
            Event::Scalar(text, style, anchor, tag) => {
                if tag.is_some() {
                    return None;
                }
                self.count_nodes(1)?;
                if self.expects_key() {
                    if anchor != 0 {
                        return None;
                    }
                    return self.key(text.into_owned(), style);
                }
                let value = match style {
                    ScalarStyle::Plain => yaml_scalar::plain(&text)?,
                    _ => Value::String(text.into_owned()),
                };
                if anchor != 0 {
                    self.keep(anchor, &value, 1)?;
                }
                self.place(value)
            }
            Event::Alias(id) => {
                self.aliases += 1;
                if self.aliases > MAX_ALIASES || self.expects_key() {
                    return None;
                }
                let anchored = self.anchors.get(&id)?;
                let (value, nodes) = (anchored.value.clone(), anchored.nodes);
                if self.stack.len() + anchored.depth > MAX_DEPTH {
                    return None;
                }
                self.count_nodes(nodes)?;
                self.place(value)
            }
            Event::SequenceStart(_, anchor, tag) => self.open(Node::Seq(Vec::new()), anchor, tag.is_some()),
            Event::MappingStart(_, anchor, tag) => self.open(Node::Map(Map::new(), None), anchor, tag.is_some()),
            Event::SequenceEnd | Event::MappingEnd => self.close(),
            // Stream start and end, comments: nothing to build.
            _ => Some(()),
        }
    }

    fn count_nodes(&mut self, n: usize) -> Option<()> {
        self.nodes = self.nodes.saturating_add(n);
        (self.nodes <= MAX_NODES).then_some(())
    }

    fn expects_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame { node: Node::Map(_, None), .. }))
    }

    /// A mapping key. Plain keys that serde-saphyr compares by meaning
    /// rather than text (null, integers, the merge key `<<`) are left to it,
    /// and so is a key serde_json would treat as its raw-value marker.
    fn key(&mut self, text: String, style: ScalarStyle) -> Option<()> {
        if style == ScalarStyle::Plain
            && (yaml_scalar::is_null(&text) || text == "<<" || yaml_scalar::is_integer_key(&text))
        {
            return None;
        }
        if text == "$serde_json::private::RawValue" {
            return None;
        }
        let Some(Frame { node: Node::Map(map, key), .. }) = self.stack.last_mut() else { return None };
        // A duplicate key: serde-saphyr reports it.
        if map.contains_key(&text) {
            return None;
        }
        *key = Some(text);
        Some(())
    }

    fn open(&mut self, node: Node, anchor: usize, tagged: bool) -> Option<()> {
        if tagged || self.expects_key() || self.stack.len() >= MAX_DEPTH {
            return None;
        }
        self.count_nodes(1)?;
        self.stack.push(Frame { node, anchor, nodes_before: self.nodes - 1 });
        Some(())
    }

    fn close(&mut self) -> Option<()> {
        let frame = self.stack.pop()?;
        let value = match frame.node {
            Node::Seq(items) => Value::Array(items),
            Node::Map(map, None) => Value::Object(map),
            Node::Map(_, Some(_)) => return None,
        };
        if frame.anchor != 0 {
            self.keep(frame.anchor, &value, self.nodes - frame.nodes_before)?;
        }
        self.place(value)
    }

    fn keep(&mut self, anchor: usize, value: &Value, nodes: usize) -> Option<()> {
        self.anchored_nodes = self.anchored_nodes.saturating_add(nodes);
        if self.anchored_nodes > MAX_ANCHORED_NODES {
            return None;
        }
        let depth = depth(value);
        self.anchors.insert(anchor, Anchored { value: value.clone(), nodes, depth });
        Some(())
    }

    /// Puts a finished value where it belongs: the document root, the next
    /// item of a sequence, or the value of the pending key.
    fn place(&mut self, value: Value) -> Option<()> {
        match self.stack.last_mut() {
            None => {
                self.root = Some(value);
            }
            Some(Frame { node: Node::Seq(items), .. }) => items.push(value),
            Some(Frame { node: Node::Map(map, key), .. }) => {
                map.insert(key.take()?, value);
            }
        }
        Some(())
    }
}

/// Container nesting of a value (a scalar is 0).
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}
