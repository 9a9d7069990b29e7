//! The flag SIGINT and SIGTERM set, so that a long run stops where it is and still writes
//! what it measured and takes its namespaces down.
//!
//! A run's clean-up can itself take a while (daemons to stop, labs to remove), so a second
//! signal while the first is being handled exits at once (status 130), as a shell user
//! pressing Ctrl-C twice expects.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// A flag that turns true on the first SIGINT or SIGTERM; the second exits the process.
pub(crate) fn on_signal() -> std::io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registered first, so it sees the flag as the first signal left it.
        signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&stop))?;
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    Ok(stop)
}
