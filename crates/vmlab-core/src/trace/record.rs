//! The typed record stream every trace source yields (see docs/trace-format.md).

use crate::addr::{AccessKind, Pid};

/// How a region was mapped (mmap flags vmlab cares about).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct MapFlags(pub u8);

impl MapFlags {
    pub const PRIVATE: MapFlags = MapFlags(0);
    /// MAP_SHARED: the pages are shared with other mappings of the same object.
    pub const SHARED: MapFlags = MapFlags(1);
    /// Backed by a file rather than anonymous memory.
    pub const FILE: MapFlags = MapFlags(2);
    /// A stack (grows down); informational.
    pub const STACK: MapFlags = MapFlags(4);

    pub const fn contains(self, o: MapFlags) -> bool {
        self.0 & o.0 == o.0
    }
    pub const fn union(self, o: MapFlags) -> MapFlags {
        MapFlags(self.0 | o.0)
    }
}

/// One memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    pub vaddr: u64,
    pub pid: Pid,
    /// Bytes accessed (1..=65535). An access that crosses a page boundary translates
    /// every page it touches.
    pub size: u16,
    pub kind: AccessKind,
}

/// One record of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Record {
    Access(Access),
    /// `n` instructions retired that no fetch record stands for (synthetic traces,
    /// data-only traces). Instructions = sum of ticks + number of fetch accesses.
    Tick(u64),
    Mmap {
        pid: Pid,
        start: u64,
        len: u64,
        prot: u8,
        flags: MapFlags,
    },
    Munmap {
        pid: Pid,
        start: u64,
        len: u64,
    },
    Mprotect {
        pid: Pid,
        start: u64,
        len: u64,
        prot: u8,
    },
    /// The program break of `pid` moves to `end` (the heap is [start of heap, end)).
    Brk {
        pid: Pid,
        end: u64,
    },
    /// `child` is a copy of `parent`'s address space.
    Fork {
        parent: Pid,
        child: Pid,
    },
    Exit {
        pid: Pid,
    },
    /// `pid` runs from here on (on the one simulated CPU).
    ContextSwitch {
        pid: Pid,
    },
}

impl Record {
    #[inline]
    pub const fn access(kind: AccessKind, vaddr: u64, size: u16, pid: Pid) -> Record {
        Record::Access(Access { vaddr, pid, size, kind })
    }
    pub const fn read(vaddr: u64, size: u16, pid: Pid) -> Record {
        Record::access(AccessKind::Read, vaddr, size, pid)
    }
    pub const fn write(vaddr: u64, size: u16, pid: Pid) -> Record {
        Record::access(AccessKind::Write, vaddr, size, pid)
    }
    pub const fn fetch(vaddr: u64, size: u16, pid: Pid) -> Record {
        Record::access(AccessKind::Fetch, vaddr, size, pid)
    }
}

/// POSIX PROT_* bits as they appear in Mmap/Mprotect records.
pub mod prot {
    pub const READ: u8 = 1;
    pub const WRITE: u8 = 2;
    pub const EXEC: u8 = 4;
}
