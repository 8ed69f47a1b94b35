//! GUPS (random read-modify-write), STREAM (sequential) and STRIDE. Every address
//! comes from a counter or the random generator, none from loaded data: all accesses
//! are independent (`Dep::NONE`).

use super::gen::{below, mmap_rw, page_round, rng, Generator};
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::{Dep, Record};
use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;

pub(crate) fn gups_info() -> WorkloadInfo {
    WorkloadInfo {
        name: "gups",
        description: "GUPS: uniform random 8-byte read-modify-write (a read, then a write of the same word) over the footprint",
        params: vec![param("footprint", "1G", "bytes of the table"), base_param()],
    }
}

struct Gups {
    base: u64,
    words: u64,
    rng: Xoshiro256PlusPlus,
    /// The write that completes a read-modify-write split across calls.
    pending: Option<u64>,
}

pub(crate) fn gups(p: &mut Params) -> Result<Box<dyn Generator>> {
    let footprint = p.footprint()?;
    p.require(footprint >= 8, "footprint", "at least 8 bytes")?;
    Ok(Box::new(Gups { base: p.base()?, words: footprint / 8, rng: rng(p.seed()?), pending: None }))
}

impl Generator for Gups {
    fn base(&self) -> u64 {
        self.base
    }
    fn setup(&mut self, pid: u32, out: &mut Vec<Record>) {
        out.push(mmap_rw(pid, self.base, page_round(self.words * 8)));
    }
    fn emit(&mut self, mut n: u64, pid: u32, out: &mut Vec<Record>) {
        if n > 0 {
            if let Some(va) = self.pending.take() {
                out.push(Record::write(va, 8, pid).with_dep(Dep::NONE));
                n -= 1;
            }
        }
        while n >= 2 {
            let va = self.base + below(self.rng.next_u64(), self.words) * 8;
            out.push(Record::read(va, 8, pid).with_dep(Dep::NONE));
            out.push(Record::write(va, 8, pid).with_dep(Dep::NONE));
            n -= 2;
        }
        if n == 1 {
            let va = self.base + below(self.rng.next_u64(), self.words) * 8;
            out.push(Record::read(va, 8, pid).with_dep(Dep::NONE));
            self.pending = Some(va);
        }
    }
}

pub(crate) fn stream_info() -> WorkloadInfo {
    WorkloadInfo {
        name: "stream",
        description: "STREAM-like sequential reads over the footprint, advancing by `stride` and wrapping around",
        params: vec![
            param("footprint", "1G", "bytes swept"),
            param("stride", "64", "bytes between consecutive accesses"),
            param("size", "8", "bytes per access"),
            param("write_ratio", "0", "fraction of accesses that are writes (every k-th access, deterministic)"),
            base_param(),
        ],
    }
}

pub(crate) fn stride_info() -> WorkloadInfo {
    WorkloadInfo {
        name: "stride",
        description: "`streams` interleaved sequential sweeps with a large stride (one new page per access by default)",
        params: vec![
            param("footprint", "1G", "bytes swept"),
            param("stride", "4160", "bytes between consecutive accesses of one stream (4096 + 64)"),
            param("streams", "1", "concurrent streams, starting at equal offsets of the footprint"),
            param("size", "8", "bytes per access"),
            param("write_ratio", "0", "fraction of accesses that are writes"),
            base_param(),
        ],
    }
}

/// Sequential sweeps: `streams` cursors advancing by `stride` modulo the footprint.
struct Sweep {
    base: u64,
    footprint: u64,
    stride: u64,
    size: u16,
    cursors: Vec<u64>,
    next: usize,
    /// Every `write_every`-th access is a write (0 = none).
    write_every: u64,
    count: u64,
}

fn sweep(p: &mut Params, streams: u64) -> Result<Box<dyn Generator>> {
    let footprint = p.footprint()?;
    let stride = p.bytes("stride")?;
    let size = p.int("size")?;
    let write_ratio = p.float("write_ratio")?;
    p.require(footprint > 0, "footprint", "a positive size")?;
    p.require(stride > 0, "stride", "a positive number of bytes")?;
    p.require((1..=4096).contains(&size), "size", "1 to 4096 bytes")?;
    p.require(size <= footprint, "size", "at most the footprint")?;
    p.require((0.0..=1.0).contains(&write_ratio), "write_ratio", "a fraction in [0, 1]")?;
    p.require((1..=1024).contains(&streams), "streams", "1 to 1024 streams")?;
    let cursors = (0..streams).map(|s| (footprint / streams * s) / 64 * 64).collect();
    let write_every = if write_ratio > 0.0 { (1.0 / write_ratio).round().max(1.0) as u64 } else { 0 };
    Ok(Box::new(Sweep { base: p.base()?, footprint, stride, size: size as u16, cursors, next: 0, write_every, count: 0 }))
}

pub(crate) fn stream(p: &mut Params) -> Result<Box<dyn Generator>> {
    sweep(p, 1)
}

pub(crate) fn stride(p: &mut Params) -> Result<Box<dyn Generator>> {
    let streams = p.int("streams")?;
    sweep(p, streams)
}

impl Generator for Sweep {
    fn base(&self) -> u64 {
        self.base
    }
    fn setup(&mut self, pid: u32, out: &mut Vec<Record>) {
        out.push(mmap_rw(pid, self.base, page_round(self.footprint)));
    }
    fn emit(&mut self, n: u64, pid: u32, out: &mut Vec<Record>) {
        let limit = self.footprint - self.size as u64;
        for _ in 0..n {
            let c = &mut self.cursors[self.next];
            let off = *c;
            *c += self.stride;
            if *c > limit {
                *c %= self.footprint;
                if *c > limit {
                    *c = 0;
                }
            }
            self.next += 1;
            if self.next == self.cursors.len() {
                self.next = 0;
            }
            self.count += 1;
            let write = self.write_every != 0 && self.count.is_multiple_of(self.write_every);
            let va = self.base + off;
            let r = if write { Record::write(va, self.size, pid) } else { Record::read(va, self.size, pid) };
            out.push(r.with_dep(Dep::NONE));
        }
    }
}
