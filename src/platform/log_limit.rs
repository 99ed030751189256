//! Log flood control: [`WarnLimiter`] (at most one line per key per interval, the rest
//! counted) and [`Limited`], the logging layer that applies it to other crates' warnings.
//!
//! Our own warnings that can repeat go through a `WarnLimiter` where they are written (the file
//! watcher's, per root). Third-party crates log on their own: `notify` writes a
//! `WatchNotFound` warning for every directory that vanishes under a recursive watch, hundreds
//! a second while a granted directory churns. [`Limited`] wraps the log writer and lets
//! through at most one WARN/ERROR line per minute from each third-party call site (target,
//! file and line; a `log` record's own), then one line saying how many like it were held back.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tracing::{
    Event, Level, Metadata, Subscriber,
    callsite::{DefaultCallsite, Identifier},
    field::FieldSet,
    metadata::Kind,
    span,
};
use tracing_log::NormalizeEvent;
use tracing_subscriber::layer::{Context, Layer};

/// At most one log line per key per `every`: a directory that churns while it is watched
/// (files appearing and vanishing during a recursive watch or a rescan) must not flood the
/// log. The lines held back are counted and reported with the next one written.
#[derive(Debug)]
pub struct WarnLimiter {
    every: Duration,
    seen: HashMap<String, (Instant, u64)>,
}

impl WarnLimiter {
    pub fn new(every: Duration) -> Self {
        WarnLimiter { every, seen: HashMap::new() }
    }

    /// `Some(held_back)` when a line for `key` may be written at `now` (with how many were
    /// held back since the last one written), `None` when it is to be held back.
    pub fn allow(&mut self, key: &str, now: Instant) -> Option<u64> {
        match self.seen.get_mut(key) {
            Some((last, held)) if now.saturating_duration_since(*last) < self.every => {
                *held += 1;
                None
            }
            Some((last, held)) => {
                let n = *held;
                (*last, *held) = (now, 0);
                Some(n)
            }
            None => {
                self.seen.insert(key.to_string(), (now, 0));
                Some(0)
            }
        }
    }
}

/// How often one third-party call site may write a WARN/ERROR line.
pub const THIRD_PARTY_EVERY: Duration = Duration::from_secs(60);

/// A logging layer (the writer, e.g. `fmt::layer()`) behind a limit: WARN and ERROR events
/// of targets other than `mnote` pass [`WarnLimiter`] keyed by their call site; the ones held
/// back are counted, and the next line written from that call site is followed by one saying
/// how many. Every other event goes to the writer as it is.
pub struct Limited<L> {
    inner: L,
    limiter: Mutex<WarnLimiter>,
    every: Duration,
    clock: Arc<dyn Fn() -> Instant + Send + Sync>,
}

impl<L> Limited<L> {
    pub fn new(inner: L) -> Self {
        Self::with_clock(inner, THIRD_PARTY_EVERY, Arc::new(Instant::now))
    }

    /// With its own interval and clock (the tests move time on by hand).
    pub fn with_clock(inner: L, every: Duration, clock: Arc<dyn Fn() -> Instant + Send + Sync>) -> Self {
        Limited { inner, limiter: Mutex::new(WarnLimiter::new(every)), every, clock }
    }

    /// `Some(held back)` when `event` may be written; always for our own targets and below WARN.
    fn admit(&self, event: &Event<'_>) -> Option<u64> {
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        let target = meta.target();
        if *meta.level() > Level::WARN || target == "mnote" || target.starts_with("mnote::") {
            return Some(0);
        }
        let key = format!("{target}@{}:{}", meta.file().unwrap_or("?"), meta.line().unwrap_or(0));
        self.limiter.lock().unwrap_or_else(|e| e.into_inner()).allow(&key, (self.clock)())
    }
}

/// The call site of the "held back" line (a `Metadata` needs one).
static HELD_BACK_CALLSITE: DefaultCallsite = DefaultCallsite::new(&HELD_BACK_META);
static HELD_BACK_META: Metadata<'static> = Metadata::new(
    "log lines held back",
    "mnote::log_limit",
    Level::WARN,
    Some(file!()),
    Some(line!()),
    Some(module_path!()),
    FieldSet::new(&["message"], Identifier(&HELD_BACK_CALLSITE)),
    Kind::EVENT,
);

