//! XSBench (Tramm et al., Argonne): the macroscopic cross-section lookups of its
//! event-based simulation with the unionized energy grid, run on XSBench's own H-M data,
//! so every address is the one the program computes.
//!
//! Data (XSBench GridInit.c, Materials.c): `n_isotopes` nuclides, each with
//! `n_gridpoints` NuclideGridPoints (energy and five cross sections, 6 doubles = 48 B)
//! sorted by energy, the energies drawn by XSBench's LCG from seed 42; the unionized
//! energy grid, every nuclide energy sorted (G = n_isotopes x n_gridpoints doubles); the
//! index grid, G rows of n_isotopes ints, row e holding for each nuclide the index of its
//! grid point just below energy e; 12 materials with the H-M nuclide lists and
//! concentrations. The arrays sit in the order XSBench allocates them, each page-aligned,
//! in one region.
//!
//! What the host keeps: every nuclide energy (8 B a grid point, in each nuclide's order)
//! and the unionized energies (8 B a point): 16 B per grid point, 1/22 of the simulated
//! footprint at H-M large. The cross sections, the index grid and the concentrations are
//! never stored: a lookup's addresses need only where its energy falls, and the index
//! grid's entry for (e, nuclide) is derived exactly from the energies (below).
//!
//! A lookup (Simulation.c, `run_event_based_simulation`, `calculate_macro_xs`): draw an
//! energy and a material (`pick_mat`) from the LCG, binary-search the unionized grid
//! (`grid_search`), read the material's nuclide count, then for each of its nuclides read
//! its id (`mats`), its concentration (`concs`), its index-grid entry and the two grid
//! points that bracket the energy (96 B, `calculate_micro_xs`).

use super::gen::{page_round, BurstGen, Bursts, Generator, Planned};
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::Dep;
use rayon::prelude::*;

pub(crate) fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "xsbench",
        description: "XSBench's event-based cross-section lookups on its H-M data: a binary search of the unionized energy grid, then for each nuclide of the material its index-grid entry and two bracketing grid points",
        params: vec![
            param("size", "large", "H-M size: small (68 nuclides), large (355), XL or XXL (355, more grid points), as XSBench -s"),
            param("gridpoints", "0", "energy points per nuclide, as XSBench -g (0 = the size's: 11303, XL 238847, XXL 501578)"),
            base_param(),
        ],
    }
}

/// A NuclideGridPoint: energy, total, elastic, absorbtion, fission, nu_fission (doubles).
const POINT: u64 = 48;
/// XSbench_header.h: the lookups' and the grids' LCG seeds.
const STARTING_SEED: u64 = 1070;
const INITIALIZATION_SEED: u64 = 42;
/// XSBench's LCG (Simulation.c `LCG_random_double`): modulus 2^63, increment 1.
const LCG_A: u64 = 2806196910506780709;
const LCG_MASK: u64 = (1 << 63) - 1;
/// Draws per NuclideGridPoint at initialisation: the energy, then five cross sections.
const DRAWS_PER_POINT: u64 = 6;

/// Materials.c `load_num_nucs`: nuclides per material; the fuel's (material 0) is 34 in
/// H-M small and 321 otherwise.
const NUM_NUCS: [usize; 12] = [321, 5, 4, 4, 27, 21, 21, 21, 21, 21, 9, 9];
const FUEL_SMALL: usize = 34;
/// Materials.c `load_mats`: the nuclide ids of each material. H-M large's fuel adds ids
/// 68..355 after the small fuel's 34.
const FUEL: [u32; 34] = [58, 59, 60, 61, 40, 42, 43, 44, 45, 46, 1, 2, 3, 7, 8, 9, 10, 29, 57, 47, 48, 0, 62, 15, 33, 34, 52, 53, 54, 55, 56, 18, 23, 41];
const CLADDING: [u32; 5] = [63, 64, 65, 66, 67];
const WATER: [u32; 4] = [24, 41, 4, 5];
const RPV: [u32; 27] = [19, 20, 21, 22, 35, 36, 37, 38, 39, 25, 27, 28, 29, 30, 31, 32, 26, 49, 50, 51, 11, 12, 13, 14, 6, 16, 17];
const REFLECTOR: [u32; 21] = [24, 41, 4, 5, 19, 20, 21, 22, 35, 36, 37, 38, 39, 25, 49, 50, 51, 11, 12, 13, 14];
const ASSEMBLY_ENDS: [u32; 9] = [24, 41, 4, 5, 63, 64, 65, 66, 67];
/// Simulation.c `pick_mat`: the cumulative volume fractions of the 12 materials.
const MAT_CDF: [f64; 12] = [0.140, 0.192, 0.467, 0.601, 0.755, 0.819, 0.885, 0.940, 0.948, 0.963, 0.988, 1.0];

