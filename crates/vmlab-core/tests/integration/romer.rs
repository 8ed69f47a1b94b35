//! Romer's superpage-promotion policies (thesis ch. 3, §6.5) through the engine: the
//! invariants every policy keeps, and the directions the thesis reports.

use crate::common;

use proptest::prelude::*;
use serde_json::Value;
use vmlab::api::{run, RunRequest, SourceSpec};
use vmlab::config::Config;
use vmlab::mmu::pwc::PageWalkCache;
use vmlab::pt::{PageTable, RadixPageTable};
use vmlab::trace::vmt::VmtWriter;
use vmlab::trace::{Record, TraceMeta};

const BASE: u64 = 0x7f00_0000_0000;

fn workload(policy: &str, extra: &[&str], name: &str, params: &[(&str, &str)]) -> Value {
    let mut overrides = vec![format!("os.policy.kind={policy}")];
    overrides.extend(extra.iter().map(|s| s.to_string()));
    run(&RunRequest {
        config: "romer".into(),
        overrides,
        source: SourceSpec::Workload { name: name.into(), params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() },
        progress: false,
    })
    .unwrap_or_else(|e| panic!("{policy}: {e}"))
}

fn f(v: &Value, p: &str) -> f64 {
    v.pointer(p).and_then(Value::as_f64).unwrap_or_else(|| panic!("missing {p}"))
}

/// §3.6: on a dense TLB-bound workload APPROX-ONLINE removes most TLB misses (≥ 10×
/// fewer than FIXED 4K) at a memory overhead ≤ 5%; it approaches OFFLINE, and both beat
/// FIXED 4K in TLBMCPI.
#[test]
fn approx_online_cuts_misses_tenfold_at_low_memory_overhead() {
    let params = [("footprint", "16M"), ("accesses", "6000000")];
    let fixed = workload("fixed", &[], "gups", &params);
    let approx = workload("approx-online", &[], "gups", &params);
    let offline = workload("offline", &[], "gups", &params);
    let misses = |d: &Value| f(d, "/tlb/dtlb/misses");
    assert!(misses(&fixed) >= 10.0 * misses(&approx), "fixed {} vs approx-online {}", misses(&fixed), misses(&approx));
    assert!(f(&approx, "/policy/bloat_fraction") <= 0.05);
    assert!(f(&approx, "/policy/promotions") > 0.0);
    let cpi = |d: &Value| f(d, "/policy/tlbmcpi");
    assert!(cpi(&approx) < cpi(&fixed), "approx-online {} vs fixed {}", cpi(&approx), cpi(&fixed));
    assert!(cpi(&offline) <= cpi(&approx), "offline {} vs approx-online {}", cpi(&offline), cpi(&approx));
    assert_eq!(f(&offline, "/policy/details/passes"), 2.0);
    // Bookkeeping is charged per miss at Table 3-3's cost.
    assert_eq!(f(&approx, "/policy/bookkeeping_cycles"), 100.0 * misses(&approx));
}

/// §3.6.1: ASAP never promotes a superpage that is not fully populated, so a workload
/// touching every other page defeats it; APPROX-ONLINE promotes anyway.
#[test]
fn asap_fails_on_partly_populated_regions() {
    let params = [("footprint", "16M"), ("stride", "8192"), ("accesses", "3000000")];
    let asap = workload("asap", &[], "stride", &params);
    let approx = workload("approx-online", &[], "stride", &params);
    assert_eq!(f(&asap, "/policy/promotions"), 0.0);
    assert!(f(&approx, "/policy/promotions") > 0.0);
    assert!(f(&approx, "/tlb/dtlb/misses") * 4.0 < f(&asap, "/tlb/dtlb/misses"));
}

/// §6.5: on a workload promotion cannot help (sparse pages), THROTTLE suspends the
/// bookkeeping that APPROX-ONLINE keeps paying.
#[test]
fn throttle_bounds_bookkeeping_where_promotion_cannot_help() {
    let params = [("pages", "4096"), ("space", "64G"), ("accesses", "4000000")];
    let extra = ["os.policy.romer.throttle_window=1000000"];
    let approx = workload("approx-online", &extra, "sparse", &params);
    let throttle = workload("throttle", &extra, "sparse", &params);
    assert_eq!(f(&approx, "/policy/promotions"), 0.0);
    assert!(f(&throttle, "/policy/details/throttle/activations") >= 1.0);
    assert!(f(&throttle, "/policy/bookkeeping_cycles") * 10.0 < f(&approx, "/policy/bookkeeping_cycles"));
    assert!(f(&throttle, "/policy/tlbmcpi") < f(&approx, "/policy/tlbmcpi"));
}

#[test]
fn superpages_need_a_table_that_maps_every_size() {
    let e = Config::load("romer", &["page_table.radix.tailored=false".into()])
        .and_then(|cfg| vmlab::sim::Engine::new(&cfg, RadixPageTable::from_config(&cfg.page_table.radix)?, PageWalkCache::none()).map(|_| ()));
    let msg = e.unwrap_err().to_string();
    assert!(msg.contains("os.policy.romer.max_size") && msg.contains("tailored"), "{msg}");
    let e = Config::load("romer", &["tlb.dtlb.ways=4".into()]).unwrap_err().to_string();
    assert!(e.contains("tlb.dtlb.any_size"), "{e}");
}

