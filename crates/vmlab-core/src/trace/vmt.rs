//! The .vmt trace format, version 2 (version 1 is read too): a header with JSON
//! metadata, then zstd-compressed blocks of delta/varint-coded records, each with a
//! CRC-32, then an end marker with the record and block counts. Byte-level spec:
//! docs/trace-format.md.
//!
//! Readers hold one block at a time, so memory is bounded whatever the trace length.

use super::{Access, Dep, MapFlags, Record, TraceMeta, TraceSource, BATCH};
use crate::addr::AccessKind;
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub(crate) const MAGIC: &[u8; 8] = b"VMLABTRC";
/// The version the writer writes.
pub(crate) const VERSION: u16 = 2;
/// The oldest version the reader reads: version 1 has no dependences (every access is
/// [`Dep::UNKNOWN`]) and tag bit 7 must be 0.
pub(crate) const OLDEST_VERSION: u16 = 1;
/// Records per block.
pub const BLOCK_RECORDS: usize = 1 << 16;
const TAG_BLOCK: u8 = b'B';
const TAG_END: u8 = b'E';
/// Block header after its tag: records u32, raw bytes u32, compressed bytes u32, crc u32.
const BLOCK_HEADER: usize = 16;
/// End marker: tag, total records u64, blocks u64, crc u32.
const END_LEN: usize = 1 + 8 + 8 + 4;
/// Upper bounds that reject absurd headers before allocating.
const MAX_META: u32 = 16 << 20;
const MAX_RAW: u32 = (BLOCK_RECORDS * 40) as u32;

// Record tag byte. Accesses: bits 0-1 kind (0 read, 1 write, 2 fetch), bits 2-4 size
// class (2^c bytes for c < 7; 7 = explicit u16), bit 5 pid follows, bit 6 the address
// delta repeats the previous delta of this stream (no varint follows), bit 7 (version
// 2) a dependence varint ends the body.
// Other records: bits 0-1 = 3, bits 2-7 the event code.
const KIND_OTHER: u8 = 3;
const SIZE_EXPLICIT: u8 = 7;
const F_PID: u8 = 1 << 5;
const F_REPEAT: u8 = 1 << 6;
const F_DEP: u8 = 1 << 7;
const EV_TICK: u8 = 0;
const EV_MMAP: u8 = 1;
const EV_MUNMAP: u8 = 2;
const EV_MPROTECT: u8 = 3;
const EV_BRK: u8 = 4;
const EV_FORK: u8 = 5;
const EV_EXIT: u8 = 6;
const EV_SWITCH: u8 = 7;

/// Delta-coding state; reset at every block so blocks decode independently.
#[derive(Clone, Copy, Default)]
struct Deltas {
    /// Previous address and delta, per stream: 0 = data, 1 = instruction fetches.
    addr: [u64; 2],
    delta: [u64; 2],
    pid: u32,
}

#[inline(always)]
fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}
#[inline(always)]
fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

