//! DynamoRIO drmemtrace offline traces (the format of drcachesim and its tools),
//! imported: one trace file or a trace directory of per-thread (or per-core) files.
//!
//! A file is a stream of 12-byte `trace_entry_t` records (type u16, size u16, addr
//! u64; DynamoRIO's `trace_entry.h`), plain or compressed, or a zip archive whose
//! members (`chunk.0000`, ...) continue one stream. Instructions become fetches of
//! their length, loads and stores become reads and writes, and `PID` records say whose
//! address space they touch; the files of a directory are interleaved by their
//! `TIMESTAMP` markers, as drcachesim's serial mode replays them. Records no
//! translation sees (prefetches, cache flushes, the kernel's own code) are dropped and
//! counted. drmemtrace records no mmap, so the OS model treats the memory a trace
//! touches as implicit anonymous memory, as for ChampSim. Rules: docs/importers.md.

use super::compressed::{self, Compression};
use super::{Record, TraceMeta, TraceSource, BATCH};
use crate::addr::{AccessKind, Pid};
use crate::error::{Error, Result};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Bytes per `trace_entry_t` (packed; the same for every version and architecture
/// vmlab reads: 64-bit traces).
pub(crate) const ENTRY_BYTES: usize = 12;
/// Most trace files one directory may hold (each is read at once, with its own
/// buffer): a directory with more is an error, not unbounded host memory.
pub(crate) const MAX_FILES: usize = 4096;
/// The trace versions vmlab reads (`TRACE_ENTRY_VERSION_*`): 1 (legacy) to 7 (retired
/// instructions only). Their records are alike; later versions add types and markers.
const VERSIONS: std::ops::RangeInclusive<u64> = 1..=7;
/// Bytes read from a file at a time.
const BUF_BYTES: usize = 16 * 1024;

/// `trace_type_t` values (DynamoRIO's `trace_entry.h`).
mod ty {
    pub(crate) const READ: u16 = 0;
    pub(crate) const WRITE: u16 = 1;
    pub(crate) const INSTR: u16 = 10;
    pub(crate) const INSTR_RETURN: u16 = 16;
    pub(crate) const INSTR_BUNDLE: u16 = 17;
    pub(crate) const INSTR_FLUSH: u16 = 18;
    pub(crate) const DATA_FLUSH_END: u16 = 21;
    pub(crate) const THREAD: u16 = 22;
    pub(crate) const THREAD_EXIT: u16 = 23;
    pub(crate) const PID: u16 = 24;
    pub(crate) const HEADER: u16 = 25;
    pub(crate) const FOOTER: u16 = 26;
    pub(crate) const HARDWARE_PREFETCH: u16 = 27;
    pub(crate) const MARKER: u16 = 28;
    pub(crate) const INSTR_NO_FETCH: u16 = 29;
    pub(crate) const INSTR_MAYBE_FETCH: u16 = 30;
    pub(crate) const INSTR_SYSENTER: u16 = 31;
    pub(crate) const PREFETCH_READ_L1_NT: u16 = 32;
    pub(crate) const PREFETCH_WRITE_L3_NT: u16 = 46;
    pub(crate) const ENCODING: u16 = 47;
    pub(crate) const INSTR_TAKEN_JUMP: u16 = 48;
    pub(crate) const INSTR_UNTAKEN_JUMP: u16 = 49;
}

/// `trace_marker_type_t` values (a MARKER record's size field).
mod marker {
    pub(crate) const TIMESTAMP: u16 = 2;
    pub(crate) const FILETYPE: u16 = 9;
    pub(crate) const PAGE_SIZE: u16 = 18;
    pub(crate) const SYSCALL_TRACE_START: u16 = 27;
    pub(crate) const SYSCALL_TRACE_END: u16 = 28;
    pub(crate) const CONTEXT_SWITCH_START: u16 = 34;
    pub(crate) const CONTEXT_SWITCH_END: u16 = 35;
}

/// `offline_file_type_t` bits (the FILETYPE marker's value).
mod filetype {
    /// Data references filtered by an online cache, or instructions, or both: the
    /// trace holds a cache's misses, not the program's references.
    pub(crate) const FILTERED: u64 = 0x01 | 0x80 | 0x100 | 0x2000;
    pub(crate) const ARCH_AARCH64: u64 = 0x08;
    pub(crate) const ARCH_ARM32: u64 = 0x10;
    pub(crate) const ARCH_X86_32: u64 = 0x20;
    pub(crate) const ARCH_X86_64: u64 = 0x40;
    pub(crate) const ARCH_REGDEPS: u64 = 0x20000;
}

/// What a record type is to vmlab.
enum Kind {
    Data(AccessKind),
    Instr,
    Bundle,
    NoFetch,
    /// A software or hardware prefetch: no architectural access, dropped.
    Prefetch,
    /// A cache flush: dropped.
    Flush,
    Thread,
    ThreadExit,
    Pid,
    Header,
    Footer,
    Marker,
    /// An instruction's encoding bytes: nothing to translate.
    Encoding,
}

fn kind(t: u16) -> Option<Kind> {
    Some(match t {
        ty::READ => Kind::Data(AccessKind::Read),
        ty::WRITE => Kind::Data(AccessKind::Write),
        2..=9 | ty::PREFETCH_READ_L1_NT..=ty::PREFETCH_WRITE_L3_NT | ty::HARDWARE_PREFETCH => Kind::Prefetch,
        ty::INSTR..=ty::INSTR_RETURN | ty::INSTR_MAYBE_FETCH | ty::INSTR_SYSENTER | ty::INSTR_TAKEN_JUMP | ty::INSTR_UNTAKEN_JUMP => Kind::Instr,
        ty::INSTR_BUNDLE => Kind::Bundle,
        ty::INSTR_FLUSH..=ty::DATA_FLUSH_END => Kind::Flush,
        ty::THREAD => Kind::Thread,
        ty::THREAD_EXIT => Kind::ThreadExit,
        ty::PID => Kind::Pid,
        ty::HEADER => Kind::Header,
        ty::FOOTER => Kind::Footer,
        ty::MARKER => Kind::Marker,
        ty::INSTR_NO_FETCH => Kind::NoFetch,
        ty::ENCODING => Kind::Encoding,
        _ => return None,
    })
}

/// Records the import dropped, by reason (docs/importers.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    pub prefetches: u64,
    pub flushes: u64,
    /// Records of the kernel's own syscall and context-switch code.
    pub kernel: u64,
}

