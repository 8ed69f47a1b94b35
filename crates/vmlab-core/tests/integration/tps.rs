//! Tailored Page Sizes through the engine (TPS §III, §IV): the directions the paper
//! reports, and its OS policy's invariants.

use crate::common;

use proptest::prelude::*;
use serde_json::Value;
use vmlab::api::{run, RunRequest, SourceSpec};
use vmlab::config::Config;

const BASE: u64 = 0x7f00_0000_0000;

fn gups(config: &str, overrides: &[&str], footprint: &str, accesses: &str) -> Value {
    run(&RunRequest {
        config: config.into(),
        overrides: overrides.iter().map(|s| s.to_string()).collect(),
        source: SourceSpec::Workload { name: "gups".into(), params: vec![("footprint".into(), footprint.into()), ("accesses".into(), accesses.into())] },
        progress: false,
    })
    .unwrap_or_else(|e| panic!("{config} {overrides:?}: {e}"))
}

fn l1d_misses(d: &Value) -> f64 {
    d.pointer("/tlb_levels_by_side/data/0/misses").and_then(Value::as_f64).unwrap()
}

fn f(v: &Value, p: &str) -> f64 {
    v.pointer(p).and_then(Value::as_f64).unwrap_or_else(|| panic!("missing {p}"))
}

/// TPS §IV: on a dense GUPS-like workload with unfragmented memory, TPS removes at
/// least 90% of the L1 DTLB misses of reservation-based THP (100% thresholds both);
/// at 50% it removes nearly all.
#[test]
fn tps_removes_nine_tenths_of_l1_dtlb_misses_vs_reservation_thp() {
    let thp = gups("skylake", &["os.policy.kind=thp-reserve"], "256M", "16000000");
    let tps = gups("tps", &[], "256M", "16000000");
    let removed = 1.0 - l1d_misses(&tps) / l1d_misses(&thp);
    assert!(removed >= 0.90, "TPS removed {:.1}% of THP's L1 DTLB misses", 100.0 * removed);
    // The whole region ends up as one 256M page, grown in place (no copies).
    assert_eq!(f(&tps, "/page_sizes/256M"), 1.0);
    assert_eq!(f(&tps, "/policy/bytes_copied"), 0.0);
    assert_eq!(f(&tps, "/policy/bloat_fraction"), 0.0, "100% threshold: no bloat");
    let half = gups("tps", &["os.policy.threshold=0.5"], "256M", "16000000");
    assert!(l1d_misses(&half) < 0.01 * l1d_misses(&thp));
    assert!(f(&half, "/walks/refs") < 0.05 * f(&thp, "/walks/refs"));
}

/// TPS §III-B2: under fragmentation the reservations fall back to smaller sizes, yet
/// still larger than 4K where some contiguity remains; memory accounting balances.
#[test]
fn tps_falls_back_to_smaller_pages_under_fragmentation() {
    let frag = ["machine.phys_mem=1G", "machine.fragmentation.free=0.5", "machine.fragmentation.level=1.0", "machine.fragmentation.order=6"];
    let d = gups("tps", &frag, "64M", "1000000");
    assert!(f(&d, "/faults/fallbacks") > 0.0);
    let sizes = d["page_sizes"].as_object().unwrap();
    let largest = sizes.iter().filter(|(_, n)| n.as_u64() > Some(0)).map(|(s, _)| vmlab::addr::parse_bytes(s).unwrap()).max().unwrap();
    assert!(largest > 4096 && largest < (1 << 18), "largest page {largest} with no free block of 256K");
    let m = |k: &str| f(&d, &format!("/memory/{k}"));
    assert_eq!(m("frames_used"), m("frames_data") + m("frames_page_table") + m("frames_reserved") + m("frames_other"));
    // Unfragmented, the same run grows one 64M page.
    let clean = gups("tps", &["machine.phys_mem=1G"], "64M", "1000000");
    assert_eq!(f(&clean, "/page_sizes/64M"), 1.0);
}