#[inline(always)]
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn encode(r: &Record, st: &mut Deltas, out: &mut Vec<u8>) {
    match *r {
        Record::Access(a) => {
            let stream = (a.kind == AccessKind::Fetch) as usize;
            let class = match a.size {
                1 => 0,
                2 => 1,
                4 => 2,
                8 => 3,
                16 => 4,
                32 => 5,
                64 => 6,
                _ => SIZE_EXPLICIT,
            };
            let delta = a.vaddr.wrapping_sub(st.addr[stream]);
            let mut tag = a.kind as u8 | (class << 2);
            if a.pid != st.pid {
                tag |= F_PID;
            }
            if delta == st.delta[stream] {
                tag |= F_REPEAT;
            }
            if a.dep.is_known() {
                tag |= F_DEP;
            }
            out.push(tag);
            if class == SIZE_EXPLICIT {
                out.extend_from_slice(&a.size.to_le_bytes());
            }
            if a.pid != st.pid {
                put_varint(out, a.pid as u64);
                st.pid = a.pid;
            }
            if delta != st.delta[stream] {
                put_varint(out, zigzag(delta as i64));
                st.delta[stream] = delta;
            }
            st.addr[stream] = a.vaddr;
            if a.dep.is_known() {
                // 0: independent; k: the k-th previous load (docs/trace-format.md, "Dependences").
                put_varint(out, a.dep.distance().unwrap_or(0) as u64);
            }
        }
        Record::Tick(n) => {
            out.push(KIND_OTHER | (EV_TICK << 2));
            put_varint(out, n);
        }
        Record::Mmap { pid, start, len, prot, flags } => {
            out.push(KIND_OTHER | (EV_MMAP << 2));
            put_varint(out, pid as u64);
            put_varint(out, start);
            put_varint(out, len);
            out.push(prot);
            out.push(flags.0);
        }
        Record::Munmap { pid, start, len } => {
            out.push(KIND_OTHER | (EV_MUNMAP << 2));
            put_varint(out, pid as u64);
            put_varint(out, start);
            put_varint(out, len);
        }
        Record::Mprotect { pid, start, len, prot } => {
            out.push(KIND_OTHER | (EV_MPROTECT << 2));
            put_varint(out, pid as u64);
            put_varint(out, start);
            put_varint(out, len);
            out.push(prot);
        }
        Record::Brk { pid, end } => {
            out.push(KIND_OTHER | (EV_BRK << 2));
            put_varint(out, pid as u64);
            put_varint(out, end);
        }
        Record::Fork { parent, child } => {
            out.push(KIND_OTHER | (EV_FORK << 2));
            put_varint(out, parent as u64);
            put_varint(out, child as u64);
        }
        Record::Exit { pid } => {
            out.push(KIND_OTHER | (EV_EXIT << 2));
            put_varint(out, pid as u64);
        }
        Record::ContextSwitch { pid } => {
            out.push(KIND_OTHER | (EV_SWITCH << 2));
            put_varint(out, pid as u64);
        }
    }
}

/// Writes a .vmt trace.
pub struct VmtWriter {
    out: BufWriter<Box<dyn Write + Send>>,
    path: PathBuf,
    /// Created by [`VmtWriter::create`]: the file becomes `path` only when finished.
    file: Option<crate::files::AtomicFile>,
    raw: Vec<u8>,
    comp: Vec<u8>,
    in_block: usize,
    state: Deltas,
    total: u64,
    blocks: u64,
    level: i32,
    offset: u64,
}

impl VmtWriter {
    /// Write the header of a new trace that becomes `path` when [`VmtWriter::finish`]
    /// has written its end (until then an existing `path` is left as it was).
    pub fn create(path: &Path, meta: &TraceMeta) -> Result<VmtWriter> {
        let (file, f) = crate::files::AtomicFile::create(path)?;
        let mut w = VmtWriter::new(f, meta, path)?;
        w.file = Some(file);
        Ok(w)
    }

