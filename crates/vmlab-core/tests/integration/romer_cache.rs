//! Romer's cache-conflict policies (thesis ch. 4-6) through the engine: page colouring,
//! bin hopping, the software recolouring policies, CML, and COMBINED; and the safety of
//! recolouring (a page's translation changes only in where it sits).

use crate::common;

use proptest::prelude::*;
use serde_json::Value;
use vmlab::api::{run, RunRequest, SourceSpec};
use vmlab::config::Config;
use vmlab::pt::PageTable;
use vmlab::trace::{MapFlags, Record};

fn run_with(config: &str, overrides: &[&str], name: &str, params: &[(&str, &str)]) -> Value {
    run(&RunRequest {
        config: config.into(),
        overrides: overrides.iter().map(|s| s.to_string()).collect(),
        source: SourceSpec::Workload { name: name.into(), params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() },
        progress: false,
    })
    .unwrap_or_else(|e| panic!("{overrides:?}: {e}"))
}

fn f(v: &Value, p: &str) -> f64 {
    v.pointer(p).and_then(Value::as_f64).unwrap_or_else(|| panic!("missing {p}"))
}

const STRAWMAN: [(&str, &str); 1] = [("accesses", "2000000")];

/// Romer Table 4-6 / 5-3, strawman rows: under page colouring the hot pages share a
/// colour and L2 MCPI is high; Snapshot-Miss and CML recolour one page and remove nearly
/// all of it; under bin hopping there is little conflict to begin with; a two-way L2
/// removes it too.
#[test]
fn strawman_conflicts_collapse_under_snapshot_miss_and_cml() {
    let l2 = |d: &Value| f(d, "/mcpi/l2_mcpi");
    let dm = run_with("romer-cache", &[], "strawman", &STRAWMAN);
    assert!(l2(&dm) > 4.0, "page colouring, direct-mapped: {}", l2(&dm));
    for policy in ["snapshot-miss", "cml"] {
        let set = format!("os.recolor.kind=\"{policy}\"");
        let d = run_with("romer-cache", &[&set], "strawman", &STRAWMAN);
        assert!(l2(&d) < 0.05 * l2(&dm), "{policy}: {} vs {}", l2(&d), l2(&dm));
        assert!(f(&d, "/recolor/pages_recolored") >= 1.0);
        assert!(f(&d, "/mcpi/recolor_cpi") > 0.0, "{policy} pays for its copy");
    }
    let bh = run_with("romer-cache", &["os.placement.kind=\"bin-hopping\""], "strawman", &STRAWMAN);
    assert!(l2(&bh) < 0.02 * l2(&dm), "bin hopping: {}", l2(&bh));
    let a2 = run_with("romer-cache", &["cache.l2.ways=2"], "strawman", &STRAWMAN);
    assert!(l2(&a2) < 0.02 * l2(&dm), "two-way: {}", l2(&a2));
    // Nothing to fix under bin hopping: CML finds no conflict.
    let bh_cml = run_with("romer-cache", &["os.placement.kind=\"bin-hopping\"", "os.recolor.kind=\"cml\""], "strawman", &STRAWMAN);
    assert_eq!(f(&bh_cml, "/recolor/pages_recolored"), 0.0);
}

/// Romer §4.5.2's stab: caller and callee code pages conflicting in the L2.
#[test]
fn stab_code_conflicts_are_recolored_too() {
    let params = [("accesses", "2000000"), ("fetch", "1")];
    let dm = run_with("romer-cache", &[], "strawman", &params);
    let cml = run_with("romer-cache", &["os.recolor.kind=\"cml\""], "strawman", &params);
    assert!(f(&cml, "/mcpi/l2_miss_cpi") < 0.05 * f(&dm, "/mcpi/l2_miss_cpi"));
}

/// A single-line ping-pong (one line per hot page): the victim cache turns every
/// conflict miss into a victim hit.
#[test]
fn victim_cache_removes_single_line_ping_pong_misses() {
    let params = [("accesses", "200000"), ("line", "4096")];
    let dm = run_with("romer-cache", &[], "strawman", &params);
    let vc = run_with("romer-cache", &["cache.l2.victim.entries=1", "cache.l2.victim.latency=5"], "strawman", &params);
    assert!(f(&dm, "/caches/l2/misses") > 190_000.0);
    assert!(f(&vc, "/caches/l2/victim_hits") > 199_000.0);
    assert!(f(&vc, "/memory/dram_accesses") < 100.0, "only cold misses reach memory");
}

