//! ChampSim binary traces (`input_instr`, 64 bytes per instruction), both ways.
//!
//! Import (plain, gzip, xz or zstd): each instruction becomes a 4-byte fetch of its ip, then a read
//! per non-zero source memory operand, then a write per non-zero destination operand;
//! the accesses' dependences come from register dataflow. Export: each access of a
//! .vmt trace becomes one instruction, its dependence a register written by the load
//! it depends on. Rules for both: docs/importers.md. ChampSim traces carry no OS
//! events: the OS model treats the memory they touch as implicit anonymous memory.

use super::{compressed, Access, Dep, Record, TraceMeta, TraceSource, BATCH};
use crate::addr::{AccessKind, Pid};
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Bytes per instruction: ip u64, is_branch u8, branch_taken u8, destination_registers
/// [u8; 2], source_registers [u8; 4], destination_memory [u64; 2], source_memory [u64; 4].
pub(crate) const INSTR_BYTES: usize = 64;
/// Instruction size assumed for fetches (ChampSim records no length).
pub(crate) const FETCH_SIZE: u16 = 4;
/// Byte offsets of an `input_instr`'s fields.
const DST_REGS: usize = 10;
const SRC_REGS: usize = 12;
const DST_MEM: usize = 16;
const SRC_MEM: usize = 32;
/// Registers ChampSim gives a meaning (its `trace_instruction.h`; Pin's numbering): an
/// instruction writing the instruction pointer is a branch, and the stack pointer and
/// flags tell the branch's kind.
pub(crate) const REG_STACK_POINTER: u8 = 6;
pub(crate) const REG_FLAGS: u8 = 25;
pub(crate) const REG_INSTRUCTION_POINTER: u8 = 26;

/// Which load produced each architectural register's value, for the importer: the
/// load's number among the reads emitted so far (1-based), 0 for none.
struct Dataflow {
    producer: [u64; 256],
    /// Reads emitted so far.
    loads: u64,
}

impl Dataflow {
    /// The most recent load among the producers of `regs` (0: none).
    fn producer_of(&self, regs: &[u8]) -> u64 {
        regs.iter().map(|&r| self.producer[r as usize]).max().unwrap_or(0)
    }

    /// The dependence of an access whose address registers were produced by load `p`.
    fn dep(&self, p: u64) -> Dep {
        if p == 0 {
            Dep::NONE
        } else {
            Dep::on_load(self.loads - p + 1)
        }
    }

    /// Give `regs` the value of load `p` (0: a value no load produced). Register 0 is
    /// no register. The instruction and stack pointers never carry a load: a write to
    /// the first is control flow, which the core predicts, and `pop` or `ret` load
    /// through the second but set it to sp ± 8, not to the loaded value.
    fn define(&mut self, regs: &[u8], p: u64) {
        for &r in regs {
            if r != 0 && r != REG_STACK_POINTER && r != REG_INSTRUCTION_POINTER {
                self.producer[r as usize] = p;
            }
        }
    }
}

pub struct ChampSimReader {
    input: Box<dyn Read + Send>,
    path: PathBuf,
    meta: TraceMeta,
    pid: Pid,
    chunk: Vec<u8>,
    flow: Box<Dataflow>,
    /// Instructions decoded so far (for error offsets in the uncompressed stream).
    instrs: u64,
    done: bool,
}

impl ChampSimReader {
    pub fn open(path: &Path, pid: Pid) -> Result<ChampSimReader> {
        Self::from_reader(File::open(path).map_err(|e| Error::io(path, e))?, path, pid)
    }