/// One LCG step; the value in [0, 1).
#[inline]
fn lcg_random_double(seed: &mut u64) -> f64 {
    *seed = LCG_A.wrapping_mul(*seed).wrapping_add(1) & LCG_MASK;
    *seed as f64 / (1u64 << 63) as f64
}

/// The LCG state `n` steps on (Simulation.c `fast_forward_LCG`).
fn fast_forward_lcg(seed: u64, mut n: u64) -> u64 {
    let (mut a, mut c) = (LCG_A, 1u64);
    let (mut a_new, mut c_new) = (1u64, 0u64);
    while n > 0 {
        if n & 1 == 1 {
            a_new = a_new.wrapping_mul(a);
            c_new = c_new.wrapping_mul(a).wrapping_add(c);
        }
        c = c.wrapping_mul(a.wrapping_add(1));
        a = a.wrapping_mul(a);
        n >>= 1;
    }
    a_new.wrapping_mul(seed).wrapping_add(c_new) & LCG_MASK
}

/// Simulation.c `pick_mat`.
fn pick_mat(seed: &mut u64) -> usize {
    let roll = lcg_random_double(seed);
    MAT_CDF.iter().position(|&d| roll < d).unwrap_or(11)
}

/// The H-M problem: nuclide count and the materials' nuclide lists.
struct Materials {
    /// `max_num_nucs`: the row length of `mats` and `concs`.
    max: usize,
    lists: Vec<Vec<u32>>,
}

impl Materials {
    fn new(n_isotopes: u64) -> Materials {
        let fuel: Vec<u32> = if n_isotopes == 68 { FUEL.to_vec() } else { FUEL.iter().copied().chain(68..68 + (NUM_NUCS[0] - FUEL_SMALL) as u32).collect() };
        let reflector = REFLECTOR.to_vec();
        let lists = vec![
            fuel,
            CLADDING.to_vec(),
            WATER.to_vec(),
            WATER.to_vec(),
            RPV.to_vec(),
            reflector.clone(),
            reflector.clone(),
            reflector.clone(),
            reflector.clone(),
            reflector,
            ASSEMBLY_ENDS.to_vec(),
            ASSEMBLY_ENDS.to_vec(),
        ];
        Materials { max: lists.iter().map(Vec::len).max().unwrap_or(0), lists }
    }
}

/// Where the simulated program's arrays sit, in XSBench's allocation order.
struct Layout {
    nuclide_grid: u64,
    unionized: u64,
    index_grid: u64,
    num_nucs: u64,
    mats: u64,
    concs: u64,
    end: u64,
}

impl Layout {
    fn new(base: u64, n_isotopes: u64, n_gridpoints: u64, max_num_nucs: u64) -> Layout {
        let g = n_isotopes * n_gridpoints;
        let nuclide_grid = base;
        let unionized = nuclide_grid + page_round(g * POINT);
        let index_grid = unionized + page_round(g * 8);
        let num_nucs = index_grid + page_round(g * n_isotopes * 4);
        let mats = num_nucs + page_round(12 * 4);
        let concs = mats + page_round(12 * max_num_nucs * 4);
        let end = concs + page_round(12 * max_num_nucs * 8);
        Layout { nuclide_grid, unionized, index_grid, num_nucs, mats, concs, end }
    }
}

struct XsBench {
    n_isotopes: u64,
    n_gridpoints: u64,
    /// Each nuclide's energies in ascending order, nuclide after nuclide.
    energies: Vec<f64>,
    /// The unionized energy grid.
    unionized: Vec<f64>,
    materials: Materials,
    /// The lookups' LCG state.
    seed: u64,
    at: Layout,
}

pub(crate) fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
    Ok(BurstGen::boxed(build(p)?))
}

