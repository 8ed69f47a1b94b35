//! Addresses, page sizes, permissions and address-space identifiers.
//!
//! Page sizes are any power of two >= 4 KiB (TPS needs every 2^n); x86's 4K/2M/1G
//! are just three of them, so a size is stored as its log2 ("shift").

use std::fmt;

/// Smallest page shift vmlab models (4 KiB).
pub(crate) const MIN_PAGE_SHIFT: u8 = 12;
/// Largest page shift: pages up to 2^48 bytes (far beyond any real MMU).
pub(crate) const MAX_PAGE_SHIFT: u8 = 48;

/// A page size, 2^shift bytes with `MIN_PAGE_SHIFT <= shift <= MAX_PAGE_SHIFT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageSize(u8);

impl PageSize {
    pub const K4: PageSize = PageSize(12);
    pub(crate) const M2: PageSize = PageSize(21);
    pub(crate) const G1: PageSize = PageSize(30);

    /// The page size 2^shift, or an error naming the bad value.
    pub(crate) fn from_shift(shift: u8) -> Result<PageSize, String> {
        if (MIN_PAGE_SHIFT..=MAX_PAGE_SHIFT).contains(&shift) {
            Ok(PageSize(shift))
        } else {
            Err(format!("page size 2^{shift} is outside 2^{MIN_PAGE_SHIFT}..2^{MAX_PAGE_SHIFT}"))
        }
    }

    /// For shifts that come from an already-validated size (page-table entries, TLB
    /// entries): no check in release builds.
    #[inline(always)]
    pub const fn from_valid_shift(shift: u8) -> PageSize {
        debug_assert!(shift >= MIN_PAGE_SHIFT && shift <= MAX_PAGE_SHIFT);
        PageSize(shift)
    }

    /// The page size of `bytes` bytes, which must be a power of two >= 4 KiB.
    pub fn from_bytes(bytes: u64) -> Result<PageSize, String> {
        if bytes == 0 || !bytes.is_power_of_two() {
            return Err(format!("page size {bytes} is not a power of two"));
        }
        PageSize::from_shift(bytes.trailing_zeros() as u8)
    }

    #[inline(always)]
    pub(crate) const fn shift(self) -> u8 {
        self.0
    }
    #[inline(always)]
    pub const fn bytes(self) -> u64 {
        1u64 << self.0
    }
    /// Mask of the offset bits inside one page.
    #[inline(always)]
    pub(crate) const fn offset_mask(self) -> u64 {
        self.bytes() - 1
    }
    /// Round `va` down to the start of its page.
    #[inline(always)]
    pub const fn align_down(self, va: u64) -> u64 {
        va & !self.offset_mask()
    }
    #[inline(always)]
    pub const fn is_aligned(self, a: u64) -> bool {
        a & self.offset_mask() == 0
    }
    /// Number of 4 KiB base pages in one page of this size.
    #[inline(always)]
    pub const fn base_pages(self) -> u64 {
        1u64 << (self.0 - MIN_PAGE_SHIFT)
    }
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_bytes(self.bytes()))
    }
}

/// Format a byte count as the shortest exact unit: 4K, 2M, 1G, 12K, 5000B.
pub(crate) fn format_bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 5] = [(1 << 50, "P"), (1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (scale, suffix) in UNITS {
        if b >= scale && b.is_multiple_of(scale) {
            return format!("{}{}", b / scale, suffix);
        }
    }
    format!("{b}B")
}

/// Parse "4K", "4KiB", "2M", "1G", "4096", "16GiB" into bytes.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let stripped = lower.strip_suffix("ib").or_else(|| lower.strip_suffix('b')).unwrap_or(&lower);
    let (num, mult) = match stripped.chars().last() {
        Some('k') => (&stripped[..stripped.len() - 1], 1u64 << 10),
        Some('m') => (&stripped[..stripped.len() - 1], 1u64 << 20),
        Some('g') => (&stripped[..stripped.len() - 1], 1u64 << 30),
        Some('t') => (&stripped[..stripped.len() - 1], 1u64 << 40),
        Some('p') => (&stripped[..stripped.len() - 1], 1u64 << 50),
        _ => (stripped, 1u64),
    };
    let n: u64 = num.trim().parse().map_err(|_| format!("`{s}` is not a size (use e.g. 4096, 4K, 2M, 1G)"))?;
    n.checked_mul(mult).ok_or_else(|| format!("`{s}` overflows 64 bits"))
}

