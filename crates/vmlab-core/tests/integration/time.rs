//! The time model (time/): its checks against first principles — a dependent chain
//! costs the sum of its latencies, MSHRs buy memory-level parallelism, the DRAM bus
//! never beats its peak, walkers limit walks — and that it changes no counter.

use serde_json::Value;
use vmlab::api::{run, RunRequest, SourceSpec};
use vmlab::config::Config;
use vmlab::mem::thread::WalkerThread;
use vmlab::sim::{self, SourceInfo};
use vmlab::trace::synth;

fn workload(name: &str, params: &[&str]) -> SourceSpec {
    let params = params.iter().map(|p| p.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).unwrap()).collect();
    SourceSpec::Workload { name: name.into(), params }
}

/// A timed run on the skylake preset with `sets` on top.
fn timed(name: &str, params: &[&str], sets: &[&str]) -> Value {
    timed_on("skylake", name, params, sets)
}

/// A timed run on `config` with `sets` on top.
fn timed_on(config: &str, name: &str, params: &[&str], sets: &[&str]) -> Value {
    let mut overrides = vec!["memory.data_refs=true".to_string(), "time.model=\"ooo\"".to_string()];
    overrides.extend(sets.iter().map(|s| s.to_string()));
    run(&RunRequest { config: config.into(), overrides, source: workload(name, params), progress: false }).unwrap()
}

fn f(doc: &Value, path: &str) -> f64 {
    let mut v = doc;
    for k in path.split('.') {
        v = &v[k];
    }
    v.as_f64().unwrap_or_else(|| panic!("{path} is not a number: {v}"))
}

#[test]
fn a_pointer_chase_costs_the_sum_of_its_latencies() {
    // Every load's address comes from the previous load: nothing overlaps.
    let d = timed("pchase", &["footprint=1G", "accesses=100k"], &["time.unknown_deps=\"previous-load\""]);
    let accesses = f(&d, "totals.accesses");
    let per_access = f(&d, "time.cycles") / accesses;
    let latency = f(&d, "time.latency.translation") + f(&d, "time.latency.data");
    assert!((per_access - latency).abs() <= 0.05 * latency, "{per_access:.1} cycles per access, {latency:.1} of latency");
    assert!(f(&d, "time.mlp") < 1.05, "a chase has no memory-level parallelism");
}

const ONE_MSHR: [&str; 3] = ["cache.l1d.mshrs=1", "cache.l2.mshrs=1", "cache.llc.mshrs=1"];

#[test]
fn mshrs_overlap_independent_misses_and_the_bus_keeps_its_peak() {
    // 1G pages: every translation hits the TLB, so the data references alone set the time.
    let gups = ["footprint=4G", "accesses=300k"];
    let one = timed("gups", &gups, &[&ONE_MSHR[..], &["os.page_size=1G"]].concat());
    let ten = timed("gups", &gups, &["cache.l1d.mshrs=10", "os.page_size=1G"]);
    // One MSHR: the misses one after another, each its unloaded latency.
    let serial = f(&one, "time.latency.serialized_cycles");
    let cycles = f(&one, "time.cycles");
    assert!((cycles - serial).abs() <= 0.05 * serial, "1 MSHR: {cycles} cycles against a serialized {serial}");
    let speedup = cycles / f(&ten, "time.cycles");
    assert!(speedup >= 4.0, "10 MSHRs are only {speedup:.2}x faster");
    assert!(f(&ten, "time.mlp") > 4.0);
    for d in [&one, &ten] {
        assert!(f(d, "time.dram.bandwidth_gbs") <= 19.2 && f(d, "time.dram.bandwidth_utilisation") <= 1.0);
    }
}

