//! Elphinstone's native page-table costs, per operation, on the real data structures:
//! MAP1/MAPN-like map and unmap of 16 MiB of 4 KiB pages, MAPS-like 16 random pages
//! in a large region, functional lookups of every mapped page in a scattered order, and
//! task create/delete (an address space with 2 pages).

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use vmlab::addr::{PageSize, Perms};
use vmlab::os::buddy::BuddyAllocator;
use vmlab::pt::guarded::GuardedConfig;
use vmlab::pt::hashed::HashedConfig;
use vmlab::pt::inverted::InvertedConfig;
use vmlab::pt::{GuardedPageTable, HashedPageTable, InvertedPageTable, MultilevelPageTable, PageTable, RadixPageTable};

const PHYS: u64 = 1 << 30;
const BASE: u64 = 0x7f00_0000_0000;

/// Builds a fresh table of one kind.
type Maker = Box<dyn Fn() -> Box<dyn PtOps>>;

fn kinds() -> Vec<(&'static str, Maker)> {
    vec![
        ("radix", Box::new(|| Box::new(RadixPageTable::new(4).unwrap()) as Box<dyn PtOps>)),
        ("mpt", Box::new(|| Box::new(MultilevelPageTable::new()))),
        ("hashed", Box::new(|| Box::new(HashedPageTable::new(&HashedConfig::default()).unwrap()))),
        ("clustered", Box::new(|| Box::new(HashedPageTable::new(&HashedConfig { subblock: 4, buckets: 2048, ..Default::default() }).unwrap()))),
        ("guarded2", Box::new(|| Box::new(GuardedPageTable::new(&GuardedConfig { node_entries: 2, va_bits: 48 }).unwrap()))),
        ("guarded16", Box::new(|| Box::new(GuardedPageTable::new(&GuardedConfig { node_entries: 16, va_bits: 48 }).unwrap()))),
        ("guarded256", Box::new(|| Box::new(GuardedPageTable::new(&GuardedConfig { node_entries: 256, va_bits: 48 }).unwrap()))),
        ("inverted", Box::new(|| Box::new(InvertedPageTable::new(&InvertedConfig::default(), PHYS).unwrap()))),
    ]
}

/// Object-safe view of the operations measured (benchmark plumbing only).
trait PtOps {
    fn create(&mut self, mem: &mut BuddyAllocator, asid: u16);
    fn destroy(&mut self, mem: &mut BuddyAllocator, asid: u16);
    fn map4k(&mut self, mem: &mut BuddyAllocator, asid: u16, va: u64, pa: u64);
    fn unmap(&mut self, mem: &mut BuddyAllocator, asid: u16, va: u64);
    fn lookup(&self, asid: u16, va: u64) -> u64;
}

impl<P: PageTable> PtOps for P {
    fn create(&mut self, mem: &mut BuddyAllocator, asid: u16) {
        self.create_space(mem, asid).unwrap()
    }
    fn destroy(&mut self, mem: &mut BuddyAllocator, asid: u16) {
        self.destroy_space(mem, asid)
    }
    fn map4k(&mut self, mem: &mut BuddyAllocator, asid: u16, va: u64, pa: u64) {
        self.map(mem, asid, va, pa, PageSize::K4, Perms::RW_USER).unwrap()
    }
    fn unmap(&mut self, mem: &mut BuddyAllocator, asid: u16, va: u64) {
        PageTable::unmap(self, mem, asid, va).unwrap();
    }
    fn lookup(&self, asid: u16, va: u64) -> u64 {
        self.translate(asid, va).unwrap().pa
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("pt");
    g.sample_size(10);
    let pages = 4096u64; // 16 MiB
    for (name, make) in kinds() {
        g.throughput(Throughput::Elements(pages));
        g.bench_function(BenchmarkId::new("map_16M", name), |b| {
            b.iter_batched(
                || {
                    let mut mem = BuddyAllocator::new(PHYS).unwrap();
                    let mut pt = make();
                    pt.create(&mut mem, 0);
                    (pt, mem)
                },
                |(mut pt, mut mem)| {
                    for p in 0..pages {
                        pt.map4k(&mut mem, 0, BASE + p * 4096, (p + 1) << 12);
                    }
                    (pt, mem)
                },
                BatchSize::LargeInput,
            )
        });
        g.bench_function(BenchmarkId::new("unmap_16M", name), |b| {
            b.iter_batched(
                || {
                    let mut mem = BuddyAllocator::new(PHYS).unwrap();
                    let mut pt = make();
                    pt.create(&mut mem, 0);
                    for p in 0..pages {
                        pt.map4k(&mut mem, 0, BASE + p * 4096, (p + 1) << 12);
                    }
                    (pt, mem)
                },
                |(mut pt, mut mem)| {
                    for p in 0..pages {
                        pt.unmap(&mut mem, 0, BASE + p * 4096);
                    }
                    (pt, mem)
                },
                BatchSize::LargeInput,
            )
        });
        g.bench_function(BenchmarkId::new("lookup_16M", name), |b| {
            let mut mem = BuddyAllocator::new(PHYS).unwrap();
            let mut pt = make();
            pt.create(&mut mem, 0);
            for p in 0..pages {
                pt.map4k(&mut mem, 0, BASE + p * 4096, (p + 1) << 12);
            }
            // A scattered order (odd stride), so neighbouring lookups share no path.
            b.iter(|| (0..pages).fold(0u64, |acc, i| acc ^ pt.lookup(0, BASE + ((i * 2053) % pages) * 4096)))
        });
        g.throughput(Throughput::Elements(1));
        g.bench_function(BenchmarkId::new("task_create_delete", name), |b| {
            let mut mem = BuddyAllocator::new(PHYS).unwrap();
            let mut pt = make();
            b.iter(|| {
                pt.create(&mut mem, 1);
                pt.map4k(&mut mem, 1, 0x40_0000, 0x1000);
                pt.map4k(&mut mem, 1, 0x7fff_f000, 0x2000);
                pt.unmap(&mut mem, 1, 0x40_0000);
                pt.unmap(&mut mem, 1, 0x7fff_f000);
                pt.destroy(&mut mem, 1);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
