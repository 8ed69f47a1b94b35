//! Elphinstone's sparse address spaces: SPARSE-PAGE (isolated 4 KiB pages scattered
//! over a large range) and SPARSE-FILE (objects with a file-size distribution).

use super::gen::{below, mix, mmap_rw, rng, Generator, Permutation};
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::{Dep, Record};
use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;

/// SPARSE-FILE places each object in its own slot of this many pages (the largest
/// object size), so objects never overlap.
const SLOT_PAGES: u64 = 256;

pub(crate) fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "sparse",
        description: "sparse address space: `pages` random 4 KiB pages (layout=page, SPARSE-PAGE) or `pages` objects of file-like sizes (layout=file, SPARSE-FILE) scattered over `space`",
        params: vec![
            param("pages", "1024", "pages (layout=page) or objects (layout=file)"),
            param("space", "1T", "size of the virtual range the pages are scattered over"),
            param("layout", "page", "page | file"),
            param("order", "random", "random | sequential: which page each access touches"),
            base_param(),
        ],
    }
}

struct Sparse {
    base: u64,
    /// Start page and length in pages of every object (layout=page: one page each).
    objects: Vec<(u64, u64)>,
    total_pages: u64,
    random: bool,
    rng: Xoshiro256PlusPlus,
    next: u64,
}

/// SPARSE-FILE sizes in pages: 66% single pages, 31% 2..32 pages (log-uniform), 3%
/// 33..256 pages (> 128 KiB).
fn file_pages(h: u64) -> u64 {
    let bucket = h % 100;
    let r = h >> 8;
    if bucket < 66 {
        1
    } else if bucket < 97 {
        let exp = 1 + r % 5; // 2..32 pages
        ((1u64 << exp) + (r >> 8) % (1u64 << exp)).min(32)
    } else {
        33 + (r >> 8) % (SLOT_PAGES - 32)
    }
}

pub(crate) fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
    let count = p.count("pages")?;
    let space = p.bytes("space")?;
    let layout = p.choice("layout", &["page", "file"])?;
    let order = p.choice("order", &["random", "sequential"])?;
    let base = p.base()?;
    let seed = p.seed()?;
    p.require(count >= 1, "pages", "at least 1")?;
    p.require(space % 4096 == 0 && space > 0, "space", "a positive multiple of 4K")?;
    p.require(base.checked_add(space).is_some(), "space", "a range that fits below 2^64 from `base`")?;
    let space_pages = space / 4096;
    let objects: Vec<(u64, u64)> = if layout == "page" {
        p.require(count <= space_pages, "pages", "at most the number of 4K pages in `space`")?;
        let perm = Permutation::new(space_pages, seed);
        (0..count).map(|i| (perm.get(i), 1)).collect()
    } else {
        let slots = space_pages / SLOT_PAGES;
        p.require(count <= slots, "pages", "at most space / 1 MiB objects for layout=file")?;
        let perm = Permutation::new(slots, seed);
        (0..count).map(|i| (perm.get(i) * SLOT_PAGES, file_pages(mix(seed, i)))).collect()
    };
    let total_pages = objects.iter().map(|o| o.1).sum();
    Ok(Box::new(Sparse { base, objects, total_pages, random: order == "random", rng: rng(seed ^ 1), next: 0 }))
}

impl Generator for Sparse {
    fn base(&self) -> u64 {
        self.base
    }
    fn setup(&mut self, pid: u32, out: &mut Vec<Record>) {
        for &(page, len) in &self.objects {
            out.push(mmap_rw(pid, self.base + page * 4096, len * 4096));
        }
    }
    fn emit(&mut self, n: u64, pid: u32, out: &mut Vec<Record>) {
        for _ in 0..n {
            let (obj, page) = if self.random {
                // A uniformly random page of the whole set.
                let r = self.rng.next_u64();
                let o = below(r, self.objects.len() as u64) as usize;
                (o, below(mix(r, 1), self.objects[o].1))
            } else {
                let k = self.next;
                self.next = (self.next + 1) % self.total_pages;
                // Walk objects in order, page by page.
                let mut k = k;
                let mut o = 0;
                while k >= self.objects[o].1 {
                    k -= self.objects[o].1;
                    o += 1;
                }
                (o, k)
            };
            let (start, _) = self.objects[obj];
            // The page comes from the random generator or a counter: independent.
            out.push(Record::read(self.base + (start + page) * 4096 + (mix(page, 7) % 512) * 8, 8, pid).with_dep(Dep::NONE));
        }
    }
}
