//! The .vmt format: lossless round trips, and a clear error (never a panic, never a
//! silently short read) for truncated, corrupted or foreign input.

use proptest::prelude::*;
use std::io::Cursor;
use std::path::Path;
use vmlab::addr::AccessKind;
use vmlab::trace::vmt::{VmtReader, VmtWriter, BLOCK_RECORDS};
use vmlab::trace::{Access, Dep, MapFlags, Record, TraceMeta, TraceSource};

/// A writer over an in-memory buffer we can take back.
#[derive(Clone, Default)]
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn meta() -> TraceMeta {
    TraceMeta { source: "test".into(), command: vec!["prog".into(), "arg".into()], source_page_size: Some(4096), ..Default::default() }
}

fn encode(records: &[Record]) -> Vec<u8> {
    let sink = Shared::default();
    let mut w = VmtWriter::new(sink.clone(), &meta(), Path::new("mem")).unwrap();
    w.write_all(records).unwrap();
    assert_eq!(w.finish().unwrap(), records.len() as u64);
    let v = sink.0.lock().unwrap().clone();
    v
}

fn decode(bytes: Vec<u8>) -> vmlab::Result<(TraceMeta, Vec<Record>)> {
    let mut r = VmtReader::from_reader(Cursor::new(bytes), Path::new("mem.vmt"))?;
    let mut all = Vec::new();
    let mut buf = Vec::new();
    while r.next_batch(&mut buf)? {
        all.extend_from_slice(&buf);
    }
    Ok((r.meta().clone(), all))
}

/// Every dependence a record can carry: unknown, none, one byte (1..=127, the plain
/// decoding loop's) and two bytes (128..=254).
fn dep_strategy() -> impl Strategy<Value = Dep> {
    prop_oneof![Just(Dep::UNKNOWN), Just(Dep::NONE), Just(Dep::on_load(1)), any::<u8>().prop_map(Dep)]
}

fn record_strategy() -> impl Strategy<Value = Record> {
    let addr = prop_oneof![Just(0u64), Just(u64::MAX), any::<u64>(), 0x7f00_0000_0000u64..0x7f00_0010_0000];
    prop_oneof![
        6 => (0u8..3, addr.clone(), any::<u16>(), prop_oneof![Just(1u32), any::<u32>()], dep_strategy()).prop_map(|(k, vaddr, size, pid, dep)| {
            let kind = [AccessKind::Read, AccessKind::Write, AccessKind::Fetch][k as usize];
            Record::Access(Access { vaddr, pid, size, kind, dep })
        }),
        1 => any::<u64>().prop_map(Record::Tick),
        1 => (any::<u32>(), addr.clone(), any::<u64>(), any::<u8>(), any::<u8>())
            .prop_map(|(pid, start, len, prot, f)| Record::Mmap { pid, start, len, prot, flags: MapFlags(f) }),
        1 => (any::<u32>(), addr.clone(), any::<u64>()).prop_map(|(pid, start, len)| Record::Munmap { pid, start, len }),
        1 => (any::<u32>(), addr.clone(), any::<u64>(), any::<u8>()).prop_map(|(pid, start, len, prot)| Record::Mprotect { pid, start, len, prot }),
        1 => (any::<u32>(), addr).prop_map(|(pid, end)| Record::Brk { pid, end }),
        1 => (any::<u32>(), any::<u32>()).prop_map(|(parent, child)| Record::Fork { parent, child }),
        1 => any::<u32>().prop_map(|pid| Record::Exit { pid }),
        1 => any::<u32>().prop_map(|pid| Record::ContextSwitch { pid }),
    ]
}

proptest! {
    #![proptest_config(crate::common::proptest_config(200))]
    #[test]
    fn round_trip_is_lossless(records in proptest::collection::vec(record_strategy(), 0..600)) {
        let (m, back) = decode(encode(&records)).unwrap();
        prop_assert_eq!(m, meta());
        prop_assert_eq!(back, records);
    }

    /// Random bytes after a valid header never panic and never decode "successfully"
    /// into a different record stream.
    #[test]
    fn mutated_files_error_or_decode_exactly(records in proptest::collection::vec(record_strategy(), 1..200),
                                             flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4)) {
        let good = encode(&records);
        let mut bad = good.clone();
        for (i, x) in flips {
            let at = i.index(bad.len());
            bad[at] ^= x;
        }
        if let Ok((_, back)) = decode(bad) {
            prop_assert_eq!(back, records, "a corrupted file decoded to different records");
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), keep_magic in any::<bool>()) {
        let mut b = bytes;
        if keep_magic && b.len() >= 8 {
            b[..8].copy_from_slice(b"VMLABTRC");
        }
        let _ = decode(b);
    }
}