    /// Write to any sink (a pipe, a socket); `path_for_errors` names it in errors.
    pub fn new<W: Write + Send + 'static>(w: W, meta: &TraceMeta, path_for_errors: &Path) -> Result<VmtWriter> {
        let mut out = BufWriter::with_capacity(1 << 20, Box::new(w) as Box<dyn Write + Send>);
        let json = serde_json::to_vec(meta).expect("metadata serializes");
        let mut header = Vec::with_capacity(16 + json.len() + 4);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&0u16.to_le_bytes());
        header.extend_from_slice(&(json.len() as u32).to_le_bytes());
        header.extend_from_slice(&json);
        let crc = crc32fast::hash(&header);
        header.extend_from_slice(&crc.to_le_bytes());
        out.write_all(&header).map_err(|e| Error::io(path_for_errors, e))?;
        Ok(VmtWriter {
            out,
            path: path_for_errors.to_path_buf(),
            file: None,
            raw: Vec::with_capacity(BLOCK_RECORDS * 4),
            comp: Vec::new(),
            in_block: 0,
            state: Deltas::default(),
            total: 0,
            blocks: 0,
            level: 3,
            offset: header.len() as u64,
        })
    }

    /// zstd compression level (1..=22, default 3).
    pub fn set_level(&mut self, level: i32) {
        self.level = level.clamp(1, 22);
    }

    #[inline]
    pub(crate) fn write(&mut self, r: &Record) -> Result<()> {
        encode(r, &mut self.state, &mut self.raw);
        self.in_block += 1;
        self.total += 1;
        if self.in_block == BLOCK_RECORDS {
            self.flush_block()?;
        }
        Ok(())
    }

    pub fn write_all(&mut self, rs: &[Record]) -> Result<()> {
        rs.iter().try_for_each(|r| self.write(r))
    }

    fn io(&self, e: std::io::Error) -> Error {
        Error::io(&self.path, e)
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.in_block == 0 {
            return Ok(());
        }
        self.comp = zstd::bulk::compress(&self.raw, self.level).map_err(|e| self.io(e))?;
        let mut h = [0u8; 1 + BLOCK_HEADER];
        h[0] = TAG_BLOCK;
        h[1..5].copy_from_slice(&(self.in_block as u32).to_le_bytes());
        h[5..9].copy_from_slice(&(self.raw.len() as u32).to_le_bytes());
        h[9..13].copy_from_slice(&(self.comp.len() as u32).to_le_bytes());
        h[13..17].copy_from_slice(&crc32fast::hash(&self.comp).to_le_bytes());
        self.out.write_all(&h).map_err(|e| Error::io(&self.path, e))?;
        self.out.write_all(&self.comp).map_err(|e| Error::io(&self.path, e))?;
        self.offset += (h.len() + self.comp.len()) as u64;
        self.blocks += 1;
        self.raw.clear();
        self.in_block = 0;
        self.state = Deltas::default();
        Ok(())
    }

    /// Flush the last block and write the end marker; returns the records written.
    pub fn finish(mut self) -> Result<u64> {
        self.flush_block()?;
        let mut end = [0u8; END_LEN];
        end[0] = TAG_END;
        end[1..9].copy_from_slice(&self.total.to_le_bytes());
        end[9..17].copy_from_slice(&self.blocks.to_le_bytes());
        let crc = crc32fast::hash(&end[..17]);
        end[17..21].copy_from_slice(&crc.to_le_bytes());
        self.out.write_all(&end).map_err(|e| Error::io(&self.path, e))?;
        self.out.flush().map_err(|e| Error::io(&self.path, e))?;
        if let Some(file) = self.file.take() {
            file.commit()?;
        }
        Ok(self.total)
    }
}

trait ReadSeek: Read + Seek + Send {}
impl<T: Read + Seek + Send> ReadSeek for T {}

/// Streams the records of a .vmt trace.
pub struct VmtReader {
    input: Box<dyn ReadSeek>,
    path: PathBuf,
    meta: TraceMeta,
    /// The file's format version; from 2 on, accesses may carry dependences.
    version: u16,
    /// Byte offset of the next unread byte of the file.
    offset: u64,
    comp: Vec<u8>,
    raw: Vec<u8>,
    /// Decoding position inside `raw`, records left in the block, block's offset.
    pos: usize,
    left: u32,
    block_offset: u64,
    state: Deltas,
    records: u64,
    blocks: u64,
    total_hint: Option<u64>,
    done: bool,
}

impl VmtReader {
    pub fn open(path: &Path) -> Result<VmtReader> {
        let f = File::open(path).map_err(|e| Error::io(path, e))?;
        VmtReader::from_reader(BufReader::with_capacity(1 << 20, f), path)
    }

