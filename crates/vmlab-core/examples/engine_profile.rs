//! Profiling driver: `cargo run --release --example engine_profile -- gups 4G 20000000 [k=v ...]`
//! Generates records in-process (no file I/O) and prints accesses/s; run under
//! `perf record` to see where the engine spends its time.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use vmlab::config::Config;
use vmlab::sim::{run, SourceInfo};
use vmlab::trace::{MapFlags, Record, TraceMeta, TraceSource, BATCH};

const BASE: u64 = 0x7f00_0000_0000;

struct Gen {
    meta: TraceMeta,
    rng: Xoshiro256PlusPlus,
    pattern: String,
    footprint: u64,
    left: u64,
    i: u64,
    started: bool,
}

impl TraceSource for Gen {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }
    fn next_batch(&mut self, buf: &mut Vec<Record>) -> vmlab::Result<bool> {
        buf.clear();
        if !self.started {
            self.started = true;
            buf.push(Record::Mmap { pid: 1, start: BASE, len: self.footprint, prot: 3, flags: MapFlags::PRIVATE });
        }
        while buf.len() < BATCH && self.left > 0 {
            let off = if self.pattern == "gups" { self.rng.gen_range(0..self.footprint) & !7 } else { (self.i * 64) % self.footprint };
            self.i += 1;
            self.left -= 1;
            buf.push(Record::read(BASE + off, 8, 1));
        }
        Ok(!buf.is_empty())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let pattern = args.get(1).cloned().unwrap_or("gups".into());
    let footprint = vmlab::addr::parse_bytes(args.get(2).map(|s| s.as_str()).unwrap_or("4G")).unwrap();
    let n: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(20_000_000);
    let overrides: Vec<String> = args.iter().skip(4).cloned().collect();
    let cfg = Config::load("skylake", &overrides).unwrap();
    let mut g = Gen { meta: TraceMeta::default(), rng: Xoshiro256PlusPlus::seed_from_u64(1), pattern, footprint, left: n, i: 0, started: false };
    let t = std::time::Instant::now();
    let doc = run(&cfg, &mut g, &SourceInfo::default(), |_| {}).unwrap();
    let s = t.elapsed().as_secs_f64();
    println!("{:.1} M accesses/s ({} accesses, {} walks, {} faults, {:.2} s)", n as f64 / s / 1e6, n, doc["walks"]["count"], doc["faults"]["count"], s);
}
