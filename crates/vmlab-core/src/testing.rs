//! What the unit tests share.

use proptest::test_runner::{Config, FileFailurePersistence};

/// A property test of `cases` cases whose failing seeds are kept in
/// `tests/proptest-regressions/src/`, at the source file's path (`mmu/tlb.rs`:
/// `src/mmu/tlb.txt`), beside the integration tests' under `integration/`, so that every
/// regression file of the crate is in one place.
pub(crate) fn proptest_config(cases: u32) -> Config {
    Config { cases, failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel("tests/proptest-regressions/src"))), ..Config::default() }
}