    /// Read from any seekable input (an in-memory buffer, say); `path` names it in errors.
    pub fn from_reader<R: Read + Seek + Send + 'static>(input: R, path: &Path) -> Result<VmtReader> {
        let mut r = VmtReader {
            input: Box::new(input),
            path: path.to_path_buf(),
            meta: TraceMeta::default(),
            version: VERSION,
            offset: 0,
            comp: Vec::new(),
            raw: Vec::new(),
            pos: 0,
            left: 0,
            block_offset: 0,
            state: Deltas::default(),
            records: 0,
            blocks: 0,
            total_hint: None,
            done: false,
        };
        r.read_header()?;
        r.total_hint = r.peek_end_marker();
        Ok(r)
    }

    fn err(&self, offset: u64, msg: impl Into<String>) -> Error {
        Error::Trace { file: self.path.clone(), offset, msg: msg.into() }
    }

    /// The file's format version (1 or 2).
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Fill `buf` exactly, or fail naming what was being read.
    fn read_exact_at(&mut self, buf: &mut [u8], what: &str) -> Result<()> {
        let at = self.offset;
        let mut got = 0;
        while got < buf.len() {
            match self.input.read(&mut buf[got..]) {
                Ok(0) => return Err(self.err(at, format!("truncated {what}: file ends after {got} of {} bytes", buf.len()))),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.err(at, format!("reading {what}: {e}"))),
            }
        }
        self.offset += buf.len() as u64;
        Ok(())
    }

    fn read_header(&mut self) -> Result<()> {
        let mut fixed = [0u8; 16];
        let mut got = 0;
        while got < fixed.len() {
            match self.input.read(&mut fixed[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) => return Err(self.err(0, format!("reading header: {e}"))),
            }
        }
        if got < 8 || &fixed[..8] != MAGIC {
            return Err(self.err(0, "not a vmlab trace (bad magic; expected a .vmt file)"));
        }
        if got < 16 {
            return Err(self.err(got as u64, "truncated header"));
        }
        self.offset = 16;
        let version = u16::from_le_bytes([fixed[8], fixed[9]]);
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            return Err(self.err(8, format!("unsupported trace format version {version} (this vmlab reads versions {OLDEST_VERSION} to {VERSION})")));
        }
        self.version = version;
        let meta_len = u32::from_le_bytes(fixed[12..16].try_into().unwrap());
        if meta_len > MAX_META {
            return Err(self.err(12, format!("metadata length {meta_len} is implausible (corrupt header)")));
        }
        let mut json = vec![0u8; meta_len as usize];
        self.read_exact_at(&mut json, "header metadata")?;
        let mut crc = [0u8; 4];
        let crc_at = self.offset;
        self.read_exact_at(&mut crc, "header checksum")?;
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&fixed);
        hasher.update(&json);
        if hasher.finalize() != u32::from_le_bytes(crc) {
            return Err(self.err(crc_at, "header checksum mismatch (corrupt header)"));
        }
        self.meta = serde_json::from_slice(&json).map_err(|e| self.err(16, format!("header metadata is not valid: {e}")))?;
        Ok(())
    }

    /// The record count from the end marker, if the input can seek there and it is intact.
    fn peek_end_marker(&mut self) -> Option<u64> {
        let here = self.input.stream_position().ok()?;
        let len = self.input.seek(SeekFrom::End(0)).ok()?;
        let mut end = [0u8; END_LEN];
        let ok = len >= here + END_LEN as u64 && self.input.seek(SeekFrom::End(-(END_LEN as i64))).is_ok() && self.input.read_exact(&mut end).is_ok();
        self.input.seek(SeekFrom::Start(here)).ok()?;
        (ok && end[0] == TAG_END && crc32fast::hash(&end[..17]) == u32::from_le_bytes(end[17..21].try_into().unwrap()))
            .then(|| u64::from_le_bytes(end[1..9].try_into().unwrap()))
    }

    /// Load the next block; returns false at a valid end marker.
    fn next_block(&mut self) -> Result<bool> {
        let at = self.offset;
        let mut tag = [0u8; 1];
        match self.input.read(&mut tag) {
            Ok(0) => return Err(self.err(at, "truncated trace: no end marker (the writer did not finish)")),
            Ok(_) => self.offset += 1,
            Err(e) => return Err(self.err(at, format!("reading block: {e}"))),
        }
        match tag[0] {
            TAG_BLOCK => {}
            TAG_END => {
                let mut end = [0u8; END_LEN - 1];
                self.read_exact_at(&mut end, "end marker")?;
                let mut all = [0u8; END_LEN];
                all[0] = TAG_END;
                all[1..].copy_from_slice(&end);
                if crc32fast::hash(&all[..17]) != u32::from_le_bytes(all[17..21].try_into().unwrap()) {
                    return Err(self.err(at, "end marker checksum mismatch"));
                }
                let total = u64::from_le_bytes(all[1..9].try_into().unwrap());
                let blocks = u64::from_le_bytes(all[9..17].try_into().unwrap());
                if total != self.records || blocks != self.blocks {
                    return Err(self.err(
                        at,
                        format!("end marker says {total} records in {blocks} blocks, but {} records in {} blocks were read", self.records, self.blocks),
                    ));
                }
                let mut extra = [0u8; 1];
                if matches!(self.input.read(&mut extra), Ok(n) if n > 0) {
                    return Err(self.err(self.offset, "data after the end marker"));
                }
                return Ok(false);
            }
            t => return Err(self.err(at, format!("expected a block or the end marker, found byte {t:#04x} (corrupt trace)"))),
        }
        let mut h = [0u8; BLOCK_HEADER];
        self.read_exact_at(&mut h, "block header")?;
        let count = u32::from_le_bytes(h[0..4].try_into().unwrap());
        let raw_len = u32::from_le_bytes(h[4..8].try_into().unwrap());
        let comp_len = u32::from_le_bytes(h[8..12].try_into().unwrap());
        let crc = u32::from_le_bytes(h[12..16].try_into().unwrap());
        if count == 0 || count as usize > BLOCK_RECORDS || raw_len > MAX_RAW || raw_len < count || comp_len > MAX_RAW + 1024 {
            return Err(self.err(at, format!("implausible block header ({count} records, {raw_len} bytes, {comp_len} compressed)")));
        }
        self.comp.resize(comp_len as usize, 0);
        let mut comp = std::mem::take(&mut self.comp);
        let r = self.read_exact_at(&mut comp, "block");
        self.comp = comp;
        r?;
        if crc32fast::hash(&self.comp) != crc {
            return Err(self.err(at, "block checksum mismatch (corrupt block)"));
        }
        self.raw.resize(raw_len as usize, 0);
        let n = zstd::bulk::decompress_to_buffer(&self.comp, &mut self.raw[..]).map_err(|e| self.err(at, format!("block does not decompress: {e}")))?;
        if n != raw_len as usize {
            return Err(self.err(at, format!("block decompresses to {n} bytes, header says {raw_len}")));
        }
        self.block_offset = at;
        self.pos = 0;
        self.left = count;
        self.state = Deltas::default();
        self.blocks += 1;
        Ok(true)
    }

    fn corrupt(&self, msg: &str) -> Error {
        self.err(self.block_offset, format!("corrupt block: {msg} (at byte {} of the decompressed block)", self.pos))
    }

    /// Decode up to `max` records of the current block into `out`, straight into its
    /// spare capacity (no per-record capacity check or reload of the vector).
    fn decode(&mut self, out: &mut Vec<Record>, max: usize) -> Result<()> {
        let n = (self.left as usize).min(max);
        out.reserve(n);
        let base = out.len();
        let mut pos = self.pos;
        let mut st = self.state;
        let deps = self.version >= 2;
        let (done, r) = decode_records(&self.raw, &mut pos, &mut st, deps, &mut out.spare_capacity_mut()[..n]);
        // SAFETY: decode_records initialised slots base..base + done of the reserved capacity.
        unsafe { out.set_len(base + done) };
        self.pos = pos;
        if let Err(bad) = r {
            return Err(self.corrupt(&bad.to_string()));
        }
        self.state = st;
        self.left -= n as u32;
        self.records += n as u64;
        if self.left == 0 && self.pos != self.raw.len() {
            return Err(self.corrupt("bytes left over after the block's last record"));
        }
        Ok(())
    }
}

