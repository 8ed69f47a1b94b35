//! Helpers shared by the engine-level test files.

use proptest::prelude::*;
use vmlab::os::address_space::Mapping;
use vmlab::pt::PageTable;
use vmlab::sim::Engine;
use vmlab::trace::{MapFlags, Record};

/// Map `regions` (start, length) for pid 1, then read at `accesses` (region index,
/// offset); if `unmap_one`, halfway through unmap the first half of the first region.
pub fn drive_vmas<P: PageTable>(e: &mut Engine<P>, regions: &[(u64, u64)], accesses: &[(usize, u64)], unmap_one: bool) {
    for &(start, len) in regions {
        e.record(&Record::Mmap { pid: 1, start, len, prot: 3, flags: MapFlags::PRIVATE }).unwrap();
    }
    for (k, &(i, off)) in accesses.iter().enumerate() {
        let (start, len) = regions[i % regions.len()];
        e.record(&Record::read(start + off % len, 8, 1)).unwrap();
        if unmap_one && k == accesses.len() / 2 {
            let (s, l) = regions[0];
            e.record(&Record::Munmap { pid: 1, start: s, len: l / 2 }).unwrap();
        }
    }
}

/// Every page pid 1 has mapped, after checking that it lies inside one VMA and is
/// aligned to its size.
pub fn pages_inside_vmas<P: PageTable>(e: &Engine<P>) -> Result<Vec<(u64, Mapping)>, TestCaseError> {
    let space = e.os.space(1).unwrap();
    let mut out = Vec::new();
    for base in space.pages.bases_in(0, u64::MAX) {
        let (b, m) = space.pages.get(base).unwrap();
        prop_assert_eq!(b, base);
        prop_assert!(m.size.is_aligned(base), "{:#x} not aligned to {}", base, m.size);
        let vma = space.vmas.find(base);
        prop_assert!(vma.map_or(false, |v| v.contains_range(base, base + m.size.bytes())), "{} page at {:#x} is not inside one VMA", m.size, base);
        out.push((base, m));
    }
    Ok(out)
}
