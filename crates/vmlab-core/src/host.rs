//! Helpers for the simulator's own speed on the host (not part of any model).

/// Hint the host to bring the cache line holding `*p` into its L1 cache. Used where a
/// structure's next reads are known before they are needed, so their host cache
/// misses overlap instead of queueing.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing architecturally.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Write the words `v` to `dst` with non-temporal stores (x86-64 `movntdq`, two words
/// at a time): the lines go towards memory without first being read for ownership. For
/// a buffer one core fills and another reads (`mem::thread`): a plain store to a line
/// the reader last held must first take it back from the reader's cache, which is slow
/// when the host places the two vCPUs far apart (docs/performance.md, "The hand-over").
/// Other targets store plainly. Call [`stream_fence`] before another thread may read
/// what was written.
///
/// # Safety
/// `dst` is valid for a write of `N` words and aligned to 16 bytes; `N` is even.
#[inline(always)]
pub(crate) unsafe fn stream_store<const N: usize>(dst: *mut [u64; N], v: [u64; N]) {
    debug_assert!(N.is_multiple_of(2) && (dst as usize).is_multiple_of(16));
    #[cfg(target_arch = "x86_64")]
    for k in 0..N / 2 {
        use std::arch::x86_64::{__m128i, _mm_set_epi64x, _mm_stream_si128};
        // SAFETY: chunk k is within `dst` and 16-byte aligned (the caller's contract).
        unsafe { _mm_stream_si128((dst as *mut __m128i).add(k), _mm_set_epi64x(v[2 * k + 1] as i64, v[2 * k] as i64)) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        dst.write(v)
    }
}

/// Copy `*src` to `dst` with non-temporal stores (x86-64 `movnti`, a word at a time),
/// as [`stream_store`] does for a padding-free op: for an op type with padding (an
/// enum), whose bytes safe code may not read as words. Types whose size is not a
/// multiple of 8 bytes, or whose alignment is less than 8, and other targets, store
/// plainly. Call [`stream_fence`] before another thread may read what was written.
///
/// # Safety
/// `dst` is valid for a write of one `T` and aligned for it.
#[inline(always)]
pub(crate) unsafe fn stream_copy<T: Copy>(dst: *mut T, src: &T) {
    #[cfg(target_arch = "x86_64")]
    if std::mem::size_of::<T>().is_multiple_of(8) && std::mem::align_of::<T>() >= 8 {
        let (d, s) = (dst as *mut u64, src as *const T as *const u64);
        for k in 0..std::mem::size_of::<T>() / 8 {
            // SAFETY: word k is within both `*src` and `*dst` (the size is a whole number
            // of words) and 8-byte aligned in both (their alignment is at least 8). The
            // copy is in assembly because a padding byte is uninitialised: Rust may not
            // load it as part of a word, a machine instruction may (as `memcpy` does).
            unsafe {
                std::arch::asm!(
                    "mov {t}, qword ptr [{s}]",
                    "movnti qword ptr [{d}], {t}",
                    s = in(reg) s.add(k),
                    d = in(reg) d.add(k),
                    t = out(reg) _,
                    options(nostack, preserves_flags),
                );
            }
        }
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { dst.write(*src) }
}

/// Order every [`stream_store`] before the stores that follow (x86-64 `sfence`; the
/// non-temporal stores are otherwise weakly ordered), so a thread that sees a later
/// store (a buffer handed over) sees them too.
#[inline(always)]
pub(crate) fn stream_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a fence has no operands.
    unsafe {
        std::arch::x86_64::_mm_sfence();
    }
}

/// Bit w set where `keys[w]` equals `key` in every bit outside `ignore` (at most 64
/// keys). The tag match of every TLB, walk cache and cache set: on x86-64, SSE2 (part of
/// the baseline) compares four 64-bit keys in about a dozen instructions, where the
/// scalar loop takes five per key. Branch-free either way: keys are random, so an
/// early-exit loop would mispredict on almost every key.
#[inline(always)]
pub(crate) fn match_mask(keys: &[u64], key: u64, ignore: u64) -> u64 {
    debug_assert!(keys.len() <= 64);
    let mut mask = 0u64;
    let mut w = 0;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of the x86-64 baseline; the intrinsics only compute on
    // values (keys are read by safe, bounds-checked indexing).
    unsafe {
        use std::arch::x86_64::*;
        let want = _mm_set1_epi64x((key | ignore) as i64);
        let ign = _mm_set1_epi64x(ignore as i64);
        while w + 4 <= keys.len() {
            let a = _mm_or_si128(_mm_set_epi64x(keys[w + 1] as i64, keys[w] as i64), ign);
            let b = _mm_or_si128(_mm_set_epi64x(keys[w + 3] as i64, keys[w + 2] as i64), ign);
            // 32-bit halves compared; a key matches where both of its halves do.
            let ea = _mm_castsi128_ps(_mm_cmpeq_epi32(a, want));
            let eb = _mm_castsi128_ps(_mm_cmpeq_epi32(b, want));
            let low = _mm_shuffle_ps::<0b10_00_10_00>(ea, eb);
            let high = _mm_shuffle_ps::<0b11_01_11_01>(ea, eb);
            mask |= (_mm_movemask_ps(_mm_and_ps(low, high)) as u64) << w;
            w += 4;
        }
    }
    while w < keys.len() {
        mask |= (((keys[w] | ignore) == (key | ignore)) as u64) << w;
        w += 1;
    }
    mask
}

/// Bit i set where `bytes[i] == b`, for `bytes` of 16, 32, 48 or 64 bytes: one SSE2
/// compare per 16 bytes on x86-64 (the fingerprint match of wide sets,
/// `mmu::assoc`).
#[inline(always)]
pub(crate) fn byte_match_mask(bytes: &[u8], b: u8) -> u64 {
    debug_assert!(bytes.len() <= 64 && bytes.len().is_multiple_of(16));
    let mut mask = 0u64;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of the x86-64 baseline; each load reads 16 bytes inside
    // `chunk`, which `chunks_exact` guarantees holds 16.
    unsafe {
        use std::arch::x86_64::*;
        let want = _mm_set1_epi8(b as i8);
        for (c, chunk) in bytes.chunks_exact(16).enumerate() {
            let v = _mm_loadu_si128(chunk.as_ptr() as *const __m128i);
            mask |= (_mm_movemask_epi8(_mm_cmpeq_epi8(v, want)) as u32 as u64) << (16 * c);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (i, &x) in bytes.iter().enumerate() {
        mask |= ((x == b) as u64) << i;
    }
    mask
}

/// Types for which all-zero bytes are a valid value (so an array of them can come
/// straight from zeroed memory).
///
/// # Safety
/// Implement only for plain-data types whose every field is valid when zero.
pub unsafe trait Zeroable: Copy {}
// SAFETY: integers are valid when zero.
unsafe impl Zeroable for u64 {}

const HUGE_PAGE: usize = 2 << 20;

/// A fixed-length, zero-initialised array in the simulator's own memory. Arrays of 2 MiB
/// or more are 2 MiB-aligned and the host is asked to back them with huge pages before
/// they are touched, so random probes of a large simulated structure cost the host one
/// cache miss, not a host TLB miss too.
pub(crate) struct HugeArray<T: Zeroable> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
}

// SAFETY: the array owns its allocation exclusively; T is plain data, so moving the
// owner moves the only access to it.
unsafe impl<T: Zeroable + Send> Send for HugeArray<T> {}
// SAFETY: shared references only read through `&self`, as a `[T]` would.
unsafe impl<T: Zeroable + Sync> Sync for HugeArray<T> {}

impl<T: Zeroable> HugeArray<T> {
    pub(crate) fn zeroed(len: usize) -> HugeArray<T> {
        let Some(layout) = Self::layout(len) else {
            return HugeArray { ptr: std::ptr::NonNull::dangling(), len };
        };
        let p = alloc_zeroed_huge(layout) as *mut T;
        let Some(ptr) = std::ptr::NonNull::new(p) else { std::alloc::handle_alloc_error(layout) };
        HugeArray { ptr, len }
    }

    /// None for an empty allocation (zero length or zero-sized T).
    fn layout(len: usize) -> Option<std::alloc::Layout> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).expect("array size overflows");
        if bytes == 0 {
            return None;
        }
        let align = if bytes >= HUGE_PAGE { HUGE_PAGE } else { std::mem::align_of::<T>() };
        Some(std::alloc::Layout::from_size_align(bytes, align).expect("array layout"))
    }
}

