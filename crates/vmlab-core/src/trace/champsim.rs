//! Importer for ChampSim binary traces (`input_instr`, 64 bytes per instruction, plain
//! or xz-compressed). Each instruction becomes a 4-byte fetch of its ip, then a read per
//! non-zero source memory operand, then a write per non-zero destination operand
//! (docs/importers.md). ChampSim traces carry no OS events: the OS model treats the
//! memory they touch as implicit anonymous memory.

use super::{Record, TraceMeta, TraceSource, BATCH};
use crate::addr::Pid;
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

pub struct ChampSimReader {
    input: Box<dyn Read + Send>,
    path: PathBuf,
    meta: TraceMeta,
    pid: Pid,
    chunk: Vec<u8>,
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
        Ok(ChampSimReader { input, path: path.to_path_buf(), meta, pid, chunk: Vec::new(), instrs: 0, done: false })
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
        for rec in self.chunk[..got].chunks_exact(INSTR_BYTES) {
            let ip = u64_at(rec, 0);
            buf.push(Record::fetch(ip, FETCH_SIZE, self.pid));
            for k in 0..4 {
                let a = u64_at(rec, 32 + 8 * k);
                if a != 0 {
                    buf.push(Record::read(a, 8, self.pid));
                }
            }
            for k in 0..2 {
                let a = u64_at(rec, 16 + 8 * k);
                if a != 0 {
                    buf.push(Record::write(a, 8, self.pid));
                }
            }
        }
        self.instrs += (got / INSTR_BYTES) as u64;
        Ok(!buf.is_empty())
    }
}