/// The software policies pay for monitoring: the active ones in TLB misses they
/// provoke and in copies, the periodic ones in recolours; each counts what it did.
#[test]
fn software_policies_report_their_costs() {
    let params = [("accesses", "1000000"), ("pages", "4")];
    for policy in ["active-naive", "active-delay", "active-throttle", "periodic-random", "periodic-color", "snapshot", "snapshot-delay", "snapshot-miss"] {
        let set = format!("os.recolor.kind=\"{policy}\"");
        let d = run_with("romer-cache", &[&set], "strawman", &params);
        assert!(f(&d, "/recolor/policy_cycles") > 0.0, "{policy}");
        assert!(f(&d, "/recolor/details/overhead_cycles") >= f(&d, "/recolor/policy_cycles"), "{policy}");
        let moved = f(&d, "/recolor/pages_recolored");
        assert!(moved >= 1.0, "{policy} recoloured nothing");
        assert_eq!(f(&d, "/recolor/bytes_copied"), 4096.0 * moved, "{policy}");
        if policy.starts_with("snapshot") {
            assert!(f(&d, "/recolor/details/snapshots") >= 1.0, "{policy}");
        }
    }
    // Active-delay provokes TLB misses by invalidating conflicting entries.
    let d = run_with("romer-cache", &["os.recolor.kind=\"active-delay\""], "strawman", &params);
    assert!(f(&d, "/recolor/details/tlb_invalidations") > 0.0);
}

/// COMBINED (ch. 6): recolouring a page inside a superpage demotes it and copies only
/// that base page; the other pages keep their frames.
#[test]
fn combined_recolors_one_base_page_of_a_superpage() {
    let cfg = Config::load("combined", &[]).unwrap();
    let mut e = common::radix_engine(&cfg);
    let base = 0x7f00_0000_0000u64;
    e.record(&Record::Mmap { pid: 1, start: base, len: 64 << 10, prot: 3, flags: MapFlags::PRIVATE }).unwrap();
    for p in 0..16 {
        e.record(&Record::read(base + p * 4096, 8, 1)).unwrap();
    }
    assert!(e.os.mm.promote_by_copy(1, base, vmlab::addr::PageSize::from_valid_shift(16)).unwrap());
    let before: Vec<u64> = (0..16).map(|p| e.os.mm.translation_at(1, base + p * 4096).unwrap().phys(base + p * 4096)).collect();
    let target = (e.os.mm.placement.color_of(before[3]) + 7) % e.os.mm.placement.colors;
    let to = e.os.mm.recolor_page(1, base + 3 * 4096, target).unwrap().expect("moved");
    assert_eq!(e.os.mm.placement.color_of(to), target);
    assert_eq!(e.os.mm.rc.demotions, 1);
    assert_eq!(e.os.mm.rc.bytes_copied, 4096);
    assert_eq!(e.os.mm.copies.len(), 1);
    assert_eq!((e.os.mm.copies[0].from, e.os.mm.copies[0].to), (before[3], to));
    for p in 0..16u64 {
        let t = e.os.mm.translation_at(1, base + p * 4096).unwrap();
        assert_eq!(t.size, vmlab::addr::PageSize::K4);
        let want = if p == 3 { to } else { before[p as usize] };
        assert_eq!(t.phys(base + p * 4096), want, "page {p}");
    }
    // Table 6-3: that page was copied by both mechanisms, the rest by promotion only.
    assert_eq!(e.os.mm.rc.copiers_split(), [15, 0, 1]);
}

