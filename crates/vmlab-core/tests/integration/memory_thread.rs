//! The memory model on its own thread (mem/thread.rs), or the MMU's whole walker
//! (sim/mmu.rs), changes wall time only: every stats document equals the inline
//! run's, across page-table kinds, nested virtual references, data references, fixed
//! miss costs, a statistics warm-up, and random traces with OS events and context
//! switches.

use proptest::prelude::*;
use vmlab::api::{open_source, SourceSpec};
use vmlab::config::Config;
use vmlab::mem::thread::WalkerThread;
use vmlab::sim::{build, SourceInfo};
use vmlab::trace::{MapFlags, Record, TraceMeta};

fn document(config: &str, overrides: &[&str], workload: &str, params: &[(&str, &str)], thread: bool) -> (serde_json::Value, bool) {
    let cfg = Config::load(config, &overrides.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let spec = SourceSpec::Workload { name: workload.into(), params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() };
    let (mut src, info) = open_source(&spec).unwrap();
    let mut sim = build(&cfg, &info, None).unwrap();
    let detached = sim.use_memory_thread(thread, WalkerThread::Auto);
    let mut buf = Vec::new();
    while src.next_batch(&mut buf).unwrap() {
        if sim.feed(&buf).unwrap() {
            break;
        }
    }
    (sim.finish(src.meta()).unwrap().0, detached)
}

#[test]
fn documents_are_identical_with_the_memory_model_on_its_own_thread() {
    let gups: &[(&str, &str)] = &[("footprint", "256M"), ("accesses", "150000")];
    // (config, overrides, workload, its parameters)
    type Case<'a> = (&'a str, &'a [&'a str], &'a str, &'a [(&'a str, &'a str)]);
    let cases: &[Case] = &[
        ("skylake", &[], "gups", gups),
        ("skylake", &["memory.data_refs=true", "sim.warmup_accesses=40000"], "gups", gups),
        ("skylake", &["memory.data_refs=true", "sim.warmup_instructions=160002", "sim.max_instructions=500001"], "gups", gups),
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

/// The stats document of `records` fed in batches of the given sizes (cycled), inline
/// or with a second thread that takes the walker wherever the table splits its walk;
/// and whether the MMU ran on it.
fn feed_records(cfg: &Config, records: &[Record], batches: &[usize], thread: bool) -> (Result<serde_json::Value, String>, bool) {
    feed_records_with(cfg, records, batches, thread, WalkerThread::Always).0
}

/// `feed_records` with the walker placed as `walker` says, and whether a second thread
/// ran at all (the walker, or the memory model alone).
fn feed_records_with(
    cfg: &Config,
    records: &[Record],
    batches: &[usize],
    thread: bool,
    walker: WalkerThread,
) -> ((Result<serde_json::Value, String>, bool), bool) {
    let mut sim = build(cfg, &SourceInfo::default(), None).unwrap();
    let any_thread = sim.use_memory_thread(thread, walker);
    let on_thread = sim.mmu_on_thread();
    let mut at = 0;
    for &n in batches.iter().cycle() {
        if at >= records.len() {
            break;
        }
        let end = (at + n).min(records.len());
        match sim.feed(&records[at..end]) {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => return ((Err(e.to_string()), on_thread), any_thread),
        }
        at = end;
    }
    ((sim.finish(&TraceMeta::default()).map(|r| r.0).map_err(|e| e.to_string()), on_thread), any_thread)
}

/// A random trace of three processes: maps, unmaps, protection changes (faults that
/// grant rights), forks, context switches, and accesses of every kind, some crossing
/// a page, over a few MiB so small TLBs miss often.
fn arb_trace() -> impl Strategy<Value = Vec<Record>> {
    const BASE: u64 = 0x4000_0000;
    const SPAN: u64 = 8 << 20;
    let op = (0u8..100, 1u32..4, 0u64..SPAN, 1u64..64, 0u8..8);
    prop::collection::vec(op, 200..1500).prop_map(|ops| {
        let mut recs: Vec<Record> = (1..=3).map(|pid| Record::Mmap { pid, start: BASE, len: SPAN, prot: 7, flags: MapFlags::PRIVATE }).collect();
        for (what, pid, off, pages, x) in ops {
            let at = BASE + (off & !0xfff);
            let len = (pages << 12).min(BASE + SPAN - at);
            recs.push(match what {
                0..=1 => Record::Munmap { pid, start: at, len },
                2..=3 => Record::Mmap { pid, start: at, len, prot: 7, flags: MapFlags::PRIVATE },
                4..=6 => Record::Mprotect { pid, start: at, len, prot: [1, 3, 5, 7][x as usize % 4] },
                7..=9 => Record::ContextSwitch { pid },
                10 => Record::Tick(x as u64 + 1),
                _ => {
                    // Mostly reads and writes, some fetches, a few crossing into the next page.
                    let va = BASE + off;
                    let size = if x == 7 { 64 } else { 8 };
                    match x % 4 {
                        0 => Record::fetch(va, size, pid),
                        1 => Record::write(va, size, pid),
                        _ => Record::read(va, size, pid),
                    }
                }
            });
        }
        recs
    })
}

proptest! {
    #![proptest_config(crate::common::proptest_config(24))]

    /// The walker on its own thread gives the inline run's stats document (or its
    /// error) on random traces, with ASID tags or flushes on switches, a warm-up, an
    /// access limit, huge pages, data references, page-size policies that watch the
    /// TLBs or work in the background, and a splintering TLB, whatever the batch
    /// boundaries.
    #[test]
    fn the_walker_thread_matches_inline_on_random_traces(
        recs in arb_trace(),
        batches in prop::collection::vec(1usize..400, 1..6),
        setting in 0usize..11,
    ) {
        let sets: &[&str] = match setting {
            0 => &[],
            1 => &["mmu.asid_tags=false"],
            2 => &["sim.warmup_accesses=300"],
            3 => &["sim.max_accesses=700"],
            4 => &["os.policy.kind=\"thp-eager\""],
            5 => &["memory.data_refs=true", "mmu.asid_tags=false"],
            // Policies that watch the TLBs and move pages (shootdowns from the policy).
            6 => &["os.policy.kind=\"online\"", "page_table.radix.tailored=true"],
            7 => &["os.policy.kind=\"thp-eager\"", "tlb.l1d.page_sizes=[\"4K\"]", "tlb.l1d.splinter=true"],
            8 => &["os.policy.khugepaged.every=50", "os.policy.kind=\"thp-reserve\""],
            // Nested radix: guest and host walks, NTLB and nested PWC on the walker's
            // thread; guest page-table pages backed by the engine on their first walk.
            9 => &["page_table.kind=\"nested-radix\""],
            _ => &["page_table.kind=\"nested-radix\"", "page_table.nested.host_page_size=\"2M\"", "os.policy.kind=\"thp-eager\"", "mmu.asid_tags=false"],
        };
        let cfg = Config::load("tiny", &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let (inline, _) = feed_records(&cfg, &recs, &batches, false);
        let (threaded, on_thread) = feed_records(&cfg, &recs, &batches, true);
        prop_assert!(on_thread, "{:?}: the walker should run on its own thread", sets);
        prop_assert_eq!(inline, threaded, "{:?}", sets);
    }

    /// The memory model alone on its own thread (the page tables that do not split
    /// their walk) gives the inline run's document: walks of one reference per step
    /// (guarded, linear), of parallel probes (hashed, ECPT, nested ECPT), and with
    /// virtual references (linear), queued in batches whatever the buffer boundaries.
    #[test]
    fn the_memory_thread_matches_inline_on_random_traces(
        recs in arb_trace(),
        batches in prop::collection::vec(1usize..400, 1..6),
        setting in 0usize..6,
    ) {
        let sets: &[&str] = match setting {
            0 => &["page_table.kind=\"guarded\"", "page_table.guarded.node_entries=2"],
            // G2 maps 2M pages (a leaf nine digits up).
            1 => &["page_table.kind=\"guarded\"", "page_table.guarded.node_entries=2", "os.policy.kind=\"thp-eager\""],
            2 => &["page_table.kind=\"hashed\""],
            3 => &["page_table.kind=\"ecpt\"", "mmu.asid_tags=false"],
            4 => &["page_table.kind=\"nested-ecpt\""],
            _ => &["page_table.kind=\"linear\""],
        };
        let cfg = Config::load("tiny", &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let ((inline, _), _) = feed_records_with(&cfg, &recs, &batches, false, WalkerThread::Auto);
        let ((threaded, walker), memory) = feed_records_with(&cfg, &recs, &batches, true, WalkerThread::Auto);
        prop_assert!(memory && !walker, "{:?}: the memory model alone should run on its own thread", sets);
        prop_assert_eq!(inline, threaded, "{:?}", sets);
    }
}

#[test]
fn the_walker_goes_to_the_thread_when_the_table_splits_its_walk() {
    let recs: Vec<Record> = vec![Record::Mmap { pid: 1, start: 0x4000_0000, len: 1 << 20, prot: 3, flags: MapFlags::PRIVATE }, Record::read(0x4000_0000, 8, 1)];
    let on_thread = |config: &str, sets: &[&str]| {
        let cfg = Config::load(config, &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        feed_records(&cfg, &recs, &[10], true).1
    };
    assert!(on_thread("skylake", &[]), "radix on skylake splits");
    // The TLBs stay on the engine's thread, so what reads them per access does not
    // keep the walker here.
    assert!(on_thread("skylake", &["mmu.regions.share=true"]));
    assert!(on_thread("skylake", &["tlb.l1d_2m.splinter=true"]));
    assert!(on_thread("tiny", &["os.policy.kind=\"online\"", "page_table.radix.tailored=true"]));
    assert!(on_thread("skylake", &["page_table.kind=\"nested-radix\""]), "radix over radix splits");
    // Tables whose walk does not split keep it here (the caches may still go to a thread).
    assert!(!on_thread("skylake", &["page_table.kind=\"hashed\""]));
    assert!(!on_thread("ecpt-asplos22", &["page_table.kind=\"hybrid\""]));
}

#[test]
fn by_default_the_walker_stays_with_the_engine_when_program_references_use_the_caches() {
    let recs: Vec<Record> = vec![Record::Mmap { pid: 1, start: 0x4000_0000, len: 1 << 20, prot: 3, flags: MapFlags::PRIVATE }, Record::read(0x4000_0000, 8, 1)];
    let placed = |sets: &[&str], walker: WalkerThread| {
        let cfg = Config::load("skylake", &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let ((_, walker_moved), any_thread) = feed_records_with(&cfg, &recs, &[10], true, walker);
        (any_thread, walker_moved)
    };
    assert_eq!(placed(&[], WalkerThread::Auto), (true, true), "count-only: the walker moves");
    assert_eq!(placed(&["memory.data_refs=true"], WalkerThread::Auto), (true, false), "the caches alone move");
    assert_eq!(placed(&["memory.data_refs=true", "time.model=\"ooo\""], WalkerThread::Auto), (true, false));
    assert_eq!(placed(&["memory.data_refs=true"], WalkerThread::Always), (true, true));
    assert_eq!(placed(&[], WalkerThread::Never), (true, false));
}