#[test]
fn written_lines_go_back_to_dram_and_share_its_bandwidth() {
    // GUPS writes every word it reads: once the caches are full, each line they push out
    // is dirty, so DRAM writes about as many lines as it reads.
    let gups = ["footprint=1G", "accesses=300k"];
    let d = timed("gups", &gups, &["os.page_size=1G"]);
    let (reads, writes) = (f(&d, "time.dram.reads"), f(&d, "time.dram.writes"));
    assert_eq!(writes, f(&d, "memory.dram_writes"), "every write-back timed");
    // Every line read was written, and all but those the caches still hold went back.
    let cached = ((32u64 << 10) + (1 << 20) + (2 << 20)) as f64 / 64.0;
    assert!(writes >= reads - cached && writes <= reads, "{writes} writes for {reads} reads");
    assert_eq!(f(&d, "caches.llc.writeback_accesses"), f(&d, "caches.l2.writebacks"));
    assert!(f(&d, "time.dram.bandwidth_utilisation") <= 1.0);
    // A stream that writes every line it reads moves twice the bytes of a read-only one
    // through the same bus: half the lines a second, and never past the peak.
    let stream = |ratio: &str| timed("stream", &["footprint=1G", "accesses=1M", ratio], &[]);
    let (read_only, written) = (stream("write_ratio=0"), stream("write_ratio=1"));
    assert_eq!(f(&read_only, "memory.dram_writes"), 0.0);
    let per_line = |d: &Value| f(d, "time.dram.bytes") / f(d, "time.dram.reads");
    assert!(per_line(&written) > 1.9 * per_line(&read_only), "each line read is written back");
    assert!(f(&written, "time.dram.bandwidth_utilisation") <= 1.0);
    assert!(f(&written, "time.cycles") > 1.5 * f(&read_only, "time.cycles"), "the bus is the limit");
}

#[test]
fn a_stream_reaches_the_dram_bandwidth_and_never_passes_it() {
    let d = timed("stream", &["footprint=1G", "accesses=2M"], &[]);
    let gbs = f(&d, "time.dram.bandwidth_gbs");
    assert!((0.8 * 19.2..=19.2).contains(&gbs), "{gbs} GB/s of 19.2");
    assert!(f(&d, "time.dram.row_hit_rate") > 0.9, "a stream takes row hits");
    // A request moves a line of the last level: with 128-byte lines (Itanium 2's L2 and
    // L3) each read is one 128-byte burst, half as many of them, at the same peak.
    let wide = timed("stream", &["footprint=1G", "accesses=2M"], &["cache.l2.line=128", "cache.llc.line=128"]);
    assert_eq!(f(&wide, "time.dram.bytes"), 128.0 * (f(&wide, "time.dram.reads") + f(&wide, "time.dram.writes")));
    let reads = f(&wide, "time.dram.reads");
    assert!((reads - f(&d, "time.dram.reads") / 2.0).abs() < 0.01 * reads, "{reads} 128-byte reads");
    let wide_gbs = f(&wide, "time.dram.bandwidth_gbs");
    assert!((0.8 * 19.2..=19.2).contains(&wide_gbs), "{wide_gbs} GB/s of 19.2 with 128-byte bursts");
}

#[test]
fn the_itanium2_presets_random_miss_costs_the_papers_memory_latency() {
    // Chapman et al. §4.1: memory about 100 cycles on the rx2600. A pointer chase at
    // random over 256 MiB (1G pages: no walk) misses every cache and opens another row
    // each time: the L3's 14 cycles and a row conflict, about what `memory.latency` (100)
    // charges every miss in count-only runs.
    let sets = ["time.unknown_deps=\"previous-load\"", "os.page_size=1G", "tlb.l1d.page_sizes=[\"1G\"]"];
    let d = timed_on("itanium2", "pchase", &["footprint=256M", "accesses=100k"], &sets);
    let latency = f(&d, "time.latency.data_unloaded");
    assert!((97.0..=103.0).contains(&latency), "{latency} cycles a miss");
    assert!(f(&d, "time.dram.row_hit_rate") < 0.01, "every miss a row conflict");
    assert_eq!(f(&d, "time.dram.bytes"), 128.0 * f(&d, "time.dram.reads"), "128-byte lines");
}

#[test]
fn walks_of_dependent_accesses_leave_no_walker_idle_while_walks_wait() {
    // A key-value store's chain and value reads depend on the reads before them, so
    // their walks are ready late in time though early in the trace. With walks made
    // long (pwc.latency), both walkers are the bound: a walker serves whichever walk is
    // ready, so they are never idle while a walk waits (docs/validation.md, model check 3).
    let d = timed("kv", &["keys=1M", "accesses=100k"], &["pwc.latency=258"]);
    let occupancy = f(&d, "time.walks.walker_occupancy");
    assert!(occupancy > 0.98, "the walkers are busy {occupancy:.3} of the time");
    assert!(f(&d, "time.walks.walker_wait_cycles") > f(&d, "time.walks.count") * 100.0, "walks wait for a walker");
}

