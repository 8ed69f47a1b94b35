//! A live process's address space as records: its VMAs from /proc/PID/maps and one read
//! of every page /proc/PID/pagemap reports present (or swapped). Replaying them builds
//! any page table for the process's real layout (`vmlab pt snapshot PID`).

use super::{MapFlags, Record, VecSource};
use crate::error::{Error, Result};
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

const PRESENT: u64 = 1 << 63;
const SWAPPED: u64 = 1 << 62;
/// Regions larger than this are scanned too, but a reservation this big (e.g. a GC heap)
/// is rarely worth reading page by page; cap the scan per region.
const MAX_SCAN_PAGES: u64 = 1 << 26;

/// Records describing process `pid`: an Mmap per VMA, then a 1-byte read of each
/// resident page.
pub(crate) fn snapshot(pid: u32) -> Result<VecSource> {
    let maps_path = PathBuf::from(format!("/proc/{pid}/maps"));
    let maps = std::fs::read_to_string(&maps_path).map_err(|e| Error::io(&maps_path, e))?;
    let pm_path = PathBuf::from(format!("/proc/{pid}/pagemap"));
    let mut pagemap = std::fs::File::open(&pm_path).map_err(|e| Error::io(&pm_path, e))?;
    let mut records = Vec::new();
    let mut resident = Vec::new();
    for (n, line) in maps.lines().enumerate() {
        let mut f = line.split_whitespace();
        let (range, perms) = (f.next().unwrap_or(""), f.next().unwrap_or(""));
        let bad = || Error::Import { source_name: maps_path.display().to_string(), line: n as u64 + 1, msg: format!("unexpected line `{line}`") };
        let (s, e) = range.split_once('-').ok_or_else(bad)?;
        let start = u64::from_str_radix(s, 16).map_err(|_| bad())?;
        let end = u64::from_str_radix(e, 16).map_err(|_| bad())?;
        let path = line.splitn(6, char::is_whitespace).filter(|s| !s.is_empty()).nth(5).unwrap_or("");
        if start >> 47 != 0 {
            continue; // [vsyscall] and kernel-half mappings
        }
        let p = perms.as_bytes();
        let prot = (p.first() == Some(&b'r')) as u8 | ((p.get(1) == Some(&b'w')) as u8) << 1 | ((p.get(2) == Some(&b'x')) as u8) << 2;
        let mut flags = if p.get(3) == Some(&b's') { MapFlags::SHARED } else { MapFlags::PRIVATE };
        if path.starts_with('/') {
            flags = flags.union(MapFlags::FILE);
        }
        records.push(Record::Mmap { pid, start, len: end - start, prot, flags });
        let pages = ((end - start) >> 12).min(MAX_SCAN_PAGES);
        let mut buf = vec![0u8; (pages * 8) as usize];
        if pagemap.seek(SeekFrom::Start((start >> 12) * 8)).is_err() || pagemap.read_exact(&mut buf).is_err() {
            continue;
        }
        for (i, c) in buf.chunks_exact(8).enumerate() {
            let v = u64::from_le_bytes(c.try_into().unwrap());
            if v & (PRESENT | SWAPPED) != 0 {
                resident.push(Record::read(start + ((i as u64) << 12), 1, pid));
            }
        }
    }
    records.extend(resident);
    let mut src = VecSource::new("proc-snapshot", records);
    src.meta_mut().command = vec![format!("pid {pid}")];
    Ok(src)
}
