//! Helpers for the simulator's own speed on the host (not part of any model).

/// Hint the host to bring the cache line holding `*p` into its L1 cache. Used where a
/// structure's next reads are known before they are needed, so their host cache
/// misses overlap instead of queueing.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing architecturally.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
