//! `vmlab info`: what a trace contains — record counts, processes, footprint, the VMAs
//! its events describe, and how many distinct pages it touches at each page size.

use super::{Record, TraceSource};
use crate::addr::{format_bytes, AccessKind};
use crate::error::Result;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

#[derive(Clone, Debug, Default, Serialize)]
pub struct RecordCounts {
    pub(crate) records: u64,
    pub(crate) reads: u64,
    pub(crate) writes: u64,
    pub(crate) fetches: u64,
    /// Accesses by what the trace says their address depends on (`Access.dep`): an
    /// earlier load, none, or nothing said.
    pub dependent: u64,
    pub independent: u64,
    pub unknown_deps: u64,
    pub(crate) ticks: u64,
    pub(crate) mmap: u64,
    pub(crate) munmap: u64,
    pub(crate) mprotect: u64,
    pub(crate) brk: u64,
    pub(crate) fork: u64,
    pub(crate) exit: u64,
    pub(crate) context_switch: u64,
}

#[derive(Clone, Debug, Serialize)]
pub(crate) struct VmaInfo {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) prot: String,
    pub(crate) shared: bool,
    pub(crate) file: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct ProcessInfo {
    pub(crate) accesses: u64,
    /// Distinct 4 KiB pages touched.
    pub(crate) pages_4k: u64,
    /// Regions left at the end of the trace (from mmap/munmap/mprotect/brk events).
    pub(crate) vmas: Vec<VmaInfo>,
    /// Accesses that fell outside every region the trace announced.
    pub(crate) accesses_outside_vmas: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct TraceInfo {
    pub(crate) source: String,
    pub(crate) command: Vec<String>,
    pub counts: RecordCounts,
    /// Σ ticks + fetches.
    pub(crate) instructions: u64,
    pub(crate) processes: BTreeMap<u32, ProcessInfo>,
    /// Distinct pages touched, per page size, over all processes.
    pub(crate) pages_touched: BTreeMap<String, u64>,
    pub(crate) footprint_bytes: u64,
}

const HIST_SIZES: [u8; 3] = [12, 21, 30];

/// Read `src` to the end and summarise it. Memory grows with the footprint, not with
/// the trace length.
pub fn summarize(src: &mut dyn TraceSource) -> Result<TraceInfo> {
    let mut counts = RecordCounts::default();
    let mut instructions = 0u64;
    let mut pages: [HashSet<(u32, u64)>; 3] = Default::default();
    let mut procs: BTreeMap<u32, (ProcessInfo, HashSet<u64>, crate::os::vma::VmaSet, Option<u64>)> = BTreeMap::new();
    let mut buf = Vec::new();
    while src.next_batch(&mut buf)? {
        crate::interrupt::check()?;
        for r in &buf {
            counts.records += 1;
            match *r {
                Record::Access(a) => {
                    match (a.dep.distance(), a.dep.is_known()) {
                        (Some(_), _) => counts.dependent += 1,
                        (None, true) => counts.independent += 1,
                        (None, false) => counts.unknown_deps += 1,
                    }
                    match a.kind {
                        AccessKind::Read => counts.reads += 1,
                        AccessKind::Write => counts.writes += 1,
                        AccessKind::Fetch => {
                            counts.fetches += 1;
                            instructions += 1;
                        }
                    }
                    let p = procs.entry(a.pid).or_default();
                    p.0.accesses += 1;
                    if p.2.find(a.vaddr).is_none() {
                        p.0.accesses_outside_vmas += 1;
                    }
                    let last = a.vaddr.saturating_add(a.size.max(1) as u64 - 1);
                    for (i, &shift) in HIST_SIZES.iter().enumerate() {
                        for page in (a.vaddr >> shift)..=(last >> shift) {
                            pages[i].insert((a.pid, page));
                            if i == 0 {
                                p.1.insert(page);
                            }
                        }
                    }
                }
                Record::Tick(n) => {
                    counts.ticks += 1;
                    instructions += n;
                }
                Record::Mmap { pid, start, len, prot, flags } => {
                    counts.mmap += 1;
                    let v = crate::os::vma::Vma {
                        start,
                        end: start.saturating_add(len),
                        perms: crate::addr::Perms::from_prot(prot as u32),
                        flags,
                        object: None,
                        object_start: 0,
                        implicit: false,
                    };
                    procs.entry(pid).or_default().2.insert(v);
                }
                Record::Munmap { pid, start, len } => {
                    counts.munmap += 1;
                    procs.entry(pid).or_default().2.remove_range(start, start.saturating_add(len));
                }
                Record::Mprotect { pid, start, len, prot } => {
                    counts.mprotect += 1;
                    let perms = crate::addr::Perms::from_prot(prot as u32);
                    procs.entry(pid).or_default().2.protect_range(start, start.saturating_add(len), perms);
                }
                Record::Brk { pid, end } => {
                    counts.brk += 1;
                    let p = procs.entry(pid).or_default();
                    match p.3 {
                        None => p.3 = Some(end),
                        Some(start) if end > start => p.2.insert(crate::os::vma::Vma {
                            start,
                            end,
                            perms: crate::addr::Perms::RW_USER,
                            flags: Default::default(),
                            object: None,
                            object_start: 0,
                            implicit: false,
                        }),
                        Some(_) => {}
                    }
                }
                Record::Fork { parent, child } => {
                    counts.fork += 1;
                    let vmas = procs.entry(parent).or_default().2.clone();
                    procs.entry(child).or_default().2 = vmas;
                }
                Record::Exit { .. } => counts.exit += 1,
                Record::ContextSwitch { pid } => {
                    counts.context_switch += 1;
                    procs.entry(pid).or_default();
                }
            }
        }
    }
    let processes = procs
        .into_iter()
        .map(|(pid, (mut info, p4k, vmas, _))| {
            info.pages_4k = p4k.len() as u64;
            info.vmas = vmas
                .iter()
                .map(|v| VmaInfo {
                    start: v.start,
                    end: v.end,
                    prot: v.perms.to_string()[..3].to_string(),
                    shared: v.flags.contains(super::MapFlags::SHARED),
                    file: v.flags.contains(super::MapFlags::FILE),
                })
                .collect();
            (pid, info)
        })
        .collect();
    let pages_touched = HIST_SIZES.iter().zip(pages.iter()).map(|(&s, set)| (format_bytes(1u64 << s), set.len() as u64)).collect();
    let meta = src.meta();
    Ok(TraceInfo {
        source: meta.source.clone(),
        command: meta.command.clone(),
        footprint_bytes: pages[0].len() as u64 * 4096,
        counts,
        instructions,
        processes,
        pages_touched,
    })
}

impl TraceInfo {
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let c = &self.counts;
        let mut s = String::new();
        let _ = writeln!(s, "source        {}", self.source);
        if !self.command.is_empty() {
            let _ = writeln!(s, "command       {}", self.command.join(" "));
        }
        let _ = writeln!(s, "records       {}", c.records);
        let _ = writeln!(s, "accesses      {} reads, {} writes, {} fetches", c.reads, c.writes, c.fetches);
        let _ = writeln!(s, "dependences   {} on an earlier load, {} independent, {} unknown", c.dependent, c.independent, c.unknown_deps);
        let _ = writeln!(s, "instructions  {}", self.instructions);
        let _ = writeln!(
            s,
            "os events     mmap {} munmap {} mprotect {} brk {} fork {} exit {} switch {}",
            c.mmap, c.munmap, c.mprotect, c.brk, c.fork, c.exit, c.context_switch
        );
        let _ = writeln!(s, "footprint     {} ({} distinct 4K pages)", format_bytes(self.footprint_bytes), self.footprint_bytes / 4096);
        let hist: Vec<String> = self.pages_touched.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let _ = writeln!(s, "pages touched {}", hist.join(", "));
        for (pid, p) in &self.processes {
            let _ = writeln!(
                s,
                "pid {pid}: {} accesses, {} pages, {} VMAs, {} accesses outside announced VMAs",
                p.accesses,
                p.pages_4k,
                p.vmas.len(),
                p.accesses_outside_vmas
            );
            for v in p.vmas.iter().take(40) {
                let _ = writeln!(
                    s,
                    "    {:#014x}-{:#014x} {:>8} {}{}{}",
                    v.start,
                    v.end,
                    format_bytes(v.end - v.start),
                    v.prot,
                    if v.shared { " shared" } else { "" },
                    if v.file { " file" } else { "" }
                );
            }
            if p.vmas.len() > 40 {
                let _ = writeln!(s, "    ... {} more", p.vmas.len() - 40);
            }
        }
        s
    }
}
