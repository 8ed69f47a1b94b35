//! XSBench-like cross-section lookups (Monte Carlo neutron transport's hot loop).
//!
//! Approximation: a unionized energy grid of G points (8 B each), an index grid of
//! G × nuclides 4-byte entries, and per-nuclide grids of `points` rows of 48 B. A lookup
//! binary-searches the unionized grid for a random energy (log2 G dependent reads), reads
//! the index row of the point found, then reads two adjacent rows of each of the
//! `nuclides` nuclide grids at the indexed position. G is chosen so the three arrays
//! fill `footprint`.

use super::gen::{below, mix, page_round, rng, BurstGen, Bursts, Generator, Planned};
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::Dep;
use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;

const ROW: u64 = 48;

pub(crate) fn info() -> WorkloadInfo {
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
}

pub(crate) fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
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
    Ok(BurstGen::boxed(XsBench { seed, grid_points, nuclides, points_per_nuclide, rng: rng(seed), base, index_at, nuclide_at, end }))
}

impl XsBench {
    /// One lookup. Dependences: each probe of the binary search goes where the energy
    /// read before it sent it (the first is independent: the energy is random); the
    /// index row is the point the last probe found; each nuclide-grid read is at a
    /// position the index row gives, so depends on it (n + 1 reads back for nuclide n).
    fn lookup(&mut self, out: &mut Vec<Planned>) {
        let target = below(self.rng.next_u64(), self.grid_points);
        let (mut lo, mut hi) = (0u64, self.grid_points);
        let mut dep = Dep::NONE;
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            out.push(Planned::read(self.base + mid * 8, 8, dep));
            dep = Dep::on_load(1);
            if mid <= target {
                lo = mid
            } else {
                hi = mid
            }
        }
        let row_bytes = (self.nuclides * 4).min(65535);
        out.push(Planned::read(self.index_at + lo * self.nuclides * 4, row_bytes as u16, dep));
        for n in 0..self.nuclides {
            // The indexed position in each nuclide's grid, near the same energy.
            let jitter = mix(self.seed ^ n, lo) % 3;
            // (In 128 bits: lo x points overflows 64 for footprints of tens of TiB.)
            let pos = ((lo as u128 * self.points_per_nuclide as u128 / self.grid_points as u128) as u64 + jitter).min(self.points_per_nuclide - 2);
            out.push(Planned::read(self.nuclide_at + (n * self.points_per_nuclide + pos) * ROW, (2 * ROW) as u16, Dep::on_load(n + 1)));
        }
    }
}

impl Bursts for XsBench {
    fn region(&self) -> (u64, u64) {
        (self.base, self.end)
    }
    fn next_burst(&mut self, out: &mut Vec<Planned>) {
        self.lookup(out)
    }
}
