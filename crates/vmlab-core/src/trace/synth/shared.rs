//! The Itanium paper's "extreme" benchmark (Chapman et al. §4.1): n processes that all
//! touch the same p pages, switching after each burst. The pages are shared data
//! (`MAP_SHARED`, read: stresses the DTLB), the program's text (a private, file-backed,
//! read/execute mapping, fetched: stresses the ITLB), or both, one access each in turn.

use super::gen::Generator;
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::{Dep, MapFlags, Record};

pub(crate) fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "shared",
        description: "extreme benchmark: `procs` processes (forked from `pid`) touching the same `pages` pages in turn (MAP_SHARED data, program text, or both), `burst` accesses per time slice",
        params: vec![
            param("procs", "4", "number of processes n"),
            param("pages", "64", "shared pages p"),
            param("side", "data", "data (read MAP_SHARED pages: DTLB), instr (fetch from the program's text: ITLB) or both (alternately)"),
            param("burst", "64", "accesses per time slice (default: one pass over the pages)"),
            base_param(),
        ],
    }
}

struct Shared {
    base: u64,
    /// Where the data pages start and the text pages start (None: that side unused).
    data: Option<u64>,
    text: Option<u64>,
    /// Both sides: the next access is a fetch.
    fetch_next: bool,
    procs: u32,
    pages: u64,
    burst: u64,
    /// Process running now (index), accesses left in its slice, page cursor.
    cur: u32,
    left: u64,
    cursor: u64,
}

pub(crate) fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
    let procs = p.int("procs")?;
    let pages = p.count("pages")?;
    let burst = p.count("burst")?;
    p.require((1..=65535).contains(&procs), "procs", "1 to 65535 processes")?;
    p.require(pages >= 1, "pages", "at least 1")?;
    p.require(burst >= 1, "burst", "at least 1")?;
    p.require(pages <= 1 << 28, "pages", "at most 2^28 (1 TiB)")?;
    let side = p.choice("side", &["data", "instr", "both"])?;
    let base = p.base()?;
    // With both sides, the text starts at the next GiB boundary after the data.
    let (data, text) = match side.as_str() {
        "data" => (Some(base), None),
        "instr" => (None, Some(base)),
        _ => (Some(base), Some(base + (pages * 4096).next_multiple_of(1 << 30))),
    };
    Ok(Box::new(Shared { base, data, text, fetch_next: true, procs: procs as u32, pages, burst, cur: procs as u32 - 1, left: 0, cursor: 0 }))
}

impl Generator for Shared {
    fn base(&self) -> u64 {
        self.base
    }
    fn setup(&mut self, pid: u32, out: &mut Vec<Record>) {
        use crate::trace::record::prot;
        if let Some(start) = self.data {
            out.push(Record::Mmap { pid, start, len: self.pages * 4096, prot: prot::READ | prot::WRITE, flags: MapFlags::SHARED });
        }
        if let Some(start) = self.text {
            out.push(Record::Mmap { pid, start, len: self.pages * 4096, prot: prot::READ | prot::EXEC, flags: MapFlags::FILE });
        }
        for k in 1..self.procs {
            out.push(Record::Fork { parent: pid, child: pid + k });
        }
    }
    fn emit(&mut self, n: u64, pid: u32, out: &mut Vec<Record>) {
        for _ in 0..n {
            if self.left == 0 {
                self.cur = (self.cur + 1) % self.procs;
                out.push(Record::ContextSwitch { pid: pid + self.cur });
                self.left = self.burst;
            }
            self.left -= 1;
            let page = self.cursor % self.pages;
            let line = (self.cursor / self.pages) % 64;
            let off = page * 4096 + line * 64;
            let pid = pid + self.cur;
            // The address is a counter's: independent.
            match (self.data, self.text) {
                (Some(d), None) => out.push(Record::read(d + off, 8, pid).with_dep(Dep::NONE)),
                (None, Some(t)) => out.push(Record::fetch(t + off, 4, pid).with_dep(Dep::NONE)),
                (Some(d), Some(t)) => {
                    // A fetch, then a read, of the same page (one access each).
                    if self.fetch_next {
                        out.push(Record::fetch(t + off, 4, pid).with_dep(Dep::NONE));
                        self.fetch_next = false;
                        continue;
                    }
                    out.push(Record::read(d + off, 8, pid).with_dep(Dep::NONE));
                    self.fetch_next = true;
                }
                (None, None) => unreachable!("a side is always chosen"),
            }
            self.cursor += 1;
        }
    }
}
