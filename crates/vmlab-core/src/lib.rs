//! vmlab: a laboratory for virtual-memory address translation.
//!
//! Data flows `trace -> os -> pt / mmu -> mem -> stats` (docs/architecture.md):
//! - [`trace`]: record stream, the .vmt format, importers, synthetic generators;
//! - [`os`]: address spaces, VMAs, demand paging, the buddy frame allocator;
//! - [`pt`]: page tables behind one trait ([`pt::PageTable`]), each with its walk caches;
//! - [`mmu`]: the TLB structures and hierarchy, the set-associative stores they and the
//!   walk caches are built from, and the walker (walk caches, walk timing, software
//!   refill);
//! - [`mem`]: the physically indexed cache hierarchy, and the thread it can run on;
//! - [`sim`]: the engine that ties them together and produces the stats document.

pub mod addr;
pub mod api;
pub mod cli;
pub mod config;
pub mod error;
pub mod files;
pub mod host;
pub mod interrupt;
pub mod mem;
pub mod mmu;
pub mod os;
pub mod pt;
pub mod sim;
pub mod stats;
pub mod time;
pub mod trace;

#[cfg(test)]
mod testing;

pub use error::{Error, Result};

/// vmlab version, part of every result's run key.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
