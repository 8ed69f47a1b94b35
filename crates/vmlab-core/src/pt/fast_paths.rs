//! Host-speed hooks of a page table and its walk caches, apart from the models
//! ([`PageTable`], [`WalkCaches`]): none of them changes a result, only how fast the
//! host gets it (docs/performance.md, "The walker thread" and "Prefetching"). Every
//! kind implements [`FastPaths`]; its defaults do nothing, so a new kind needs one line
//! (`type Split = NoSplit;`) and gains speed-ups only where it opts in. A kind whose walk
//! splits ([`SplitWalk`]) also says how its walk caches divide between the two threads
//! ([`SplitCaches`]).

use super::{PageTable, Translation, WalkCaches, WalkPath};
use crate::addr::Asid;

/// The host-side fast paths of a page table.
pub trait FastPaths: PageTable {
    /// How the walk splits between the table's thread and the walker thread: a
    /// [`SplitWalk`] for the kinds whose walk splits, [`NoSplit`] for the others.
    type Split: SplitWalk<Self>;

    /// `translate` of a page just mapped gives exactly what the OS mapped (no second
    /// dimension, no splintering): a fault can hand the TLB the OS's translation
    /// without translating again (`Os::fault`).
    const TRANSLATES_AS_MAPPED: bool = false;

    /// Whether `prefetch` does anything (a nested table skips the work of finding a
    /// host address to prefetch for when its host table would ignore the hint).
    const PREFETCHES: bool = false;

    /// A hint that `va` will probably be walked soon: bring the simulator's own copy of
    /// the entries into the host cache. Must not change any state or statistic.
    #[inline(always)]
    fn prefetch(&self, _asid: Asid, _va: u64) {}

    /// `prefetch`, also saying where the entry it hinted sits, for a later `phys_at`
    /// once the entry has reached the host cache (a nested table's look-ahead for its
    /// host table). `None`: the table does not say; the caller translates instead.
    #[inline(always)]
    fn prefetch_at(&self, asid: Asid, va: u64) -> Option<u64> {
        self.prefetch(asid, va);
        None
    }

    /// What the entry at `loc` (from `prefetch_at` of `va`) maps `va` to now. A hint
    /// only: the answer may be stale or missing, never a reason to change state.
    fn phys_at(&self, _asid: Asid, _loc: u64, _va: u64) -> Option<u64> {
        None
    }
}

/// The path a walk of `P` takes, as its split walk sends it to the walker.
pub type PathOf<P> = <<P as FastPaths>::Split as SplitWalk<P>>::Path;

/// The witness that `P`'s walk splits, if it does.
#[inline(always)]
pub fn split_walk<P: FastPaths>() -> Option<P::Split> {
    <P::Split as SplitWalk<P>>::WITNESS
}

