//! Storage for fixed-size page-table nodes in the simulator's own memory: nodes live in
//! 2 MiB chunks that the host is asked to back with huge pages, so a random walk over a
//! large simulated table costs the host one cache miss, not a host TLB miss too.

use std::alloc::Layout;

const CHUNK_BYTES: usize = 2 << 20;

/// An arena of nodes of `N` u64 entries each, addressed by a dense `u32` index.
pub struct NodeArena<const N: usize> {
    chunks: Vec<*mut u64>,
    /// Nodes handed out so far (including freed ones awaiting reuse).
    len: u32,
    free: Vec<u32>,
}

// SAFETY: the arena owns its chunks exclusively (no other pointer to them exists), and
// u64 entries are plain data, so moving the arena to another thread moves the only
// access to them.
unsafe impl<const N: usize> Send for NodeArena<N> {}

impl<const N: usize> NodeArena<N> {
    const PER_CHUNK: usize = CHUNK_BYTES / (N * 8);

    pub fn new() -> Self {
        assert!(Self::PER_CHUNK >= 1, "node larger than a chunk");
        NodeArena { chunks: Vec::new(), len: 0, free: Vec::new() }
    }

    fn layout() -> Layout {
        Layout::from_size_align(CHUNK_BYTES, CHUNK_BYTES).expect("chunk layout")
    }

    /// A zeroed node.
    pub fn alloc(&mut self) -> u32 {
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
        self.len += 1;
        i
    }

    pub fn free(&mut self, i: u32) {
        self.free.push(i);
    }

    /// Node `i`'s first entry. Panics if `i` lies beyond every chunk; an `i` past
    /// `len` inside the last chunk reads zeroed, unused memory of the arena (never out
    /// of its allocation).
    #[inline(always)]
    fn ptr(&self, i: u32) -> *mut u64 {
        let (c, o) = (i as usize / Self::PER_CHUNK, i as usize % Self::PER_CHUNK);
        // SAFETY: `self.chunks[c]` is bounds-checked, so the chunk exists: CHUNK_BYTES,
        // allocated by `alloc`. `o < PER_CHUNK = CHUNK_BYTES / (8 N)`, so the node's N
        // entries at `o * N` end inside it.
        unsafe { self.chunks[c].add(o * N) }
    }

    #[inline(always)]
    pub fn get(&self, i: u32) -> &[u64; N] {
        debug_assert!(i < self.len);
        // SAFETY: `ptr` points at N entries inside a live chunk (its note); nodes never
        // overlap, and chunks live as long as the arena, which `&self` borrows.
        unsafe { &*(self.ptr(i) as *const [u64; N]) }
    }

    #[inline(always)]
    pub fn get_mut(&mut self, i: u32) -> &mut [u64; N] {
        debug_assert!(i < self.len);
        // SAFETY: as `get`, and `&mut self` makes the borrow exclusive.
        unsafe { &mut *(self.ptr(i) as *mut [u64; N]) }
    }

    /// Hint the host to bring entry `e` of node `i` into its cache.
    #[inline(always)]
    pub fn prefetch(&self, i: u32, e: usize) {
        debug_assert!(e < N);
        // A prefetch of any address is harmless: no pointer arithmetic to justify.
        crate::host::prefetch(self.ptr(i).wrapping_add(e));
    }
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
}