#[test]
fn a_second_walker_overlaps_walks() {
    let gups = ["footprint=4G", "accesses=200k"];
    let one = timed("gups", &gups, &["time.walkers=1"]);
    let two = timed("gups", &gups, &["time.walkers=2"]);
    let (c1, c2) = (f(&one, "time.cycles"), f(&two, "time.cycles"));
    assert!(c2 < 0.75 * c1, "two walkers: {c2} cycles, one: {c1}");
    // Both runs are walker-bound: the walkers are busy nearly all the time, so the
    // time is the walks' total divided by the walkers.
    for (d, walkers) in [(&one, 1.0), (&two, 2.0)] {
        let occupancy = f(d, "time.walks.walker_occupancy");
        assert!((0.9..=1.0).contains(&occupancy), "{walkers} walkers busy {occupancy:.2} of the time");
        // The walks' total over the walkers is the time they were busy (walks placed in
        // trace order overlap little).
        let walk_cycles = f(d, "time.walks.count") * f(d, "time.walks.mean_latency");
        let busy = walk_cycles / walkers / f(d, "time.cycles");
        assert!((busy - occupancy).abs() < 0.02, "walks {busy:.3} of the time, walkers busy {occupancy:.3}");
    }
}

/// Strip what only the time model adds.
fn counters(mut d: Value) -> Value {
    let o = d.as_object_mut().unwrap();
    for k in ["time", "config", "config_hash"] {
        o.remove(k);
    }
    d
}

#[test]
fn the_time_model_changes_no_counter() {
    for (name, params) in [
        ("gups", &["footprint=1G", "accesses=50k"][..]),
        ("kv", &["accesses=50k"]),
        ("graph", &["accesses=50k"]),
        ("pchase", &["footprint=64M", "accesses=50k"]),
    ] {
        for kind in ["radix", "nested-ecpt"] {
            let base = ["memory.data_refs=true".to_string(), format!("page_table.kind=\"{kind}\"")];
            let count = run(&RunRequest { config: "skylake".into(), overrides: base.to_vec(), source: workload(name, params), progress: false }).unwrap();
            let count = counters(count);
            // Timed in full, and sampled (which skips most references).
            for sampling in [None, Some(SAMPLED)] {
                let mut with_time = base.to_vec();
                with_time.push("time.model=\"ooo\"".into());
                with_time.extend(sampling.into_iter().flatten().map(|s| s.to_string()));
                let timed = run(&RunRequest { config: "skylake".into(), overrides: with_time, source: workload(name, params), progress: false }).unwrap();
                assert!(timed["time"]["cycles"].as_u64().unwrap() > 0);
                assert_eq!(count, counters(timed), "{name} on {kind}, sampling {sampling:?}");
            }
        }
    }
}

/// The same run inline and with the memory model (and the walker, as `walker` says) on
/// its own thread.
fn run_threaded(cfg: &Config, threaded: bool, walker: WalkerThread) -> Value {
    let mut src = synth::open("gups", &[("footprint".into(), "256M".into()), ("accesses".into(), "100k".into())]).unwrap();
    let mut s = sim::build(cfg, &SourceInfo::default(), None).unwrap();
    assert_eq!(s.use_memory_thread(threaded, walker), threaded);
    let mut buf = Vec::new();
    while src.next_batch(&mut buf).unwrap() {
        s.feed(&buf).unwrap();
    }
    s.finish(src.meta()).unwrap().0
}

#[test]
fn the_time_model_times_the_same_on_the_memory_thread() {
    for kind in ["radix", "ecpt"] {
        for sampling in [&[][..], &SAMPLED] {
            let mut sets = vec!["memory.data_refs=true".to_string(), "time.model=\"ooo\"".into(), format!("page_table.kind=\"{kind}\"")];
            sets.extend(sampling.iter().map(|s| s.to_string()));
            let cfg = Config::load("skylake", &sets).unwrap();
            let inline = run_threaded(&cfg, false, WalkerThread::Auto);
            // Radix splits its walk: the whole walker on the thread too.
            for walker in [WalkerThread::Auto, WalkerThread::Always] {
                assert_eq!(inline["time"], run_threaded(&cfg, true, walker)["time"], "{kind} {sampling:?} {walker:?}");
            }
        }
    }
}

/// Sampling a tenth of the references in detail, a twentieth measured.
const SAMPLED: [&str; 3] = ["time.sampling.period=20000", "time.sampling.unit=1000", "time.sampling.warmup=1000"];

