//! Draws the round's progress events ([`winfleet::progress`]) on stderr:
//! on a terminal a spinner per node with its elapsed time and latest step;
//! otherwise one plain line per event, `winfleet: [ELAPSED] NODE: MESSAGE`,
//! the elapsed time counted from the start of the command.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use winfleet::progress::{self, Phase};

/// A tracing layer for the progress events only (filter it by target).
pub struct ProgressLayer {
    start: Instant,
    /// `None` when stderr is not a terminal: plain lines then.
    bars: Option<Mutex<Bars>>,
}

struct Bars {
    multi: MultiProgress,
    nodes: BTreeMap<String, ProgressBar>,
}

impl ProgressLayer {
    /// Spinners when `terminal`, plain lines otherwise.
    pub fn new(terminal: bool) -> Self {
        let bars = terminal.then(|| {
            let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
            Mutex::new(Bars { multi, nodes: BTreeMap::new() })
        });
        Self { start: Instant::now(), bars }
    }
}

/// The fields of one progress event.
#[derive(Default)]
struct Fields {
    node: String,
    phase: String,
    message: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "node" => value.clone_into(&mut self.node),
            "phase" => value.clone_into(&mut self.phase),
            "message" => value.clone_into(&mut self.message),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}

impl<S: Subscriber> Layer<S> for ProgressLayer {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let finished = [Phase::Done, Phase::Failed].iter().any(|p| p.as_str() == fields.phase);
        let Some(bars) = &self.bars else {
            let elapsed = progress::elapsed(self.start.elapsed());
            let line = format!("winfleet: [{elapsed}] {}: {}", fields.node, fields.message);
            let _ = writeln!(std::io::stderr().lock(), "{line}");
            return;
        };
        let Ok(mut bars) = bars.lock() else { return };
        let Bars { multi, nodes } = &mut *bars;
        let bar = nodes.entry(fields.node.clone()).or_insert_with(|| {
            let style = ProgressStyle::with_template("{spinner} [{elapsed:>4}] {prefix}: {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            let bar = multi.add(ProgressBar::new_spinner().with_style(style).with_prefix(fields.node.clone()));
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        if finished {
            bar.finish_with_message(fields.message);
            nodes.remove(&fields.node);
        } else {
            bar.set_message(fields.message);
        }
    }
}
