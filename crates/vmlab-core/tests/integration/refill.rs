//! Software-managed refill as code (`[mmu.refill]`, mmu/refill.rs): the handler's
//! instructions, fetches and exception cost, in count-only mode and under the time
//! model, against the same walks refilled by hardware.

use serde_json::Value;
use vmlab::api::{run, RunRequest, SourceSpec};

/// The R4700-like machine of the Elphinstone reproduction: one 48-entry unified TLB,
/// no page-walk caches, 16 KiB L1 I- and D-caches of 32-byte lines.
const R4700: [&str; 5] = [
    r#"tlb={utlb={level=1,serves="unified",entries=48,ways=0,page_sizes=["4K"]}}"#,
    "pwc.entries=[]",
    r#"cache={l1d={level=1,serves="data",size="16K",ways=2,line=32,latency=2},l1i={level=1,serves="instr",size="16K",ways=2,line=32,latency=1},l2={level=2,size="512K",ways=1,line=32,latency=12}}"#,
    "memory.latency=60",
    "machine.phys_mem=2G",
];

fn sparse(sets: &[&str]) -> Value {
    let mut overrides: Vec<String> = R4700.iter().map(|s| s.to_string()).collect();
    overrides.extend(sets.iter().map(|s| s.to_string()));
    let params = [("pages", "512"), ("space", "1T"), ("accesses", "100k")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    run(&RunRequest { config: "tiny".into(), overrides, source: SourceSpec::Workload { name: "sparse".into(), params }, progress: false }).unwrap()
}

fn u(d: &Value, path: &str) -> u64 {
    d.pointer(path).and_then(Value::as_u64).unwrap_or_else(|| panic!("{path}: {}", d.pointer(path).unwrap_or(&Value::Null)))
}

fn mean_latency(d: &Value) -> f64 {
    d["walks"]["latency"]["mean"].as_f64().unwrap()
}

#[test]
fn the_handler_runs_its_instructions_through_the_instruction_cache() {
    let hw = sparse(&["page_table.kind=guarded"]);
    let sw = sparse(&["page_table.kind=guarded", "mmu.refill.kind=software"]);
    // The same walks: the handler reads what the walker read.
    for p in ["/walks/count", "/walks/refs", "/walks/steps", "/caches/l1d/walk_accesses", "/caches/l1d/walk_misses"] {
        assert_eq!(u(&hw, p), u(&sw, p), "{p}");
    }
    // The GPT's handler: 10 instructions, and 8 per step (Elphinstone App. B.1.3).
    let (walks, steps) = (u(&sw, "/walks/count"), u(&sw, "/walks/steps"));
    assert_eq!(u(&sw, "/walks/handler_refills"), walks);
    assert_eq!(u(&sw, "/walks/handler_instructions"), 10 * walks + 8 * steps);
    // Each instruction is one fetch, a walk reference of the L1 I-cache; the handler's
    // few lines stay there.
    assert_eq!(u(&sw, "/caches/l1i/walk_accesses"), u(&sw, "/walks/handler_instructions"));
    assert!(u(&sw, "/caches/l1i/walk_misses") < 20);
    assert_eq!(u(&hw, "/caches/l1i/walk_accesses"), 0);
    // Its cycles: entry and exit (5 + 2), one per instruction, less the first-level
    // hits its loads hide (2 per step), plus its few fetch misses.
    let added = mean_latency(&sw) - mean_latency(&hw);
    let expect = 7.0 + (10 * walks + 8 * steps) as f64 / walks as f64 - 2.0 * steps as f64 / walks as f64;
    assert!((added - expect).abs() < 0.05, "the handler added {added:.2} cycles per refill, expected {expect:.2}");
}

#[test]
fn handler_lengths_are_config_keys_and_rank_the_tables_by_code() {
    let short = sparse(&["page_table.kind=guarded", "mmu.refill.kind=software", "mmu.refill.instructions_per_step=2", "mmu.refill.entry_cycles=0"]);
    let long = sparse(&["page_table.kind=guarded", "mmu.refill.kind=software"]);
    assert!(mean_latency(&long) > mean_latency(&short) + 20.0);
    // An HPT's one-bucket handler is shorter than an MPT's six levels.
    let hpt = sparse(&["page_table.kind=hashed", "page_table.hashed.subblock=2", "mmu.refill.kind=software"]);
    let mpt = sparse(&["page_table.kind=mpt", "mmu.refill.kind=software"]);
    let per_refill = |d: &Value| u(d, "/walks/handler_instructions") as f64 / u(d, "/walks/count") as f64;
    assert!((per_refill(&mpt) - 34.0).abs() < 0.5, "MPT: {}", per_refill(&mpt));
    assert!(per_refill(&hpt) < 21.0, "HPT: {}", per_refill(&hpt));
    assert!(mean_latency(&mpt) > mean_latency(&hpt));
}

#[test]
fn an_stlb_miss_traps_to_the_handler_and_a_hit_does_not() {
    let sw = sparse(&["page_table.kind=guarded", "page_table.stlb.entries=64", "mmu.refill.kind=stlb-miss"]);
    let stlb_misses = u(&sw, "/page_table/details/stlb/misses");
    assert!(stlb_misses > 0 && stlb_misses < u(&sw, "/walks/count"));
    assert_eq!(u(&sw, "/walks/handler_refills"), stlb_misses);
}

#[test]
fn under_the_time_model_a_software_refill_is_an_exception() {
    let timed = ["memory.data_refs=true", "time.model=ooo", "page_table.kind=guarded"];
    let hw = sparse(&timed);
    let sw = sparse(&[&timed[..], &["mmu.refill.kind=software"]].concat());
    let t = |d: &Value, k: &str| d["time"][k].as_f64().unwrap();
    assert!(t(&sw, "cycles") > t(&hw, "cycles"));
    // The handler runs on the core: the lost dispatch is translation, not a walker's.
    let cpi = |d: &Value| d["time"]["cpi_stack"]["translation"].as_f64().unwrap();
    assert!(cpi(&sw) > cpi(&hw));
    assert_eq!(u(&sw, "/time/walks/walker_wait_cycles"), 0);
    // The counters stay the count-only model's.
    let count = sparse(&["memory.data_refs=true", "page_table.kind=guarded", "mmu.refill.kind=software"]);
    for p in ["/walks", "/caches", "/tlb"] {
        assert_eq!(count.pointer(p), sw.pointer(p), "{p}");
    }
}

#[test]
fn bad_refill_settings_name_their_key() {
    let err = |sets: &[&str]| {
        let mut overrides: Vec<String> = R4700.iter().map(|s| s.to_string()).collect();
        overrides.extend(sets.iter().map(|s| s.to_string()));
        vmlab::config::Config::load("tiny", &overrides).unwrap_err().to_string()
    };
    assert!(err(&["mmu.refill.entry_cycles=3"]).contains("mmu.refill.kind"));
    assert!(err(&["mmu.refill.kind=stlb-miss"]).contains("page_table.stlb.entries"));
    assert!(err(&["mmu.refill.kind=software", "mmu.fixed_miss_cycles=30"]).contains("mmu.fixed_miss_cycles"));
    assert!(err(&["mmu.refill.kind=software", "mmu.refill.cycles_per_instruction=0"]).contains("mmu.refill.cycles_per_instruction"));
    assert!(err(&["mmu.refill.kind=firmware"]).contains("mmu.refill.kind"));
}
