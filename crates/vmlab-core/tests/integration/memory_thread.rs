//! The memory model on its own thread (mem/thread.rs) changes wall time only: every
//! stats document equals the inline run's, across page-table kinds, nested virtual
//! references, data references, fixed miss costs and a statistics warm-up.

use vmlab::api::{open_source, SourceSpec};
use vmlab::config::Config;
use vmlab::sim::build;

fn document(config: &str, overrides: &[&str], workload: &str, params: &[(&str, &str)], thread: bool) -> (serde_json::Value, bool) {
    let cfg = Config::load(config, &overrides.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let spec = SourceSpec::Workload {
        name: workload.into(),
        params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    };
    let (mut src, info) = open_source(&spec).unwrap();
    let mut sim = build(&cfg, &info, None).unwrap();
    let detached = sim.use_memory_thread(thread);
    let mut buf = Vec::new();
    while src.next_batch(&mut buf).unwrap() {
        if sim.feed(&buf).unwrap() {
            break;
        }
    }
    (sim.finish(src.meta()).0, detached)
}

#[test]
fn documents_are_identical_with_the_memory_model_on_its_own_thread() {
    let gups: &[(&str, &str)] = &[("footprint", "256M"), ("accesses", "150000")];
    let cases: &[(&str, &[&str], &str, &[(&str, &str)])] = &[
        ("skylake", &[], "gups", gups),
        ("skylake", &["memory.data_refs=true", "sim.warmup_accesses=40000"], "gups", gups),
        ("skylake", &["mmu.fixed_miss_cycles=40"], "gups", gups),
        // Virtual walk references: nested walks inside walks.
        ("skylake", &["page_table.kind=\"linear\""], "gups", gups),
        ("skylake", &["page_table.kind=\"nested-radix\""], "gups", gups),
        ("ecpt-asplos22", &["page_table.kind=\"nested-ecpt\""], "gups", gups),
        ("skylake", &["page_table.kind=\"guarded\"", "memory.data_refs=true"], "stream", &[("accesses", "200000")]),
        ("tps", &[], "gups", &[("footprint", "64M"), ("accesses", "150000")]),
    ];
    for (config, overrides, workload, params) in cases {
        let (inline, _) = document(config, overrides, workload, params, false);
        let (threaded, detached) = document(config, overrides, workload, params, true);
        assert!(detached, "{config} {overrides:?} should run its memory model on a thread");
        assert!(inline["walks"]["count"].as_u64().unwrap() > 0);
        assert_eq!(inline, threaded, "{config} {overrides:?} {workload}");
    }
}

#[test]
fn configurations_whose_timing_feeds_back_stay_inline() {
    // Write buffers (their stalls depend on the core's clock) and recolouring (the CML
    // buffer interrupts the OS) keep the hierarchy inline; so does having no caches.
    for (config, overrides) in [("romer-cache", &[][..]), ("skylake", &["cache={}"][..])] {
        let (_, detached) = document(config, overrides, "gups", &[("footprint", "16M"), ("accesses", "1000")], true);
        assert!(!detached, "{config} {overrides:?}");
    }
    let (_, detached) = document("skylake", &[], "gups", &[("footprint", "16M"), ("accesses", "1000")], false);
    assert!(!detached, "not asked");
}