/// A walk split in two, so that its halves can run on two threads: the functional
/// half ([`SplitWalk::full_path`]: the table, and the walk caches that decide what it
/// must read) on the table's thread, the timing half ([`SplitWalk::replay`]: the other
/// walk caches) on the walker's. `walk` must be exactly `full_path` followed by the
/// replay of every piece it sends, and the walk caches divide between the two
/// ([`SplitWalk::split_caches`], by the caches' [`SplitCaches`]).
///
/// Implemented by a witness type: a value of it exists only where the walk splits
/// ([`SplitWalk::WITNESS`]), and every method takes one, so a table that does not
/// split ([`NoSplit`], uninhabited) has nothing to implement.
pub trait SplitWalk<P: PageTable + ?Sized>: Copy + Send + 'static {
    /// One piece of a walk's path: what a walk with cold walk caches reads, found
    /// without the caches.
    type Path: Copy + Default + Send + 'static;
    /// The witness, where the table's walk splits.
    const WITNESS: Option<Self>;
    /// `full_path` sends exactly one piece (radix): then the walker can take it from
    /// [`SplitWalk::full_path_into`].
    const ONE_PIECE: bool = false;

    /// The mapping of `va`, and the path a walk takes to it (or to the missing entry),
    /// sent to `emit` in pieces, the last one ending the walk
    /// ([`SplitWalk::path_continues`]). Radix: one piece, read with cold walk caches.
    /// A nested table consults its guest PWC and NTLB in `front` (what `split_front`
    /// moved out): they decide which host walks happen.
    fn full_path(self, pt: &mut P, asid: Asid, va: u64, front: &mut P::Caches, emit: impl FnMut(Self::Path)) -> Option<Translation>;

    /// `full_path` of a `ONE_PIECE` table, written into `out` rather than handed to a
    /// closure by value.
    #[inline(always)]
    fn full_path_into(self, pt: &mut P, asid: Asid, va: u64, front: &mut P::Caches, out: &mut Self::Path) -> Option<Translation> {
        self.full_path(pt, asid, va, front, |p| *out = p)
    }

    /// The walk of `va` along one piece of its path, with the walker's walk caches: the
    /// references it makes go into `path`, exactly as `walk` would make them (the
    /// mapping is `full_path`'s).
    fn replay(self, full: &Self::Path, asid: Asid, va: u64, caches: &mut P::Caches, path: &mut WalkPath);

    /// Whether more pieces of the same walk follow this one.
    fn path_continues(self, full: &Self::Path) -> bool;

    /// When the walker leaves for a thread of its own: move out of `caches` the walk
    /// caches `full_path` consults (its `front`), leaving the rest for `replay`. The
    /// caches of a table whose walk splits divide ([`SplitCaches::split_front`]).
    fn split_caches(self, caches: &mut P::Caches) -> P::Caches;

    /// When the walker returns: take back into `caches` the `front` that
    /// `split_caches` moved out ([`SplitCaches::rejoin_front`]).
    fn rejoin_caches(self, caches: &mut P::Caches, front: P::Caches);
}

/// How a kind's walk caches divide when its walk splits ([`SplitWalk`]) and the walker
/// leaves for a thread of its own: a host-speed hook, apart from the model
/// ([`WalkCaches`]). Only the walk caches of the kinds whose walk splits implement it
/// (their split reaches it through [`SplitWalk::split_caches`]), so nothing here has a
/// default.
pub trait SplitCaches: WalkCaches + Sized {
    /// An instance of the same kind that caches nothing: what a split leaves where a
    /// part moved out (a nested table's front holds its guest's vacant caches).
    fn vacant(&self) -> Self;
    /// Move out the caches the functional path consults ([`SplitWalk::full_path`]'s
    /// `front`), leaving the rest here for the walker.
    fn split_front(&mut self) -> Self;
    /// Take back what `split_front` moved out (when the walker returns).
    fn rejoin_front(&mut self, front: Self);
}

/// The path of a table that can be a nested table's guest: the nested table
/// host-translates the pages of its entries for the walker.
pub trait GuestPath {
    /// The physical address of every entry a walk along this path may read, whatever
    /// its walk caches hold.
    fn entries(&self, each: impl FnMut(u64));
}

/// The split of a table whose walk does not split: no value exists, so none of its
/// methods can be called.
#[derive(Clone, Copy, Debug)]
pub enum NoSplit {}

impl<P: PageTable + ?Sized> SplitWalk<P> for NoSplit {
    type Path = ();
    const WITNESS: Option<Self> = None;
    fn full_path(self, _: &mut P, _: Asid, _: u64, _: &mut P::Caches, _: impl FnMut(())) -> Option<Translation> {
        match self {}
    }
    fn replay(self, _: &(), _: Asid, _: u64, _: &mut P::Caches, _: &mut WalkPath) {
        match self {}
    }
    fn path_continues(self, _: &()) -> bool {
        match self {}
    }
    fn split_caches(self, _: &mut P::Caches) -> P::Caches {
        match self {}
    }
    fn rejoin_caches(self, _: &mut P::Caches, _: P::Caches) {
        match self {}
    }
}