/// The zip compression methods vmlab decompresses.
#[derive(Clone, Copy)]
enum Method {
    Stored,
    Deflate,
    Zstd,
}

/// One member of a zip archive, read raw by vmlab.
struct Member {
    method: Method,
    data_start: u64,
    compressed_size: u64,
}

/// A zip archive's members read in order as one stream (drmemtrace's chunks).
struct ZipChunks {
    file: File,
    members: std::vec::IntoIter<Member>,
    current: Option<Box<dyn Read + Send>>,
}

impl ZipChunks {
    fn open(path: &Path) -> Result<ZipChunks> {
        let bad = |e: zip::result::ZipError| Error::Trace { file: path.to_path_buf(), offset: 0, msg: format!("not a readable zip archive: {e}") };
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let mut archive = zip::ZipArchive::new(file.try_clone().map_err(|e| Error::io(path, e))?).map_err(bad)?;
        let mut members = Vec::with_capacity(archive.len().min(1 << 16));
        for i in 0..archive.len() {
            let m = archive.by_index_raw(i).map_err(bad)?;
            if m.is_dir() {
                continue;
            }
            use zip::CompressionMethod as C;
            let method = match m.compression() {
                C::STORE => Method::Stored,
                C::DEFLATE => Method::Deflate,
                C::ZSTD => Method::Zstd,
                other => {
                    let msg = format!("zip member {:?} uses compression {other:?}; vmlab reads stored, deflate and zstd members", m.name().unwrap_or_default());
                    return Err(Error::Trace { file: path.to_path_buf(), offset: m.header_start(), msg });
                }
            };
            let data_start = m.data_start().ok_or_else(|| bad(zip::result::ZipError::InvalidArchive("member without data".into())))?;
            members.push(Member { method, data_start, compressed_size: m.compressed_size() });
        }
        Ok(ZipChunks { file, members: members.into_iter(), current: None })
    }

    fn next_member(&mut self) -> std::io::Result<bool> {
        let Some(m) = self.members.next() else { return Ok(false) };
        let mut f = self.file.try_clone()?;
        f.seek(SeekFrom::Start(m.data_start))?;
        let raw = std::io::BufReader::with_capacity(1 << 16, f.take(m.compressed_size));
        self.current = Some(match m.method {
            Method::Stored => Box::new(raw),
            Method::Deflate => Box::new(flate2::bufread::DeflateDecoder::new(raw)),
            Method::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(raw)?),
        });
        Ok(true)
    }
}

impl Read for ZipChunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if let Some(r) = self.current.as_mut() {
                let n = r.read(buf)?;
                if n > 0 || buf.is_empty() {
                    return Ok(n);
                }
                self.current = None;
            }
            if !self.next_member()? {
                return Ok(0);
            }
        }
    }
}