/// Access permissions of a mapping (R/W/X plus user-accessible).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Perms(u8);

impl Perms {
    pub(crate) const NONE: Perms = Perms(0);
    pub(crate) const R: Perms = Perms(1);
    pub(crate) const W: Perms = Perms(2);
    pub(crate) const X: Perms = Perms(4);
    pub(crate) const USER: Perms = Perms(8);
    pub(crate) const RW: Perms = Perms(1 | 2);
    pub(crate) const RWX_USER: Perms = Perms(1 | 2 | 4 | 8);
    pub const RW_USER: Perms = Perms(1 | 2 | 8);

    #[inline(always)]
    pub(crate) const fn bits(self) -> u8 {
        self.0
    }
    #[inline(always)]
    pub const fn from_bits(b: u8) -> Perms {
        Perms(b & 0xf)
    }
    #[inline(always)]
    pub(crate) const fn contains(self, other: Perms) -> bool {
        self.0 & other.0 == other.0
    }
    #[inline(always)]
    pub(crate) const fn union(self, other: Perms) -> Perms {
        Perms(self.0 | other.0)
    }
    /// The permission an access of `kind` needs.
    #[inline(always)]
    pub(crate) const fn needed_for(kind: AccessKind) -> Perms {
        match kind {
            AccessKind::Read => Perms::R,
            AccessKind::Write => Perms::W,
            AccessKind::Fetch => Perms::X,
        }
    }
    /// From POSIX PROT_* bits (READ=1, WRITE=2, EXEC=4); user pages.
    pub const fn from_prot(prot: u32) -> Perms {
        Perms(((prot & 7) as u8) | 8)
    }
}

impl fmt::Display for Perms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = |p: Perms, ch: char| if self.contains(p) { ch } else { '-' };
        write!(f, "{}{}{}{}", c(Perms::R, 'r'), c(Perms::W, 'w'), c(Perms::X, 'x'), c(Perms::USER, 'u'))
    }
}

/// What a memory access does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AccessKind {
    Read = 0,
    Write = 1,
    Fetch = 2,
}

impl AccessKind {
    #[inline(always)]
    pub(crate) const fn is_instr(self) -> bool {
        matches!(self, AccessKind::Fetch)
    }
    pub const fn name(self) -> &'static str {
        match self {
            AccessKind::Read => "read",
            AccessKind::Write => "write",
            AccessKind::Fetch => "fetch",
        }
    }
}

/// A process id as it appears in a trace.
pub(crate) type Pid = u32;

/// An address-space identifier as the MMU sees it: a dense small number the OS model
/// assigns to each live address space, used as the TLB tag.
pub type Asid = u16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format_sizes() {
        assert_eq!(parse_bytes("4K").unwrap(), 4096);
        assert_eq!(parse_bytes("2MiB").unwrap(), 2 << 20);
        assert_eq!(parse_bytes("16GiB").unwrap(), 16 << 30);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert!(parse_bytes("four").is_err());
        assert_eq!(format_bytes(2 << 20), "2M");
        assert_eq!(format_bytes(12 << 10), "12K");
        assert_eq!(format_bytes(5000), "5000B");
    }

    #[test]
    fn page_sizes_are_any_power_of_two_from_4k() {
        assert!(PageSize::from_bytes(8192).is_ok());
        assert!(PageSize::from_bytes(1 << 13).unwrap().shift() == 13);
        assert!(PageSize::from_bytes(2048).is_err());
        assert!(PageSize::from_bytes(12288).is_err());
        assert_eq!(PageSize::M2.base_pages(), 512);
        assert_eq!(PageSize::K4.align_down(0x1fff), 0x1000);
    }
}
