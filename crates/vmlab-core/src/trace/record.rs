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
    pub(crate) const fn union(self, o: MapFlags) -> MapFlags {
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
    /// Which earlier load this access's address depends on, if the trace says.
    pub dep: Dep,
}

/// What an access's address depends on (docs/trace-format.md, "Dependences"). The
/// time model's core lets independent loads overlap inside its window; a dependent
/// access waits for its producer's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Dep(pub u8);

impl Dep {
    /// The trace does not say (lackey logs, version-1 traces): `time.core.unknown_deps`
    /// decides.
    pub const UNKNOWN: Dep = Dep(0);
    /// The address depends on no earlier load.
    pub const NONE: Dep = Dep(u8::MAX);
    /// The farthest producer a dependence can name, in loads back.
    pub(crate) const MAX_DISTANCE: u64 = 254;

    /// The address depends on the `k`-th most recent load (read) of the same process
    /// (`k` = 1: the previous one). A producer farther back than
    /// [`Dep::MAX_DISTANCE`] has long completed in any window: independent.
    pub const fn on_load(k: u64) -> Dep {
        if k == 0 || k > Dep::MAX_DISTANCE {
            Dep::NONE
        } else {
            Dep(k as u8)
        }
    }

    /// The producer's distance in loads back, if the address depends on one.
    #[inline(always)]
    pub const fn distance(self) -> Option<u8> {
        if self.0 == 0 || self.0 == u8::MAX {
            None
        } else {
            Some(self.0)
        }
    }

    pub const fn is_known(self) -> bool {
        self.0 != 0
    }
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
        Record::Access(Access { vaddr, pid, size, kind, dep: Dep::UNKNOWN })
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
    /// This record with dependence `dep`, if it is an access (other records have none).
    #[inline]
    pub const fn with_dep(self, dep: Dep) -> Record {
        match self {
            Record::Access(a) => Record::Access(Access { dep, ..a }),
            r => r,
        }
    }
}

/// POSIX PROT_* bits as they appear in Mmap/Mprotect records.
pub mod prot {
    pub const READ: u8 = 1;
    pub(crate) const WRITE: u8 = 2;
    pub const EXEC: u8 = 4;
}
