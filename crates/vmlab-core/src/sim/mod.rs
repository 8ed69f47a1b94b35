//! Running a simulation: pick the engine for the configured page-table kind, drain the
//! source, and assemble the stats document (schema in docs/metrics.md).

pub mod engine;

pub use engine::Engine;

use crate::config::Config;
use crate::os::policy::{OfflinePlan, PolicyName};
use crate::error::Result;
use crate::pt::cwc::EcptWalkCaches;
use crate::pt::nested::{nested_pwc, NestedPageTable, NestedWalkCaches};
use crate::pt::{radix::PageWalkCache, ElasticCuckooPageTable, GuardedPageTable, HashedPageTable, InvertedPageTable, LinearPageTable, NoWalkCaches, SoftwareTlb, PageTable, RadixPageTable, WalkCaches};
use crate::stats::SCHEMA;
use crate::trace::TraceSource;
use serde_json::{json, Map, Value};

/// How the run's source is described in the stats document.
#[derive(Clone, Debug, Default)]
pub struct SourceInfo {
    pub kind: String,
    pub name: String,
    pub params: Value,
    pub content_hash: Option<String>,
}

/// One pass over a source, and OFFLINE's plan going in (second pass) or out (first).
pub struct Pass<'a> {
    src: &'a mut dyn TraceSource,
    plan: Option<OfflinePlan>,
    plan_out: Option<OfflinePlan>,
}

/// Simulate `src` under `cfg`. `on_batch(records_so_far)` reports progress. A policy
/// that reads the trace twice (OFFLINE) needs [`run_source`].
pub fn run(cfg: &Config, src: &mut dyn TraceSource, info: &SourceInfo, on_batch: impl FnMut(u64)) -> Result<Value> {
    if cfg.os.policy.kind == PolicyName::Offline {
        return Err(crate::Error::config("os.policy.kind", "\"offline\" reads the trace twice; this source can be read only once"));
    }
    run_pass(cfg, &mut Pass { src, plan: None, plan_out: None }, info, on_batch)
}

/// Simulate the source `open` opens (once, or twice for OFFLINE, Romer §3.4.1: a first
/// pass collects the charges, the second runs with the superpages they justify).
pub fn run_source(
    cfg: &Config,
    open: &mut dyn FnMut() -> Result<Box<dyn TraceSource + Send>>,
    info: &SourceInfo,
    mut on_batch: impl FnMut(u64),
) -> Result<Value> {
    let mut first = open()?;
    if cfg.os.policy.kind != PolicyName::Offline {
        return run(cfg, first.as_mut(), info, on_batch);
    }
    let mut pass = Pass { src: first.as_mut(), plan: None, plan_out: None };
    run_pass(cfg, &mut pass, info, &mut on_batch)?;
    let plan = pass.plan_out.take().expect("the first OFFLINE pass makes a plan");
    let mut second = open()?;
    let mut doc = run_pass(cfg, &mut Pass { src: second.as_mut(), plan: Some(plan), plan_out: None }, info, &mut on_batch)?;
    doc["policy"]["details"]["passes"] = 2.into();
    Ok(doc)
}

