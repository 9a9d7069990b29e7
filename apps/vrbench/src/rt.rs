//! `--rt-unthrottle`: switch off the kernel's real-time throttling for one run, and put it
//! back afterwards.
//!
//! Why: the kernel lets `SCHED_FIFO` tasks use `sched_rt_runtime_us` of every
//! `sched_rt_period_us` on a CPU (950 ms of each second by default) and then stops them for
//! the rest. A DUT worker that spins on its core as `SCHED_FIFO` (the in-process DUT's
//! worker, a pinned kernel NAPI thread under overload) is then held off its core for ~50 ms
//! of every second of a trial, and what arrives meanwhile is counted as the DUT's loss —
//! measured in this project as gaps of 49–51 ms at t = 1.0 and 2.0 s (docs/perf.md,
//! "vrbench quick"). Writing −1 lifts the limit for the whole host, so it is opt-in: a
//! spinning real-time task then keeps every ordinary task off its core, which is what a
//! dedicated forwarding core is, and what a shared machine may not want.
//!
//! [`Unthrottled`] restores the value it found when dropped: at the end of the run, on an
//! error, on unwinding, and after Ctrl-C (vrbench's SIGINT/SIGTERM handlers end the run
//! normally, so the drop runs). Only SIGKILL leaves it changed; the message printed when it
//! is applied says how to put it back by hand.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The knob.
pub(crate) const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// Real-time throttling switched off until this drops.
#[derive(Debug)]
pub(crate) struct Unthrottled {
    path: PathBuf,
    /// The value found (µs per period; −1 means already unthrottled).
    before: i64,
}

impl Unthrottled {
    /// Check that `--rt-unthrottle` can be applied (root), before anything is built.
    pub(crate) fn check() -> anyhow::Result<()> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            bail!(
                "--rt-unthrottle writes {RT_RUNTIME} and needs root: run as root, or leave \
                 --rt-unthrottle out (real-time tasks are then stopped ~50 ms of every second)"
            );
        }
        read(Path::new(RT_RUNTIME))?;
        Ok(())
    }

    /// Set [`RT_RUNTIME`] to −1 and remember what it was.
    pub(crate) fn apply() -> anyhow::Result<Unthrottled> {
        Unthrottled::check()?;
        Unthrottled::apply_at(Path::new(RT_RUNTIME))
    }

    fn apply_at(path: &Path) -> anyhow::Result<Unthrottled> {
        let before = read(path)?;
        if before != -1 {
            write(path, -1)?;
            eprintln!(
                "vrbench: {} = -1 for this run (was {before}); restored at exit — if vrbench \
                 is killed, restore it with: echo {before} > {}",
                path.display(),
                path.display()
            );
        }
        Ok(Unthrottled {
            path: path.to_path_buf(),
            before,
        })
    }

    /// The value found before the run.
    pub(crate) fn before(&self) -> i64 {
        self.before
    }
}

impl Drop for Unthrottled {
    fn drop(&mut self) {
        if self.before == -1 {
            return;
        }
        if let Err(e) = write(&self.path, self.before) {
            eprintln!(
                "vrbench: could not restore {} to {}: {e:#}; restore it by hand",
                self.path.display(),
                self.before
            );
        }
    }
}

fn read(path: &Path) -> anyhow::Result<i64> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.trim()
        .parse()
        .with_context(|| format!("{}: {:?} is not a number", path.display(), text.trim()))
}

fn write(path: &Path, v: i64) -> anyhow::Result<()> {
    std::fs::write(path, format!("{v}\n"))
        .with_context(|| format!("writing {v} to {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guard writes −1 and puts back exactly what it found; a value that was −1 already
    /// is left alone. (On a plain file: the real knob is exercised by the root test in
    /// `tests/measure.rs`.)
    #[test]
    fn the_old_value_comes_back_on_drop() {
        let _alone = crate::cores_alone();
        let p = std::env::temp_dir().join(format!("vrbench-rt-{}", std::process::id()));
        std::fs::write(&p, "950000\n").unwrap();
        let g = Unthrottled::apply_at(&p).unwrap();
        assert_eq!(g.before(), 950_000);
        assert_eq!(read(&p).unwrap(), -1);
        drop(g);
        assert_eq!(read(&p).unwrap(), 950_000);
        std::fs::write(&p, "-1\n").unwrap();
        let g = Unthrottled::apply_at(&p).unwrap();
        assert_eq!(g.before(), -1);
        drop(g);
        assert_eq!(read(&p).unwrap(), -1);
        std::fs::write(&p, "lots\n").unwrap();
        let e = format!("{:#}", Unthrottled::apply_at(&p).unwrap_err());
        assert!(e.contains("not a number"), "{e}");
        let _ = std::fs::remove_file(&p);
    }
}
