//! vmlab: a laboratory for virtual-memory address translation.
//!
//! Data flows `trace -> os -> mmu -> mem -> stats` (see ../../../shared/DESIGN.md and
//! docs/architecture in the README):
//! - [`trace`]: record stream, the .vmt format, importers, synthetic generators;
//! - [`os`]: address spaces, VMAs, demand paging, the buddy frame allocator;
//! - [`pt`]: page tables behind one trait ([`pt::PageTable`]);
//! - [`mmu`]: TLBs, walk caches and the walker;
//! - [`mem`]: the physically indexed cache hierarchy;
//! - [`sim`]: the engine that ties them together and produces the stats document.

pub mod addr;
pub mod api;
pub mod cli;
pub mod config;
pub mod error;
pub mod host;
pub mod mem;
pub mod mmu;
pub mod os;
pub mod pt;
pub mod sim;
pub mod stats;
pub mod trace;

pub use error::{Error, Result};

/// vmlab version, part of every result's run key.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