    /// Read a ChampSim trace from `input` (plain or compressed, told by its first bytes:
    /// trace::compressed); `path` names it in errors.
    pub fn from_reader<R: Read + Send + 'static>(input: R, path: &Path, pid: Pid) -> Result<ChampSimReader> {
        let (compression, input) = compressed::open_stream(input, path, &format!("ChampSim traces {}", compressed::STREAMED))?;
        let meta = TraceMeta {
            source: "champsim".into(),
            extra: [("compression".to_string(), compression.name().to_string())].into_iter().collect(),
            ..Default::default()
        };
        let flow = Box::new(Dataflow { producer: [0; 256], loads: 0 });
        Ok(ChampSimReader { input, path: path.to_path_buf(), meta, pid, chunk: Vec::new(), flow, instrs: 0, done: false })
    }

    fn err(&self, offset: u64, msg: impl Into<String>) -> Error {
        Error::Trace { file: self.path.clone(), offset, msg: msg.into() }
    }
}

impl TraceSource for ChampSimReader {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_batch(&mut self, buf: &mut Vec<Record>) -> Result<bool> {
        buf.clear();
        if self.done {
            return Ok(false);
        }
        // At most 7 records per instruction.
        let want = BATCH / 7 * INSTR_BYTES;
        self.chunk.resize(want, 0);
        let mut got = 0;
        while got < want {
            match self.input.read(&mut self.chunk[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let at = self.instrs * INSTR_BYTES as u64 + got as u64;
                    return Err(self.err(at, format!("read error: {e} (offset in the decompressed stream)")));
                }
            }
        }
        if got < want {
            self.done = true;
        }
        if got % INSTR_BYTES != 0 {
            let at = self.instrs * INSTR_BYTES as u64 + (got - got % INSTR_BYTES) as u64;
            return Err(self.err(at, format!("truncated trace: a partial {}-byte instruction record of {} bytes at the end", INSTR_BYTES, got % INSTR_BYTES)));
        }
        let u64_at = |r: &[u8], o: usize| u64::from_le_bytes(r[o..o + 8].try_into().unwrap());
        let flow = &mut *self.flow;
        let access = |kind, vaddr, size, dep| Record::Access(Access { vaddr, pid: self.pid, size, kind, dep });
        for (k, rec) in self.chunk[..got].chunks_exact(INSTR_BYTES).enumerate() {
            let ip = u64_at(rec, 0);
            if ip == 0 {
                // No instruction lives at 0 (ChampSim's "no address"): zeros, not a trace.
                let at = (self.instrs + k as u64) * INSTR_BYTES as u64;
                let msg = "an instruction at ip 0: not a ChampSim trace (zeroed or corrupt data)".into();
                return Err(Error::Trace { file: self.path.clone(), offset: at, msg });
            }
            let (dst_regs, src_regs) = (&rec[DST_REGS..DST_REGS + 2], &rec[SRC_REGS..SRC_REGS + 4]);
            // Every access of the instruction depends on the most recent load behind its
            // source registers (docs/importers.md, "Dependences from register dataflow").
            let p = flow.producer_of(src_regs);
            buf.push(access(AccessKind::Fetch, ip, FETCH_SIZE, Dep::NONE));
            let mut loaded = false;
            for k in 0..4 {
                let a = u64_at(rec, SRC_MEM + 8 * k);
                if a != 0 {
                    buf.push(access(AccessKind::Read, a, 8, flow.dep(p)));
                    flow.loads += 1;
                    loaded = true;
                }
            }
            for k in 0..2 {
                let a = u64_at(rec, DST_MEM + 8 * k);
                if a != 0 {
                    buf.push(access(AccessKind::Write, a, 8, flow.dep(p)));
                }
            }
            // A load's destinations hold what it loaded (the last load, if several);
            // anything else passes its sources' producer on, or none.
            flow.define(dst_regs, if loaded { flow.loads } else { p });
        }
        self.instrs += (got / INSTR_BYTES) as u64;
        Ok(!buf.is_empty())
    }
}

