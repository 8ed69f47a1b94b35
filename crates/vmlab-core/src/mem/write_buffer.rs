//! Write buffer between a write-through cache and the level below (Romer Table 4-2:
//! 4 entries). A write enters the buffer and retires in the background, one at a time,
//! each taking the latency of its write to the level below; the core stalls only when it
//! writes while every entry is still busy. (The write updates the lower levels when it
//! enters: their state runs slightly ahead of the drain timing, not behind.)

use std::collections::VecDeque;

#[derive(Clone, Debug)]
pub struct WriteBuffer {
    /// Cycle at which each buffered write retires, oldest first.
    retire_at: VecDeque<u64>,
    entries: usize,
    pub writes: u64,
    pub stall_cycles: u64,
    /// Writes that found the buffer full.
    pub full_stalls: u64,
}

impl WriteBuffer {
    pub fn new(entries: usize) -> WriteBuffer {
        WriteBuffer { retire_at: VecDeque::with_capacity(entries), entries, writes: 0, stall_cycles: 0, full_stalls: 0 }
    }

    /// A write at cycle `now` whose write below takes `cost` cycles; returns the cycles
    /// the core stalls.
    #[inline]
    pub fn push(&mut self, now: u64, cost: u64) -> u64 {
        while self.retire_at.front().is_some_and(|&t| t <= now) {
            self.retire_at.pop_front();
        }
        let mut stall = 0;
        if self.retire_at.len() == self.entries {
            let oldest = self.retire_at.pop_front().expect("full buffer");
            stall = oldest - now;
            self.full_stalls += 1;
        }
        let start = self.retire_at.back().copied().unwrap_or(0).max(now + stall);
        self.retire_at.push_back(start + cost);
        self.writes += 1;
        self.stall_cycles += stall;
        stall
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_only_when_full() {
        let mut b = WriteBuffer::new(2);
        // Two writes of 10 cycles at t=0 retire at 10 and 20.
        assert_eq!(b.push(0, 10), 0);
        assert_eq!(b.push(0, 10), 0);
        // A third at t=1 waits for the first to retire (t=10).
        assert_eq!(b.push(1, 10), 9);
        // It retires at 30; at t=25 the second (20) is gone, one entry busy.
        assert_eq!(b.push(25, 10), 0);
        assert_eq!(b.stall_cycles, 9);
        assert_eq!(b.full_stalls, 1);
        // Spread-out writes never stall.
        let mut b = WriteBuffer::new(1);
        for t in 0..10 {
            assert_eq!(b.push(t * 100, 25), 0);
        }
    }
}
