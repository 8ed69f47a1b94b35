//! The drmemtrace importer: DynamoRIO's own test traces give drcachesim's counts, and
//! hand-built streams pin each mapping rule and each error (docs/importers.md,
//! "drmemtrace").

use std::io::Write;
use std::path::{Path, PathBuf};
use vmlab::addr::AccessKind;
use vmlab::trace::drmemtrace::{DrmemtraceReader, Dropped};
use vmlab::trace::{Record, TraceSource};

use crate::common::drain;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/drmemtrace").join(name)
}

/// What drcachesim's basic_counts reports: fetched and non-fetched instructions, loads,
/// stores.
#[derive(Debug, PartialEq, Default)]
struct Counts {
    fetched: u64,
    non_fetched: u64,
    loads: u64,
    stores: u64,
}

fn counts(records: &[Record]) -> Counts {
    let mut c = Counts::default();
    for r in records {
        match r {
            Record::Access(a) => match a.kind {
                AccessKind::Fetch => c.fetched += 1,
                AccessKind::Read => c.loads += 1,
                AccessKind::Write => c.stores += 1,
            },
            Record::Tick(n) => c.non_fetched += n,
            Record::ContextSwitch { .. } => {}
            other => panic!("drmemtrace has no OS events, yet the import made {other:?}"),
        }
    }
    c
}

#[test]
fn dynamorios_test_traces_give_drcachesims_counts() {
    // tests/data/drmemtrace/README.md says where each count comes from.
    // Version 1 traces carry no file type, so no architecture.
    for (name, fetched, non_fetched, loads, stores, arch) in [
        ("drmemtrace.threadsig.x64.tracedir", 650_576, 126, 172_208, 100_150, "x86_64"),
        ("drmemtrace.legacy-for-record-filter.x64.tracedir", 38_067, 26_248, 33_029, 37_486, "unknown"),
        ("drmemtrace.allasm_x86_64.trace.zip", 133, 0, 0, 0, "x86_64"),
    ] {
        let mut r = DrmemtraceReader::open(&data(name)).unwrap();
        let records = drain(&mut r).unwrap();
        assert_eq!(counts(&records), Counts { fetched, non_fetched, loads, stores }, "{name}");
        assert_eq!(r.dropped(), Dropped::default(), "{name}");
        assert_eq!(r.meta().source, "drmemtrace");
        assert_eq!(r.meta().extra["arch"], arch, "{name}");
    }
    // Nine threads of one process: one address space, entered once.
    let records = drain(&mut DrmemtraceReader::open(&data("drmemtrace.threadsig.x64.tracedir")).unwrap()).unwrap();
    let switches: Vec<_> = records.iter().filter(|r| matches!(r, Record::ContextSwitch { .. })).collect();
    assert_eq!(switches, [&Record::ContextSwitch { pid: 872_805 }]);
}

/// One `trace_entry_t`: type, size, addr.
fn e(t: u16, size: u16, addr: u64) -> Vec<u8> {
    [&t.to_le_bytes()[..], &size.to_le_bytes(), &addr.to_le_bytes()].concat()
}

const HEADER: u16 = 25;
const MARKER: u16 = 28;
const THREAD: u16 = 22;
const PID: u16 = 24;
const FOOTER: u16 = 26;
const READ: u16 = 0;
const WRITE: u16 = 1;
const INSTR: u16 = 10;
const TIMESTAMP: u16 = 2;
const FILETYPE: u16 = 9;

/// A thread's stream: header, version and file type markers, thread and process, then
/// `body`, then the footer.
fn stream(tid: u64, pid: u64, body: &[Vec<u8>]) -> Vec<u8> {
    let mut v = [e(HEADER, 0, 7), e(MARKER, 12, 7), e(MARKER, FILETYPE, 0x40), e(THREAD, 4, tid), e(PID, 4, pid)].concat();
    for b in body {
        v.extend_from_slice(b);
    }
    v.extend(e(FOOTER, 0, 0));
    v
}

fn ts(t: u64) -> Vec<u8> {
    e(MARKER, TIMESTAMP, t)
}

fn read_dir(files: &[(&str, Vec<u8>)]) -> vmlab::Result<Vec<Record>> {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    DrmemtraceReader::open(dir.path()).and_then(|mut r| drain(&mut r))
}

fn read_bytes(bytes: Vec<u8>) -> vmlab::Result<Vec<Record>> {
    DrmemtraceReader::from_reader(std::io::Cursor::new(bytes), Path::new("t.trace")).and_then(|mut r| drain(&mut r))
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    g.write_all(bytes).unwrap();
    g.finish().unwrap()
}