fn stream(n: usize) -> Vec<Record> {
    (0..n).map(|i| Record::read(0x1000 + i as u64 * 64, 8, 1)).collect()
}

#[test]
fn block_boundaries() {
    for n in [0, 1, BLOCK_RECORDS - 1, BLOCK_RECORDS, BLOCK_RECORDS + 1, 2 * BLOCK_RECORDS + 7] {
        let recs = stream(n);
        let (_, back) = decode(encode(&recs)).unwrap();
        assert_eq!(back.len(), n);
        assert_eq!(back, recs);
    }
}

#[test]
fn sequential_stream_costs_about_a_byte_per_record_before_compression_and_less_after() {
    let bytes = encode(&stream(200_000));
    assert!(bytes.len() < 200_000 / 10, "{} bytes for 200k stream records", bytes.len());
}

#[test]
fn truncation_at_every_offset_is_an_error_with_the_offset() {
    let mut recs = stream(300);
    recs.push(Record::Mmap { pid: 2, start: 0x5000, len: 4096, prot: 3, flags: MapFlags::SHARED });
    recs.push(Record::Tick(99));
    let good = encode(&recs);
    for cut in 0..good.len() {
        let e = decode(good[..cut].to_vec()).expect_err(&format!("truncated at {cut} decoded"));
        let msg = e.to_string();
        assert!(msg.starts_with("mem.vmt: at byte offset "), "{msg}");
    }
}

#[test]
fn every_single_byte_corruption_is_detected() {
    let good = encode(&stream(500));
    for at in 0..good.len() {
        let mut bad = good.clone();
        bad[at] ^= 0x5a;
        match decode(bad) {
            Err(e) => assert!(e.to_string().contains("at byte offset"), "{e}"),
            Ok((_, back)) => assert_eq!(back, stream(500), "byte {at}"),
        }
    }
}