#[test]
fn bad_cache_and_recolor_settings_name_their_key() {
    for (set, key) in [
        ("os.recolor.kind=\"sometimes\"", "os.recolor.kind"),
        ("os.recolor.target=\"coldest-miss\"", "os.recolor.target"),
        ("os.recolor.snapshot_pages=0", "os.recolor.snapshot_pages"),
        ("os.placement.kind=\"rainbow\"", "os.placement.kind"),
        ("os.placement.colours=999999999", "os.placement.colours"),
        ("cache.l2.organisation=\"column-associative\"", "cache.l2.organisation"),
        ("cache.l2.slow_latency=9", "cache.l2.slow_latency"),
        ("cache.l2.write_buffer=4", "cache.l2.write_buffer"),
        ("cache.l2.victim.entries=0", "cache.l2.victim.entries"),
    ] {
        let mut o = vec![set.to_string()];
        if set.starts_with("os.recolor.target") {
            o.push("os.recolor.kind=\"snapshot\"".into());
        }
        if set.contains("column-associative") {
            o.push("cache.l2.ways=2".into());
        }
        if set.contains("victim.entries") {
            o.push("cache.l2.victim.latency=5".into());
        }
        let e = Config::load("romer-cache", &o).unwrap_err().to_string();
        assert!(e.contains(key), "{set}: {e}");
    }
}

/// Overrides for a small machine without and with recolouring `policy` (thresholds
/// lowered so it acts often); `promote` adds COMBINED-style 64K superpages, which
/// recolouring a page inside demotes.
fn recoloring_overrides(policy: &str, placement: &str, promote: bool) -> (Vec<String>, Vec<String>) {
    let mut base = vec![
        "machine.phys_mem=64M".to_string(),
        format!("os.placement.kind=\"{placement}\""),
        "cache.l2.size=\"64K\"".to_string(),
        "tlb.dtlb.entries=8".to_string(),
    ];
    if promote {
        base.extend(
            [
                "os.policy.kind=\"approx-online\"",
                "os.policy.romer.max_size=64K",
                "os.policy.romer.prefetch_threshold=0.0005",
                "page_table.radix.tailored=true",
                "tlb.dtlb.page_sizes=[\"4K\",\"64K\"]",
                "tlb.dtlb.any_size=true",
            ]
            .map(String::from),
        );
    }
    let mut with = base.clone();
    with.extend([
        format!("os.recolor.kind=\"{policy}\""),
        "os.recolor.period=2000".into(),
        "os.recolor.delay=3".into(),
        "os.recolor.recolor_threshold=4".into(),
        "os.recolor.interrupt_threshold=6".into(),
        "os.recolor.clear_every=20000".into(),
        "os.recolor.snapshot_pages=4".into(),
    ]);
    if policy == "snapshot-miss" {
        with.push("os.recolor.period=50".into());
    }
    (base, with)
}

fn recoloring_policy() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("active-naive"),
        Just("active-delay"),
        Just("active-throttle"),
        Just("periodic-random"),
        Just("periodic-color"),
        Just("snapshot"),
        Just("snapshot-delay"),
        Just("snapshot-miss"),
        Just("cml")
    ]
}

fn placement_policy() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("page-coloring"), Just("bin-hopping"), Just("random")]
}

