//! STRAWMAN (Romer Table 4-3: "a program that repeatedly alternates references to two
//! conflicting cache pages"): `pages` hot pages `spacing` bytes apart, referenced a line
//! at a time in turn (line 0 of each page, then line 1 of each, ...). With the default
//! spacing (512 KiB, the colour span of Romer's 512 KiB direct-mapped L2) every hot page
//! has the same colour under page colouring, so each reference is a conflict miss; bin
//! hopping gives them different colours. With `fetch = 1` the references are
//! instruction fetches: Romer §4.5.2's *stab*, a caller and a shared-library callee at
//! overlapping page offsets.

use super::gen::{mmap_rw, Generator};
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::record::prot;
use crate::trace::{Dep, MapFlags, Record};

pub(crate) fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "strawman",
        description: "Romer's cache-conflict strawman: `pages` hot pages `spacing` apart (same colour under page colouring), referenced a line at a time in turn; fetch=1 gives stab (code pages)",
        params: vec![
            param("pages", "2", "hot pages"),
            param("spacing", "512K", "bytes between hot pages (a multiple of 4K)"),
            param("line", "32", "bytes between consecutive references within a page"),
            param("fetch", "0", "1: the references are instruction fetches (stab)"),
            base_param(),
        ],
    }
}

struct Strawman {
    base: u64,
    pages: u64,
    spacing: u64,
    line: u64,
    fetch: bool,
    i: u64,
}

pub(crate) fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
    let pages = p.int("pages")?;
    let spacing = p.bytes("spacing")?;
    let line = p.bytes("line")?;
    let fetch = p.int("fetch")?;
    p.require(pages >= 1, "pages", "at least 1")?;
    p.require(spacing >= 4096 && spacing % 4096 == 0, "spacing", "a positive multiple of 4K")?;
    p.require((1..=4096).contains(&line) && 4096 % line == 0, "line", "a divisor of 4096")?;
    p.require(fetch <= 1, "fetch", "0 or 1")?;
    let base = p.base()?;
    p.require(pages.checked_mul(spacing).and_then(|b| b.checked_add(base)).is_some(), "spacing", "pages x spacing past the address space")?;
    Ok(Box::new(Strawman { base, pages, spacing, line, fetch: fetch == 1, i: 0 }))
}

impl Generator for Strawman {
    fn base(&self) -> u64 {
        self.base
    }
    fn setup(&mut self, pid: u32, out: &mut Vec<Record>) {
        let len = (self.pages - 1) * self.spacing + 4096;
        if self.fetch {
            out.push(Record::Mmap { pid, start: self.base, len, prot: prot::READ | prot::EXEC, flags: MapFlags::PRIVATE });
        } else {
            out.push(mmap_rw(pid, self.base, len));
        }
    }
    fn emit(&mut self, n: u64, pid: u32, out: &mut Vec<Record>) {
        let per_page = 4096 / self.line;
        for _ in 0..n {
            let page = self.i % self.pages;
            let line = (self.i / self.pages) % per_page;
            let va = self.base + page * self.spacing + line * self.line;
            // The address is a counter's: independent.
            let r = if self.fetch { Record::fetch(va, 4, pid) } else { Record::read(va, 8, pid) };
            out.push(r.with_dep(Dep::NONE));
            self.i += 1;
        }
    }
}