impl<T: Zeroable> HugeArray<T> {
    /// This array's first `keep` elements in an array of `len` (> the current length),
    /// the rest zero. Large arrays move their pages into the new mapping (`mremap`)
    /// instead of copying them: copying made the host fault in and zero a fresh huge
    /// page for every one it copied, which was a tenth of the time of gups 4G's
    /// first-touch phase (the OS page index doubling as it grows).
    fn grown(self, len: usize, keep: usize) -> HugeArray<T> {
        debug_assert!(len > self.len && keep <= self.len);
        let grown = HugeArray::zeroed(len);
        #[cfg(target_os = "linux")]
        if let (Some(from), Some(to)) = (Self::layout(self.len), Self::layout(len)) {
            if from.size() >= HUGE_PAGE && to.size() >= HUGE_PAGE {
                // SAFETY: both ranges are whole mappings made by `map_huge` (a layout of
                // at least HUGE_PAGE bytes); MREMAP_FIXED replaces the start of the new
                // one with the old one's pages (zero past what was written, as the old
                // array was), and the old range is unmapped: forgetting `self` keeps
                // its Drop from unmapping it again.
                let moved = unsafe {
                    libc::mremap(
                        self.ptr.as_ptr() as *mut libc::c_void,
                        from.size(),
                        from.size(),
                        libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                        grown.ptr.as_ptr() as *mut libc::c_void,
                    )
                };
                if moved != libc::MAP_FAILED {
                    std::mem::forget(self);
                    return grown;
                }
            }
        }
        let mut grown = grown;
        grown[..keep].copy_from_slice(&self[..keep]);
        grown
    }
}