fn build(p: &mut Params) -> Result<XsBench> {
    let size = p.choice("size", &["small", "large", "XL", "XXL"])?;
    let gridpoints = p.count("gridpoints")?;
    // io.c `read_CLI`: H-M small has 68 nuclides, the rest 355; XL's grid is sized for
    // 120 GB of cross-section data, XXL's (238847 x 2.1, truncated) for 252 GB.
    let n_isotopes: u64 = if size == "small" { 68 } else { 355 };
    let n_gridpoints = match (gridpoints, size.as_str()) {
        (0, "XL") => 238_847,
        (0, "XXL") => 501_578,
        (0, _) => 11_303,
        (g, _) => g,
    };
    // At least two points bracket an energy; XSBench indexes the grid with ints.
    p.require((2..=i32::MAX as u64).contains(&n_gridpoints), "gridpoints", "2 to 2^31 - 1 points per nuclide (0: the size's)")?;
    let seed = p.seed()?;
    let base = p.base()?;
    let materials = Materials::new(n_isotopes);
    let at = Layout::new(base, n_isotopes, n_gridpoints, materials.max as u64);
    let key = if gridpoints == 0 { "size" } else { "gridpoints" };
    p.require(at.end - base <= 1 << 56, key, "a footprint of at most 2^56 bytes")?;
    let g = n_isotopes * n_gridpoints;
    let host_gib = ((g * 16) as f64 / (1u64 << 30) as f64).ceil();
    let (energies, unionized) =
        grids(seed, n_isotopes, n_gridpoints).ok_or_else(|| p.err(key, &format!("grids whose energies (about {host_gib} GiB) fit in host memory")))?;
    Ok(XsBench { n_isotopes, n_gridpoints, energies, unionized, materials, seed: STARTING_SEED.wrapping_mul(seed) & LCG_MASK, at })
}

/// GridInit.c: every grid point's energy is the first of its six LCG draws (seed 42 x
/// `seed`); each nuclide's points are sorted by energy; the unionized grid is all the
/// energies sorted. `None` if the host cannot hold them.
fn grids(seed: u64, n_isotopes: u64, n_gridpoints: u64) -> Option<(Vec<f64>, Vec<f64>)> {
    let g = (n_isotopes * n_gridpoints) as usize;
    let mut energies: Vec<f64> = Vec::new();
    energies.try_reserve_exact(g).ok()?;
    energies.resize(g, 0.0);
    let start = INITIALIZATION_SEED.wrapping_mul(seed) & LCG_MASK;
    energies.par_chunks_mut(n_gridpoints as usize).enumerate().for_each(|(i, grid)| {
        let mut s = fast_forward_lcg(start, i as u64 * n_gridpoints * DRAWS_PER_POINT);
        for e in grid.iter_mut() {
            *e = lcg_random_double(&mut s);
            s = fast_forward_lcg(s, DRAWS_PER_POINT - 1);
        }
        grid.sort_unstable_by(f64::total_cmp);
    });
    let mut unionized: Vec<f64> = Vec::new();
    unionized.try_reserve_exact(g).ok()?;
    unionized.extend_from_slice(&energies);
    unionized.par_sort_unstable_by(f64::total_cmp);
    Some((energies, unionized))
}

impl XsBench {
    /// The index-grid entry of nuclide `nuc` in the unionized row an energy's search
    /// finds: the nuclide's grid point just below the energy. GridInit.c builds row e by
    /// advancing each nuclide's `idx_low` past every one of its points at or below
    /// unionized energy e, stopping at n_gridpoints - 2; the row the search returns is
    /// the last unionized energy at or below the looked-up one (or the first or the
    /// second-last row at the ends), which no point of any nuclide lies between, so the
    /// entry is the count of the nuclide's points at or below the energy, less one,
    /// clamped to [0, n_gridpoints - 2].
    fn index_entry(&self, nuc: u64, energy: f64) -> u64 {
        let ng = self.n_gridpoints as usize;
        let grid = &self.energies[nuc as usize * ng..(nuc as usize + 1) * ng];
        let at_or_below = grid.partition_point(|&e| e <= energy) as u64;
        at_or_below.saturating_sub(1).min(self.n_gridpoints - 2)
    }

