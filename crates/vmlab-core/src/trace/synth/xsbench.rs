//! XSBench-like cross-section lookups (Monte Carlo neutron transport's hot loop).
//!
//! Approximation: a unionized energy grid of G points (8 B each), an index grid of
//! G × nuclides 4-byte entries, and per-nuclide grids of `points` rows of 48 B. A lookup
//! binary-searches the unionized grid for a random energy (log2 G dependent reads), reads
//! the index row of the point found, then reads two adjacent rows of each of the
//! `nuclides` nuclide grids at the indexed position. G is chosen so the three arrays
//! fill `footprint`.

use super::gen::{below, emit_bursts, mix, mmap_rw, page_round, rng, Bursts, Generator, Pending};
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::Record;
use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;

const ROW: u64 = 48;

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "xsbench",
        description: "XSBench-like lookups: binary search of a unionized energy grid, then scattered nuclide-grid reads",
        params: vec![param("footprint", "1G", "total bytes of the grids"), param("nuclides", "68", "nuclides per lookup"), base_param()],
    }
}

struct XsBench {
    seed: u64,
    grid_points: u64,
    nuclides: u64,
    points_per_nuclide: u64,
    rng: Xoshiro256PlusPlus,
    base: u64,
    index_at: u64,
    nuclide_at: u64,
    end: u64,
    pending: Pending,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
    let footprint = p.footprint()?;
    let nuclides = p.int("nuclides")?;
    p.require((1..=4096).contains(&nuclides), "nuclides", "1 to 4096")?;
    // Per unionized point: 8 B energy + 4 B per nuclide index; nuclide grids hold
    // G / nuclides rows each (the unionized grid is the union of theirs).
    let per_point = 8 + 4 * nuclides + ROW;
    let grid_points = footprint / per_point;
    p.require(grid_points >= 16, "footprint", "large enough for 16 grid points")?;
    let points_per_nuclide = (grid_points / nuclides).max(2);
    let base = p.base()?;
    let index_at = base + page_round(grid_points * 8);
    let nuclide_at = index_at + page_round(grid_points * nuclides * 4);
    let end = nuclide_at + page_round(nuclides * points_per_nuclide * ROW);
    let seed = p.seed()?;
    Ok(Box::new(XsBench { seed, grid_points, nuclides, points_per_nuclide, rng: rng(seed), base, index_at, nuclide_at, end, pending: Pending::default() }))
}

impl XsBench {
    fn lookup(&mut self) {
        let target = below(self.rng.next_u64(), self.grid_points);
        let buf = self.pending.refill();
        let (mut lo, mut hi) = (0u64, self.grid_points);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            buf.push((self.base + mid * 8, 8, false));
            if mid <= target {
                lo = mid
            } else {
                hi = mid
            }
        }
        let row_bytes = (self.nuclides * 4).min(65535);
        buf.push((self.index_at + lo * self.nuclides * 4, row_bytes as u16, false));
        for n in 0..self.nuclides {
            // The indexed position in each nuclide's grid, near the same energy.
            let jitter = mix(self.seed ^ n, lo) % 3;
            // (In 128 bits: lo x points overflows 64 for footprints of tens of TiB.)
            let pos = ((lo as u128 * self.points_per_nuclide as u128 / self.grid_points as u128) as u64 + jitter).min(self.points_per_nuclide - 2);
            buf.push((self.nuclide_at + (n * self.points_per_nuclide + pos) * ROW, (2 * ROW) as u16, false));
        }
    }
}

impl Generator for XsBench {
    fn base(&self) -> u64 {
        self.base
    }
    fn setup(&mut self, pid: u32, out: &mut Vec<Record>) {
        out.push(mmap_rw(pid, self.base, self.end - self.base));
    }
    fn emit(&mut self, n: u64, pid: u32, out: &mut Vec<Record>) {
        emit_bursts(self, n, pid, out)
    }
}

impl Bursts for XsBench {
    fn pending(&mut self) -> &mut Pending {
        &mut self.pending
    }
    fn next_burst(&mut self) {
        self.lookup()
    }
}
