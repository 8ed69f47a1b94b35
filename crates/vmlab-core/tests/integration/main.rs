//! vmlab-core's integration tests, one module per area, built as one test binary: a
//! release test build links the library once here instead of once per file, which was
//! most of the test command's build time on a 2-core machine.

mod common;

mod drmemtrace;
mod engine;
mod fuzz;
mod importers;
mod memory_thread;
mod mrc;
mod one_pass;
mod pair_tlb;
mod progress;
mod pt_props;
mod refill;
mod regions;
mod romer;
mod romer_cache;
mod short_vhpt;
mod synth;
mod time;
mod tps;
mod vmt_format;