#[test]
fn sampled_timing_estimates_the_fully_timed_run() {
    for (name, params) in [
        ("gups", &["footprint=1G", "accesses=400k"][..]),
        ("stream", &["footprint=1G", "accesses=400k"]),
        ("pchase", &["footprint=256M", "accesses=400k"]),
        ("kv", &["accesses=400k"]),
    ] {
        let full = timed(name, params, &[]);
        let sampled = timed(name, params, &SAMPLED);
        let (c_full, c_sampled) = (f(&full, "time.cycles"), f(&sampled, "time.cycles"));
        let error = (c_sampled - c_full).abs() / c_full;
        let interval = f(&sampled, "time.sampling.cpi_error");
        assert!(error < 0.05, "{name}: sampled {c_sampled} cycles, timed in full {c_full}");
        assert!(interval > 0.0 && interval < 0.15, "{name}: a 95% interval of ±{interval}");
        assert_eq!(f(&sampled, "time.sampling.units"), 20.0, "{name}");
        assert_eq!(f(&sampled, "time.sampling.measured_references"), 20_000.0, "{name}");
        // Every instruction is in the estimate; the counts scale to the whole run.
        assert_eq!(f(&sampled, "time.instructions"), f(&full, "time.instructions"), "{name}");
        for path in ["time.loads", "time.dram.reads"] {
            let (a, b) = (f(&sampled, path), f(&full, path));
            assert!((a - b).abs() <= 0.1 * b + 100.0, "{name}: {path} sampled {a}, in full {b}");
        }
    }
}

#[test]
fn a_warm_up_leaves_the_time_of_the_rest() {
    let all = timed("gups", &["footprint=256M", "accesses=100k"], &[]);
    let warm = timed("gups", &["footprint=256M", "accesses=100k"], &["sim.warmup_accesses=50000"]);
    let (c_all, c_warm) = (f(&all, "time.cycles"), f(&warm, "time.cycles"));
    assert!(c_warm < 0.6 * c_all && c_warm > 0.3 * c_all, "{c_warm} of {c_all}");
    assert_eq!(f(&warm, "time.instructions"), f(&warm, "totals.instructions"));
    let sampled = timed("gups", &["footprint=256M", "accesses=100k"], &[&["sim.warmup_accesses=50000"][..], &SAMPLED].concat());
    assert_eq!(f(&sampled, "time.instructions"), f(&warm, "totals.instructions"));
    assert_eq!(f(&sampled, "time.sampling.references"), 50_000.0);
    let c_sampled = f(&sampled, "time.cycles");
    assert!((c_sampled - c_warm).abs() < 0.1 * c_warm, "sampled {c_sampled}, in full {c_warm}");
}

#[test]
fn bad_time_settings_are_one_line_errors_naming_the_key() {
    for (set, key) in [
        ("cache.l1d.mshrs=0", "cache.l1d.mshrs"),
        ("time.core.rob=0", "time.core.rob"),
        ("time.dram.channel_gbs=0", "time.dram.channel_gbs"),
        ("time.walkers=0", "time.walkers"),
        ("time.core.base_cpi=0.1", "time.core.base_cpi"),
        ("time.dram.row=\"100\"", "time.dram.row"),
        ("time.model=\"fast\"", "time.model"),
        ("time.sampling.unit=0", "time.sampling.unit"),
        ("time.sampling.period=2000", "time.sampling.period"),
        ("time.sampling.rate=2", "time.sampling.rate"),
        // Counts that size whole structures are bounded, not allocated until the host gives out.
        ("time.walkers=2147483648", "time.walkers"),
        ("time.core.load_queue=2147483648", "time.core.load_queue"),
        ("time.core.store_queue=100000", "time.core.store_queue"),
        ("time.dram.channels=2048", "time.dram.channels"),
        ("time.dram.banks=2147483648", "time.dram.banks"),
    ] {
        let e = Config::load("skylake", &["memory.data_refs=true".into(), set.into()]).unwrap_err().to_string();
        assert!(e.contains(key) && !e.contains('\n'), "{set}: {e}");
    }
    // Checked when the model is built.
    for (preset, sets, key) in [
        ("skylake", &["page_table.stlb.entries=2147483648"][..], "page_table.stlb.entries"),
        ("romer-cache", &["os.recolor.kind=\"cml\"", "os.recolor.cml_lru=2147483648"][..], "os.recolor.cml_lru"),
        ("skylake", &["mmu.refill.kind=\"software\"", "mmu.refill.instructions=1000000000"][..], "mmu.refill.instructions"),
    ] {
        let built = Config::load(preset, &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .and_then(|cfg| vmlab::sim::build(&cfg, &vmlab::sim::SourceInfo::default(), None).map(|_| ()));
        let e = built.unwrap_err().to_string();
        assert!(e.contains(key) && !e.contains('\n'), "{sets:?}: {e}");
    }
    let e = Config::load("skylake", &["time.model=\"ooo\"".into()]).unwrap_err().to_string();
    assert!(e.contains("time.model") && e.contains("memory.data_refs"), "{e}");
}