impl<T: Zeroable> std::ops::Deref for HugeArray<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        // SAFETY: `len` zero-initialised (or since written) Ts live at `ptr`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> std::ops::DerefMut for HugeArray<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as `deref`, and `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Zeroable> Clone for HugeArray<T> {
    fn clone(&self) -> Self {
        let mut a = HugeArray::zeroed(self.len);
        a.copy_from_slice(self);
        a
    }
}

impl<T: Zeroable> Drop for HugeArray<T> {
    fn drop(&mut self) {
        if let Some(layout) = Self::layout(self.len) {
            // SAFETY: allocated in `zeroed` with this layout.
            unsafe { free_huge(self.ptr.as_ptr() as *mut u8, layout) };
        }
    }
}

/// A growable array in the simulator's own memory that, like [`HugeArray`], sits in
/// huge pages once it reaches 2 MiB: for a large structure that grows while the
/// simulation runs (a `Vec` would grow in small pages, each random probe then a host TLB
/// miss as well as a cache miss).
#[derive(Clone)]
pub(crate) struct HugeVec<T: Zeroable> {
    buf: HugeArray<T>,
    len: usize,
}

impl<T: Zeroable> HugeVec<T> {
    pub(crate) fn new() -> HugeVec<T> {
        HugeVec { buf: HugeArray::zeroed(0), len: 0 }
    }

    /// Append `n` all-zero elements. The capacity past `len` is still zero (it came
    /// zeroed, and nothing can write past `len`), so only a regrowth copies.
    pub(crate) fn extend_zeroed(&mut self, n: usize) {
        let len = self.len.checked_add(n).expect("array size overflows");
        if len > self.buf.len() {
            let old = std::mem::replace(&mut self.buf, HugeArray::zeroed(0));
            let cap = len.max(2 * old.len());
            self.buf = old.grown(cap, self.len);
        }
        self.len = len;
    }
}

impl<T: Zeroable> Default for HugeVec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Zeroable> std::ops::Deref for HugeVec<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        &self.buf[..self.len]
    }
}

impl<T: Zeroable> std::ops::DerefMut for HugeVec<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.buf[..self.len]
    }
}

impl<T: Zeroable + std::fmt::Debug> std::fmt::Debug for HugeVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Allocate `layout` zeroed (null on failure). One spanning a huge page comes straight
/// from the kernel (`mmap`), 2 MiB-aligned and advised huge before anything touches it:
/// its pages read as zero and become resident only when first written, so a large
/// array costs memory for the part in use. (Not `alloc_zeroed`: for an alignment above
/// 16 it allocates, then zeroes, so every page is faulted in as a small page before any
/// advice, and all of it is resident.) Free with [`free_huge`].
pub(crate) fn alloc_zeroed_huge(layout: std::alloc::Layout) -> *mut u8 {
    debug_assert!(layout.size() > 0);
    #[cfg(target_os = "linux")]
    if layout.size() >= HUGE_PAGE && layout.align() <= HUGE_PAGE {
        return map_huge(layout.size());
    }
    // SAFETY: the caller's layout has a non-zero size.
    unsafe { std::alloc::alloc_zeroed(layout) }
}

