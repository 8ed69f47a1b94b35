//! Seeded synthetic workloads. Each generator streams records (nothing is
//! materialised), is fully determined by its parameters and seed, announces its
//! regions with `Mmap` records before touching them, and says what each access's
//! address depends on (`Access::dep`). Catalogue: docs/workloads.md.

mod gen;
mod graph;
mod graph500;
mod kv;
mod params;
mod pchase;
mod shared;
mod simple;
mod sparse;
mod strawman;
mod sysbench;
mod xsbench;
mod ycsb;

pub use params::{ParamInfo, WorkloadInfo};

use super::{Record, TraceMeta, TraceSource, BATCH};
use crate::error::{Error, Result};
use gen::Generator;
use params::Params;

/// Default virtual base of a workload's region: 1 GiB aligned, in the user half of a
/// 48-bit address space.
pub(crate) const DEFAULT_BASE: u64 = 0x7f00_0000_0000;

/// Builds a workload's generator from its parameters.
type Constructor = fn(&mut Params) -> Result<Box<dyn Generator>>;

/// Every workload: name, description, constructor.
fn registry() -> Vec<(WorkloadInfo, Constructor)> {
    vec![
        (simple::gups_info(), simple::gups),
        (simple::stream_info(), simple::stream),
        (simple::stride_info(), simple::stride),
        (pchase::info(), pchase::new),
        (sparse::info(), sparse::new),
        (shared::info(), shared::new),
        (graph::info(), graph::new),
        (graph500::info(), graph500::new),
        (kv::info(), kv::new),
        (xsbench::info(), xsbench::new),
        (ycsb::info(), ycsb::new),
        (sysbench::info(), sysbench::new),
        (strawman::info(), strawman::new),
    ]
}

/// The catalogue of built-in workloads with their parameters and defaults.
pub fn catalog() -> Vec<WorkloadInfo> {
    registry().into_iter().map(|(i, _)| i).collect()
}

/// Open workload `name` with `key=value` parameters.
pub fn open(name: &str, params: &[(String, String)]) -> Result<Box<dyn TraceSource + Send>> {
    let reg = registry();
    let Some((info, ctor)) = reg.iter().find(|(i, _)| i.name == name) else {
        let names: Vec<&str> = reg.iter().map(|(i, _)| i.name).collect();
        return Err(Error::Workload { name: name.into(), msg: format!("unknown workload (known: {})", names.join(", ")) });
    };
    let mut p = Params::new(name, info, params)?;
    let generator = ctor(&mut p)?;
    let common = p.common()?;
    p.finish()?;
    Ok(Box::new(SynthSource::new(name, p.resolved(), common, generator)))
}

/// Parameters every workload takes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Common {
    pub(crate) accesses: u64,
    pub(crate) instrs_per_access: u64,
    pub(crate) pid: u32,
    /// Bytes of code fetched sequentially (one fetch per access), 0 = none.
    pub(crate) code: u64,
}

/// Drives a generator: emits its setup records, then accesses with ticks and fetches.
struct SynthSource {
    meta: TraceMeta,
    gen: Box<dyn Generator>,
    common: Common,
    emitted: u64,
    setup_done: bool,
    code_base: u64,
    code_off: u64,
}

impl SynthSource {
    fn new(name: &str, resolved: Vec<(String, String)>, common: Common, gen: Box<dyn Generator>) -> SynthSource {
        let meta = TraceMeta { source: format!("synthetic:{name}"), command: Vec::new(), source_page_size: None, extra: resolved.into_iter().collect() };
        // Code sits 1 GiB below the data region (1 GiB aligned).
        let code_base = gen.base().saturating_sub(1 << 30) & !((1 << 30) - 1);
        SynthSource { meta, gen, common, emitted: 0, setup_done: false, code_base, code_off: 0 }
    }
}

impl TraceSource for SynthSource {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    /// The records of the accesses, their fetches and ticks; the few setup records and
    /// a generator's own events (a context switch) come on top.
    fn len_hint(&self) -> Option<u64> {
        let per = 1 + (self.common.code > 0) as u64 + (self.common.instrs_per_access > 0) as u64;
        Some(self.common.accesses.saturating_mul(per))
    }

    fn next_batch(&mut self, buf: &mut Vec<Record>) -> Result<bool> {
        buf.clear();
        if !self.setup_done {
            self.setup_done = true;
            if self.common.code > 0 {
                buf.push(Record::Mmap {
                    pid: self.common.pid,
                    start: self.code_base,
                    len: self.common.code,
                    prot: super::record::prot::READ | super::record::prot::EXEC,
                    flags: super::MapFlags::PRIVATE,
                });
            }
            self.gen.setup(self.common.pid, buf);
        }
        let left = self.common.accesses - self.emitted;
        // Records per access: the access itself, a fetch if code is simulated, and the
        // tick of the instructions before it.
        let per = 1 + (self.common.code > 0) as usize + (self.common.instrs_per_access > 0) as usize;
        let room = (BATCH.saturating_sub(buf.len()) / per).max(1) as u64;
        let n = left.min(room);
        if n == 0 {
            return Ok(!buf.is_empty());
        }
        let before = buf.len();
        if self.common.code > 0 {
            for _ in 0..n {
                // Instruction fetches follow the program counter, not loaded data.
                buf.push(Record::fetch(self.code_base + self.code_off, 4, self.common.pid).with_dep(super::Dep::NONE));
                self.code_off = (self.code_off + 4) % self.common.code;
                self.gen.emit(1, self.common.pid, buf);
            }
        } else {
            self.gen.emit(n, self.common.pid, buf);
        }
        // Generators emit exactly the number of data accesses asked for.
        let made = n;
        // (Each access, and its fetch if code is simulated; the ticks come below.)
        debug_assert_eq!(buf[before..].iter().filter(|r| matches!(r, Record::Access(_))).count() as u64, n * (1 + (self.common.code > 0) as u64));
        self.emitted += made;
        // The non-memory instructions before each access (before its fetch, if any), so
        // the time model sees the instructions between two accesses where they are.
        let ipa = self.common.instrs_per_access;
        if ipa > 0 && made > 0 {
            // A tick before each access (before its fetch, with code: the fetch starts
            // the instruction; a workload whose own accesses are fetches, such as stab,
            // gets its ticks too), made room for at the end and placed from the back:
            // every record moves once.
            let with_code = self.common.code > 0;
            let old = buf.len();
            if !with_code && old - before == n as usize {
                // Only the accesses were made (no event among them): each one's tick goes
                // before it, pair by pair.
                buf.resize(old + n as usize, Record::Tick(ipa));
                for i in (0..n as usize).rev() {
                    buf[before + 2 * i + 1] = buf[before + i];
                    buf[before + 2 * i] = Record::Tick(ipa);
                }
                return Ok(true);
            }
            let ticked = |r: &Record| matches!(r, Record::Access(a) if !with_code || a.kind.is_instr());
            let ticks = buf[before..].iter().filter(|r| ticked(r)).count();
            buf.resize(old + ticks, Record::Tick(0));
            let mut w = buf.len();
            for i in (before..old).rev() {
                let r = buf[i];
                w -= 1;
                buf[w] = r;
                if ticked(&r) {
                    w -= 1;
                    buf[w] = Record::Tick(ipa);
                }
            }
            debug_assert_eq!(w, before);
        }
        Ok(true)
    }
}
