//! .vmt decode and encode throughput (records/s) on three shapes of trace.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::io::Cursor;
use std::path::Path;
use vmlab::trace::vmt::{VmtReader, VmtWriter};
use vmlab::trace::{synth, Record, TraceMeta, TraceSource};

const N: &str = "4000000";

fn records(name: &str, params: &[(&str, &str)]) -> Vec<Record> {
    let p: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut src = synth::open(name, &p).unwrap();
    let mut all = Vec::new();
    let mut buf = Vec::new();
    while src.next_batch(&mut buf).unwrap() {
        all.extend_from_slice(&buf);
    }
    all
}

#[derive(Clone, Default)]
struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
impl std::io::Write for Sink {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn encode(recs: &[Record]) -> Vec<u8> {
    let s = Sink::default();
    let mut w = VmtWriter::new(s.clone(), &TraceMeta::default(), Path::new("mem")).unwrap();
    w.write_all(recs).unwrap();
    w.finish().unwrap();
    let v = s.0.lock().unwrap().clone();
    v
}

fn bench(c: &mut Criterion) {
    let shapes = [
        ("stream", records("stream", &[("accesses", N), ("instrs_per_access", "0")])),
        ("gups", records("gups", &[("accesses", N), ("instrs_per_access", "0")])),
        // Lackey-like: instruction fetches interleaved with data accesses.
        ("mixed", records("kv", &[("accesses", N), ("code", "64K"), ("keys", "1M")])),
    ];
    let mut g = c.benchmark_group("vmt");
    g.sample_size(10);
    for (name, recs) in &shapes {
        let bytes = encode(recs);
        eprintln!("{name}: {} records, {:.2} bytes/record", recs.len(), bytes.len() as f64 / recs.len() as f64);
        g.throughput(Throughput::Elements(recs.len() as u64));
        g.bench_with_input(BenchmarkId::new("decode", name), &bytes, |b, bytes| {
            b.iter(|| {
                let mut r = VmtReader::from_reader(Cursor::new(bytes.clone()), Path::new("mem")).unwrap();
                let mut buf = Vec::with_capacity(vmlab::trace::BATCH);
                let mut n = 0usize;
                while r.next_batch(&mut buf).unwrap() {
                    n += buf.len();
                }
                n
            })
        });
        g.bench_with_input(BenchmarkId::new("encode", name), recs, |b, recs| b.iter(|| encode(recs).len()));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
