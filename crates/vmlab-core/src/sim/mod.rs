//! Running a simulation: pick the engine for the configured page-table kind, drain the
//! source, and assemble the stats document (schema in docs/metrics.md).

pub mod engine;

pub use engine::Engine;

use crate::config::{Config, PageTableKind};
use crate::error::Result;
use crate::mem::thread::WalkerThread;
use crate::mmu::cwc::EcptWalkCaches;
use crate::mmu::pwc::PageWalkCache;
use crate::os::policy::{OfflinePlan, PolicyName};
use crate::pt::ecpt::EcptConfig;
use crate::pt::nested::{nested_pwc, NestedPageTable, NestedWalkCaches};
use crate::pt::nested_ecpt::{NestedEcptCaches, NestedEcptPageTable};
use crate::pt::{
    ElasticCuckooPageTable, FastPaths, GuardedPageTable, HashedPageTable, InvertedPageTable, LinearPageTable, MultilevelPageTable, NoWalkCaches,
    RadixPageTable, SoftwareTlb, WalkCaches,
};
use crate::stats::SCHEMA;
use crate::trace::{Record, TraceMeta, TraceSource};
use serde_json::{json, Map, Value};

/// How the run's source is described in the stats document.
#[derive(Clone, Debug, Default)]
pub struct SourceInfo {
    pub(crate) kind: String,
    pub(crate) name: String,
    pub(crate) params: Value,
    pub(crate) content_hash: Option<String>,
}