impl<S: Subscriber, L: Layer<S>> Layer<S> for Limited<L> {
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(held) = self.admit(event) else { return };
        self.inner.on_event(event, ctx.clone());
        if held > 0 {
            let normalized = event.normalized_metadata();
            let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
            let text = format!(
                "{held} more lines like the one above ({} {}:{}) were held back in the last {} s",
                meta.target(),
                meta.file().unwrap_or("?"),
                meta.line().unwrap_or(0),
                self.every.as_secs()
            );
            let fields = HELD_BACK_META.fields();
            let message = fields.field("message").expect("the held-back line has a message");
            let values = [(&message, Some(&format_args!("{text}") as &dyn tracing::field::Value))];
            self.inner.on_event(&Event::new(&HELD_BACK_META, &fields.value_set(&values)), ctx);
        }
    }

    fn on_register_dispatch(&self, subscriber: &tracing::Dispatch) {
        self.inner.on_register_dispatch(subscriber)
    }
    fn on_layer(&mut self, subscriber: &mut S) {
        self.inner.on_layer(subscriber)
    }
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        self.inner.register_callsite(metadata)
    }
    fn enabled(&self, metadata: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        self.inner.enabled(metadata, ctx)
    }
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        self.inner.max_level_hint()
    }
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        self.inner.on_new_span(attrs, id, ctx)
    }
    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        self.inner.on_record(id, values, ctx)
    }
    fn on_follows_from(&self, id: &span::Id, follows: &span::Id, ctx: Context<'_, S>) {
        self.inner.on_follows_from(id, follows, ctx)
    }
    fn on_enter(&self, id: &span::Id, ctx: Context<'_, S>) {
        self.inner.on_enter(id, ctx)
    }
    fn on_exit(&self, id: &span::Id, ctx: Context<'_, S>) {
        self.inner.on_exit(id, ctx)
    }
    fn on_close(&self, id: span::Id, ctx: Context<'_, S>) {
        self.inner.on_close(id, ctx)
    }
    fn on_id_change(&self, old: &span::Id, new: &span::Id, ctx: Context<'_, S>) {
        self.inner.on_id_change(old, new, ctx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[test]
    fn warnings_are_limited_per_key_and_the_held_back_ones_counted() {
        let mut w = WarnLimiter::new(Duration::from_secs(60));
        let t0 = Instant::now();
        assert_eq!(w.allow("/a", t0), Some(0), "the first line is written");
        // A flood: 10,000 more within the minute, none written.
        for i in 0..10_000u64 {
            assert_eq!(w.allow("/a", t0 + Duration::from_millis(i * 5)), None);
        }
        // Another root is not held back by the first one.
        assert_eq!(w.allow("/b", t0 + Duration::from_secs(1)), Some(0));
        assert_eq!(w.allow("/b", t0 + Duration::from_secs(2)), None);
        // After the minute: one line, with the count of those held back.
        assert_eq!(w.allow("/a", t0 + Duration::from_secs(60)), Some(10_000));
        assert_eq!(w.allow("/a", t0 + Duration::from_secs(61)), None);
        assert_eq!(w.allow("/a", t0 + Duration::from_secs(121)), Some(1));
        assert_eq!(w.allow("/b", t0 + Duration::from_secs(300)), Some(1));
    }

    /// The log as written by `fmt`, line by line.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Lines {
        fn take(&self) -> Vec<String> {
            let text = String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap();
            text.lines().map(str::to_string).collect()
        }
    }

    /// What `notify` writes for every vanished directory of a recursive watch (its own
    /// target, through `log` as notify does, and the same from a `tracing` call site).
    fn notify_warns(n: usize) {
        for i in 0..n {
            tracing_log::format_trace(
                &log::Record::builder()
                    .level(log::Level::Warn)
                    .target("notify::inotify")
                    .file(Some("notify-8.2.2/src/inotify.rs"))
                    .line(Some(381))
                    .module_path(Some("notify::inotify"))
                    .args(format_args!("Unable to remove the path from the watches: WatchNotFound ({i})"))
                    .build(),
            )
            .unwrap();
        }
    }

    #[test]
    fn third_party_warnings_are_limited_per_call_site_and_counted_ours_never() {
        let lines = Lines::default();
        let writer = lines.clone();
        let base = Instant::now();
        let secs = Arc::new(AtomicU64::new(0));
        let now = secs.clone();
        let layer = Limited::with_clock(
            tracing_subscriber::fmt::layer().with_ansi(false).with_writer(move || writer.clone()),
            Duration::from_secs(60),
            Arc::new(move || base + Duration::from_secs(now.load(Ordering::SeqCst))),
        );
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            // A churning directory: 242 warnings from notify's one call site in 10 s.
            notify_warns(242);
            let written = lines.take();
            assert_eq!(written.len(), 1, "{written:#?}");
            assert!(written[0].contains("WatchNotFound (0)") && written[0].contains("notify::inotify"), "{written:?}");
            // Another third-party call site is limited on its own; an ERROR too.
            for _ in 0..3 {
                tracing::error!(target: "hyper::proto", "connection error");
            }
            // Our own warnings and others' INFO lines are never held back.
            for _ in 0..5 {
                tracing::warn!(target: "mnote::ingest::watch", "cannot watch");
                tracing::info!(target: "notify::inotify", "info line");
            }
            assert_eq!(lines.take().len(), 1 + 10);
            // A minute later: the next notify warning is written, then the count held back.
            secs.store(60, Ordering::SeqCst);
            notify_warns(1);
            let written = lines.take();
            assert_eq!(written.len(), 2, "{written:#?}");
            assert!(written[0].contains("WatchNotFound (0)"), "{written:?}");
            assert!(
                written[1].contains("241 more lines like the one above (notify::inotify")
                    && written[1].contains("held back in the last 60 s"),
                "{written:?}"
            );
            // Nothing held back since: no count line.
            secs.store(120, Ordering::SeqCst);
            notify_warns(1);
            assert_eq!(lines.take().len(), 1);
        });
    }
}
