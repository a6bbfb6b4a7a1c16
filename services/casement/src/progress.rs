//! Progress while a batch of events is indexed: a bar on a terminal, a line every few
//! seconds otherwise (logs, CI).

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::watch;

/// Follows `finished` (events of this run) until it reaches `base + total`.
pub async fn follow(label: &str, mut finished: watch::Receiver<u64>, base: u64, total: u64) {
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let bar = if terminal {
        let bar = ProgressBar::new(total);
        if let Ok(style) = ProgressStyle::with_template(
            "{msg} [{bar:32}] {pos}/{len} events, {per_sec}, {elapsed} (eta {eta})",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(label.to_owned());
        bar.enable_steady_tick(Duration::from_millis(200));
        Some(bar)
    } else {
        None
    };
    let started = Instant::now();
    let mut last_line = Instant::now();
    loop {
        let done = finished.borrow().saturating_sub(base).min(total);
        if let Some(bar) = &bar {
            bar.set_position(done);
        } else if last_line.elapsed() >= Duration::from_secs(5) || done == total {
            eprintln!(
                "{label}: {done}/{total} events ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
            last_line = Instant::now();
        }
        if done >= total || finished.changed().await.is_err() {
            break;
        }
    }
    if let Some(bar) = bar {
        bar.finish();
    }
}