proptest! {
    #![proptest_config(crate::common::proptest_config(32))]
    /// Under every online policy and TPS (both roundings: aggressive grows VMAs), with
    /// promotion made cheap (so it happens often):
    /// every mapped page lies inside one VMA and is aligned, the page table agrees with
    /// the OS's record of every page, and frame accounting balances.
    #[test]
    fn romer_policies_keep_pages_inside_vmas_and_tables_consistent(
        vmas in proptest::collection::vec((0u64..16, 1u64..700), 1..5),
        accesses in proptest::collection::vec((0usize..5, 0u64..(700 << 12)), 1..2000),
        policy in prop_oneof![Just("online"), Just("approx-online"), Just("throttle"), Just("asap"), Just("asap-4-64"), Just("tps")],
        threshold in prop_oneof![Just("1.0"), Just("0.5")],
        rounding in prop_oneof![Just("conservative"), Just("aggressive")],
        unmap_one in any::<bool>(),
    ) {
        let cfg = Config::load("romer", &[
            format!("os.policy.tps.rounding={rounding}"),
            "machine.phys_mem=512M".to_string(),
            format!("os.policy.kind={policy}"),
            "os.policy.romer.max_size=1M".to_string(),
            "os.policy.tps.max_size=1M".to_string(),
            format!("os.policy.threshold={threshold}"),
            "os.policy.romer.prefetch_threshold=0.0005".to_string(),
            "os.policy.romer.capacity_threshold=0.001".to_string(),
            "os.policy.romer.throttle_window=500".to_string(),
            "tlb.dtlb.entries=4".to_string(),
        ]).unwrap();
        let mut e = common::radix_engine(&cfg);
        let regions: Vec<(u64, u64)> = vmas.iter().map(|&(slot, pages)| (BASE + slot * (4 << 20) + (((slot * 7) % 256) << 12), pages << 12)).collect();
        common::drive_vmas(&mut e, &regions, &accesses, unmap_one);
        common::tlbs_agree_with_page_table(&e)?;
        let asid = e.os.mm.asid_of(1).unwrap();
        let mut data_frames = 0;
        for (base, m) in common::pages_inside_vmas(&e)? {
            prop_assert!(m.size.is_aligned(m.pa), "frame {:#x} not aligned to {}", m.pa, m.size);
            let t = e.os.mm.pt.translate(asid, base).unwrap();
            prop_assert_eq!((t.pa, t.size, t.perms), (m.pa, m.size, m.perms));
            data_frames += m.size.base_pages();
        }
        let c = e.os.mm.mem.counters();
        prop_assert_eq!(c.frames_data, data_frames);
        prop_assert_eq!(c.frames_used, c.frames_data + c.frames_page_table + c.frames_reserved + c.frames_other);
    }
}

#[test]
fn bad_policy_settings_name_their_key() {
    for (set, key) in [
        ("os.policy.romer.prefetch_threshold=-1", "os.policy.romer.prefetch_threshold"),
        ("os.policy.romer.max_size=4K", "os.policy.romer.max_size"),
        ("os.policy.romer.max_size=3M", "os.policy.romer.max_size"),
        ("os.policy.romer.asap_4_64_fraction=1.5", "os.policy.romer.asap_4_64_fraction"),
        ("os.policy.romer.throttle_window=0", "os.policy.romer.throttle_window"),
        ("os.policy.romer.no_such_key=1", "no_such_key"),
        ("os.policy.tps.max_size=4K", "os.policy.tps.max_size"),
        ("os.policy.tps.rounding=sloppy", "os.policy.tps.rounding"),
        ("os.policy.kind=approx", "os.policy.kind"),
    ] {
        let e = Config::load("romer", &[set.to_string()]).unwrap_err().to_string();
        assert!(e.contains(key), "{set}: {e}");
    }
}

/// §3.4.1: OFFLINE plans from the whole first pass, so a trace that ends with its
/// process's exit (as every traced program's does) gets the plan it would get without
/// the exit record: the exited process's charges are kept for the plan.
#[test]
fn offline_plans_from_a_process_that_exited() {
    let dir = tempfile::tempdir().unwrap();
    let mut x = 1u64;
    let mut recs: Vec<Record> = (0..1_500_000)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            Record::read(BASE + (((x >> 33) % (4 << 20)) & !7), 8, 1)
        })
        .collect();
    let run_trace = |name: &str, recs: &[Record]| {
        let path = dir.path().join(name);
        let mut w = VmtWriter::create(&path, &TraceMeta::default()).unwrap();
        w.write_all(recs).unwrap();
        w.finish().unwrap();
        run(&RunRequest { config: "romer".into(), overrides: vec!["os.policy.kind=offline".into()], source: SourceSpec::Trace(path), progress: false }).unwrap()
    };
    let running = run_trace("running.vmt", &recs);
    recs.push(Record::Exit { pid: 1 });
    let exited = run_trace("exited.vmt", &recs);
    let planned = |d: &Value| f(d, "/policy/details/planned_superpages");
    assert!(planned(&running) > 0.0);
    assert_eq!(planned(&exited), planned(&running));
    assert_eq!(f(&exited, "/tlb/dtlb/misses"), f(&running, "/tlb/dtlb/misses"));
}
