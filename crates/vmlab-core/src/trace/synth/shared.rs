//! The Itanium paper's "extreme" benchmark: n processes that all touch the same p
//! shared pages, switching after each burst.

use super::gen::Generator;
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::{MapFlags, Record};

pub fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "shared",
        description: "extreme benchmark: `procs` processes (forked from `pid`) touching the same `pages` MAP_SHARED pages in turn, `burst` accesses per time slice",
        params: vec![
            param("procs", "4", "number of processes n"),
            param("pages", "64", "shared pages p"),
            param("burst", "64", "accesses per time slice (default: one pass over the pages)"),
            base_param(),
        ],
    }
}

struct Shared {
    base: u64,
    procs: u32,
    pages: u64,
    burst: u64,
    /// Process running now (index), accesses left in its slice, page cursor.
    cur: u32,
    left: u64,
    cursor: u64,
}

pub fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
    let procs = p.int("procs")?;
    let pages = p.count("pages")?;
    let burst = p.count("burst")?;
    p.require((1..=65535).contains(&procs), "procs", "1 to 65535 processes")?;
    p.require(pages >= 1, "pages", "at least 1")?;
    p.require(burst >= 1, "burst", "at least 1")?;
    Ok(Box::new(Shared { base: p.base()?, procs: procs as u32, pages, burst, cur: procs as u32 - 1, left: 0, cursor: 0 }))
}

impl Generator for Shared {
    fn base(&self) -> u64 {
        self.base
    }
    fn setup(&mut self, pid: u32, out: &mut Vec<Record>) {
        out.push(Record::Mmap {
            pid,
            start: self.base,
            len: self.pages * 4096,
            prot: crate::trace::record::prot::READ | crate::trace::record::prot::WRITE,
            flags: MapFlags::SHARED,
        });
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
            self.cursor += 1;
            out.push(Record::read(self.base + page * 4096 + line * 64, 8, pid + self.cur));
        }
    }
}
