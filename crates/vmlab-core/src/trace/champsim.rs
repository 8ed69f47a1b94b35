//! Importer for ChampSim binary traces (`input_instr`, 64 bytes per instruction, plain
//! or xz-compressed). Each instruction becomes a 4-byte fetch of its ip, then a read per
//! non-zero source memory operand, then a write per non-zero destination operand; the
//! accesses' dependences come from register dataflow (docs/importers.md). ChampSim
//! traces carry no OS events: the OS model treats the memory they touch as implicit
//! anonymous memory.

use super::{Access, Dep, Record, TraceMeta, TraceSource, BATCH};
use crate::addr::{AccessKind, Pid};
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// Bytes per instruction: ip u64, is_branch u8, branch_taken u8, destination_registers
/// [u8; 2], source_registers [u8; 4], destination_memory [u64; 2], source_memory [u64; 4].
pub const INSTR_BYTES: usize = 64;
const XZ_MAGIC: [u8; 6] = [0xFD, b'7', b'z', b'X', b'Z', 0x00];
/// Instruction size assumed for fetches (ChampSim records no length).
pub const FETCH_SIZE: u16 = 4;
/// Byte offsets of an `input_instr`'s fields.
const DST_REGS: usize = 10;
const SRC_REGS: usize = 12;
const DST_MEM: usize = 16;
const SRC_MEM: usize = 32;
/// Registers ChampSim gives a meaning (its `trace_instruction.h`; Pin's numbering): an
/// instruction writing the instruction pointer is a branch, and the stack pointer and
/// flags tell the branch's kind.
pub const REG_STACK_POINTER: u8 = 6;
pub const REG_FLAGS: u8 = 25;
pub const REG_INSTRUCTION_POINTER: u8 = 26;

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

    /// Read a ChampSim trace from `input` (plain or xz); `path` names it in errors.
    pub fn from_reader<R: Read + Send + 'static>(input: R, path: &Path, pid: Pid) -> Result<ChampSimReader> {
        let mut f = BufReader::with_capacity(1 << 20, input);
        let head = {
            use std::io::BufRead;
            f.fill_buf().map_err(|e| Error::io(path, e))?.to_vec()
        };
        let xz = head.len() >= 6 && head[..6] == XZ_MAGIC;
        let input: Box<dyn Read + Send> = if xz { Box::new(xz2::read::XzDecoder::new(f)) } else { Box::new(f) };
        let meta = TraceMeta {
            source: "champsim".into(),
            extra: [("compression".to_string(), if xz { "xz" } else { "none" }.to_string())].into_iter().collect(),
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
        for rec in self.chunk[..got].chunks_exact(INSTR_BYTES) {
            let ip = u64_at(rec, 0);
            let (dst_regs, src_regs) = (&rec[DST_REGS..DST_REGS + 2], &rec[SRC_REGS..SRC_REGS + 4]);
            // Every access of the instruction depends on the most recent load behind
            // its source registers (docs/importers.md, "Dependences").
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