#[test]
fn thread_files_interleave_by_their_timestamps() {
    // Thread 1 (pid 5) runs at 10 and 30, thread 2 (pid 6) at 20 and 40; a tie (thread
    // 3 at 30 too) goes to the earlier file by name.
    let a = stream(1, 5, &[ts(10), e(READ, 8, 0x1000), e(READ, 8, 0x1008), ts(30), e(WRITE, 4, 0x1010)]);
    let b = stream(2, 6, &[ts(20), e(INSTR, 3, 0x40_0000), ts(40), e(READ, 8, 0x2000)]);
    let c = stream(3, 5, &[ts(30), e(READ, 2, 0x3000)]);
    let got = read_dir(&[("drmemtrace.app.1.0001.trace.gz", gzip(&a)), ("drmemtrace.app.2.0002.trace", b), ("drmemtrace.app.3.0003.trace", c)]).unwrap();
    assert_eq!(
        got,
        [
            Record::ContextSwitch { pid: 5 },
            Record::read(0x1000, 8, 5),
            Record::read(0x1008, 8, 5),
            Record::ContextSwitch { pid: 6 },
            Record::fetch(0x40_0000, 3, 6),
            Record::ContextSwitch { pid: 5 },
            Record::write(0x1010, 4, 5),
            Record::read(0x3000, 2, 5),
            Record::ContextSwitch { pid: 6 },
            Record::read(0x2000, 8, 6),
        ]
    );
}

#[test]
fn a_trace_folder_is_read_from_its_trace_subfolder() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("trace")).unwrap();
    std::fs::write(dir.path().join("trace/drmemtrace.app.1.trace"), stream(1, 5, &[ts(1), e(READ, 8, 0x1000)])).unwrap();
    // Not trace files: drcachesim's schedule files and function lists.
    std::fs::write(dir.path().join("trace/funclist.log"), "x").unwrap();
    let got = drain(&mut DrmemtraceReader::open(dir.path()).unwrap()).unwrap();
    assert_eq!(got, [Record::ContextSwitch { pid: 5 }, Record::read(0x1000, 8, 5)]);
}

#[test]
fn what_no_translation_sees_is_dropped_and_counted() {
    let syscall_trace = |start: bool| e(MARKER, if start { 27 } else { 28 }, 0);
    let body = [
        ts(1),
        e(3, 1, 0x5000),        // prefetcht0
        e(27, 64, 0x5040),      // a simulator's hardware prefetch
        e(18, 64, 0x6000),      // an instruction-cache flush
        e(47, 3, 0x90_90_90),   // an encoding
        e(INSTR, 2, 0x40_0000), // kept
        syscall_trace(true),    // the kernel's code for a syscall
        e(INSTR, 4, 0xffff_ffff_8100_0000),
        e(READ, 8, 0xffff_8880_0000_0000),
        syscall_trace(false),
        e(READ, 0, 0x7000), // size 0: one byte
    ];
    let mut r = DrmemtraceReader::from_reader(std::io::Cursor::new(stream(1, 5, &body)), Path::new("t.trace")).unwrap();
    let got = drain(&mut r).unwrap();
    assert_eq!(got, [Record::ContextSwitch { pid: 5 }, Record::fetch(0x40_0000, 2, 5), Record::read(0x7000, 1, 5)]);
    assert_eq!(r.dropped(), Dropped { prefetches: 2, flushes: 1, kernel: 4 });
}

#[test]
fn bundles_and_non_fetched_instructions_count_as_instructions() {
    // A legacy bundle of 3 instructions (lengths 2, 5, 1) follows the last instruction.
    let bundle = e(17, 3, u64::from_le_bytes([2, 5, 1, 0, 0, 0, 0, 0]));
    let got = read_bytes(stream(1, 5, &[ts(1), e(INSTR, 4, 0x40_0000), bundle, e(29, 3, 0x40_000b)])).unwrap();
    assert_eq!(
        got,
        [
            Record::ContextSwitch { pid: 5 },
            Record::fetch(0x40_0000, 4, 5),
            Record::fetch(0x40_0004, 2, 5),
            Record::fetch(0x40_0006, 5, 5),
            Record::fetch(0x40_000b, 1, 5),
            Record::Tick(1),
        ]
    );
}

#[test]
fn a_core_sharded_file_switches_threads_and_processes_mid_stream() {
    // One core ran thread 1 (pid 5), then thread 2 (pid 6): each thread's stream whole,
    // header and footer included, as record_filter's core-sharded output has them.
    let mut core = stream(1, 5, &[ts(1), e(READ, 8, 0x1000)]);
    core.extend(stream(2, 6, &[ts(2), e(WRITE, 8, 0x2000)]));
    core.extend([e(THREAD, 4, 1), e(PID, 4, 5), ts(3), e(READ, 8, 0x1008)].concat());
    let got = read_bytes(core).unwrap();
    assert_eq!(
        got,
        [
            Record::ContextSwitch { pid: 5 },
            Record::read(0x1000, 8, 5),
            Record::ContextSwitch { pid: 6 },
            Record::write(0x2000, 8, 6),
            Record::ContextSwitch { pid: 5 },
            Record::read(0x1008, 8, 5),
        ]
    );
}