/// Free what [`alloc_zeroed_huge`] returned for `layout`.
///
/// # Safety
/// `p` came from `alloc_zeroed_huge(layout)` and is not used afterwards.
pub(crate) unsafe fn free_huge(p: *mut u8, layout: std::alloc::Layout) {
    #[cfg(target_os = "linux")]
    if layout.size() >= HUGE_PAGE && layout.align() <= HUGE_PAGE {
        // SAFETY: map_huge mapped exactly [p, p + size).
        unsafe { libc::munmap(p as *mut libc::c_void, layout.size()) };
        return;
    }
    // SAFETY: allocated by alloc_zeroed with this layout.
    unsafe { std::alloc::dealloc(p, layout) }
}

/// `bytes` of fresh anonymous memory at a 2 MiB boundary, advised huge; null on failure.
#[cfg(target_os = "linux")]
fn map_huge(bytes: usize) -> *mut u8 {
    let Some(span) = bytes.checked_add(HUGE_PAGE) else { return std::ptr::null_mut() };
    // SAFETY: an anonymous private mapping touches no existing memory; the slack before
    // and after the aligned range is unmapped again, leaving exactly [start, start + bytes).
    unsafe {
        let base = libc::mmap(std::ptr::null_mut(), span, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
        if base == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        let b = base as usize;
        let start = (b + HUGE_PAGE - 1) & !(HUGE_PAGE - 1);
        if start > b {
            libc::munmap(base, start - b);
        }
        let tail = b + span - (start + bytes);
        if tail > 0 {
            libc::munmap((start + bytes) as *mut libc::c_void, tail);
        }
        advise_huge(start as *mut libc::c_void, bytes);
        start as *mut u8
    }
}

/// Ask the host to back [p, p + len) with huge pages (a hint; ignored where unsupported).
// madvise never dereferences the pointer: a bad range is an error return, not UB.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub(crate) fn advise_huge(p: *mut libc::c_void, len: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: the range is a live allocation of the caller's; madvise is only a hint.
    unsafe {
        libc::madvise(p, len, libc::MADV_HUGEPAGE);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (p, len);
}

/// A connected pair of Unix `SOCK_SEQPACKET` sockets, both closed on exec: each write
/// is one message, read whole, and messages from several writers never mix (the QEMU
/// tracing engine's channel: trace/qemu.rs). Linux only.
pub(crate) fn seqpacket_pair() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::FromRawFd;
        let mut fds = [-1 as libc::c_int; 2];
        // SAFETY: socketpair writes two descriptors into the array on success.
        let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: two fresh descriptors that nothing else owns.
        Ok(unsafe { (std::os::fd::OwnedFd::from_raw_fd(fds[0]), std::os::fd::OwnedFd::from_raw_fd(fds[1])) })
    }
    #[cfg(not(target_os = "linux"))]
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "SOCK_SEQPACKET socket pairs need Linux"))
}

/// A copy of `fd` that a spawned program inherits (not closed on exec).
pub(crate) fn inheritable(fd: &std::os::fd::OwnedFd) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: F_DUPFD on a descriptor we own returns a new one (without FD_CLOEXEC).
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD, 3) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(n) })
}

