//! The verdict marker a model starts its answer with (`[not-found]`, `[partial]`,
//! [`verdict`](crate::agents::verdict)): held back from the stream while the answer's start may
//! still be one, then dropped, so the reader never sees it.

use crate::agents::verdict::{MARKERS, ModelSaid, may_become, strip_marker};

#[derive(Debug)]
pub struct MarkerGate {
    /// Past the start: everything passes.
    open: bool,
    /// A marker was read: whitespace before the answer is dropped too.
    skip_space: bool,
    held: String,
    said: ModelSaid,
}

impl Default for MarkerGate {
    fn default() -> Self {
        MarkerGate { open: false, skip_space: false, held: String::new(), said: ModelSaid::Answer }
    }
}

impl MarkerGate {
    /// What the model said with its marker (none: an answer).
    pub fn said(&self) -> ModelSaid {
        self.said
    }

    /// What of `delta` may be streamed now.
    pub fn pass(&mut self, delta: &str) -> String {
        if self.open {
            return self.skip(delta.to_string());
        }
        self.held.push_str(delta);
        let start = self.held.trim_start();
        for (marker, what) in MARKERS {
            if let Some(after) = strip_marker(start, marker) {
                self.said = what;
                self.open = true;
                self.skip_space = true;
                let after = after.to_string();
                self.held.clear();
                return self.skip(after);
            }
        }
        if !start.is_empty() && MARKERS.iter().any(|(m, _)| may_become(start, m)) || start.is_empty() {
            return String::new();
        }
        self.flush()
    }

    /// Whatever is held back (the answer ended).
    pub fn flush(&mut self) -> String {
        self.open = true;
        std::mem::take(&mut self.held)
    }

    fn skip(&mut self, s: String) -> String {
        if !self.skip_space {
            return s;
        }
        let t = s.trim_start();
        if !t.is_empty() {
            self.skip_space = false;
        }
        t.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(deltas: &[&str]) -> (String, ModelSaid) {
        let mut g = MarkerGate::default();
        let mut out: String = deltas.iter().map(|d| g.pass(d)).collect();
        out.push_str(&g.flush());
        (out, g.said())
    }

    #[test]
    fn a_leading_marker_never_reaches_the_stream() {
        assert_eq!(run(&["[not", "-fou", "nd]", "\n\n", "Nothing ", "here."]), ("Nothing here.".into(), ModelSaid::NotFound));
        assert_eq!(run(&["[PARTIAL] Only", " part."]), ("Only part.".into(), ModelSaid::Partial));
        assert_eq!(run(&["[1] is a ", "footnote"]), ("[1] is a footnote".into(), ModelSaid::Answer));
        assert_eq!(run(&["The answer", " is 4."]), ("The answer is 4.".into(), ModelSaid::Answer));
        assert_eq!(run(&["[no"]), ("[no".into(), ModelSaid::Answer), "held back, then flushed at the end");
        assert_eq!(run(&["  ", "Hi"]), ("  Hi".into(), ModelSaid::Answer));
    }
}
