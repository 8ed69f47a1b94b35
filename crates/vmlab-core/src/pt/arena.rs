//! Storage for fixed-size page-table nodes in the simulator's own memory: nodes live in
//! 2 MiB chunks that the host is asked to back with huge pages, so a random walk over a
//! large simulated table costs the host one cache miss, not a host TLB miss too.

use std::alloc::Layout;

const CHUNK_BYTES: usize = 2 << 20;

/// An arena of nodes of `N` u64 entries each, addressed by a dense `u32` index.
///
/// Every access checks its index against the nodes handed out (`i < len`), in every
/// build: that one comparison replaces the bounds check of the chunk list it implies,
/// so an index the arena never gave out panics instead of reading past it.
pub(crate) struct NodeArena<const N: usize> {
    /// Chunks of `PER_CHUNK` nodes; always `len.div_ceil(PER_CHUNK)` of them (`alloc`
    /// adds one when `len` reaches a multiple of `PER_CHUNK`).
    chunks: Vec<*mut u64>,
    /// Nodes handed out so far (including freed ones awaiting reuse).
    len: u32,
    free: Vec<u32>,
}

// SAFETY: the arena owns its chunks exclusively (no other pointer to them exists:
// `get` and `get_mut` hand out borrows of `self`), and u64 entries are plain data, so
// moving the arena to another thread moves the only access to them. It is not `Sync`
// (raw pointers are not), so no two threads reach the chunks at once.
unsafe impl<const N: usize> Send for NodeArena<N> {}

impl<const N: usize> NodeArena<N> {
    const PER_CHUNK: usize = CHUNK_BYTES / (N * 8);

    pub(crate) fn new() -> Self {
        assert!(Self::PER_CHUNK >= 1, "node larger than a chunk");
        NodeArena { chunks: Vec::new(), len: 0, free: Vec::new() }
    }

    fn layout() -> Layout {
        Layout::from_size_align(CHUNK_BYTES, CHUNK_BYTES).expect("chunk layout")
    }

    /// A zeroed node.
    pub(crate) fn alloc(&mut self) -> u32 {
        if let Some(i) = self.free.pop() {
            self.get_mut(i).fill(0);
            return i;
        }
        let i = self.len;
        if (i as usize).is_multiple_of(Self::PER_CHUNK) {
            let p = crate::host::alloc_zeroed_huge(Self::layout()) as *mut u64;
            if p.is_null() {
                std::alloc::handle_alloc_error(Self::layout());
            }
            self.chunks.push(p);
        }
        self.len = i.checked_add(1).expect("fewer than 2^32 nodes");
        i
    }

    /// Return node `i` for reuse.
    pub(crate) fn free(&mut self, i: u32) {
        assert!(i < self.len, "freeing node {i} of an arena of {}", self.len);
        self.free.push(i);
    }

    /// Node `i`'s first entry. Panics unless `i` is a node the arena handed out.
    #[inline(always)]
    fn ptr(&self, i: u32) -> *mut u64 {
        if i >= self.len {
            out_of_bounds(i, self.len);
        }
        let (c, o) = (i as usize / Self::PER_CHUNK, i as usize % Self::PER_CHUNK);
        // SAFETY: `i < len`, and there are `len.div_ceil(PER_CHUNK)` chunks (the field's
        // note), so `c < chunks.len()`: the chunk exists, CHUNK_BYTES allocated by
        // `alloc`. `o < PER_CHUNK = CHUNK_BYTES / (8 N)`, so the node's N entries at
        // `o * N` end inside it.
        unsafe { self.chunks.get_unchecked(c).add(o * N) }
    }

    #[inline(always)]
    pub(crate) fn get(&self, i: u32) -> &[u64; N] {
        // SAFETY: `ptr` points at N entries inside a live chunk (its note); nodes never
        // overlap, and chunks live as long as the arena, which `&self` borrows.
        unsafe { &*(self.ptr(i) as *const [u64; N]) }
    }

    #[inline(always)]
    pub(crate) fn get_mut(&mut self, i: u32) -> &mut [u64; N] {
        // SAFETY: as `get`, and `&mut self` makes the borrow exclusive.
        unsafe { &mut *(self.ptr(i) as *mut [u64; N]) }
    }

    /// Hint the host to bring entry `e` of node `i` into its cache.
    #[inline(always)]
    pub(crate) fn prefetch(&self, i: u32, e: usize) {
        debug_assert!(e < N);
        // A prefetch of any address is harmless: no pointer arithmetic to justify.
        crate::host::prefetch(self.ptr(i).wrapping_add(e));
    }
}

/// The panic of an index the arena never handed out (kept off the access path).
#[cold]
#[inline(never)]
fn out_of_bounds(i: u32, len: u32) -> ! {
    panic!("node {i} of an arena of {len} nodes")
}

impl<const N: usize> Default for NodeArena<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Drop for NodeArena<N> {
    fn drop(&mut self) {
        for &c in &self.chunks {
            // SAFETY: allocated with the same layout in `alloc`.
            unsafe { crate::host::free_huge(c as *mut u8, Self::layout()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_zeroed_distinct_and_reused() {
        let mut a: NodeArena<512> = NodeArena::new();
        let ids: Vec<u32> = (0..1100).map(|_| a.alloc()).collect();
        for &i in &ids {
            assert!(a.get(i).iter().all(|&e| e == 0));
            a.get_mut(i)[7] = i as u64 + 1;
        }
        for &i in &ids {
            assert_eq!(a.get(i)[7], i as u64 + 1);
        }
        a.free(ids[3]);
        let r = a.alloc();
        assert_eq!(r, ids[3]);
        assert_eq!(a.get(r)[7], 0);
    }

    /// An index the arena never handed out panics, even inside the last chunk (whose
    /// memory exists): release builds check too.
    #[test]
    fn indices_past_the_nodes_handed_out_panic() {
        let mut a: NodeArena<512> = NodeArena::new();
        let i = a.alloc();
        assert!(std::panic::catch_unwind(|| a.get(i + 1)[0]).is_err());
        assert!(std::panic::catch_unwind(|| a.get(u32::MAX)[0]).is_err());
        let mut empty: NodeArena<512> = NodeArena::new();
        assert!(std::panic::catch_unwind(move || empty.get_mut(0)[0] = 1).is_err());
    }
}