    /// One macroscopic lookup. Dependences: the first probe's address is fixed; each
    /// later probe goes where the energy read before it sent it (load 1). The material's
    /// nuclide count, its nuclide ids and concentrations are at the material's row (its
    /// index comes from the LCG: independent). A nuclide's index-grid entry is at the id
    /// read two loads before (load 2) in the row the search found; its grid points are
    /// at the index the entry holds (load 1).
    fn lookup(&mut self, out: &mut Vec<Planned>) {
        let energy = lcg_random_double(&mut self.seed);
        let mat = pick_mat(&mut self.seed);
        // `grid_search` over the unionized grid: A[mid] > energy exactly when mid is at
        // or past the count of energies at or below it.
        let n = self.unionized.len() as u64;
        let at_or_below = self.unionized.partition_point(|&e| e <= energy) as u64;
        let (mut lower, mut upper) = (0u64, n - 1);
        let mut dep = Dep::NONE;
        while upper - lower > 1 {
            let mid = lower + (upper - lower) / 2;
            out.push(Planned::read(self.at.unionized + mid * 8, 8, dep));
            dep = Dep::on_load(1);
            if mid >= at_or_below {
                upper = mid;
            } else {
                lower = mid;
            }
        }
        let row = lower;
        out.push(Planned::read(self.at.num_nucs + mat as u64 * 4, 4, Dep::NONE));
        let max = self.materials.max as u64;
        for j in 0..self.materials.lists[mat].len() {
            let nuc = self.materials.lists[mat][j] as u64;
            let slot = mat as u64 * max + j as u64;
            out.push(Planned::read(self.at.mats + slot * 4, 4, Dep::NONE));
            out.push(Planned::read(self.at.concs + slot * 8, 8, Dep::NONE));
            out.push(Planned::read(self.at.index_grid + (row * self.n_isotopes + nuc) * 4, 4, Dep::on_load(2)));
            let low = self.index_entry(nuc, energy);
            out.push(Planned::read(self.at.nuclide_grid + (nuc * self.n_gridpoints + low) * POINT, (2 * POINT) as u16, Dep::on_load(1)));
        }
    }
}