#[test]
fn zip_members_continue_one_stream() {
    // drmemtrace's chunks: the stream split across members, here stored and at an odd
    // byte, so a record spans two members.
    let bytes = stream(1, 5, &[ts(1), e(READ, 8, 0x1000), e(WRITE, 8, 0x2000), e(INSTR, 3, 0x40_0000)]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drmemtrace.app.1.trace.zip");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let opts = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let cut = bytes.len() / 2 + 5;
    for (k, part) in [&bytes[..cut], &bytes[cut..]].into_iter().enumerate() {
        z.start_file(format!("chunk.{k:04}"), opts).unwrap();
        z.write_all(part).unwrap();
    }
    z.finish().unwrap();
    assert_eq!(drain(&mut DrmemtraceReader::open(&path).unwrap()).unwrap(), read_bytes(bytes).unwrap());
}

/// The one-line error of reading `bytes`, which must name `want` and the offset.
fn error_of(bytes: Vec<u8>) -> String {
    read_bytes(bytes).map(|_| ()).unwrap_err().to_string()
}

#[test]
fn bad_traces_are_one_line_errors_naming_the_offset() {
    let good = stream(1, 5, &[ts(1), e(READ, 8, 0x1000)]);
    // Truncated inside the footer: the partial record starts where the footer does.
    let cut = good.len() - 5;
    let msg = error_of(good[..cut].to_vec());
    assert!(msg.contains(&format!("at byte offset {}", good.len() - 12)) && msg.contains("partial 12-byte record of 7 bytes"), "{msg}");
    // An unknown record type, after the 7 records of the stream's start.
    let msg = error_of(stream(1, 5, &[ts(1), e(999, 8, 0)]));
    assert!(msg.contains("at byte offset 72") && msg.contains("unknown record type 999"), "{msg}");
    // Not a drmemtrace file, and a version from the future.
    let msg = error_of(b"hello, world, this is text".to_vec());
    assert!(msg.contains("at byte offset 0") && msg.contains("not a drmemtrace trace"), "{msg}");
    let mut future = stream(1, 5, &[]);
    future[4..12].copy_from_slice(&8u64.to_le_bytes());
    let msg = error_of(future);
    assert!(msg.contains("drmemtrace version 8; vmlab reads versions 1 to 7"), "{msg}");
    // A cache-filtered trace holds a cache's misses, not the program's references.
    let mut filtered = stream(1, 5, &[ts(1)]);
    filtered[24 + 4..24 + 12].copy_from_slice(&0x41u64.to_le_bytes());
    let msg = error_of(filtered);
    assert!(msg.contains("at byte offset 24") && msg.contains("cache-filtered"), "{msg}");
    // An access with no process to belong to.
    let orphan = [e(HEADER, 0, 7), ts(1), e(READ, 8, 0x1000)].concat();
    let msg = error_of(orphan);
    assert!(msg.contains("at byte offset 24") && msg.contains("before the thread's PID record"), "{msg}");
    // An access before the first timestamp.
    let early = [e(HEADER, 0, 7), e(PID, 4, 5), e(READ, 8, 0x1000)].concat();
    let msg = error_of(early);
    assert!(msg.contains("at byte offset 24") && msg.contains("before the trace's first timestamp"), "{msg}");
    // Compressions vmlab does not read are named.
    for (magic, name) in [(&b"\xFF\x06\x00\x00sNaPpY"[..], "snappy"), (&[0x04, 0x22, 0x4D, 0x18][..], "lz4"), (b"BZh9", "bzip2")] {
        let msg = error_of([magic, &[0u8; 40][..]].concat());
        assert!(msg.contains(&format!("{name}-compressed")) && msg.contains("at byte offset 0"), "{msg}");
    }
    assert!(!msg.contains('\n'));
}

#[test]
fn directories_without_traces_say_what_they_hold() {
    let dir = tempfile::tempdir().unwrap();
    let msg = DrmemtraceReader::open(dir.path()).map(|_| ()).unwrap_err().to_string();
    assert!(msg.contains("no drmemtrace trace files"), "{msg}");
    std::fs::create_dir(dir.path().join("raw")).unwrap();
    let msg = DrmemtraceReader::open(dir.path()).map(|_| ()).unwrap_err().to_string();
    assert!(msg.contains("drraw2trace"), "{msg}");
    let msg = DrmemtraceReader::open(&dir.path().join("missing.trace.zip")).map(|_| ()).unwrap_err().to_string();
    assert!(msg.contains("missing.trace.zip"), "{msg}");
}
