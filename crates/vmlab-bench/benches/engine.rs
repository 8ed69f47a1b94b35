//! Engine throughput on in-memory record streams (no decoding, no generation), so the
//! figure is the simulation cost alone. End-to-end figures: `vmlab bench`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use vmlab::config::Config;
use vmlab::sim::{run, SourceInfo};
use vmlab::trace::{MapFlags, Record, VecSource};

const BASE: u64 = 0x7f00_0000_0000;
const N: usize = 2_000_000;

fn stream() -> Vec<Record> {
    let mut v = vec![Record::Mmap { pid: 1, start: BASE, len: 1 << 30, prot: 3, flags: MapFlags::PRIVATE }];
    v.extend((0..N as u64).map(|i| Record::read(BASE + (i * 64) % (1 << 30), 8, 1)));
    v
}

fn gups(footprint: u64) -> Vec<Record> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut v = vec![Record::Mmap { pid: 1, start: BASE, len: footprint, prot: 3, flags: MapFlags::PRIVATE }];
    v.extend((0..N).map(|_| Record::read(BASE + (rng.gen_range(0..footprint) & !7), 8, 1)));
    v
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    g.throughput(Throughput::Elements(N as u64));
    let inputs = [("stream", stream()), ("gups_1g", gups(1 << 30))];
    for data_refs in [false, true] {
        let cfg = Config::load("skylake", &[format!("memory.data_refs={data_refs}")]).unwrap();
        for (name, recs) in &inputs {
            let id = BenchmarkId::new(*name, if data_refs { "skylake+data" } else { "skylake" });
            g.bench_with_input(id, recs, |b, recs| {
                b.iter(|| {
                    let mut src = VecSource::new("bench", recs.clone());
                    run(&cfg, &mut src, &SourceInfo::default(), |_| {}).unwrap()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