/// One pass over a source, and OFFLINE's plan going in (second pass) or out (first).
pub(crate) struct Pass<'a> {
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
pub(crate) fn run_source(
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

/// Build the engine for the configured page-table kind, ready to be fed records. The
/// kind is chosen here, once, so each engine's per-access path stays monomorphised.
pub fn build(cfg: &Config, info: &SourceInfo, plan: Option<OfflinePlan>) -> Result<Box<dyn Simulation>> {
    let info = info.clone();
    let pwc = || PageWalkCache::new(&cfg.pwc.entries, cfg.pwc.ways, cfg.pwc.replacement, cfg.pwc.latency, cfg.mmu.seed);
    match cfg.page_table.kind {
        PageTableKind::Radix => {
            let pt = RadixPageTable::from_config(&cfg.page_table.radix)?;
            with_stlb(cfg, pt, pwc()?, plan, info)
        }
        PageTableKind::Hashed => with_stlb(cfg, HashedPageTable::new(&cfg.page_table.hashed)?, NoWalkCaches, plan, info),
        PageTableKind::Linear => {
            let pt = LinearPageTable::new(&cfg.page_table.linear)?;
            with_stlb(cfg, pt, pwc()?, plan, info)
        }
        PageTableKind::Guarded => with_stlb(cfg, GuardedPageTable::new(&cfg.page_table.guarded)?, NoWalkCaches, plan, info),
        PageTableKind::Mpt => with_stlb(cfg, MultilevelPageTable::new(), NoWalkCaches, plan, info),
        PageTableKind::Ecpt => {
            let e = &cfg.page_table.ecpt;
            let cwc = EcptWalkCaches::new(e.pte_cwc, e.pmd_cwc, e.pud_cwc, e.cwc_latency)?;
            with_stlb(cfg, ElasticCuckooPageTable::new(e)?, cwc, plan, info)
        }
        PageTableKind::Inverted => {
            let pt = InvertedPageTable::new(&cfg.page_table.inverted, cfg.machine.phys_mem.0)?;
            with_stlb(cfg, pt, NoWalkCaches, plan, info)
        }
        kind @ (PageTableKind::NestedRadix | PageTableKind::NestedEcpt | PageTableKind::Hybrid) => {
            let n = &cfg.page_table.nested;
            let e = &cfg.page_table.ecpt;
            let radix = || -> crate::Result<(RadixPageTable, PageWalkCache)> { Ok((RadixPageTable::from_config(&cfg.page_table.radix)?, pwc()?)) };
            let host_ecpt = || -> crate::Result<(ElasticCuckooPageTable, EcptWalkCaches)> {
                let keys = ["page_table.nested.host_pte_cwc", "page_table.nested.host_pmd_cwc", "page_table.nested.host_pud_cwc"];
                let caches = EcptWalkCaches::with_keys([0, n.host_pmd_cwc, n.host_pud_cwc], e.cwc_latency, keys)?;
                Ok((ElasticCuckooPageTable::new(e)?, caches))
            };
            let host_radix = || -> crate::Result<(RadixPageTable, PageWalkCache)> {
                let host = RadixPageTable::new(n.host_levels).map_err(|_| crate::Error::config("page_table.nested.host_levels", "must be 4 or 5"))?;
                Ok((host, nested_pwc(n, cfg.mmu.seed)?))
            };
            let seed = cfg.mmu.seed;
            match kind {
                PageTableKind::NestedRadix => {
                    let ((g, gc), (h, hc)) = (radix()?, host_radix()?);
                    let caches = NestedWalkCaches::new(gc, hc, n, seed)?;
                    with_stlb(cfg, NestedPageTable::new("nested-radix", g, h, n)?, caches, plan, info)
                }
                PageTableKind::NestedEcpt => {
                    let gcwc = EcptWalkCaches::new(e.pte_cwc, e.pmd_cwc, e.pud_cwc, e.cwc_latency)?;
                    let caches = NestedEcptCaches::new(gcwc, n, e.cwc_latency)?;
                    // The host keeps a PTE-CWT when an hCWC caches it (§4.2).
                    let pte_cwt = n.host_pte_cwc > 0 || n.step1_host_pte_cwc > 0;
                    let host = ElasticCuckooPageTable::new(&EcptConfig { pte_cwc: 0, pte_cwt, ..e.clone() })?;
                    with_stlb(cfg, NestedEcptPageTable::new(ElasticCuckooPageTable::new(e)?, host, n)?, caches, plan, info)
                }
                _ => {
                    let ((g, gc), (h, hc)) = (radix()?, host_ecpt()?);
                    let caches = NestedWalkCaches::new(gc, hc, n, seed)?;
                    with_stlb(cfg, NestedPageTable::new("hybrid", g, h, n)?, caches, plan, info)
                }
            }
        }
    }
}

/// A kind's simulation, behind a software TLB if one is configured.
fn with_stlb<P: FastPaths + Send + 'static>(cfg: &Config, pt: P, caches: P::Caches, plan: Option<OfflinePlan>, info: SourceInfo) -> Result<Box<dyn Simulation>>
where
    P::Caches: Send,
{
    if cfg.page_table.stlb.entries > 0 {
        boxed(cfg, SoftwareTlb::new(pt, &cfg.page_table.stlb)?, caches, plan, info)
    } else {
        boxed(cfg, pt, caches, plan, info)
    }
}

fn boxed<P: FastPaths + Send + 'static>(cfg: &Config, pt: P, caches: P::Caches, plan: Option<OfflinePlan>, info: SourceInfo) -> Result<Box<dyn Simulation>>
where
    P::Caches: Send,
{
    let mut engine = Engine::new(cfg, pt, caches)?;
    if let Some(plan) = plan {
        engine.os.policy.set_offline_plan(plan);
        engine.refresh_policy_hooks();
    }
    Ok(Box::new(Run { cfg: cfg.clone(), engine, info, done: false }))
}

/// An engine of some page-table kind, fed batch by batch: what a pass (or a one-pass
/// multi-configuration run) drives. Dynamic dispatch happens once per batch, never per
/// access.
pub trait Simulation: Send {
    /// Simulate one batch. Returns `true` once the run wants no more records
    /// (`sim.max_accesses` reached); later batches are ignored.
    fn feed(&mut self, batch: &[Record]) -> Result<bool>;
    /// Run the memory model (with the walker, as `walker` says) on a thread of its own
    /// if `on` and the configuration allows ([`Engine::use_memory_thread`]); returns
    /// whether it will.
    fn use_memory_thread(&mut self, on: bool, walker: WalkerThread) -> bool;
    /// Whether that thread runs the whole walker (`mmu::Walker`: walk caches, walk
    /// accounting and caches), not only the cache hierarchy.
    fn mmu_on_thread(&self) -> bool;
    /// End the run: its stats document, and the OFFLINE plan a first pass made.
    fn finish(self: Box<Self>, meta: &TraceMeta) -> Result<(Value, Option<OfflinePlan>)>;
}

struct Run<P: FastPaths> {
    cfg: Config,
    engine: Engine<P>,
    info: SourceInfo,
    done: bool,
}

impl<P: FastPaths + Send> Simulation for Run<P>
where
    P::Caches: Send,
{
    fn feed(&mut self, batch: &[Record]) -> Result<bool> {
        if !self.done {
            self.done = self.engine.feed(batch)?;
        }
        Ok(self.done)
    }

    fn use_memory_thread(&mut self, on: bool, walker: WalkerThread) -> bool {
        self.engine.use_memory_thread(on, walker)
    }

    fn mmu_on_thread(&self) -> bool {
        self.engine.mmu_on_thread()
    }

    fn finish(mut self: Box<Self>, meta: &TraceMeta) -> Result<(Value, Option<OfflinePlan>)> {
        self.engine.finish()?;
        let plan = self.engine.os.policy.offline_plan(&self.cfg.os.policy);
        Ok((document(&self.cfg, &self.engine, meta, &self.info), plan))
    }
}

/// Drain a pass's source through a fresh simulation of `cfg`.
fn run_pass(cfg: &Config, pass: &mut Pass, info: &SourceInfo, mut on_batch: impl FnMut(u64)) -> Result<Value> {
    let mut sim = build(cfg, info, pass.plan.take())?;
    let (on, walker) = crate::mem::thread::thread_settings()?;
    sim.use_memory_thread(on, walker);
    let mut buf = Vec::with_capacity(crate::trace::BATCH);
    let mut records = 0u64;
    while pass.src.next_batch(&mut buf)? {
        crate::interrupt::check()?;
        records += buf.len() as u64;
        let done = sim.feed(&buf)?;
        on_batch(records);
        if done {
            break;
        }
    }
    let (doc, plan) = sim.finish(pass.src.meta())?;
    pass.plan_out = plan;
    Ok(doc)
}

/// One pass, many configurations: decode `src` once and feed every batch to a
/// simulation of each config, spread over `threads` worker threads. Returns one result
/// per config, in order: a config that fails to build or to simulate fails alone. An
/// error reading the source fails them all (the outer error). OFFLINE configs need two
/// passes and are refused here (the caller runs them with [`run_source`]).
pub fn run_many(cfgs: &[Config], src: &mut dyn TraceSource, info: &SourceInfo, threads: usize, mut on_batch: impl FnMut(u64)) -> Result<Vec<Result<Value>>> {
    let mut results: Vec<Option<Result<Value>>> = (0..cfgs.len()).map(|_| None).collect();
    let mut sims: Vec<(usize, Box<dyn Simulation>)> = Vec::new();
    for (i, cfg) in cfgs.iter().enumerate() {
        if cfg.os.policy.kind == PolicyName::Offline {
            results[i] = Some(Err(crate::Error::config("os.policy.kind", "\"offline\" reads the trace twice; it cannot share a one-pass run")));
            continue;
        }
        match build(cfg, info, None) {
            Ok(sim) => sims.push((i, sim)),
            Err(e) => results[i] = Some(Err(e)),
        }
    }
    let threads = threads.clamp(1, sims.len().max(1));
    if let [(_, sim)] = sims.as_mut_slice() {
        // A lone simulation has the second core to itself; several keep theirs busy.
        let (on, walker) = crate::mem::thread::thread_settings()?;
        sim.use_memory_thread(on, walker);
    }
    // Round-robin groups, one per worker thread.
    let mut groups: Vec<Vec<(usize, Box<dyn Simulation>)>> = (0..threads).map(|_| Vec::new()).collect();
    for (n, s) in sims.into_iter().enumerate() {
        groups[n % threads].push(s);
    }
    let meta = src.meta().clone();
    let finished: Vec<(usize, Result<Value>)> = if threads == 1 {
        let mut group = groups.pop().unwrap_or_default();
        let mut out = Vec::new();
        let (mut buf, mut scratch) = (Vec::with_capacity(ONE_PASS_CHUNK), Vec::new());
        let mut records = 0u64;
        while next_chunk(src, &mut buf, &mut scratch)? {
            records += buf.len() as u64;
            if feed_group(&mut group, &buf, &meta, &mut out) {
                break;
            }
            on_batch(records);
        }
        out.extend(group.into_iter().map(|(i, s)| (i, s.finish(&meta).map(|r| r.0))));
        out
    } else {
        std::thread::scope(|scope| -> Result<Vec<(usize, Result<Value>)>> {
            let mut senders = Vec::new();
            let mut handles = Vec::new();
            for mut group in groups {
                // Two batches in flight per worker bound the memory whatever the trace length.
                let (tx, rx) = std::sync::mpsc::sync_channel::<std::sync::Arc<Vec<Record>>>(2);
                senders.push(tx);
                let meta = &meta;
                handles.push(scope.spawn(move || {
                    let mut out = Vec::new();
                    for batch in rx {
                        if feed_group(&mut group, &batch, meta, &mut out) {
                            break;
                        }
                    }
                    out.extend(group.into_iter().map(|(i, s)| (i, s.finish(meta).map(|r| r.0))));
                    out
                }));
            }
            let mut records = 0u64;
            let (mut buf, mut scratch) = (Vec::with_capacity(ONE_PASS_CHUNK), Vec::new());
            let read = loop {
                match next_chunk(src, &mut buf, &mut scratch) {
                    Ok(true) => {}
                    Ok(false) => break Ok(()),
                    Err(e) => break Err(e),
                }
                records += buf.len() as u64;
                let batch = std::sync::Arc::new(std::mem::replace(&mut buf, Vec::with_capacity(ONE_PASS_CHUNK)));
                // A worker whose simulations all finished has hung up: skip it.
                senders.retain(|tx| tx.send(batch.clone()).is_ok());
                if senders.is_empty() {
                    break Ok(());
                }
                on_batch(records);
            };
            drop(senders);
            let mut out = Vec::new();
            for h in handles {
                out.extend(h.join().map_err(|_| crate::Error::Sim("a one-pass worker thread panicked".into()))?);
            }
            read.map(|_| out)
        })?
    };
    for (i, r) in finished {
        results[i] = Some(r);
    }
    Ok(results.into_iter().map(|r| r.expect("every config has a result")).collect())
}

/// Records each simulation of a one-pass group takes in a row: large enough that
/// switching between engines (whose state then leaves the host caches) is rare, small
/// enough to bound memory (two chunks in flight per worker).
const ONE_PASS_CHUNK: usize = 1 << 16;

/// Refill `buf` with up to [`ONE_PASS_CHUNK`] records; `false` once the source is done.
fn next_chunk(src: &mut dyn TraceSource, buf: &mut Vec<Record>, scratch: &mut Vec<Record>) -> Result<bool> {
    buf.clear();
    while buf.len() + crate::trace::BATCH <= ONE_PASS_CHUNK && src.next_batch(scratch)? {
        crate::interrupt::check()?;
        buf.extend_from_slice(scratch);
    }
    Ok(!buf.is_empty())
}

/// Feed one batch to every simulation of a group; finished or failed ones move to
/// `out`. Returns `true` when the group is empty (nothing more to feed).
fn feed_group(group: &mut Vec<(usize, Box<dyn Simulation>)>, batch: &[Record], meta: &TraceMeta, out: &mut Vec<(usize, Result<Value>)>) -> bool {
    let mut k = 0;
    while k < group.len() {
        match group[k].1.feed(batch) {
            Ok(false) => k += 1,
            Ok(true) => {
                let (i, s) = group.swap_remove(k);
                out.push((i, s.finish(meta).map(|r| r.0)));
            }
            Err(e) => {
                let (i, _) = group.swap_remove(k);
                out.push((i, Err(e)));
            }
        }
    }
    group.is_empty()
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Assemble the stats document of a finished engine.
pub(crate) fn document<P: FastPaths>(cfg: &Config, e: &Engine<P>, meta: &TraceMeta, info: &SourceInfo) -> Value {
    let mut tlb = Map::new();
    for t in &e.mmu().tlbs.tlbs {
        let c = &t.counters;
        let mut row = json!({
            "level": t.level, "serves": t.serves.name(), "entries": t.entries(), "ways": t.ways(),
            "page_sizes": t.page_sizes().iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "lookups": c.lookups, "hits": c.hits, "misses": c.misses,
            "miss_rate": ratio(c.misses, c.lookups),
            "fills": c.fills, "evictions": c.evictions, "invalidations": c.invalidations,
            "splinters": c.splinters,
        });
        if t.pairs() {
            row["pairs"] = json!(true);
            row["half_misses"] = json!(c.half_misses);
        }
        tlb.insert(t.name.clone(), row);
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
    let [data, instr] = &e.mmu().tlb_levels;
    let tlb_levels = level_rows(&mut data.iter().zip(instr).map(|(d, i)| (d.0 + i.0, d.1 + i.1)));
    let by_side = json!({
        "data": level_rows(&mut data.iter().copied()),
        "instr": level_rows(&mut instr.iter().copied()),
    });
    let mut walk_caches = Map::new();
    for (name, c) in e.mmu().walker().walk_caches.counters() {
        let c = e.walk_cache_base.iter().find(|(n, _)| *n == name).map_or(c.clone(), |(_, base)| c.since(base));
        walk_caches.insert(name, json!({"lookups": c.lookups, "hits": c.hits, "misses": c.misses, "hit_rate": ratio(c.hits, c.lookups)}));
    }
    let mut caches = Map::new();
    for c in &e.mmu().walker().mem.caches {
        let k = &c.counters;
        caches.insert(
            c.name.clone(),
            json!({"level": c.level, "serves": c.serves.name(), "accesses": k.accesses, "hits": k.hits,
                   "misses": k.misses, "miss_rate": ratio(k.misses, k.accesses),
                   "walk_accesses": k.walk_accesses, "walk_misses": k.walk_misses,
                   "copy_accesses": k.copy_accesses, "copy_misses": k.copy_misses,
                   "writebacks": k.writebacks, "writeback_accesses": k.writeback_accesses,
                   "writeback_misses": k.writeback_misses, "slow_hits": k.slow_hits, "victim_hits": k.victim_hits,
                   "miss_cycles": k.miss_cycles,
                   "write_buffer_writes": c.write_buffer.as_ref().map_or(0, |w| w.writes),
                   "write_buffer_stall_cycles": c.write_buffer.as_ref().map_or(0, |w| w.stall_cycles)}),
        );
    }
    let fp = e.os.mm.pt.footprint();
    let (warmup_accesses, warmup_instructions) = e.warmup_length();
    let w = &e.mmu().walker().walks;
    let instr = e.run.instructions;
    let translation_cycles = e.cycles.tlb + e.cycles.walk + e.cycles.fault;
    let mem = e.os.mm.mem.counters();
    let page_sizes: Map<String, Value> = e.os.mm.mapped_by_size.iter().map(|(s, &n)| (s.to_string(), n.into())).collect();
    let mut source = json!({
        "kind": info.kind, "name": info.name, "params": info.params,
        "meta": serde_json::to_value(meta).unwrap_or(Value::Null),
    });
    if let Some(h) = &info.content_hash {
        source["content_hash"] = h.clone().into();
    }
    let mut doc = json!({
        "schema": SCHEMA,
        "vmlab_version": crate::VERSION,
        "config": cfg.to_json(),
        "config_hash": cfg.hash(),
        "source": source,
        "totals": e.run,
        // Counters cover the accesses after the first `accesses`, or what follows the
        // first `instructions` (docs/metrics.md).
        "warmup": {"accesses": cfg.sim.warmup_accesses, "instructions": cfg.sim.warmup_instructions,
                   "completed": (cfg.sim.warmup_accesses > 0 || cfg.sim.warmup_instructions > 0) && e.warmed_up()},
        // The warm-up and what the counters cover, in both units.
        "window": {"warmup_accesses": warmup_accesses, "warmup_instructions": warmup_instructions,
                   "accesses": e.run.accesses, "instructions": e.run.instructions},
        "tlb": tlb,
        "tlb_levels": tlb_levels,
        "tlb_levels_by_side": by_side,
        "walks": {
            "count": w.count, "refs": w.refs, "steps": w.steps, "faulting": w.faulting,
            "nested_lookups": w.nested_lookups, "nested_misses": w.nested_misses,
            "background_refs": w.background_refs,
            "handler_refills": w.handler_refills, "handler_instructions": w.handler_instructions,
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
            "dram_accesses": e.mmu().walker().mem.memory_accesses,
            "dram_writes": e.mmu().walker().mem.memory_writes,
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
        "regions": regions_section(cfg, e),
    });
    if let Some(t) = time_section(cfg, e) {
        doc["time"] = t;
    }
    doc
}

/// The `regions` section: region IDs and protection-key TLB sharing (docs/metrics.md).
/// The `time` section (docs/metrics.md), if the time model ran.
fn time_section<P: FastPaths>(cfg: &Config, e: &Engine<P>) -> Option<Value> {
    let end = e.time_end.as_ref()?;
    let tm = e.mmu().walker().time_model()?;
    let names: Vec<String> = cfg.cache.keys().cloned().collect();
    Some(tm.section(cfg, end, e.time_base.as_ref(), &names))
}

fn regions_section<P: FastPaths>(cfg: &Config, e: &Engine<P>) -> Value {
    let c = e.regions.as_ref().map(|r| r.counters).unwrap_or_default();
    json!({
        "share": cfg.mmu.regions.share,
        "share_text": cfg.mmu.regions.share_text,
        "shared_translations": c.shared_translations,
        "text_translations": c.text_translations,
        "key_checks": c.key_checks,
        "key_misses": c.key_misses,
        "key_miss_cycles": c.key_miss_cycles,
    })
}

/// The `recolor` section: placement and recolouring (docs/metrics.md).
fn recolor_section<P: FastPaths>(e: &Engine<P>) -> Value {
    let mm = &e.os.mm;
    let rc = &mm.rc;
    let h = rc.histogram();
    let [promotion, recolor, both] = rc.copiers_split();
    json!({
        "placement": mm.placement.kind,
        "colours": mm.placement.colors,
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
fn mcpi_section<P: FastPaths>(e: &Engine<P>) -> Value {
    let instr = e.run.instructions;
    let pc = &e.os.mm.pc;
    let last = e.mmu().walker().mem.color_cache().map(|c| c.name.clone());
    let l2_miss: u64 = e.mmu().walker().mem.caches.iter().filter(|c| Some(&c.name) == last.as_ref()).map(|c| c.counters.miss_cycles).sum();
    let upper_miss: u64 = e.mmu().walker().mem.caches.iter().filter(|c| Some(&c.name) != last.as_ref()).map(|c| c.counters.miss_cycles).sum();
    let wb: u64 = e.mmu().walker().mem.caches.iter().filter_map(|c| c.write_buffer.as_ref()).map(|w| w.stall_cycles).sum();
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
fn policy_section<P: FastPaths>(e: &Engine<P>) -> Value {
    let mm = &e.os.mm;
    let pc = &mm.pc;
    let by_size =
        |m: &std::collections::BTreeMap<crate::addr::PageSize, u64>| -> Map<String, Value> { m.iter().map(|(s, &n)| (s.to_string(), n.into())).collect() };
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
pub mod mrc;