/// How many loads back a dependence the writer writes can reach: the registers it
/// gives loads in turn.
pub const LOAD_REGISTERS: usize = 252;
/// Registers the writer gives loads, round robin: every non-zero register but the
/// three ChampSim reads as branch markers. A dependence on one of the last
/// [`LOAD_REGISTERS`] loads names its register exactly; a farther one is written as
/// independent (its register has been reused).
const LOAD_REGS: [u8; LOAD_REGISTERS] = {
    let mut regs = [0u8; LOAD_REGISTERS];
    let (mut r, mut i) = (1u8, 0);
    while i < regs.len() {
        if r != REG_STACK_POINTER && r != REG_FLAGS && r != REG_INSTRUCTION_POINTER {
            regs[i] = r;
            i += 1;
        }
        r = r.wrapping_add(1);
    }
    regs
};
/// Instructions with no fetch record behind them (ticks, and every access of a trace
/// without fetches) take their ips from a loop of this many 4-byte slots at this base.
pub const SYNTHETIC_IP_BASE: u64 = 0x40_0000;
pub(crate) const SYNTHETIC_IP_SLOTS: u64 = 1024;

/// Writes a record stream as ChampSim `input_instr` records (docs/importers.md,
/// "Writing ChampSim traces"): one instruction per fetch and per ticked instruction, an
/// access belonging to the instruction fetched or ticked last (so the instruction
/// count is the one vmlab's time model runs); OS events are dropped.
pub struct ChampSimWriter<W: Write> {
    out: W,
    path: PathBuf,
    /// The process whose accesses are written; a second one is an error.
    pid: Option<Pid>,
    /// A fetch no data access has claimed yet, and the ip of the last fetch.
    fetch: Option<u64>,
    last_fetch: Option<u64>,
    synthetic: u64,
    /// Ticked instructions not written yet: in a trace without fetches the last of
    /// them is the next access's instruction.
    ticked: u64,
    loads: u64,
    instrs: u64,
    records: u64,
}

impl<W: Write> ChampSimWriter<W> {
    /// Write to `out`; `path` names it in errors.
    pub fn new(out: W, path: &Path) -> ChampSimWriter<W> {
        ChampSimWriter { out, path: path.to_path_buf(), pid: None, fetch: None, last_fetch: None, synthetic: 0, ticked: 0, loads: 0, instrs: 0, records: 0 }
    }

    fn err(&self, msg: String) -> Error {
        Error::Trace { file: self.path.clone(), offset: self.instrs * INSTR_BYTES as u64, msg }
    }

    fn instr(&mut self, ip: u64, dst_reg: u8, src_reg: u8, dst_mem: u64, src_mem: u64) -> Result<()> {
        let mut b = [0u8; INSTR_BYTES];
        b[0..8].copy_from_slice(&ip.to_le_bytes());
        b[DST_REGS] = dst_reg;
        b[SRC_REGS] = src_reg;
        b[DST_MEM..DST_MEM + 8].copy_from_slice(&dst_mem.to_le_bytes());
        b[SRC_MEM..SRC_MEM + 8].copy_from_slice(&src_mem.to_le_bytes());
        self.out.write_all(&b).map_err(|e| Error::io(&self.path, e))?;
        self.instrs += 1;
        Ok(())
    }

    /// `n` instructions that touch no data, at synthetic ips.
    fn plain_ticked(&mut self, n: u64) -> Result<()> {
        for _ in 0..n {
            let ip = self.synthetic_ip();
            self.instr(ip, 0, 0, 0, 0)?;
        }
        Ok(())
    }

    fn synthetic_ip(&mut self) -> u64 {
        let ip = SYNTHETIC_IP_BASE + 4 * (self.synthetic % SYNTHETIC_IP_SLOTS);
        self.synthetic += 1;
        ip
    }

    fn check_pid(&mut self, pid: Pid) -> Result<()> {
        let first = *self.pid.get_or_insert(pid);
        if pid != first {
            return Err(self.err(format!("input record {}: an access of pid {pid} after pid {first}'s: a ChampSim trace holds one process", self.records)));
        }
        Ok(())
    }

    /// The register load number `n` (1-based) wrote.
    fn load_reg(n: u64) -> u8 {
        LOAD_REGS[((n - 1) % LOAD_REGS.len() as u64) as usize]
    }

