//! vmlab's criterion benchmarks (`cargo bench -p vmlab-bench`; docs/performance.md):
//! `benches/engine.rs`, `benches/decode.rs`, `benches/pt_ops.rs`. They use the
//! library's public interface only. End-to-end figures come from `vmlab bench`.