/// One trace file's records, decoded in order.
struct Stream {
    path: PathBuf,
    input: Box<dyn Read + Send>,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    /// Bytes of the decompressed stream before `buf[0]`.
    base: u64,
    /// The thread's process, from its PID record.
    pid: Option<Pid>,
    /// The pc after the last instruction (a bundle's instructions follow it).
    next_pc: u64,
    /// Inside the kernel's syscall or context-switch code.
    in_kernel: bool,
    /// The header's trace version.
    version: u64,
}

impl Stream {
    fn open(path: &Path) -> Result<Stream> {
        let mut head = [0u8; 8];
        let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
        let n = read_full(&mut f, &mut head).map_err(|e| Error::io(path, e))?;
        if Compression::sniff(&head[..n]) == Compression::Zip {
            return Stream::new(Box::new(ZipChunks::open(path)?), path);
        }
        // Not seeked back: the file may be a pipe.
        Stream::from_reader(std::io::Cursor::new(head[..n].to_vec()).chain(f), path)
    }

    /// A stream read from `input`, plain or compressed (a zip archive is read from its
    /// file, with [`Stream::open`]); `path` names it in errors.
    fn from_reader<R: Read + Send + 'static>(input: R, path: &Path) -> Result<Stream> {
        let accepted = format!("drmemtrace files zipped (from a file) or {}", compressed::STREAMED);
        Stream::new(compressed::open_stream(input, path, &accepted)?.1, path)
    }

    fn new(input: Box<dyn Read + Send>, path: &Path) -> Result<Stream> {
        let mut s = Stream {
            path: path.to_path_buf(),
            input,
            buf: vec![0u8; BUF_BYTES].into_boxed_slice(),
            pos: 0,
            len: 0,
            base: 0,
            pid: None,
            next_pc: 0,
            in_kernel: false,
            version: 0,
        };
        let Some((t, _, version, at)) = s.next_entry()? else {
            return Err(s.err(0, "empty file: not a drmemtrace trace"));
        };
        if t != ty::HEADER {
            return Err(s.err(at, format!("not a drmemtrace trace: the first record has type {t}, not the header's {}", ty::HEADER)));
        }
        s.check_version(version, at)?;
        s.version = version;
        Ok(s)
    }

    fn err(&self, offset: u64, msg: impl Into<String>) -> Error {
        Error::Trace { file: self.path.clone(), offset, msg: msg.into() }
    }

    fn check_version(&self, version: u64, at: u64) -> Result<()> {
        if VERSIONS.contains(&version) {
            return Ok(());
        }
        Err(self.err(at, format!("drmemtrace version {version}; vmlab reads versions {} to {}", VERSIONS.start(), VERSIONS.end())))
    }

    /// The next record (type, size, addr, its offset in the decompressed stream), or
    /// None at the end of the file.
    fn next_entry(&mut self) -> Result<Option<(u16, u16, u64, u64)>> {
        if self.len - self.pos < ENTRY_BYTES {
            self.buf.copy_within(self.pos..self.len, 0);
            self.base += self.pos as u64;
            self.len -= self.pos;
            self.pos = 0;
            let n = read_full(&mut self.input, &mut self.buf[self.len..])
                .map_err(|e| self.err(self.base + self.len as u64, format!("read error: {e} (offset in the decompressed stream)")))?;
            self.len += n;
            if self.len == 0 {
                return Ok(None);
            }
            if self.len < ENTRY_BYTES {
                let msg = format!("truncated trace: a partial {ENTRY_BYTES}-byte record of {} bytes at the end", self.len);
                return Err(self.err(self.base, msg));
            }
        }
        let e = &self.buf[self.pos..self.pos + ENTRY_BYTES];
        let t = u16::from_le_bytes([e[0], e[1]]);
        let size = u16::from_le_bytes([e[2], e[3]]);
        let addr = u64::from_le_bytes(e[4..12].try_into().expect("12-byte entry"));
        let at = self.base + self.pos as u64;
        self.pos += ENTRY_BYTES;
        Ok(Some((t, size, addr, at)))
    }
}

/// Reads until `buf` is full or the input ends; the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// What a record did to its stream's segment.
enum Step {
    Continue,
    /// A TIMESTAMP marker opens the next segment.
    Segment(u64),
    End,
}

pub struct DrmemtraceReader {
    streams: Vec<Stream>,
    /// Streams waiting to run, by the timestamp of their next segment, then file order.
    ready: BinaryHeap<Reverse<(u64, usize)>>,
    /// The stream whose segment is being replayed.
    current: Option<usize>,
    /// The process of the last access emitted.
    running: Option<Pid>,
    meta: TraceMeta,
    dropped: Dropped,
}