/// An access tag's kind (bits 0-1) and size class (bits 2-4), by table: a match or a
/// shift compiles to a chain of selects in the decode loop.
const KINDS: [AccessKind; 4] = [AccessKind::Read, AccessKind::Write, AccessKind::Fetch, AccessKind::Fetch];
const SIZES: [u16; 8] = [1, 2, 4, 8, 16, 32, 64, 0];

/// Why a block's bytes do not decode (the reader adds the block and byte offset).
#[derive(Clone, Copy, Debug)]
enum Malformed {
    PastEnd,
    VarintOverflow,
    VarintTooLong,
    PidTooWide,
    DepTooFar(u64),
    AccessTag(u8),
    EventCode(u8),
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::PastEnd => write!(f, "record runs past the end of the block"),
            Malformed::VarintOverflow => write!(f, "varint overflows 64 bits"),
            Malformed::VarintTooLong => write!(f, "varint longer than 10 bytes"),
            Malformed::PidTooWide => write!(f, "process id exceeds 32 bits"),
            Malformed::DepTooFar(k) => write!(f, "dependence distance {k} exceeds {} loads", Dep::MAX_DISTANCE),
            Malformed::AccessTag(t) => write!(f, "unknown access tag {t:#04x}"),
            Malformed::EventCode(e) => write!(f, "unknown event code {e}"),
        }
    }
}

