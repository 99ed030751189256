//! The progress bar of the batch commands (`mnote eval`, the benchmarks, loading a collection).

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps labelled `what`: position, rate and time left.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    let b = ProgressBar::new(len);
    b.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {what:<10} [{{bar:30}}] {{pos}}/{{len}} · {{per_sec}} · eta {{eta}} {{msg}}"
        ))
        .expect("static template")
        .progress_chars("=> "),
    );
    b
}
