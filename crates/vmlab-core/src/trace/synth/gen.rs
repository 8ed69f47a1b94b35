//! The generator interface the synthetic workloads implement.

use crate::addr::AccessKind;
use crate::trace::{Access, Dep, Record};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

pub(crate) trait Generator: Send {
    /// Lowest virtual address of the workload's data (code goes 1 GiB below).
    fn base(&self) -> u64;
    /// Records that set the stage (Mmap of the regions, forks).
    fn setup(&mut self, pid: u32, out: &mut Vec<Record>);
    /// Append exactly `n` data accesses (and any context switches they need).
    fn emit(&mut self, n: u64, pid: u32, out: &mut Vec<Record>);
}

pub(crate) fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// Uniform integer in [0, n) by multiply-shift (Lemire); bias < n / 2^64.
#[inline(always)]
pub(crate) fn below(r: u64, n: u64) -> u64 {
    ((r as u128 * n as u128) >> 64) as u64
}

/// An anonymous private read/write region.
pub(crate) fn mmap_rw(pid: u32, start: u64, len: u64) -> Record {
    Record::Mmap { pid, start, len, prot: crate::trace::record::prot::READ | crate::trace::record::prot::WRITE, flags: crate::trace::MapFlags::PRIVATE }
}

/// Round up to a whole number of 4 KiB pages.
pub(crate) fn page_round(b: u64) -> u64 {
    (b + 4095) & !4095
}

/// A seeded bijection on [0, n): a balanced Feistel network over the smallest even
/// power of two >= n, with cycle walking. Visiting permute(0), permute(1), ... gives a
/// random order with no repeats and O(1) memory.
#[derive(Clone, Debug)]
pub(crate) struct Permutation {
    n: u64,
    half_bits: u32,
    keys: [u64; 4],
}

impl Permutation {
    pub(crate) fn new(n: u64, seed: u64) -> Permutation {
        assert!(n > 0);
        let bits = 64 - (n - 1).leading_zeros().min(63);
        let half_bits = bits.div_ceil(2).max(1);
        let mut r = rng(seed ^ 0x9e37_79b9_7f4a_7c15);
        Permutation { n, half_bits, keys: std::array::from_fn(|_| rand::RngCore::next_u64(&mut r)) }
    }

    #[inline(always)]
    fn round(&self, x: u64, k: u64) -> u64 {
        let mut h = (x ^ k).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 29;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^ (h >> 32)
    }

    #[inline]
    fn feistel(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half_bits) - 1;
        let (mut l, mut r) = (x >> self.half_bits, x & mask);
        for &k in &self.keys {
            let t = r;
            r = l ^ (self.round(r, k) & mask);
            l = t;
        }
        (l << self.half_bits) | r
    }

    /// The image of `i` (< n).
    #[inline]
    pub(crate) fn get(&self, i: u64) -> u64 {
        let mut x = self.feistel(i);
        // Cycle walking: the domain is at most 4n, so this ends after ~4 steps on average.
        while x >= self.n {
            x = self.feistel(x);
        }
        x
    }
}

/// A 64-bit mix of two values (SplitMix64 finaliser), for hash-defined structure.
#[inline(always)]
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    let mut z = a.wrapping_add(b.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_add(0x632b_e59b_d9b4_e019);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Zipfian ranks in [0, n) (Gray et al. 1994, the generator of YCSB and DBx1000) with
/// O(1) sampling after an O(min(n, 2^20)) set-up.
pub(crate) struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

impl Zipf {
    pub(crate) fn new(n: u64, theta: f64) -> Zipf {
        // Summed exactly up to 2^20 terms; beyond, the tail is the integral of x^-theta
        // over [2^20 + 1/2, n + 1/2] (midpoint rule, error below 1e-12 of the sum), so
        // 2^32 keys cost no more to set up than 2^20.
        const EXACT: u64 = 1 << 20;
        let zeta = |k: u64| {
            let head = (1..=k.min(EXACT)).map(|i| 1.0 / (i as f64).powf(theta)).sum::<f64>();
            let tail = |x: f64| x.powf(1.0 - theta) / (1.0 - theta);
            head + if k > EXACT { tail(k as f64 + 0.5) - tail(EXACT as f64 + 0.5) } else { 0.0 }
        };
        let zetan = zeta(n);
        let zeta2 = zeta(2.min(n));
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf { n, theta, alpha, zetan, eta }
    }
    /// The rank for a uniform `u` in [0, 1).
    pub(crate) fn sample(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(self.n - 1);
        }
        ((self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64).min(self.n - 1)
    }
}

/// One access a burst workload plans; the pid is filled in when it is handed out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Planned {
    pub(crate) vaddr: u64,
    pub(crate) size: u16,
    pub(crate) write: bool,
    pub(crate) dep: Dep,
}

impl Planned {
    pub(crate) const fn read(vaddr: u64, size: u16, dep: Dep) -> Planned {
        Planned { vaddr, size, write: false, dep }
    }
    pub(crate) const fn write(vaddr: u64, size: u16, dep: Dep) -> Planned {
        Planned { vaddr, size, write: true, dep }
    }
}

/// A workload whose accesses come a burst at a time (a BFS vertex, a key lookup) inside
/// one private read/write region. [`BurstGen`] makes it a [`Generator`].
pub(crate) trait Bursts: Send {
    /// The region `[start, end)` the workload maps; `start` is its lowest address.
    fn region(&self) -> (u64, u64);
    /// Append the accesses of the next burst (at least one) to `out`.
    fn next_burst(&mut self, out: &mut Vec<Planned>);
}

/// Drives a [`Bursts`] workload: maps its region, then hands out exactly `n` accesses
/// per `emit`, splitting bursts across calls.
pub(crate) struct BurstGen<B> {
    bursts: B,
    pending: Vec<Planned>,
    pos: usize,
}

impl<B: Bursts + 'static> BurstGen<B> {
    pub(crate) fn boxed(bursts: B) -> Box<dyn Generator> {
        Box::new(BurstGen { bursts, pending: Vec::new(), pos: 0 })
    }
}

impl<B: Bursts> Generator for BurstGen<B> {
    fn base(&self) -> u64 {
        self.bursts.region().0
    }
    fn setup(&mut self, pid: u32, out: &mut Vec<Record>) {
        let (start, end) = self.bursts.region();
        out.push(mmap_rw(pid, start, end - start));
    }
    fn emit(&mut self, mut n: u64, pid: u32, out: &mut Vec<Record>) {
        while n > 0 {
            if self.pos == self.pending.len() {
                self.pending.clear();
                self.pos = 0;
                self.bursts.next_burst(&mut self.pending);
            }
            let take = (self.pending.len() - self.pos).min(n as usize);
            for p in &self.pending[self.pos..self.pos + take] {
                let kind = if p.write { AccessKind::Write } else { AccessKind::Read };
                out.push(Record::Access(Access { vaddr: p.vaddr, pid, size: p.size, kind, dep: p.dep }));
            }
            self.pos += take;
            n -= take as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_is_a_bijection() {
        for n in [1u64, 2, 3, 7, 100, 1000, 4096, 5000] {
            let p = Permutation::new(n, 42);
            let mut seen = vec![false; n as usize];
            for i in 0..n {
                let x = p.get(i);
                assert!(x < n && !seen[x as usize], "n={n}");
                seen[x as usize] = true;
            }
        }
    }
}