type Decoded<T> = std::result::Result<T, Malformed>;

/// Decode up to `slots.len()` records from `raw` at `*pos` into `slots`. Returns how
/// many it wrote, and whether it stopped on malformed bytes (`*pos` then says where).
/// `deps`: the file is version 2, whose access tags may set bit 7 (a dependence).
///
/// The hot loop of every trace read: the delta state lives in locals (registers), each
/// access is written straight into its slot, and events, rare in every trace, are
/// decoded out of line. Not inlined: alone, the loop keeps its state in registers.
/// The plain loops repeat the general path's few lines that move a stream's address:
/// sharing them (a macro over an optional delta) cost 2 instructions per record.
#[inline(never)]
fn decode_records(raw: &[u8], pos_out: &mut usize, st: &mut Deltas, deps: bool, slots: &mut [std::mem::MaybeUninit<Record>]) -> (usize, Decoded<()>) {
    let Deltas { addr: [mut data_addr, mut fetch_addr], delta: [mut data_delta, mut fetch_delta], mut pid } = *st;
    let mut pos = *pos_out;
    let mut done = 0;
    let n = slots.len();
    // Runs of plain accesses (no pid, no explicit size), the bulk of every trace, in a
    // loop with no calls, so its state stays in registers. Anything else, or bytes that
    // may be malformed, go to the general decoding of one record. The loop comes twice,
    // for tags without a dependence and (version 2) with one, as a trace's accesses
    // usually all carry one or none: one loop for both decoded a sequential stream a
    // fifth slower without dependences, and an eighth slower with them.
    macro_rules! plain_accesses {
        ($dep:literal) => {
            'plain: while done < n {
                let Some(&tag) = raw.get(pos) else { break };
                if tag & (F_PID | F_DEP) != if $dep { F_DEP } else { 0 } || tag & 3 == KIND_OTHER || (tag >> 2) & 7 == SIZE_EXPLICIT {
                    break;
                }
                let fetch = tag & 3 == 2;
                let mut delta = if fetch { fetch_delta } else { data_delta };
                let mut p = pos + 1;
                if tag & F_REPEAT == 0 {
                    // At most 9 bytes (63 bits) here; a longer varint, or one that runs
                    // off the block, is the general path's to decode or report.
                    let (mut z, mut shift) = (0u64, 0u32);
                    loop {
                        let Some(&b) = raw.get(p) else { break 'plain };
                        p += 1;
                        z |= ((b & 0x7f) as u64) << shift;
                        if b < 0x80 {
                            break;
                        }
                        shift += 7;
                        if shift > 56 {
                            break 'plain;
                        }
                    }
                    delta = unzigzag(z) as u64;
                }
                let dep = if $dep {
                    // One byte: independent (0) or a producer up to 127 loads back; a
                    // longer varint is the general path's.
                    let Some(&d) = raw.get(p) else { break 'plain };
                    if d >= 0x80 {
                        break 'plain;
                    }
                    p += 1;
                    dep_of(d)
                } else {
                    Dep::UNKNOWN
                };
                let vaddr = if fetch { fetch_addr } else { data_addr }.wrapping_add(delta);
                if fetch {
                    (fetch_addr, fetch_delta) = (vaddr, delta);
                } else {
                    (data_addr, data_delta) = (vaddr, delta);
                }
                let size = SIZES[((tag >> 2) & 7) as usize];
                slots[done].write(Record::Access(Access { vaddr, pid, size, kind: KINDS[(tag & 3) as usize], dep }));
                done += 1;
                pos = p;
            }
        };
    }
    let r: Decoded<()> = 'run: {
        while done < n {
            plain_accesses!(false);
            if deps {
                let before = done;
                plain_accesses!(true);
                if done != before {
                    // It may have stopped at an access without one: the first loop's.
                    continue;
                }
            }
            if done == n {
                break;
            }
            let slot = &mut slots[done];
            let Some(&tag) = raw.get(pos) else { break 'run Err(Malformed::PastEnd) };
            pos += 1;
            let kind = tag & 3;
            if kind == KIND_OTHER {
                let (r, p) = decode_event(raw, pos, tag >> 2);
                pos = p;
                match r {
                    Ok(r) => slot.write(r),
                    Err(m) => break 'run Err(m),
                };
                done += 1;
                continue;
            }
            if tag & F_DEP != 0 && !deps {
                break 'run Err(Malformed::AccessTag(tag));
            }
            let class = (tag >> 2) & 7;
            let size = if class == SIZE_EXPLICIT {
                let Some(b) = raw.get(pos..pos + 2) else {
                    pos = raw.len();
                    break 'run Err(Malformed::PastEnd);
                };
                pos += 2;
                u16::from_le_bytes([b[0], b[1]])
            } else {
                SIZES[class as usize]
            };
            if tag & F_PID != 0 {
                match varint(raw, &mut pos).and_then(pid32) {
                    Ok(p) => pid = p,
                    Err(m) => break 'run Err(m),
                }
            }
            let fetch = kind == 2;
            let mut delta = if fetch { fetch_delta } else { data_delta };
            if tag & F_REPEAT == 0 {
                match varint(raw, &mut pos) {
                    Ok(z) => delta = unzigzag(z) as u64,
                    Err(m) => break 'run Err(m),
                }
            }
            let mut dep = Dep::UNKNOWN;
            if tag & F_DEP != 0 {
                match varint(raw, &mut pos) {
                    Ok(k) if k <= Dep::MAX_DISTANCE => dep = dep_of(k as u8),
                    Ok(k) => break 'run Err(Malformed::DepTooFar(k)),
                    Err(m) => break 'run Err(m),
                }
            }
            let vaddr = if fetch { fetch_addr } else { data_addr }.wrapping_add(delta);
            if fetch {
                (fetch_addr, fetch_delta) = (vaddr, delta);
            } else {
                (data_addr, data_delta) = (vaddr, delta);
            }
            slot.write(Record::Access(Access { vaddr, pid, size, kind: KINDS[kind as usize], dep }));
            done += 1;
        }
        Ok(())
    };
    *st = Deltas { addr: [data_addr, fetch_addr], delta: [data_delta, fetch_delta], pid };
    *pos_out = pos;
    (done, r)
}

/// The dependence a version-2 dependence value `k` (at most [`Dep::MAX_DISTANCE`])
/// stands for: 0 independent, else the k-th previous load.
#[inline(always)]
fn dep_of(k: u8) -> Dep {
    if k == 0 {
        Dep::NONE
    } else {
        Dep(k)
    }
}

/// One LEB128 varint at `*pos` (advanced past it), or why it is malformed.
#[inline(always)]
fn varint(raw: &[u8], pos: &mut usize) -> Decoded<u64> {
    // Most deltas of a sequential trace fit one byte. Positions pass by value, so the
    // caller's stays in a register.
    if let Some(&b) = raw.get(*pos) {
        if b < 0x80 {
            *pos += 1;
            return Ok(b as u64);
        }
    }
    let (v, p) = varint_long(raw, *pos);
    *pos = p;
    v
}

#[inline(never)]
fn varint_long(raw: &[u8], mut pos: usize) -> (Decoded<u64>, usize) {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let Some(&b) = raw.get(pos) else { return (Err(Malformed::PastEnd), pos) };
        pos += 1;
        if shift == 63 && b > 1 {
            return (Err(Malformed::VarintOverflow), pos);
        }
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return (Ok(v), pos);
        }
        shift += 7;
        if shift > 63 {
            return (Err(Malformed::VarintTooLong), pos);
        }
    }
}

