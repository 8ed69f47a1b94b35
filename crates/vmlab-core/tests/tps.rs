//! Tailored Page Sizes through the engine (TPS §III, §IV): the directions the paper
//! reports, and its OS policy's invariants.

use serde_json::Value;
use vmlab::api::{run, RunRequest, SourceSpec};

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