/// `file` as another format version (its header checksum recomputed): what an older or
/// newer writer would have framed around the same blocks.
fn as_version(mut file: Vec<u8>, version: u16) -> Vec<u8> {
    file[8..10].copy_from_slice(&version.to_le_bytes());
    let crc_at = 16 + u32::from_le_bytes(file[12..16].try_into().unwrap()) as usize;
    let crc = crc32fast::hash(&file[..crc_at]);
    file[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
    file
}

#[test]
fn the_writer_writes_version_2() {
    let v = encode(&stream(3));
    assert_eq!(u16::from_le_bytes([v[8], v[9]]), 2);
    let r = VmtReader::from_reader(Cursor::new(v), Path::new("mem.vmt")).unwrap();
    assert_eq!(r.version(), 2);
}

/// A version-1 file, byte by byte: the header, one block of three records (a read, a
/// pid change with an explicit size, a tick) and the end marker, as the version-1
/// writer framed them. It reads, with every dependence unknown.
#[test]
fn version_1_files_still_read_with_unknown_deps() {
    let json = br#"{"source":"v1","command":[],"source_page_size":4096,"extra":{}}"#;
    let mut v = b"VMLABTRC".to_vec();
    v.extend_from_slice(&1u16.to_le_bytes());
    v.extend_from_slice(&0u16.to_le_bytes());
    v.extend_from_slice(&(json.len() as u32).to_le_bytes());
    v.extend_from_slice(json);
    let crc = crc32fast::hash(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    // Read 8 B at 0x1000 (zigzag 0x2000, varint 80 40); pid 2 writes 3 B at 0x1010
    // (delta 0x10, zigzag 0x20); Tick(5).
    let raw = [0x0c, 0x80, 0x40, 0x01 | 7 << 2 | 0x20, 3, 0, 2, 0x20, 0x03, 5];
    let comp = zstd::bulk::compress(&raw, 3).unwrap();
    v.push(b'B');
    for x in [3, raw.len() as u32, comp.len() as u32, crc32fast::hash(&comp)] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.extend_from_slice(&comp);
    let mut end = vec![b'E'];
    end.extend_from_slice(&3u64.to_le_bytes());
    end.extend_from_slice(&1u64.to_le_bytes());
    let crc = crc32fast::hash(&end);
    end.extend_from_slice(&crc.to_le_bytes());
    v.extend_from_slice(&end);

    let r = VmtReader::from_reader(Cursor::new(v.clone()), Path::new("v1.vmt")).unwrap();
    assert_eq!(r.version(), 1);
    let (m, recs) = decode(v.clone()).unwrap();
    assert_eq!(m.source, "v1");
    assert_eq!(recs, vec![Record::read(0x1000, 8, 0), Record::write(0x1010, 3, 2), Record::Tick(5)]);
    assert!(recs.iter().all(|r| !matches!(r, Record::Access(a) if a.dep.is_known())));
    // Its content hash needs no decoding, and the version does not enter it.
    let dir = tempfile::tempdir().unwrap();
    let (p1, p2) = (dir.path().join("v1.vmt"), dir.path().join("v2.vmt"));
    std::fs::write(&p1, &v).unwrap();
    std::fs::write(&p2, as_version(v, 2)).unwrap();
    assert_eq!(vmlab::trace::vmt::content_hash(&p1).unwrap(), vmlab::trace::vmt::content_hash(&p2).unwrap());
    // The same records written now (no dependence known) differ only in the header.
    let (_, again) = decode(encode(&recs)).unwrap();
    assert_eq!(again, recs);
}

#[test]
fn dependences_survive_blocks_and_every_decoding_path() {
    // Plain runs with one-byte dependences, two-byte ones, repeats, explicit sizes and
    // pid changes, across a block boundary.
    let recs: Vec<Record> = (0..BLOCK_RECORDS as u64 + 500)
        .map(|i| {
            let kind = [AccessKind::Read, AccessKind::Read, AccessKind::Write, AccessKind::Fetch][(i % 4) as usize];
            let dep = [Dep::UNKNOWN, Dep::NONE, Dep::on_load(1), Dep::on_load(127), Dep::on_load(128), Dep::on_load(254)][(i % 6) as usize];
            let size = if i % 10 == 0 { 12 } else { 8 };
            let pid = 1 + (i / 1000 % 2) as u32;
            Record::Access(Access { vaddr: 0x1000 + (i / 3) * 64, pid, size, kind, dep })
        })
        .collect();
    let (_, back) = decode(encode(&recs)).unwrap();
    assert_eq!(back, recs);
}

#[test]
fn garbage_and_wrong_versions_are_named() {
    let e = decode(b"hello world, this is not a trace".to_vec()).unwrap_err().to_string();
    assert!(e.contains("bad magic"), "{e}");
    let e = decode(Vec::new()).unwrap_err().to_string();
    assert!(e.contains("bad magic"), "{e}");
    let v = as_version(encode(&stream(3)), 9);
    let e = decode(v).unwrap_err().to_string();
    assert!(e.contains("version 9") && e.contains("at byte offset 8"), "{e}");
    let e = decode(as_version(encode(&stream(3)), 0)).unwrap_err().to_string();
    assert!(e.contains("version 0"), "{e}");
}

#[test]
fn files_report_their_length_and_a_content_hash() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.vmt");
    let mut w = VmtWriter::create(&p, &meta()).unwrap();
    w.write_all(&stream(1000)).unwrap();
    w.finish().unwrap();
    let r = VmtReader::open(&p).unwrap();
    assert_eq!(r.len_hint(), Some(1000));
    let h1 = vmlab::trace::vmt::content_hash(&p).unwrap();
    let q = dir.path().join("u.vmt");
    let mut w = VmtWriter::create(&q, &meta()).unwrap();
    w.write_all(&stream(1001)).unwrap();
    w.finish().unwrap();
    assert_ne!(h1, vmlab::trace::vmt::content_hash(&q).unwrap());
    assert_eq!(h1, vmlab::trace::vmt::content_hash(&p).unwrap());
}

/// A file whose one block holds `raw` as its decompressed bytes and claims `count`
/// records, with a valid checksum and end marker: what a buggy writer (not a flipped
/// bit, which the CRC catches) would leave. The block starts at the returned offset.
fn file_with_block(raw: &[u8], count: u32) -> (Vec<u8>, u64) {
    let empty = encode(&[]);
    let mut v = empty[..empty.len() - 21].to_vec(); // the header, without the end marker
    let at = v.len() as u64;
    let comp = zstd::bulk::compress(raw, 1).unwrap();
    v.push(b'B');
    for x in [count, raw.len() as u32, comp.len() as u32, crc32fast::hash(&comp)] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.extend_from_slice(&comp);
    let mut end = vec![b'E'];
    end.extend_from_slice(&(count as u64).to_le_bytes());
    end.extend_from_slice(&1u64.to_le_bytes());
    let crc = crc32fast::hash(&end);
    end.extend_from_slice(&crc.to_le_bytes());
    v.extend_from_slice(&end);
    (v, at)
}

#[test]
fn malformed_records_behind_a_valid_checksum_are_named() {
    // A read of 8 bytes, delta +1 (zigzag 2): the well-formed prefix of each case.
    let ok = [0x0c, 0x02];
    let cases: &[(&[u8], u32, &str)] = &[
        (&[0x80], 1, "record runs past the end of the block"),
        (&[0x0c | 0x80, 0x02], 1, "record runs past the end of the block"),
        (&[0x0c | 0x80, 0x02, 0xff, 0x01], 1, "dependence distance 255"),
        (&[0x0c | 0x80 | 0x40, 0x80, 0x80, 0x04], 1, "dependence distance 65536"),
        (&[0x03 | 8 << 2], 1, "unknown event code 8"),
        (&[0x0c, 0x80, 0x80], 1, "record runs past the end of the block"),
        (&[0x0c | 7 << 2, 0x01], 1, "record runs past the end of the block"),
        (&[0x0c, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], 1, "varint overflows 64 bits"),
        (&[0x0c | 0x20, 0x80, 0x80, 0x80, 0x80, 0x10, 0x02], 1, "process id exceeds 32 bits"),
        (&[0x03 | 1 << 2, 0x01, 0x02], 1, "record runs past the end of the block"),
        (&[0x0c, 0x02, 0x0c, 0x02], 1, "bytes left over after the block's last record"),
        (&[0x0c, 0x02], 2, "record runs past the end of the block"),
    ];
    for &(body, count, want) in cases {
        let raw: Vec<u8> = ok.iter().chain(body).copied().collect();
        let (file, at) = file_with_block(&raw, count + 1);
        let e = decode(file).expect_err(&format!("{body:02x?} decoded")).to_string();
        assert!(e.contains(want), "{body:02x?}: {e}");
        assert!(e.contains(&format!("at byte offset {at}")), "{body:02x?}: {e}");
    }
    // The same framing with well-formed bytes decodes, so each error above is the body's.
    let (file, _) = file_with_block(&[0x0c, 0x02, 0x4d, 0x03 | 6 << 2, 0x07], 3);
    let (_, recs) = decode(file).unwrap();
    assert_eq!(recs, vec![Record::read(1, 8, 0), Record::access(AccessKind::Write, 2, 8, 0), Record::Exit { pid: 7 }]);
    // With dependences: none, 254 loads back (two bytes, the largest), 1 back.
    let (file, _) = file_with_block(&[0x0c | 0x80, 0x02, 0x00, 0x0c | 0xc0, 0xfe, 0x01, 0x0d | 0xc0, 0x01], 3);
    let (_, recs) = decode(file).unwrap();
    let with = |r: Record, dep: Dep| match r {
        Record::Access(a) => Record::Access(Access { dep, ..a }),
        r => r,
    };
    assert_eq!(
        recs,
        vec![with(Record::read(1, 8, 0), Dep::NONE), with(Record::read(2, 8, 0), Dep::on_load(254)), with(Record::write(3, 8, 0), Dep::on_load(1))]
    );
    // Bit 7 in a version-1 file: malformed there, named with the block's offset.
    let (file, at) = file_with_block(&[0x0c, 0x02, 0x0c | 0x80, 0x02, 0x00], 2);
    let e = decode(as_version(file, 1)).unwrap_err().to_string();
    assert!(e.contains("unknown access tag 0x8c") && e.contains(&format!("at byte offset {at}")), "{e}");
}

proptest! {
    #![proptest_config(crate::common::proptest_config(300))]
    /// Arbitrary decompressed bytes behind a valid checksum: an error naming the block,
    /// or exactly `count` records; never a panic.
    #[test]
    fn arbitrary_block_bytes_error_or_decode(raw in proptest::collection::vec(any::<u8>(), 1..300), count in 1u32..300) {
        let (file, at) = file_with_block(&raw, count.min(raw.len() as u32));
        match decode(file) {
            Err(e) => prop_assert!(e.to_string().contains(&format!("at byte offset {at}")), "{}", e),
            Ok((_, recs)) => prop_assert_eq!(recs.len() as u32, count.min(raw.len() as u32)),
        }
    }
}