impl Bursts for XsBench {
    fn region(&self) -> (u64, u64) {
        (self.at.nuclide_grid, self.at.end)
    }
    fn next_burst(&mut self, out: &mut Vec<Planned>) {
        self.lookup(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::params::testing::{assert_refused, params};
    use super::*;

    fn xsbench(kv: &[(&str, &str)]) -> Result<XsBench> {
        build(&mut params(&info(), kv)?)
    }

    #[test]
    fn the_materials_are_xsbenchs() {
        for (n_isotopes, fuel, max) in [(68, 34, 34), (355, 321, 321)] {
            let m = Materials::new(n_isotopes);
            let counts: Vec<usize> = m.lists.iter().map(Vec::len).collect();
            assert_eq!(counts, [fuel, 5, 4, 4, 27, 21, 21, 21, 21, 21, 9, 9]);
            assert_eq!(m.max, max);
            assert!(m.lists.iter().flatten().all(|&nuc| (nuc as u64) < n_isotopes));
        }
        // pick_mat's fractions: fuel 14%, cold water 27.5%, the bottom nozzle 0.8%.
        let mut seed = STARTING_SEED;
        let mut hits = [0u64; 12];
        for _ in 0..200_000 {
            hits[pick_mat(&mut seed)] += 1;
        }
        let frac = |m: usize| hits[m] as f64 / 200_000.0;
        assert!((frac(0) - 0.140).abs() < 0.005 && (frac(2) - 0.275).abs() < 0.005 && (frac(8) - 0.008).abs() < 0.002, "{hits:?}");
    }

    #[test]
    fn fast_forward_is_that_many_steps() {
        let mut s = 12345;
        for _ in 0..1000 {
            lcg_random_double(&mut s);
        }
        assert_eq!(fast_forward_lcg(12345, 1000), s);
    }

    /// The footprint is the sum of XSBench's arrays, page-rounded: at H-M large the
    /// estimate XSBench prints (io.c, 5649 MB) plus the small material tables.
    #[test]
    fn the_footprint_is_xsbenchs_arrays() {
        let l = Layout::new(0, 355, 11_303, 321);
        let g = 355 * 11_303u64;
        assert_eq!(l.end, page_round(g * 48) + page_round(g * 8) + page_round(g * 355 * 4) + 4096 + page_round(12 * 321 * 4) + page_round(12 * 321 * 8));
        let estimate_mib = ((g * 48 + g * 8 + g * 355 * 4) as f64 / (1 << 20) as f64).ceil();
        assert_eq!(estimate_mib, 5649.0);
        assert!((l.end as f64 / (1 << 20) as f64 - estimate_mib).abs() < 1.0);
    }

    /// Against XSBench's own construction on a small grid: the unionized grid
    /// materialised, the index grid built by GridInit.c's loop, and grid_search run on
    /// it. Every lookup's probes, row and per-nuclide entries agree; a lookup reads
    /// probes + 1 + 4 x nuclides, its probes between floor and ceil of log2(G - 1).
    #[test]
    fn lookups_match_xsbenchs_grids() {
        let ng = 40u64;
        let mut x = xsbench(&[("size", "small"), ("gridpoints", "40")]).unwrap();
        let (niso, g) = (68u64, 68 * 40u64);
        assert!(x.energies.chunks(ng as usize).all(|c| c.is_sorted()));
        // GridInit.c: the index grid.
        let mut index = vec![0u64; (g * niso) as usize];
        let mut idx_low = vec![0u64; niso as usize];
        let mut energy_high: Vec<f64> = (0..niso).map(|i| x.energies[(i * ng + 1) as usize]).collect();
        for e in 0..g {
            let u = x.unionized[e as usize];
            for i in 0..niso as usize {
                if u >= energy_high[i] && idx_low[i] != ng - 2 {
                    idx_low[i] += 1;
                    energy_high[i] = x.energies[i * ng as usize + idx_low[i] as usize + 1];
                }
                index[(e * niso) as usize + i] = idx_low[i];
            }
        }
        let (lo_bound, hi_bound) = ((g - 1).ilog2() as usize, (g - 1).next_power_of_two().ilog2() as usize);
        let mut seed = STARTING_SEED;
        let mut out = Vec::new();
        for _ in 0..2000 {
            out.clear();
            x.next_burst(&mut out);
            let energy = lcg_random_double(&mut seed);
            let mat = pick_mat(&mut seed);
            // Simulation.c grid_search, on the materialised grid.
            let (mut lower, mut upper) = (0u64, g - 1);
            let mut probes = Vec::new();
            while upper - lower > 1 {
                let mid = lower + (upper - lower) / 2;
                probes.push(x.at.unionized + mid * 8);
                if x.unionized[mid as usize] > energy {
                    upper = mid
                } else {
                    lower = mid
                }
            }
            let nucs = &x.materials.lists[mat];
            assert!((lo_bound..=hi_bound).contains(&probes.len()), "{} probes", probes.len());
            assert_eq!(out.len(), probes.len() + 1 + 4 * nucs.len());
            assert_eq!(out[..probes.len()].iter().map(|a| a.vaddr).collect::<Vec<_>>(), probes);
            for (j, &nuc) in nucs.iter().enumerate() {
                let at = probes.len() + 1 + 4 * j;
                let entry = index[(lower * niso + nuc as u64) as usize];
                assert_eq!(out[at + 2].vaddr, x.at.index_grid + (lower * niso + nuc as u64) * 4);
                assert_eq!(out[at + 3].vaddr, x.at.nuclide_grid + (nuc as u64 * ng + entry) * 48);
                // The two points bracket the energy unless it lies outside the grid.
                let (e0, e1) = (x.energies[(nuc as u64 * ng + entry) as usize], x.energies[(nuc as u64 * ng + entry + 1) as usize]);
                assert!((e0 <= energy || entry == 0) && (energy < e1 || entry == ng - 2));
            }
            assert!(out.iter().all(|a| !a.write && a.vaddr >= x.at.nuclide_grid && a.vaddr + a.size as u64 <= x.at.end));
        }
    }

    #[test]
    fn bad_parameters_name_themselves() {
        assert_refused(
            xsbench,
            &[
                (&[("size", "huge")], "size"),
                (&[("gridpoints", "1")], "gridpoints"),
                (&[("gridpoints", "3000000000")], "gridpoints"),
                (&[("gridpoints", "x")], "gridpoints"),
            ],
        );
    }

    #[test]
    fn a_seed_gives_one_stream() {
        let run = |seed: &str| {
            let mut x = xsbench(&[("size", "small"), ("gridpoints", "100"), ("seed", seed)]).unwrap();
            let mut out = Vec::new();
            for _ in 0..50 {
                x.next_burst(&mut out);
            }
            out.iter().map(|a| a.vaddr).collect::<Vec<_>>()
        };
        assert_eq!(run("1"), run("1"));
        assert_ne!(run("1"), run("2"));
    }
}