impl DrmemtraceReader {
    /// Open a trace file, or a trace directory: its `trace/` folder if it has one (as
    /// drrun's `-offline` output does), else the directory itself.
    pub fn open(path: &Path) -> Result<DrmemtraceReader> {
        let files = if path.is_dir() { trace_files(path)? } else { vec![path.to_path_buf()] };
        DrmemtraceReader::from_streams(files.iter().map(|f| Stream::open(f)))
    }

    /// Read one trace stream (plain or compressed, not zipped) from `input`; `path`
    /// names it in errors.
    pub fn from_reader<R: Read + Send + 'static>(input: R, path: &Path) -> Result<DrmemtraceReader> {
        DrmemtraceReader::from_streams(std::iter::once(Stream::from_reader(input, path)))
    }

    fn from_streams(streams: impl Iterator<Item = Result<Stream>>) -> Result<DrmemtraceReader> {
        let mut r = DrmemtraceReader {
            streams: Vec::new(),
            ready: BinaryHeap::new(),
            current: None,
            running: None,
            meta: TraceMeta::default(),
            dropped: Dropped::default(),
        };
        let mut file_types = Vec::new();
        let mut page_size = None;
        for s in streams {
            let mut s = s?;
            // The preamble: markers up to the first timestamp, which opens the first
            // segment. drmemtrace writes no access before it.
            let mut first = None;
            while let Some((t, size, addr, at)) = s.next_entry()? {
                match (kind(t), size) {
                    (Some(Kind::Marker), marker::TIMESTAMP) => {
                        first = Some(addr);
                        break;
                    }
                    (Some(Kind::Marker), marker::FILETYPE) => file_types.push((addr, s.path.clone(), at)),
                    (Some(Kind::Marker), marker::PAGE_SIZE) => page_size = Some(addr),
                    (Some(Kind::Marker | Kind::Thread | Kind::Encoding), _) => {}
                    (Some(Kind::Pid), _) => s.pid = Some(pid_of(&s, addr, at)?),
                    (Some(Kind::Footer), _) => break,
                    _ => return Err(s.err(at, format!("record of type {t} before the trace's first timestamp"))),
                }
            }
            if let Some(ts) = first {
                r.ready.push(Reverse((ts, r.streams.len())));
            }
            r.streams.push(s);
        }
        for (ft, file, at) in &file_types {
            if ft & filetype::FILTERED != 0 {
                let msg = format!("a cache-filtered trace (file type {ft:#x}): its records are an online cache's misses, not the program's references; trace without -L0_filter / -L0I_filter / -L0D_filter");
                return Err(Error::Trace { file: file.clone(), offset: *at, msg });
            }
        }
        let arch = file_types.first().map(|(ft, ..)| arch_name(*ft)).unwrap_or("unknown");
        r.meta = TraceMeta {
            source: "drmemtrace".into(),
            command: Vec::new(),
            source_page_size: page_size,
            extra: [
                ("arch".to_string(), arch.to_string()),
                ("version".to_string(), r.streams.first().map_or(0, |s| s.version).to_string()),
                ("files".to_string(), r.streams.len().to_string()),
                ("file_type".to_string(), file_types.first().map(|(ft, ..)| format!("{ft:#x}")).unwrap_or_default()),
            ]
            .into_iter()
            .collect(),
        };
        Ok(r)
    }

    /// Records dropped so far, by reason.
    pub fn dropped(&self) -> Dropped {
        self.dropped
    }

    /// Decode one record of stream `i` into `buf`.
    fn step(&mut self, i: usize, buf: &mut Vec<Record>) -> Result<Step> {
        let s = &mut self.streams[i];
        let Some((t, size, addr, at)) = s.next_entry()? else { return Ok(Step::End) };
        let Some(k) = kind(t) else {
            return Err(s.err(at, format!("unknown record type {t}")));
        };
        if s.in_kernel {
            if let (Kind::Marker, marker::SYSCALL_TRACE_END | marker::CONTEXT_SWITCH_END) = (&k, size) {
                s.in_kernel = false;
            }
            self.dropped.kernel += 1;
            return Ok(Step::Continue);
        }
        let mut access = |kind: AccessKind, va: u64, size: u16, s: &Stream, running: &mut Option<Pid>| -> Result<()> {
            let pid = s.pid.ok_or_else(|| s.err(at, "an access before the thread's PID record"))?;
            if *running != Some(pid) {
                buf.push(Record::ContextSwitch { pid });
                *running = Some(pid);
            }
            // A size of 0 is an access of one byte, as the QEMU engine's (Record::Access).
            buf.push(Record::access(kind, va, size.max(1), pid));
            Ok(())
        };
        match k {
            Kind::Data(kind) => access(kind, addr, size, s, &mut self.running)?,
            Kind::Instr => {
                access(AccessKind::Fetch, addr, size, s, &mut self.running)?;
                s.next_pc = addr.wrapping_add(size as u64);
            }
            Kind::Bundle => {
                // Legacy: `size` instructions after the last one, their lengths in the
                // address field's bytes.
                if size as usize > 8 {
                    return Err(s.err(at, format!("an instruction bundle of {size} instructions (at most 8)")));
                }
                for len in addr.to_le_bytes().into_iter().take(size as usize) {
                    let pc = s.next_pc;
                    access(AccessKind::Fetch, pc, len as u16, s, &mut self.running)?;
                    s.next_pc = pc.wrapping_add(len as u64);
                }
            }
            Kind::NoFetch => buf.push(Record::Tick(1)),
            Kind::Prefetch => self.dropped.prefetches += 1,
            Kind::Flush => self.dropped.flushes += 1,
            Kind::Pid => s.pid = Some(pid_of(s, addr, at)?),
            Kind::Marker => match size {
                marker::TIMESTAMP => return Ok(Step::Segment(addr)),
                marker::SYSCALL_TRACE_START | marker::CONTEXT_SWITCH_START => {
                    s.in_kernel = true;
                    self.dropped.kernel += 1;
                }
                _ => {}
            },
            // A thread record switches threads within a file (legacy interleaved and
            // core-sharded traces); its PID record follows. Exits are kept implicit:
            // a process lives to the end of the trace. A core-sharded file holds its
            // threads' whole streams, headers and footers included; only the file's
            // end ends it.
            Kind::Thread | Kind::ThreadExit | Kind::Encoding | Kind::Footer => {}
            Kind::Header => s.check_version(addr, at)?,
        }
        Ok(Step::Continue)
    }
}