#[inline(always)]
fn pid32(v: u64) -> Decoded<u32> {
    u32::try_from(v).map_err(|_| Malformed::PidTooWide)
}

/// The record of event code `code` whose tag ends before `pos`, and the position
/// after it (or where it turned out malformed).
#[inline(never)]
fn decode_event(raw: &[u8], mut pos: usize, code: u8) -> (Decoded<Record>, usize) {
    let r = event_fields(raw, &mut pos, code);
    (r, pos)
}

fn event_fields(raw: &[u8], pos: &mut usize, code: u8) -> Decoded<Record> {
    let byte = |pos: &mut usize| -> Decoded<u8> {
        let b = *raw.get(*pos).ok_or(Malformed::PastEnd)?;
        *pos += 1;
        Ok(b)
    };
    let pid = |pos: &mut usize| varint(raw, pos).and_then(pid32);
    Ok(match code {
        EV_TICK => Record::Tick(varint(raw, pos)?),
        EV_MMAP => {
            let pid = pid(pos)?;
            let start = varint(raw, pos)?;
            let len = varint(raw, pos)?;
            let prot = byte(pos)?;
            let flags = byte(pos)?;
            Record::Mmap { pid, start, len, prot, flags: MapFlags(flags) }
        }
        EV_MUNMAP => {
            let pid = pid(pos)?;
            let start = varint(raw, pos)?;
            let len = varint(raw, pos)?;
            Record::Munmap { pid, start, len }
        }
        EV_MPROTECT => {
            let pid = pid(pos)?;
            let start = varint(raw, pos)?;
            let len = varint(raw, pos)?;
            let prot = byte(pos)?;
            Record::Mprotect { pid, start, len, prot }
        }
        EV_BRK => {
            let pid = pid(pos)?;
            let end = varint(raw, pos)?;
            Record::Brk { pid, end }
        }
        EV_FORK => {
            let parent = pid(pos)?;
            let child = pid(pos)?;
            Record::Fork { parent, child }
        }
        EV_EXIT => Record::Exit { pid: pid(pos)? },
        EV_SWITCH => Record::ContextSwitch { pid: pid(pos)? },
        e => return Err(Malformed::EventCode(e)),
    })
}

