//! Software prefetch: start loading a cache line without waiting for it.
//!
//! Why: with many VRs a VR's state, rings and tables are cold each time it runs, and the
//! path reaches them one after another; a prefetch issued for all of them at once lets the
//! misses overlap instead (see `Worker::run_vr`).

/// Start loading the line holding `p` into every cache level. A hint: it never faults,
/// whatever the address, and reads nothing observable.
#[inline(always)]
pub(crate) fn read<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch never faults and reads nothing observable.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