fn run_pass(cfg: &Config, src: &mut Pass, info: &SourceInfo, on_batch: impl FnMut(u64)) -> Result<Value> {
    match cfg.page_table.kind.as_str() {
        "radix" => {
            let pt = RadixPageTable::from_config(&cfg.page_table.radix)?;
            let pwc = PageWalkCache::new(&cfg.pwc.entries, cfg.pwc.ways, cfg.pwc.replacement, cfg.pwc.latency, cfg.mmu.seed)?;
            run_kind(cfg, pt, pwc, src, info, on_batch)
        }
        "hashed" => run_kind(cfg, HashedPageTable::new(&cfg.page_table.hashed)?, NoWalkCaches, src, info, on_batch),
        "linear" => {
            let pt = LinearPageTable::new(&cfg.page_table.linear)?;
            let pwc = PageWalkCache::new(&cfg.pwc.entries, cfg.pwc.ways, cfg.pwc.replacement, cfg.pwc.latency, cfg.mmu.seed)?;
            run_kind(cfg, pt, pwc, src, info, on_batch)
        }
        "guarded" => run_kind(cfg, GuardedPageTable::new(&cfg.page_table.guarded)?, NoWalkCaches, src, info, on_batch),
        "ecpt" => {
            let e = &cfg.page_table.ecpt;
            let cwc = EcptWalkCaches::new(e.pmd_cwc, e.pud_cwc, e.cwc_latency, cfg.mmu.seed)?;
            run_kind(cfg, ElasticCuckooPageTable::new(e)?, cwc, src, info, on_batch)
        }
        "inverted" => {
            let pt = InvertedPageTable::new(&cfg.page_table.inverted, cfg.machine.phys_mem.0)?;
            run_kind(cfg, pt, NoWalkCaches, src, info, on_batch)
        }
        "nested-radix" | "nested-ecpt" | "hybrid" => {
            let n = &cfg.page_table.nested;
            let e = &cfg.page_table.ecpt;
            let radix = || -> crate::Result<(RadixPageTable, PageWalkCache)> {
                Ok((
                    RadixPageTable::from_config(&cfg.page_table.radix)?,
                    PageWalkCache::new(&cfg.pwc.entries, cfg.pwc.ways, cfg.pwc.replacement, cfg.pwc.latency, cfg.mmu.seed)?,
                ))
            };
            let guest_ecpt = || -> crate::Result<(ElasticCuckooPageTable, EcptWalkCaches)> {
                Ok((ElasticCuckooPageTable::new(e)?, EcptWalkCaches::new(e.pmd_cwc, e.pud_cwc, e.cwc_latency, cfg.mmu.seed)?))
            };
            let host_ecpt = || -> crate::Result<(ElasticCuckooPageTable, EcptWalkCaches)> {
                Ok((ElasticCuckooPageTable::new(e)?, EcptWalkCaches::new(n.host_pmd_cwc, n.host_pud_cwc, e.cwc_latency, cfg.mmu.seed.wrapping_add(9))?))
            };
            let host_radix = || -> crate::Result<(RadixPageTable, PageWalkCache)> {
                let host = RadixPageTable::new(n.host_levels).map_err(|_| crate::Error::config("page_table.nested.host_levels", "must be 4 or 5"))?;
                Ok((host, nested_pwc(n, cfg.mmu.seed)?))
            };
            let seed = cfg.mmu.seed;
            match cfg.page_table.kind.as_str() {
                "nested-radix" => {
                    let ((g, gc), (h, hc)) = (radix()?, host_radix()?);
                    let caches = NestedWalkCaches::new(gc, hc, n, seed)?;
                    run_kind(cfg, NestedPageTable::new("nested-radix", g, h, n)?, caches, src, info, on_batch)
                }
                "nested-ecpt" => {
                    let ((g, gc), (h, hc)) = (guest_ecpt()?, host_ecpt()?);
                    let caches = NestedWalkCaches::new(gc, hc, n, seed)?;
                    run_kind(cfg, NestedPageTable::new("nested-ecpt", g, h, n)?, caches, src, info, on_batch)
                }
                _ => {
                    let ((g, gc), (h, hc)) = (radix()?, host_ecpt()?);
                    let caches = NestedWalkCaches::new(gc, hc, n, seed)?;
                    run_kind(cfg, NestedPageTable::new("hybrid", g, h, n)?, caches, src, info, on_batch)
                }
            }
        }
        other => Err(crate::Error::config("page_table.kind", format!("unknown kind `{other}`"))),
    }
}

/// Run a kind, behind a software TLB if one is configured.
fn run_kind<P: PageTable>(
    cfg: &Config,
    pt: P,
    caches: P::Caches,
    src: &mut Pass,
    info: &SourceInfo,
    on_batch: impl FnMut(u64),
) -> Result<Value> {
    if cfg.page_table.stlb.entries > 0 {
        run_with(cfg, SoftwareTlb::new(pt, &cfg.page_table.stlb)?, caches, src, info, on_batch)
    } else {
        run_with(cfg, pt, caches, src, info, on_batch)
    }
}

