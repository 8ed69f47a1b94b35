//! What the fuzz targets share: draining a source, simulating records, and turning
//! fuzzer bytes into a record stream.

use vmlab::config::Config;
use vmlab::sim::{run, SourceInfo};
use vmlab::trace::{Access, Dep, MapFlags, Record, TraceSource, VecSource};

/// Every record of `src`, or its error (at most `limit` records: a fuzzer input can
/// describe a very long stream).
pub fn drain(src: &mut dyn TraceSource, limit: usize) -> vmlab::Result<Vec<Record>> {
    let (mut all, mut buf) = (Vec::new(), Vec::new());
    while all.len() < limit && src.next_batch(&mut buf)? {
        all.extend_from_slice(&buf);
    }
    Ok(all)
}

/// Simulate `records` under the `tiny` preset with `overrides`; any result or error
/// is fine, a panic is a finding.
pub fn simulate(records: Vec<Record>, overrides: &[&str]) {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let cfg = Config::load("tiny", &o).expect("fuzz configurations load");
    let _ = run(&cfg, &mut VecSource::new("fuzz", records), &SourceInfo::default(), |_| {});
}

/// A record stream from raw bytes: each record is a kind byte and up to 17 bytes of
/// fields (missing bytes read as zero). Any byte is a dependence (`Dep` spans u8).
pub fn records_from_bytes(data: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    for chunk in data.chunks(18) {
        let mut b = [0u8; 18];
        b[..chunk.len()].copy_from_slice(chunk);
        let u = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let pid = (b[17] % 4) as u32;
        // Addresses mostly near one region, so pages get reused.
        let va = if b[1] & 0x80 == 0 { 0x7f00_0000_0000 + (u(1) & 0xff_ffff) } else { u(1) };
        out.push(match b[0] % 10 {
            0..=3 => Record::Access(Access {
                kind: [vmlab::addr::AccessKind::Read, vmlab::addr::AccessKind::Write, vmlab::addr::AccessKind::Fetch][(b[9] % 3) as usize],
                vaddr: va,
                size: u16::from_le_bytes([b[10], b[11]]),
                pid,
                dep: Dep(b[12]),
            }),
            4 => Record::Mmap { pid, start: va, len: u(9), prot: b[17], flags: MapFlags(b[16] & 7) },
            5 => Record::Munmap { pid, start: va, len: u(9) },
            6 => Record::Mprotect { pid, start: va, len: u(9), prot: b[17] },
            7 => Record::Brk { pid, end: va },
            8 => Record::Fork { parent: pid, child: (b[16] % 4) as u32 },
            _ => match b[16] % 3 {
                0 => Record::Exit { pid },
                1 => Record::ContextSwitch { pid },
                _ => Record::Tick(u(9)),
            },
        });
    }
    out
}
