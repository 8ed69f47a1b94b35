//! The record of one page walk: physical references grouped into sequential steps.
//! References inside one step are independent and may be issued in parallel; a step
//! starts only after the previous one completed (docs/metrics.md, "walk").

/// One reference made by a walk: physical, or (`what == WalkRef::VIRTUAL`) a virtual
/// address of the table's own array that the MMU must translate first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkRef {
    /// Physical byte address read.
    pub(crate) pa: u64,
    /// Sequential step this reference belongs to (0-based).
    pub step: u16,
    /// What was read, kind-specific (radix: the level of the entry, 1 = leaf).
    pub(crate) what: u8,
}

/// A reusable buffer for the references of one walk; clearing keeps the allocation, so
/// walks do not allocate.
#[derive(Clone, Debug, Default)]
pub struct WalkPath {
    refs: Vec<WalkRef>,
    /// 32 bits, not 16: `begin_step` writes it and a flag, and `push_parallel` reads it
    /// back at once; a 16-bit field beside the flags was read as one 32-bit load that
    /// the host cannot forward from the two narrower stores (docs/performance.md).
    steps: u32,
    /// Some reference in `refs` is to a virtual address.
    virtual_refs: bool,
    /// A step was opened with `begin_step` (otherwise every step is one `push_step`,
    /// so the references' steps are 0, 1, 2, ...).
    opened_steps: bool,
    /// Cycles spent outside memory references (a software refill handler's trap).
    extra_cycles: u64,
    /// References made off the walk's critical path (walk-table fills a walk cache
    /// miss starts in the background): they go through the caches and count as MMU
    /// requests, but add no latency and belong to no step.
    background: Vec<u64>,
}

impl WalkRef {
    /// Marks a reference whose `pa` is a virtual address (linear virtual arrays).
    pub(crate) const VIRTUAL: u8 = u8::MAX;
}

impl WalkPath {
    pub fn new() -> WalkPath {
        WalkPath { refs: Vec::with_capacity(64), steps: 0, virtual_refs: false, opened_steps: false, extra_cycles: 0, background: Vec::with_capacity(16) }
    }
    #[inline(always)]
    pub fn clear(&mut self) {
        self.refs.clear();
        self.background.clear();
        self.steps = 0;
        self.virtual_refs = false;
        self.opened_steps = false;
        self.extra_cycles = 0;
    }
    /// Charge cycles that are not memory references (e.g. entering a software handler).
    #[inline]
    pub(crate) fn add_cycles(&mut self, c: u64) {
        self.extra_cycles += c;
    }
    pub(crate) fn extra_cycles(&self) -> u64 {
        self.extra_cycles
    }
    /// Add a reference as a new sequential step.
    #[inline(always)]
    pub(crate) fn push_step(&mut self, pa: u64, what: u8) {
        self.refs.push(WalkRef { pa, step: self.steps as u16, what });
        self.steps += 1;
    }
    /// Add a reference to a *virtual* address as a new step (the MMU translates it,
    /// possibly through a nested walk, before reading).
    #[inline(always)]
    pub(crate) fn push_virtual_step(&mut self, va: u64) {
        self.push_step(va, WalkRef::VIRTUAL);
        self.virtual_refs = true;
    }
    /// Whether every step is one reference (made by `push_step`): reference i is
    /// step i.
    #[inline(always)]
    pub(crate) fn one_ref_per_step(&self) -> bool {
        !self.opened_steps
    }
    /// Whether some reference is to a virtual address.
    #[inline(always)]
    pub(crate) fn has_virtual_refs(&self) -> bool {
        self.virtual_refs
    }
    /// Begin a new step whose references are pushed with [`WalkPath::push_parallel`].
    #[inline(always)]
    pub(crate) fn begin_step(&mut self) {
        self.steps += 1;
        self.opened_steps = true;
    }
    /// Add a reference to the step opened by the last `begin_step`.
    #[inline(always)]
    pub(crate) fn push_parallel(&mut self, pa: u64, what: u8) {
        debug_assert!(self.steps > 0, "push_parallel before begin_step");
        self.refs.push(WalkRef { pa, step: (self.steps - 1) as u16, what });
    }
    /// Add a physical reference made in the background (see `background`).
    #[inline(always)]
    pub(crate) fn push_background(&mut self, pa: u64) {
        self.background.push(pa);
    }
    #[inline(always)]
    pub(crate) fn background(&self) -> &[u64] {
        &self.background
    }
    #[inline(always)]
    pub fn refs(&self) -> &[WalkRef] {
        &self.refs
    }
    /// Number of sequential steps (steps with no references are not counted).
    pub fn steps(&self) -> u16 {
        self.steps as u16
    }
}