fn run_with<P: PageTable>(
    cfg: &Config,
    pt: P,
    caches: P::Caches,
    pass: &mut Pass,
    info: &SourceInfo,
    on_batch: impl FnMut(u64),
) -> Result<Value> {
    let mut e = Engine::new(cfg, pt, caches)?;
    if let Some(plan) = pass.plan.take() {
        e.os.policy.set_offline_plan(plan);
        e.refresh_policy_hooks();
    }
    e.run(pass.src, on_batch)?;
    pass.plan_out = e.os.policy.offline_plan(cfg);
    Ok(document(cfg, &e, pass.src, info))
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Assemble the stats document of a finished engine.
pub fn document<P: PageTable>(cfg: &Config, e: &Engine<P>, src: &dyn TraceSource, info: &SourceInfo) -> Value {
    let mut tlb = Map::new();
    for t in &e.tlbs.tlbs {
        let c = &t.counters;
        tlb.insert(
            t.name.clone(),
            json!({
                "level": t.level, "serves": t.serves.name(), "entries": t.entries(), "ways": t.ways(),
                "page_sizes": t.page_sizes().iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                "lookups": c.lookups, "hits": c.hits, "misses": c.misses,
                "miss_rate": ratio(c.misses, c.lookups),
                "fills": c.fills, "evictions": c.evictions, "invalidations": c.invalidations,
            }),
        );
    }
    let level_rows = |levels: &mut dyn Iterator<Item = (u64, u64)>| -> Vec<Value> {
        levels
            .enumerate()
            .map(|(l, (lookups, hits))| {
                json!({"level": l + 1, "lookups": lookups, "hits": hits, "misses": lookups - hits,
                       "miss_rate": ratio(lookups - hits, lookups)})
            })
            .collect()
    };
    let [data, instr] = &e.tlb_levels;
    let tlb_levels = level_rows(&mut data.iter().zip(instr).map(|(d, i)| (d.0 + i.0, d.1 + i.1)));
    let by_side = json!({
        "data": level_rows(&mut data.iter().copied()),
        "instr": level_rows(&mut instr.iter().copied()),
    });
    let mut walk_caches = Map::new();
    for (name, c) in e.walk_caches.counters() {
        walk_caches.insert(
            name,
            json!({"lookups": c.lookups, "hits": c.hits, "misses": c.misses, "hit_rate": ratio(c.hits, c.lookups)}),
        );
    }
    let mut caches = Map::new();
    for c in &e.mem.caches {
        let k = &c.counters;
        caches.insert(
            c.name.clone(),
            json!({"level": c.level, "serves": c.serves.name(), "accesses": k.accesses, "hits": k.hits,
                   "misses": k.misses, "miss_rate": ratio(k.misses, k.accesses),
                   "walk_accesses": k.walk_accesses, "walk_misses": k.walk_misses,
                   "copy_accesses": k.copy_accesses, "copy_misses": k.copy_misses,
                   "writebacks": k.writebacks, "slow_hits": k.slow_hits, "victim_hits": k.victim_hits,
                   "miss_cycles": k.miss_cycles,
                   "write_buffer_writes": c.write_buffer.as_ref().map_or(0, |w| w.writes),
                   "write_buffer_stall_cycles": c.write_buffer.as_ref().map_or(0, |w| w.stall_cycles)}),
        );
    }
    let fp = e.os.mm.pt.footprint();
    let w = &e.walks;
    let instr = e.run.instructions;
    let translation_cycles = e.cycles.tlb + e.cycles.walk + e.cycles.fault;
    let mem = e.os.mm.mem.counters();
    let page_sizes: Map<String, Value> =
        e.os.mm.mapped_by_size.iter().map(|(s, &n)| (s.to_string(), n.into())).collect();
    let mut source = json!({
        "kind": info.kind, "name": info.name, "params": info.params,
        "meta": serde_json::to_value(src.meta()).unwrap_or(Value::Null),
    });
    if let Some(h) = &info.content_hash {
        source["content_hash"] = h.clone().into();
    }
    json!({
        "schema": SCHEMA,
        "vmlab_version": crate::VERSION,
        "config": cfg.to_json(),
        "config_hash": cfg.hash(),
        "source": source,
        "totals": e.run,
        "tlb": tlb,
        "tlb_levels": tlb_levels,
        "tlb_levels_by_side": by_side,
        "walks": {
            "count": w.count, "refs": w.refs, "steps": w.steps, "faulting": w.faulting,
            "nested_lookups": w.nested_lookups, "nested_misses": w.nested_misses,
            "refs_per_walk": ratio(w.refs, w.count), "steps_per_walk": ratio(w.steps, w.count),
            "per_kilo_instruction": 1000.0 * ratio(w.count, instr),
            // Memory references the MMU issued for walks, per kilo-instruction.
            "mmu_requests_per_kilo_instruction": 1000.0 * ratio(w.refs, instr),
            "parallel_refs_per_step": w.step_walks.iter().zip(&w.step_refs).take_while(|(n, _)| **n > 0)
                .map(|(n, r)| ratio(*r, *n)).collect::<Vec<f64>>(),
            "walks_with_step": w.step_walks.iter().copied().take_while(|n| *n > 0).collect::<Vec<u64>>(),
            "latency": w.latency.to_json(),
        },
        "walk_caches": walk_caches,
        "faults": e.os.mm.counters,
        "page_table": {
            "kind": e.os.mm.pt.kind(), "bytes": fp.bytes, "nodes": fp.nodes, "mapped_pages": fp.mapped_pages,
            "bytes_per_mapped_page": ratio(fp.bytes, fp.mapped_pages),
            "peak_mapped_pages": e.os.mm.peak_mapped_pages,
            "bytes_at_peak": e.os.mm.pt_bytes_at_peak,
            "bytes_per_mapped_page_at_peak": ratio(e.os.mm.pt_bytes_at_peak, e.os.mm.peak_mapped_pages),
            "details": e.os.mm.pt.details(),
        },
        "caches": caches,
        "memory": {
            "phys_bytes": mem.phys_bytes, "frames_total": mem.frames_total, "frames_used": mem.frames_used,
            "frames_data": mem.frames_data, "frames_page_table": mem.frames_page_table,
            "frames_reserved": mem.frames_reserved, "frames_other": mem.frames_other,
            "frames_peak": mem.frames_peak,
            "free_blocks_by_order": e.os.mm.mem.free_blocks_per_order(),
            "dram_accesses": e.mem.memory_accesses,
        },
        "cycles": {
            "tlb": e.cycles.tlb, "walk": e.cycles.walk, "fault": e.cycles.fault, "data": e.cycles.data,
            "recolor_copy": e.cycles.recolor_copy, "recolor_policy": e.cycles.recolor_policy,
            "translation": translation_cycles,
            "translation_per_kilo_instruction": 1000.0 * ratio(translation_cycles, instr),
            "translation_per_access": ratio(translation_cycles, e.run.accesses),
        },
        "page_sizes": page_sizes,
        "policy": policy_section(e),
        "recolor": recolor_section(e),
        "mcpi": mcpi_section(e),
    })
}

/// The `recolor` section: placement and recolouring (docs/metrics.md).
fn recolor_section<P: PageTable>(e: &Engine<P>) -> Value {
    let mm = &e.os.mm;
    let rc = &mm.rc;
    let h = rc.histogram();
    let [promotion, recolor, both] = rc.copiers_split();
    json!({
        "placement": mm.placement.kind,
        "colours": mm.placement.colours,
        "pages_placed": mm.placement.counters.placed,
        "placement_fallbacks": mm.placement.counters.fallbacks,
        "kind": e.os.recolor.as_ref().map_or("none", |r| r.kind.as_str()),
        "pages_recolored": rc.pages_recolored,
        "distinct_pages_recolored": rc.per_page.len(),
        "pages_recolored_5_or_more": h.pages[4],
        "pages_by_times_recolored": h.pages,
        "operations_by_times_recolored": h.operations,
        "bytes_copied": rc.bytes_copied,
        "demotions": rc.demotions,
        "failed": rc.failed,
        "copy_cycles": e.cycles.recolor_copy,
        "policy_cycles": e.cycles.recolor_policy,
        "pages_copied_by": {"promotion_only": promotion, "recolor_only": recolor, "both": both},
        "details": e.os.recolor.as_ref().map_or(Value::Null, |r| r.details()),
    })
}

/// The `mcpi` section: Romer's memory cycles per instruction, split (docs/metrics.md).
fn mcpi_section<P: PageTable>(e: &Engine<P>) -> Value {
    let instr = e.run.instructions;
    let pc = &e.os.mm.pc;
    let last = e.mem.colour_cache().map(|c| c.name.clone());
    let l2_miss: u64 = e.mem.caches.iter().filter(|c| Some(&c.name) == last.as_ref()).map(|c| c.counters.miss_cycles).sum();
    let upper_miss: u64 = e.mem.caches.iter().filter(|c| Some(&c.name) != last.as_ref()).map(|c| c.counters.miss_cycles).sum();
    let wb: u64 = e.mem.caches.iter().filter_map(|c| c.write_buffer.as_ref()).map(|w| w.stall_cycles).sum();
    let recolor = e.cycles.recolor_copy + e.cycles.recolor_policy;
    let tlbm = e.cycles.tlb + e.cycles.walk + pc.bookkeeping_cycles + pc.copy_cycles;
    let total = e.cycles.data + e.cycles.fault + recolor + tlbm;
    json!({
        "instructions": instr,
        "l1_miss_cpi": ratio(upper_miss, instr),
        "l2_miss_cpi": ratio(l2_miss, instr),
        "write_buffer_cpi": ratio(wb, instr),
        "recolor_cpi": ratio(recolor, instr),
        "tlbmcpi": ratio(tlbm, instr),
        "l2_mcpi": ratio(l2_miss + recolor + tlbm, instr),
        "mcpi": ratio(total, instr),
    })
}

/// The `policy` section (docs/metrics.md).
fn policy_section<P: PageTable>(e: &Engine<P>) -> Value {
    let mm = &e.os.mm;
    let pc = &mm.pc;
    let by_size = |m: &std::collections::BTreeMap<crate::addr::PageSize, u64>| -> Map<String, Value> {
        m.iter().map(|(s, &n)| (s.to_string(), n.into())).collect()
    };
    let touched = mm.touched.count();
    let bloat = mm.bloat_frames();
    // Romer's TLBMCPI: cycles in service of the TLB (lookups beyond L1 and walks), the
    // policy's bookkeeping and its copying, per instruction.
    let tlbm = e.cycles.tlb + e.cycles.walk + pc.bookkeeping_cycles + pc.copy_cycles;
    let reserved: u64 = mm.reservations.iter().map(|r| r.size.base_pages() - r.count).sum();
    json!({
        "kind": e.os.policy.name(),
        "huge_size": e.os.policy.huge_size().to_string(),
        "pages_mapped": by_size(&pc.mapped_total),
        "promotions": pc.promotions,
        "promotions_in_place": pc.promotions_in_place,
        "promotions_copied": pc.promotions_copied,
        "demotions": pc.demotions,
        "bytes_copied": pc.bytes_copied,
        "copy_cycles": pc.copy_cycles,
        "bookkeeping_cycles": pc.bookkeeping_cycles,
        "reservations_made": pc.reservations_made,
        "reservations_promoted": pc.reservations_promoted,
        "reservations_broken": pc.reservations_broken,
        "reservations_released": pc.reservations_released,
        "reservations_active": mm.reservations.len(),
        "reserved_bytes": reserved * 4096,
        "touched_bytes": touched * 4096,
        "bloat_bytes": bloat * 4096,
        "bloat_fraction": ratio(bloat, touched),
        "bloat_peak_bytes": pc.bloat_peak_frames * 4096,
        "tlbm_cycles": tlbm,
        "tlbmcpi": ratio(tlbm, e.run.instructions),
        "details": e.os.policy.details(),
    })
}
pub mod bench;