/// Send SIGKILL to process `pid` (a traced process vmlab started, directly or through
/// its tracer). A process that has gone already is no error.
pub(crate) fn kill(pid: u32) {
    #[cfg(unix)]
    // SAFETY: kill(2) with a pid; a process that has gone makes it fail with ESRCH.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

/// Whether descriptor `fd` is open: Rust's standard output counts writes to a closed
/// descriptor 1 as done, so the CLI checks first. (Only in the Python package's
/// `vmlab`: a Rust program's runtime reopens a closed standard descriptor on /dev/null.)
pub(crate) fn fd_is_open(fd: i32) -> bool {
    #[cfg(unix)]
    // SAFETY: F_GETFD only reads the descriptor's flags; a closed one fails with EBADF.
    return unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0;
    #[cfg(not(unix))]
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        /// The vector tag match agrees with comparing key by key, for every set size
        /// up to 64 (whole groups of four and the scalar tail), keys that differ only
        /// in the low half, the high half or the ignored bits, and duplicate matches.
        #[test]
        fn match_mask_agrees_with_a_key_by_key_compare(
            len in 0usize..=64,
            key in any::<u64>(),
            ignore in prop_oneof![Just(0u64), Just(1u64), Just(0xffffu64), any::<u64>()],
            picks in proptest::collection::vec(0u8..5, 64),
            noise in proptest::collection::vec(any::<u64>(), 64),
        ) {
            let keys: Vec<u64> = (0..len)
                .map(|w| match picks[w] {
                    0 => key,
                    1 => key ^ (noise[w] & 0xffff_ffff).max(1),
                    2 => key ^ (noise[w] & !0xffff_ffff).max(1 << 32),
                    3 => key ^ (noise[w] & ignore),
                    _ => noise[w],
                })
                .collect();
            let expected = keys.iter().enumerate().fold(0u64, |m, (w, &k)| m | (((k | ignore) == (key | ignore)) as u64) << w);
            prop_assert_eq!(match_mask(&keys, key, ignore), expected);
        }

        /// A streamed copy of an enum with padding (and of a type it stores plainly)
        /// reads back as the value copied.
        #[test]
        fn a_streamed_copy_reads_back_as_written(words in proptest::collection::vec(any::<u64>(), 24), kinds in proptest::collection::vec(0u8..3, 8)) {
            #[derive(Clone, Copy, Debug, PartialEq)]
            enum Op {
                Small(u8, u16),
                Wide { a: u64, b: [u64; 3], c: u8 },
                Pair(u32, u64),
            }
            let ops: Vec<Op> = kinds.iter().enumerate().map(|(i, k)| match k {
                0 => Op::Small(words[i] as u8, words[i + 8] as u16),
                1 => Op::Wide { a: words[i], b: [words[i + 1], words[i + 8], words[i + 16]], c: words[i + 2] as u8 },
                _ => Op::Pair(words[i] as u32, words[i + 16]),
            }).collect();
            let mut buf: Vec<Op> = Vec::with_capacity(ops.len());
            let mut odd: Vec<(u8, u16, u8)> = Vec::with_capacity(ops.len());
            for (i, op) in ops.iter().enumerate() {
                // SAFETY: within the capacities, and a Vec's slots are aligned.
                unsafe {
                    stream_copy(buf.as_mut_ptr().add(i), op);
                    stream_copy(odd.as_mut_ptr().add(i), &(i as u8, words[i] as u16, 7));
                }
            }
            stream_fence();
            // SAFETY: every slot was written.
            unsafe {
                buf.set_len(ops.len());
                odd.set_len(ops.len());
            }
            prop_assert_eq!(&buf, &ops);
            prop_assert!(odd.iter().enumerate().all(|(i, &o)| o == (i as u8, words[i] as u16, 7)));
        }
    }

    #[test]
    fn huge_vecs_grow_zeroed_and_keep_their_elements() {
        let mut v: HugeVec<u64> = HugeVec::new();
        assert!(v.is_empty());
        let mut model: Vec<u64> = Vec::new();
        // Past 2 MiB (the huge-page layout) and through several regrowths, three of
        // them between huge layouts (pages moved, not copied).
        for step in [1usize, 7, 1000, 300_000, 5, 400_000, 700_000, 3] {
            v.extend_zeroed(step);
            model.resize(model.len() + step, 0);
            assert_eq!(&v[..], &model[..]);
            let n = v.len();
            for (i, x) in v.iter_mut().enumerate().skip(n - step) {
                *x = i as u64 ^ 0x5a5a;
            }
            for (i, x) in model.iter_mut().enumerate().skip(n - step) {
                *x = i as u64 ^ 0x5a5a;
            }
        }
        assert_eq!(&v.clone()[..], &model[..]);
    }

    #[test]
    fn huge_arrays_are_zeroed_writable_and_cloned() {
        for len in [0usize, 1, 1000, (4 << 20) / 8 + 3] {
            let mut a: HugeArray<u64> = HugeArray::zeroed(len);
            assert_eq!(a.len(), len);
            assert!(a.iter().all(|&x| x == 0));
            for (i, x) in a.iter_mut().enumerate() {
                *x = i as u64 * 7;
            }
            let b = a.clone();
            drop(a);
            assert!(b.iter().enumerate().all(|(i, &x)| x == i as u64 * 7));
        }
    }
}