    pub fn write(&mut self, r: &Record) -> Result<()> {
        self.records += 1;
        match *r {
            Record::Access(a) if a.kind == AccessKind::Fetch => {
                self.check_pid(a.pid)?;
                // The previous fetch's instruction touched no data: a plain instruction.
                if let Some(ip) = self.fetch.replace(a.vaddr) {
                    self.instr(ip, 0, 0, 0, 0)?;
                }
                self.last_fetch = Some(a.vaddr);
            }
            Record::Access(a) => {
                self.check_pid(a.pid)?;
                if a.vaddr == 0 {
                    return Err(self.err(format!("input record {}: an access at address 0, which ChampSim reads as no operand", self.records)));
                }
                // The access belongs to the instruction fetched last, if the trace has
                // fetches, else to the last instruction ticked (the time model counts
                // a tick of n before an access as n instructions, the access's own
                // included), or to one of its own.
                let ip = match self.fetch.take().or(self.last_fetch) {
                    Some(ip) => ip,
                    None => {
                        self.plain_ticked(self.ticked.saturating_sub(1))?;
                        self.ticked = 0;
                        self.synthetic_ip()
                    }
                };
                let src_reg = match a.dep.distance() {
                    Some(k) if k as u64 <= self.loads && k as usize <= LOAD_REGS.len() => Self::load_reg(self.loads - k as u64 + 1),
                    _ => 0,
                };
                if a.kind == AccessKind::Read {
                    self.loads += 1;
                    self.instr(ip, Self::load_reg(self.loads), src_reg, 0, a.vaddr)?;
                } else {
                    self.instr(ip, 0, src_reg, a.vaddr, 0)?;
                }
            }
            Record::Tick(n) => {
                if self.last_fetch.is_some() {
                    self.plain_ticked(n)?;
                } else {
                    self.ticked += n;
                }
            }
            // ChampSim has no address spaces or OS events.
            _ => {}
        }
        Ok(())
    }

    /// Write what is still pending and flush; returns the instructions written and the
    /// sink.
    pub fn finish(mut self) -> Result<(u64, W)> {
        if let Some(ip) = self.fetch.take() {
            self.instr(ip, 0, 0, 0, 0)?;
        }
        let ticked = std::mem::take(&mut self.ticked);
        self.plain_ticked(ticked)?;
        self.out.flush().map_err(|e| Error::io(&self.path, e))?;
        Ok((self.instrs, self.out))
    }
}

/// Write `src` to `out` as a ChampSim trace, xz-compressed if `out` ends in `.xz`
/// (ChampSim picks its decompressor by extension), through a temporary file in the
/// same directory that replaces `out` only once complete. Returns the instructions
/// written.
pub fn write_file(src: &mut dyn TraceSource, out: &Path) -> Result<u64> {
    let xz = match out.extension().and_then(|e| e.to_str()) {
        Some("xz") => true,
        Some("gz") => {
            return Err(Error::io(out, std::io::Error::other("gzip output is not supported (name the file .xz, or give it no compression extension)")))
        }
        _ => false,
    };
    let (file, f) = crate::files::AtomicFile::create(out)?;
    let f = BufWriter::with_capacity(1 << 20, f);
    let (n, mut f) = if xz {
        let (n, enc) = write_all(src, xz2::write::XzEncoder::new(f, 6), out)?;
        (n, enc.finish().map_err(|e| Error::io(out, e))?)
    } else {
        write_all(src, f, out)?
    };
    f.flush().map_err(|e| Error::io(out, e))?;
    drop(f);
    file.commit()?;
    Ok(n)
}

/// Every record of `src` through a [`ChampSimWriter`] over `sink`.
fn write_all<W: Write>(src: &mut dyn TraceSource, sink: W, path: &Path) -> Result<(u64, W)> {
    let mut w = ChampSimWriter::new(sink, path);
    let mut buf = Vec::with_capacity(BATCH);
    while src.next_batch(&mut buf)? {
        crate::interrupt::check()?;
        buf.iter().try_for_each(|r| w.write(r))?;
    }
    w.finish()
}