proptest! {
    #![proptest_config(crate::common::proptest_config(24))]
    /// Recolouring never changes what a page translates to, only where it sits: under
    /// every recolouring policy (with thresholds lowered so it acts often), every mapped
    /// page lies inside its VMA, the page table agrees with the OS's record, no two
    /// pages share a frame, frame accounting balances, the reverse map agrees, and the
    /// same virtual pages are mapped with the same permissions as without recolouring.
    #[test]
    fn recoloring_keeps_translations_and_tables_consistent(
        vmas in proptest::collection::vec((0u64..16, 1u64..64), 1..5),
        accesses in proptest::collection::vec((0usize..5, 0u64..(64 << 12)), 1..1500),
        policy in recoloring_policy(),
        placement in placement_policy(),
        promote in any::<bool>(),
        unmap_one in any::<bool>(),
    ) {
        let (base, with) = recoloring_overrides(policy, placement, promote);
        let mut runs = Vec::new();
        for o in [&base, &with] {
            let cfg = Config::load("romer-cache", o).unwrap();
            let mut e = common::radix_engine(&cfg);
            let regions: Vec<(u64, u64)> = vmas.iter().map(|&(slot, pages)| (0x7f00_0000_0000 + slot * (1 << 20), pages << 12)).collect();
            common::drive_vmas(&mut e, &regions, &accesses, unmap_one);
            let asid = e.os.mm.asid_of(1).unwrap();
            let mut frames = std::collections::BTreeSet::new();
            let mut data_frames = 0;
            let mut pages = Vec::new();
            for (b, m) in common::pages_inside_vmas(&e)? {
                let t = e.os.mm.pt.translate(asid, b).unwrap();
                prop_assert_eq!((t.pa, t.size, t.perms), (m.pa, m.size, m.perms));
                prop_assert!(frames.insert(m.pa), "two pages share frame {:#x}", m.pa);
                if let Some(r) = &e.os.mm.rmap {
                    prop_assert_eq!(r.lookup(m.pa), Some((1, b)));
                }
                data_frames += m.size.base_pages();
                for off in (0..m.size.bytes()).step_by(4096) {
                    pages.push((b + off, m.perms));
                }
            }
            let c = e.os.mm.mem.counters();
            prop_assert_eq!(c.frames_data, data_frames);
            prop_assert_eq!(c.frames_used, c.frames_data + c.frames_page_table + c.frames_reserved + c.frames_other);
            runs.push((pages, e.os.mm.rc.pages_recolored));
        }
        if !promote {
            // Same virtual pages, same permissions (superpage demotion may free untouched
            // sub-pages, so only compare without promotion).
            prop_assert_eq!(&runs[0].0, &runs[1].0);
        }
    }

    /// Data moves with its page: a shadow of physical memory holds, in the frame every
    /// write went to, the write's tag; promotions' and recolourings' copies carry the
    /// tags, frees drop them. At the end every page written (and not unmapped) must
    /// still be mapped and read back its last tag through the page table, and no other
    /// frame may hold one (no copy went astray, no live frame was freed or reused).
    #[test]
    fn data_moves_with_its_page_across_recolors_promotions_and_demotions(
        vmas in proptest::collection::vec((0u64..16, 1u64..64), 1..5),
        accesses in proptest::collection::vec((0usize..5, 0u64..(64 << 12), any::<bool>()), 1..1500),
        policy in recoloring_policy(),
        placement in placement_policy(),
        promote in any::<bool>(),
        unmap_one in any::<bool>(),
    ) {
        let (_, with) = recoloring_overrides(policy, placement, promote);
        let cfg = Config::load("romer-cache", &with).unwrap();
        let mut e = common::radix_engine(&cfg);
        e.os.mm.shadow = Some(Default::default());
        let regions: Vec<(u64, u64)> = vmas.iter().map(|&(slot, pages)| (0x7f00_0000_0000 + slot * (1 << 20), pages << 12)).collect();
        for &(start, len) in &regions {
            e.record(&Record::Mmap { pid: 1, start, len, prot: 3, flags: MapFlags::PRIVATE }).unwrap();
        }
        let mut written = std::collections::BTreeMap::new(); // page -> last tag
        for (k, &(i, off, write)) in accesses.iter().enumerate() {
            let (start, len) = regions[i % regions.len()];
            let va = start + off % len;
            if write {
                e.record(&Record::write(va, 8, 1)).unwrap();
                let asid = e.os.mm.asid_of(1).unwrap();
                let t = e.os.mm.pt.translate(asid, va).expect("a written page is mapped");
                e.os.mm.shadow.as_mut().unwrap().write(t.phys(va), k as u64);
                written.insert(va >> 12, k as u64);
            } else {
                e.record(&Record::read(va, 8, 1)).unwrap();
            }
            if unmap_one && k == accesses.len() / 2 {
                let (s, l) = regions[0];
                e.record(&Record::Munmap { pid: 1, start: s, len: l / 2 }).unwrap();
                written.retain(|&p, _| !(s >> 12..(s + l / 2 + 4095) >> 12).contains(&p));
            }
        }
        let asid = e.os.mm.asid_of(1).unwrap();
        let shadow = e.os.mm.shadow.as_ref().unwrap();
        for (&page, &tag) in &written {
            let t = e.os.mm.pt.translate(asid, page << 12);
            prop_assert!(t.is_some(), "written page {:#x} is no longer mapped", page << 12);
            prop_assert_eq!(shadow.read(t.unwrap().phys(page << 12)), Some(tag), "page {:#x}", page << 12);
        }
        prop_assert_eq!(shadow.len(), written.len(), "frames holding data vs pages written");
    }
}