fn pid_of(s: &Stream, addr: u64, at: u64) -> Result<Pid> {
    Pid::try_from(addr).map_err(|_| s.err(at, format!("process id {addr} does not fit 32 bits")))
}

fn arch_name(ft: u64) -> &'static str {
    if ft & filetype::ARCH_X86_64 != 0 {
        "x86_64"
    } else if ft & filetype::ARCH_AARCH64 != 0 {
        "aarch64"
    } else if ft & filetype::ARCH_X86_32 != 0 {
        "x86_32"
    } else if ft & filetype::ARCH_ARM32 != 0 {
        "arm32"
    } else if ft & filetype::ARCH_REGDEPS != 0 {
        "regdeps"
    } else {
        "unknown"
    }
}

/// The trace files of a directory, in name order: drmemtrace's per-thread `*.trace*`
/// files (and legacy `*.memtrace*`), from its `trace/` folder if it has one.
fn trace_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let sub = dir.join("trace");
    let dir = if sub.is_dir() { sub } else { dir.to_path_buf() };
    let mut files = Vec::new();
    for e in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
        let p = e.map_err(|e| Error::io(&dir, e))?.path();
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if p.is_file() && (name.contains(".trace") || name.contains(".memtrace")) {
            if files.len() == MAX_FILES {
                let msg = format!("more than {MAX_FILES} trace files in one directory");
                return Err(Error::Trace { file: dir, offset: 0, msg });
            }
            files.push(p);
        }
    }
    if files.is_empty() {
        let raw = if dir.join("raw").is_dir() || dir.parent().is_some_and(|p| p.join("raw").is_dir()) {
            " (a raw/ folder is DynamoRIO's unprocessed output: run its drraw2trace on it first)"
        } else {
            ""
        };
        return Err(Error::Trace { file: dir, offset: 0, msg: format!("no drmemtrace trace files (*.trace*) in this directory{raw}") });
    }
    files.sort();
    Ok(files)
}

impl TraceSource for DrmemtraceReader {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }

    fn next_batch(&mut self, buf: &mut Vec<Record>) -> Result<bool> {
        buf.clear();
        while buf.len() < BATCH - 9 {
            let i = match self.current {
                Some(i) => i,
                None => match self.ready.pop() {
                    Some(Reverse((_, i))) => {
                        self.current = Some(i);
                        i
                    }
                    None => break,
                },
            };
            match self.step(i, buf)? {
                Step::Continue => {}
                Step::Segment(ts) => {
                    self.ready.push(Reverse((ts, i)));
                    self.current = None;
                }
                Step::End => self.current = None,
            }
        }
        Ok(!buf.is_empty())
    }
}
