//! What the unit tests share.

use proptest::test_runner::{Config, FileFailurePersistence};

/// A property test of `cases` cases whose failing seeds are kept beside the integration
/// tests' (`tests/proptest-regressions/`, under `src/` and the source file's path), so
/// that every regression file of the crate is in one place.
pub fn proptest_config(cases: u32) -> Config {
    Config { cases, failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel("tests/proptest-regressions/src"))), ..Config::default() }
}