/// TPS §III-B2, aggressive rounding: a 2052K request becomes a 4M reservation (the VMA
/// rounded up to it). At a 50% threshold that is one 4M page with the unused 2044K as
/// bloat; at 100% the pages are conservative's (2M + 4K) and the 2044K stays reserved.
/// Conservative rounding never reaches past the request.
#[test]
fn aggressive_rounding_reserves_the_next_power_of_two() {
    let run_with = |rounding: &str, threshold: &str| {
        gups("tps", &[&format!("os.policy.tps.rounding={rounding}"), &format!("os.policy.threshold={threshold}")], "2052K", "200000")
    };
    let tail = (4096 - 2052) << 10;
    let half = run_with("aggressive", "0.5");
    assert_eq!(f(&half, "/page_sizes/4M"), 1.0);
    assert_eq!(f(&half, "/policy/details/rounded_up"), 1.0);
    assert_eq!(f(&half, "/policy/details/rounded_up_bytes"), tail as f64);
    assert_eq!(f(&half, "/policy/bloat_bytes"), tail as f64);
    let full = run_with("aggressive", "1.0");
    let cons = run_with("conservative", "1.0");
    for d in [&full, &cons] {
        assert_eq!((f(d, "/page_sizes/2M"), f(d, "/page_sizes/4K")), (1.0, 1.0));
        assert_eq!(f(d, "/policy/bloat_bytes"), 0.0);
    }
    assert_eq!(f(&full, "/policy/reserved_bytes"), tail as f64);
    assert_eq!(f(&cons, "/policy/reserved_bytes"), 0.0);
    assert_eq!(f(&cons, "/policy/details/rounded_up"), 0.0);
    // Same pages, same misses: at 100% the rounding only costs memory.
    assert_eq!(l1d_misses(&full), l1d_misses(&cons));
}

/// TLB splintering: the `tps` preset's STLB holds 4K/2M, so a tailored page of another
/// size is cached there as the 4K (or 2M) piece around the access. With it the STLB
/// serves tailored pages and fewer misses walk; without it they are not cached there.
#[test]
fn the_stlb_caches_tailored_pages_as_splinters() {
    let with = gups("tps", &["tlb.l1d_tps.entries=4"], "64M", "2000000");
    let without = gups("tps", &["tlb.l1d_tps.entries=4", "tlb.stlb.splinter=false"], "64M", "2000000");
    assert!(f(&with, "/tlb/stlb/splinters") > 0.0);
    assert_eq!(f(&without, "/tlb/stlb/splinters"), 0.0);
    assert!(f(&with, "/tlb/stlb/hits") > f(&without, "/tlb/stlb/hits"));
    assert!(f(&with, "/walks/count") < f(&without, "/walks/count"));
}

proptest! {
    #![proptest_config(crate::common::proptest_config(32))]
    /// Pages grow through every size, get unmapped and refault, while a splintering
    /// STLB and a 4-entry any-size L1 cache them: every TLB entry (splinters included)
    /// always translates as the page table does.
    #[test]
    fn splinters_never_outlive_their_page(
        vmas in proptest::collection::vec((0u64..16, 1u64..900), 1..5),
        accesses in proptest::collection::vec((0usize..5, 0u64..(900 << 12)), 1..2000),
        threshold in prop_oneof![Just("1.0"), Just("0.5")],
        rounding in prop_oneof![Just("conservative"), Just("aggressive")],
        unmap_one in any::<bool>(),
    ) {
        let cfg = Config::load("tps", &[
            "machine.phys_mem=512M".to_string(),
            "os.policy.tps.max_size=4M".to_string(),
            format!("os.policy.threshold={threshold}"),
            format!("os.policy.tps.rounding={rounding}"),
            "tlb.l1d_tps.entries=4".to_string(),
            "tlb.stlb.entries=64".to_string(),
            "tlb.stlb.ways=4".to_string(),
        ]).unwrap();
        let mut e = common::radix_engine(&cfg);
        let regions: Vec<(u64, u64)> = vmas.iter().map(|&(slot, pages)| (BASE + slot * (8 << 20) + (((slot * 7) % 256) << 12), pages << 12)).collect();
        common::drive_vmas(&mut e, &regions, &accesses, unmap_one);
        common::pages_inside_vmas(&e)?;
        common::tlbs_agree_with_page_table(&e)?;
    }
}