impl TraceSource for VmtReader {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_batch(&mut self, buf: &mut Vec<Record>) -> Result<bool> {
        buf.clear();
        while buf.len() < BATCH && !self.done {
            if self.left == 0 && !self.next_block()? {
                self.done = true;
                break;
            }
            let want = BATCH - buf.len();
            self.decode(buf, want)?;
        }
        Ok(!buf.is_empty())
    }

    fn len_hint(&self) -> Option<u64> {
        self.total_hint
    }
}

/// A stable hash of a trace's content: FNV-1a over the header and every block's
/// checksum and size (no decompression needed), as 16 hex digits.
pub fn content_hash(path: &Path) -> Result<String> {
    let len = std::fs::metadata(path).map_err(|e| Error::io(path, e))?.len();
    let mut r = VmtReader::open(path)?;
    let mut h = crate::config::fnv1a(&serde_json::to_vec(&r.meta).expect("json"));
    loop {
        let at = r.offset;
        let mut tag = [0u8; 1];
        r.read_exact_at(&mut tag, "block tag")?;
        if tag[0] == TAG_END {
            let mut end = [0u8; END_LEN - 1];
            r.read_exact_at(&mut end, "end marker")?;
            h = crate::config::fnv1a_extend(h, &end);
            return Ok(format!("{h:016x}"));
        }
        if tag[0] != TAG_BLOCK {
            return Err(r.err(at, format!("expected a block, found byte {:#04x}", tag[0])));
        }
        let mut hdr = [0u8; BLOCK_HEADER];
        r.read_exact_at(&mut hdr, "block header")?;
        h = crate::config::fnv1a_extend(h, &hdr);
        let comp_len = u32::from_le_bytes(hdr[8..12].try_into().unwrap()) as i64;
        // Skipped, not read: a seek past the end would succeed, so check the length
        // (the same error, at the same offset, as reading the block gives).
        if r.offset + comp_len as u64 > len {
            let msg = format!("truncated block: file ends after {} of {comp_len} bytes", len.saturating_sub(r.offset));
            return Err(r.err(r.offset, msg));
        }
        r.input.seek(SeekFrom::Current(comp_len)).map_err(|e| r.err(at, e.to_string()))?;
        r.offset += comp_len as u64;
    }
}

/// Write every record of `src` to a new `.vmt` file at `out`; returns the records written.
pub fn write_file(src: &mut dyn super::TraceSource, out: &Path) -> Result<u64> {
    let mut w = VmtWriter::create(out, src.meta())?;
    let mut buf = Vec::with_capacity(super::BATCH);
    while src.next_batch(&mut buf)? {
        crate::interrupt::check()?;
        w.write_all(&buf)?;
    }
    w.finish()
}
