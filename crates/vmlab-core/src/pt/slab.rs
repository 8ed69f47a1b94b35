//! Fixed-size objects carved from 4 KiB frames of simulated memory, for page tables
//! whose nodes are smaller than a frame (guarded-table nodes, hash chain buckets).
//! A frame returns to the buddy allocator when its last object is freed.

use crate::addr::PageSize;
use crate::error::Result;
use crate::os::buddy::{BuddyAllocator, FrameUse};
use std::collections::HashMap;

pub(crate) struct Slab {
    obj_bytes: u64,
    per_frame: u64,
    /// Live objects per frame.
    frames: HashMap<u64, u32>,
    /// Free objects by physical address.
    free: Vec<u64>,
}

impl Slab {
    /// Objects of `obj_bytes` (at most 4096), packed into frames.
    pub(crate) fn new(obj_bytes: u64) -> Slab {
        assert!(obj_bytes > 0 && obj_bytes <= 4096);
        Slab { obj_bytes, per_frame: 4096 / obj_bytes, frames: HashMap::new(), free: Vec::new() }
    }

    pub(crate) fn alloc(&mut self, mem: &mut BuddyAllocator) -> Result<u64> {
        if self.free.is_empty() {
            let f = mem.alloc(PageSize::K4, FrameUse::PageTable)?;
            self.frames.insert(f, 0);
            self.free.extend((0..self.per_frame).rev().map(|i| f + i * self.obj_bytes));
        }
        let pa = self.free.pop().expect("refilled");
        *self.frames.get_mut(&(pa & !4095)).expect("frame of this slab") += 1;
        Ok(pa)
    }

    pub(crate) fn free(&mut self, mem: &mut BuddyAllocator, pa: u64) {
        let frame = pa & !4095;
        let live = {
            let n = self.frames.get_mut(&frame).expect("object of this slab");
            *n -= 1;
            *n
        };
        if live == 0 {
            // Release the frame: drop its free slots and give it back.
            self.free.retain(|&p| p & !4095 != frame);
            self.frames.remove(&frame);
            mem.free(frame, PageSize::K4, FrameUse::PageTable);
        } else {
            self.free.push(pa);
        }
    }

    /// Bytes of simulated memory held (whole frames).
    pub(crate) fn bytes(&self) -> u64 {
        self.frames.len() as u64 * 4096
    }
}
