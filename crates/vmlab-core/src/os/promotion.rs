//! Promotion and demotion (Romer §3.1: "promotion" coalesces adjacent virtual pages into
//! one superpage, "demotion" breaks one into smaller pages), as primitives every
//! page-size policy uses. Superpages must be aligned and contiguous in both address
//! spaces, so a promotion either finds the frames already in place (a reservation, TPS
//! §III-B1: no copy) or copies the pages into a freshly allocated aligned block (Romer's
//! policies, Linux's khugepaged), charging `os.policy.copy_cycles_per_kb`.
//!
//! Each primitive unmaps the old pages (with TLB/walk-cache shootdowns), maps the new
//! ones, keeps the OS page index and the frame accounting in sync, and counts itself in
//! the `policy` section.

use super::address_space::Mapping;
use super::buddy::FrameUse;
use super::Mm;
use crate::addr::{PageSize, Perms, Pid};
use crate::error::Result;
use crate::pt::PageTable;

impl<P: PageTable> Mm<P> {
    /// The pages of [base, base + size) merge into one page of `size` (all smaller than
    /// it, private, with one set of permissions) inside one VMA; returns their common
    /// permissions and the pages.
    fn mergeable(&self, pid: Pid, base: u64, size: PageSize) -> Option<(Perms, Vec<(u64, Mapping)>)> {
        let end = base.checked_add(size.bytes())?;
        let space = self.space(pid)?;
        let vma = space.vmas.find(base)?;
        if !size.is_aligned(base) || !vma.contains_range(base, end) || vma.object.is_some() {
            return None;
        }
        let pages = self.pages_in(pid, base, end);
        let perms = pages.first().map_or(vma.perms, |(_, m)| m.perms);
        let ok = pages.iter().all(|(b, m)| *b >= base && *b + m.size.bytes() <= end && m.size < size && m.object.is_none() && m.perms == perms);
        ok.then_some((perms, pages))
    }

    /// Whether [base, base + size) can be promoted in place onto the block at `pa`:
    /// mergeable, and every mapped page already sits at its natural offset in the block.
    pub(crate) fn can_promote_in_place(&self, pid: Pid, base: u64, size: PageSize, pa: u64) -> bool {
        size.is_aligned(pa) && self.mergeable(pid, base, size).is_some_and(|(_, pages)| pages.iter().all(|(b, m)| m.pa == pa + (b - base)))
    }

    /// Promote [base, base + size) in place onto the aligned block at `pa`. The caller
    /// has checked `can_promote_in_place` and owns every frame of the block as data
    /// (the unmapped ones become untouched data: bloat).
    pub(crate) fn promote_in_place(&mut self, pid: Pid, base: u64, size: PageSize, pa: u64) -> Result<()> {
        let (perms, pages) = self.mergeable(pid, base, size).expect("promote_in_place: checked by the caller");
        let asid = self.space(pid).unwrap().asid;
        for (b, _) in pages {
            self.unmap_page(pid, b);
        }
        self.map_page(pid, asid, base, pa, size, perms, None)?;
        self.pc.promotions += 1;
        self.pc.promotions_in_place += 1;
        Ok(())
    }

    /// Promote [base, base + size) by copying (Romer §3.1; Linux khugepaged's collapse):
    /// allocate a new aligned block, copy the mapped pages into it (the rest of the
    /// block is cleared), free the old frames, map the large page. The whole block is
    /// written, so `size` bytes are charged as copied. Returns false, changing nothing,
    /// if the region cannot be merged or no free block of `size` exists.
    pub fn promote_by_copy(&mut self, pid: Pid, base: u64, size: PageSize) -> Result<bool> {
        let Some((perms, pages)) = self.mergeable(pid, base, size) else { return Ok(false) };
        if !self.reservations.is_empty() && !self.reservations.overlapping(pid, base, base + size.bytes()).is_empty() {
            return Ok(false);
        }
        let Some(pa) = self.mem.try_alloc(size, FrameUse::Data) else { return Ok(false) };
        let asid = self.space(pid).unwrap().asid;
        self.touched.ensure(pa, size);
        for (b, m) in pages {
            for off in (0..m.size.bytes()).step_by(4096) {
                self.rc.note_copy(pid, b + off, super::recolor::COPIED_BY_PROMOTION);
            }
            // The copy keeps what was touched touched.
            for off in (0..m.size.bytes()).step_by(4096) {
                if self.touched.is_touched(m.pa + off) {
                    self.touched.touch(pa + (b - base) + off);
                }
            }
            if let Some(s) = &mut self.shadow {
                s.copy(m.pa, pa + (b - base), m.size);
            }
            self.unmap_page(pid, b);
            self.free_data(m.pa, m.size);
        }
        self.map_page(pid, asid, base, pa, size, perms, None)?;
        self.count_copied_promotion(size);
        Ok(true)
    }

    /// Count a promotion that wrote a whole page of `size`, at `copy_cycles_per_kb`.
    pub(crate) fn count_copied_promotion(&mut self, size: PageSize) {
        self.pc.promotions += 1;
        self.pc.promotions_copied += 1;
        self.pc.bytes_copied += size.bytes();
        self.pc.copy_cycles += (size.bytes() / 1024) * self.copy_cycles_per_kb;
    }

    /// Demote the page at `base` into pages of `to` on the same frames (no copy; Romer
    /// §3.1, Linux's split_huge_page). Sub-pages none of whose frames was ever touched are
    /// freed instead of mapped (as Linux's shrinker of underused huge pages does), which
    /// keeps every mapped base page touched (os/touched.rs). Returns false if no page
    /// larger than `to` starts at `base`.
    pub(crate) fn demote(&mut self, pid: Pid, base: u64, to: PageSize) -> Result<bool> {
        let Some((b, m)) = self.space(pid).and_then(|s| s.mapping_at(base)) else { return Ok(false) };
        if b != base || m.size <= to || m.object.is_some() {
            return Ok(false);
        }
        let asid = self.space(pid).unwrap().asid;
        self.unmap_page(pid, base);
        for off in (0..m.size.bytes()).step_by(to.bytes() as usize) {
            if self.touched.count_range(m.pa + off, to) > 0 {
                self.map_page(pid, asid, base + off, m.pa + off, to, m.perms, None)?;
            } else {
                self.free_data(m.pa + off, to);
            }
        }
        self.pc.demotions += 1;
        Ok(true)
    }
}
