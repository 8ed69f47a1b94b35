//! Run configuration: TOML presets (crates/vmlab-core/configs/*.toml, built into the binary), user files,
//! and `key=value` overrides. Unknown keys and impossible geometries are errors that
//! name the key path. Every key is documented in docs/config.md.

use crate::addr::{parse_bytes, PageSize};
use crate::error::{Error, Result};
use crate::mem::cache::{CacheConfig, Organization, WritePolicy};
use crate::mem::MemoryConfig;
use crate::mmu::{pwc::PwcConfig, tlb::TlbConfig, MmuConfig};
pub use crate::os::{OomPolicy, OsConfig, MAX_LIVE_PROCESSES};
use crate::pt::radix::RadixConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The presets shipped in crates/vmlab-core/configs/, by name.
pub(crate) const PRESETS: &[(&str, &str)] = &[
    ("skylake", include_str!("../configs/skylake.toml")),
    ("tiny", include_str!("../configs/tiny.toml")),
    ("itanium2", include_str!("../configs/itanium2.toml")),
    ("ecpt-asplos22", include_str!("../configs/ecpt-asplos22.toml")),
    ("romer", include_str!("../configs/romer.toml")),
    ("tps", include_str!("../configs/tps.toml")),
    ("romer-cache", include_str!("../configs/romer-cache.toml")),
    ("combined", include_str!("../configs/combined.toml")),
];

/// `page_table.kind`: the page-table organisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageTableKind {
    /// x86-64 multi-level radix table (pt/radix.rs).
    Radix,
    /// Elphinstone's six-level MIPS MPT (pt/mpt.rs).
    Mpt,
    /// Hashed and clustered tables (pt/hashed.rs).
    Hashed,
    Inverted,
    Guarded,
    /// Linear virtual array (pt/linear.rs).
    Linear,
    /// Elastic cuckoo page tables (pt/ecpt.rs).
    Ecpt,
    /// Nested translation: radix guest and host, ECPT guest and host, radix guest and
    /// ECPT host (pt/nested.rs, pt/nested_ecpt.rs).
    NestedRadix,
    NestedEcpt,
    Hybrid,
}

impl PageTableKind {
    pub(crate) const ALL: [PageTableKind; 10] = [
        PageTableKind::Radix,
        PageTableKind::Mpt,
        PageTableKind::Hashed,
        PageTableKind::Inverted,
        PageTableKind::Guarded,
        PageTableKind::Linear,
        PageTableKind::Ecpt,
        PageTableKind::NestedRadix,
        PageTableKind::NestedEcpt,
        PageTableKind::Hybrid,
    ];

    /// The name `page_table.kind` takes (and the stats document reports).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PageTableKind::Radix => "radix",
            PageTableKind::Mpt => "mpt",
            PageTableKind::Hashed => "hashed",
            PageTableKind::Inverted => "inverted",
            PageTableKind::Guarded => "guarded",
            PageTableKind::Linear => "linear",
            PageTableKind::Ecpt => "ecpt",
            PageTableKind::NestedRadix => "nested-radix",
            PageTableKind::NestedEcpt => "nested-ecpt",
            PageTableKind::Hybrid => "hybrid",
        }
    }

    /// The kind named `name`, if any.
    pub(crate) fn from_name(name: &str) -> Option<PageTableKind> {
        PageTableKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for PageTableKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A byte size written as "4K", "2MiB", "16G" or a plain integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&crate::addr::format_bytes(self.0))
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Bytes(n)),
            Raw::S(s) => parse_bytes(&s).map(Bytes).map_err(serde::de::Error::custom),
        }
    }
}

/// Entries, lines, buckets and slots one configuration's structures may hold together
/// (each takes some tens of bytes of host memory): 2^25.
pub(crate) const MAX_STRUCTURE_ENTRIES: u64 = 1 << 25;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Free-form description of the design.
    #[serde(default)]
    pub description: String,
    pub machine: MachineConfig,
    pub os: OsConfig,
    pub page_table: PageTableConfig,
    pub mmu: MmuConfig,
    /// TLB structures by name.
    pub tlb: BTreeMap<String, TlbConfig>,
    /// No `[pwc]` table: no page-walk cache.
    #[serde(default)]
    pub pwc: PwcConfig,
    /// Cache levels by name.
    #[serde(default)]
    pub cache: BTreeMap<String, CacheConfig>,
    pub memory: MemoryConfig,
    #[serde(default)]
    pub sim: SimConfig,
    /// The time model (time/): count only by default.
    #[serde(default, skip_serializing_if = "crate::time::TimeConfig::is_default")]
    pub time: crate::time::TimeConfig,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MachineConfig {
    /// Simulated physical memory.
    pub phys_mem: Bytes,
    /// Start-up fragmentation (os/fragmentation.rs).
    #[serde(default, skip_serializing_if = "crate::os::fragmentation::FragmentationConfig::is_default")]
    pub fragmentation: crate::os::fragmentation::FragmentationConfig,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PageTableConfig {
    pub kind: PageTableKind,
    #[serde(default)]
    pub radix: RadixConfig,
    #[serde(default)]
    pub hashed: crate::pt::hashed::HashedConfig,
    #[serde(default)]
    pub inverted: crate::pt::inverted::InvertedConfig,
    #[serde(default)]
    pub guarded: crate::pt::guarded::GuardedConfig,
    #[serde(default)]
    pub linear: crate::pt::linear::LinearConfig,
    /// Nested (guest radix over host radix) translation; the guest's levels are `radix.levels`.
    #[serde(default)]
    pub nested: crate::pt::nested::NestedConfig,
    /// Elastic cuckoo page tables (native).
    #[serde(default)]
    pub ecpt: crate::pt::ecpt::EcptConfig,
    /// A software TLB in front of the table (`entries = 0`: none).
    #[serde(default)]
    pub stlb: crate::pt::stlb::StlbConfig,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Serves {
    Data,
    Instr,
    #[default]
    Unified,
}

impl Serves {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Serves::Data => "data",
            Serves::Instr => "instr",
            Serves::Unified => "unified",
        }
    }
    pub(crate) fn serves_instr(self) -> bool {
        !matches!(self, Serves::Data)
    }
    pub(crate) fn serves_data(self) -> bool {
        !matches!(self, Serves::Instr)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// Stop after this many accesses (0 = the whole trace).
    #[serde(default)]
    pub max_accesses: u64,
    /// Statistics warm-up: TLB, walk, walk-cache, cache and cycle counters (and the
    /// totals they are normalised by) count only the accesses after the first this many
    /// (0 = none). The simulation itself is unchanged. docs/metrics.md, "Warm-up".
    #[serde(default)]
    pub warmup_accesses: u64,
    /// `max_accesses` in instructions (`totals.instructions`: ticks and fetches): stop
    /// after the first this many instructions and their references (0 = no limit).
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_instructions: u64,
    /// `warmup_accesses` in instructions: statistics count only what follows the first
    /// this many instructions and their references (0 = none).
    #[serde(default, skip_serializing_if = "is_default")]
    pub warmup_instructions: u64,
}

impl SimConfig {
    /// Whether a window is stated in instructions, which the trace must then count.
    pub(crate) fn by_instructions(&self) -> bool {
        self.max_instructions != 0 || self.warmup_instructions != 0
    }

    /// The key of the instruction window, for errors about it.
    pub(crate) fn instruction_key(&self) -> &'static str {
        if self.max_instructions != 0 {
            "sim.max_instructions"
        } else {
            "sim.warmup_instructions"
        }
    }

    /// One form of each key, a warm-up in runs of a fixed page size, and a warm-up
    /// shorter than the run it is part of (in the same unit).
    fn validate(&self, whole_run_policies: bool) -> Result<()> {
        for (accesses, instructions, a, i) in [
            (self.max_accesses, self.max_instructions, "sim.max_accesses", "sim.max_instructions"),
            (self.warmup_accesses, self.warmup_instructions, "sim.warmup_accesses", "sim.warmup_instructions"),
        ] {
            if accesses != 0 && instructions != 0 {
                return Err(Error::config(i, format!("{a} and {i} are the same limit in two units: set only one")));
            }
        }
        let warmup = if self.warmup_instructions != 0 { "sim.warmup_instructions" } else { "sim.warmup_accesses" };
        if (self.warmup_accesses != 0 || self.warmup_instructions != 0) && whole_run_policies {
            return Err(Error::config(
                warmup,
                "page-size and recolouring policies count their work over the whole run; a warm-up needs os.policy.kind = \"fixed\" and no os.recolor",
            ));
        }
        if self.max_accesses != 0 && self.warmup_accesses >= self.max_accesses {
            return Err(Error::config("sim.warmup_accesses", "must be smaller than sim.max_accesses, or nothing is measured"));
        }
        if self.max_instructions != 0 && self.warmup_instructions >= self.max_instructions {
            return Err(Error::config("sim.warmup_instructions", "must be smaller than sim.max_instructions, or nothing is measured"));
        }
        Ok(())
    }
}

pub(crate) fn yes() -> bool {
    true
}
pub(crate) fn one() -> u8 {
    1
}
pub(crate) fn line64() -> Bytes {
    Bytes(64)
}

/// A TOML parse error of `origin` (a file, or a preset) on one line: where (line and
/// column), then what.
fn toml_error(origin: &str, text: &str, e: &toml::de::Error) -> Error {
    let what = e.message().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ");
    let (line, msg) = match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let column = before.chars().rev().take_while(|&c| c != '\n').count() + 1;
            (before.matches('\n').count() as u64 + 1, format!("not valid TOML at column {column}: {what}"))
        }
        None => (0, format!("not valid TOML: {what}")),
    };
    Error::Import { source_name: origin.to_string(), line, msg }
}

impl Config {
    /// Load a preset by name, or a TOML file by path, then apply `key=value` overrides.
    pub fn load(name_or_path: &str, overrides: &[String]) -> Result<Config> {
        let (text, origin) = match PRESETS.iter().find(|(n, _)| *n == name_or_path) {
            Some((_, t)) => (t.to_string(), format!("preset `{name_or_path}`")),
            None => {
                let p = std::path::Path::new(name_or_path);
                if !p.exists() {
                    let names: Vec<&str> = PRESETS.iter().map(|(n, _)| *n).collect();
                    return Err(Error::arg("--config", format!("`{name_or_path}` is neither a preset ({}) nor a file", names.join(", "))));
                }
                (crate::files::read_text(p)?, p.display().to_string())
            }
        };
        Config::from_toml(&text, &origin, overrides)
    }

    /// Parse TOML text, apply overrides, deserialize and validate.
    pub fn from_toml(text: &str, origin: &str, overrides: &[String]) -> Result<Config> {
        let mut value: toml::Value = toml::from_str(text).map_err(|e| toml_error(origin, text, &e))?;
        // A file may start from a preset: `base = "skylake"`.
        if let Some(base) = value.as_table_mut().and_then(|t| t.remove("base")) {
            let base = base.as_str().ok_or_else(|| Error::config("base", "must be a preset name"))?.to_string();
            let (_, btext) = PRESETS.iter().find(|(n, _)| *n == base).ok_or_else(|| Error::config("base", format!("unknown preset `{base}`")))?;
            let mut merged: toml::Value = toml::from_str(btext).expect("built-in preset parses");
            merge(&mut merged, value);
            value = merged;
        }
        for o in overrides {
            apply_override(&mut value, o)?;
        }
        let cfg: Config = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner().to_string();
            // At the top level serde_path_to_error's path is "."; name the field instead.
            let key = match inner.split('`').nth(1) {
                Some(f) if path == "." && (inner.starts_with("unknown field") || inner.starts_with("missing field")) => f.to_string(),
                Some(f) if inner.starts_with("missing field") => format!("{path}.{f}"),
                _ => path,
            };
            let msg = if inner.starts_with("missing field") { "required, but missing".to_string() } else { first_sentence(&inner) };
            Error::config(key, msg)
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The configured sizes of the structures vmlab allocates up front, by the key that
    /// sets each: TLB entries, page-walk cache entries, cache lines, a hashed table's
    /// buckets, an ECPT's initial slots, the software TLB's entries.
    fn structure_entries(&self) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = Vec::new();
        v.extend(self.tlb.iter().map(|(n, t)| (format!("tlb.{n}.entries"), t.entries as u64)));
        v.push(("pwc.entries".into(), self.pwc.entries.iter().map(|&e| e as u64).fold(0, u64::saturating_add)));
        v.extend(self.cache.iter().map(|(n, c)| (format!("cache.{n}.size"), c.size.0 / c.line.0.max(1))));
        let pt = &self.page_table;
        if matches!(pt.kind, PageTableKind::Hashed | PageTableKind::Hybrid) {
            v.push(("page_table.hashed.buckets".into(), (pt.hashed.buckets as u64).saturating_add(pt.hashed.large_buckets as u64)));
        }
        if matches!(pt.kind, PageTableKind::Ecpt | PageTableKind::NestedEcpt) {
            let slots = |s: &[usize], ways: usize| s.iter().map(|&n| n as u64).fold(0, u64::saturating_add).saturating_mul(ways as u64);
            v.push(("page_table.ecpt.initial_slots".into(), slots(&pt.ecpt.initial_slots, pt.ecpt.ways)));
            v.push(("page_table.ecpt.cwt_slots".into(), slots(&pt.ecpt.cwt_slots, pt.ecpt.cwt_ways)));
        }
        v.push(("page_table.stlb.entries".into(), pt.stlb.entries as u64));
        v
    }

    /// Checks serde cannot express: impossible geometries and cross-key constraints.
    pub(crate) fn validate(&self) -> Result<()> {
        let sizes = self.structure_entries();
        let total = sizes.iter().map(|(_, n)| *n).fold(0, u64::saturating_add);
        if total > MAX_STRUCTURE_ENTRIES {
            let (key, n) = sizes.iter().max_by_key(|(_, n)| *n).expect("a structure");
            let msg = format!(
                "the configuration's structures hold {total} entries, lines, buckets and slots together (this one {n}); at most {MAX_STRUCTURE_ENTRIES} (about 1 GiB of host memory)"
            );
            return Err(Error::config(key.clone(), msg));
        }
        PageSize::from_bytes(self.os.page_size.0).map_err(|m| Error::config("os.page_size", m))?;
        if !(1..=MAX_LIVE_PROCESSES).contains(&self.os.max_processes) {
            return Err(Error::config("os.max_processes", format!("must be 1 to {MAX_LIVE_PROCESSES} (each live process takes about 100 KiB of host memory)")));
        }
        self.os.policy.validate(self.os.page_size)?;
        if self.page_table.kind == PageTableKind::Linear {
            self.page_table.linear.validate(self)?;
        }
        self.mmu.regions.validate(self.mmu.asid_tags, self.page_table.kind)?;
        self.mmu.refill.validate(self.page_table.stlb.entries, self.mmu.fixed_miss_cycles.is_some())?;
        self.os.recolor.validate(self)?;
        self.sim.validate(self.os.policy.kind != crate::os::policy::PolicyName::Fixed || !self.os.recolor.is_default())?;
        self.os.placement.validate(self)?;
        self.machine.fragmentation.validate()?;
        if self.tlb.is_empty() {
            return Err(Error::config("tlb", "at least one TLB structure is required"));
        }
        for (name, t) in &self.tlb {
            let key = format!("tlb.{name}");
            if t.level == 0 {
                return Err(Error::config(format!("{key}.level"), "levels start at 1"));
            }
            if t.entries == 0 || t.entries > crate::mmu::assoc::MAX_ENTRIES {
                return Err(Error::config(format!("{key}.entries"), "must be between 1 and 2^26"));
            }
            if t.page_sizes.is_empty() {
                return Err(Error::config(format!("{key}.page_sizes"), "list at least one page size"));
            }
            for s in &t.page_sizes {
                PageSize::from_bytes(s.0).map_err(|m| Error::config(format!("{key}.page_sizes"), m))?;
            }
            if t.any_size && t.ways != 0 && t.ways != t.entries {
                return Err(Error::config(
                    format!("{key}.any_size"),
                    format!("an any-size TLB must be fully associative (ways = 0 or {}), not {}-way", t.entries, t.ways),
                ));
            }
        }
        let min_level = self.tlb.values().map(|t| t.level).min().unwrap_or(1);
        if min_level != 1 {
            return Err(Error::config("tlb", "no structure at level 1"));
        }
        for (name, t) in self.tlb.iter().filter(|(_, t)| t.pairs) {
            self.validate_pairs(&format!("tlb.{name}.pairs"), t)?;
        }
        for (name, c) in &self.cache {
            let key = format!("cache.{name}");
            let line = c.line.0;
            if line == 0 || !line.is_power_of_two() {
                return Err(Error::config(format!("{key}.line"), "must be a power of two"));
            }
            if c.ways == 0 || c.size.0 == 0 || c.size.0 % (line * c.ways as u64) != 0 {
                return Err(Error::config(
                    format!("{key}.size"),
                    format!("{} bytes cannot be split into {}-way sets of {}-byte lines", c.size.0, c.ways, line),
                ));
            }
            if c.size.0 / line > crate::mmu::assoc::MAX_ENTRIES as u64 {
                return Err(Error::config(
                    format!("{key}.size"),
                    format!("{} lines is more than vmlab simulates in one cache (at most 2^26)", c.size.0 / line),
                ));
            }
            if c.level == 0 {
                return Err(Error::config(format!("{key}.level"), "levels start at 1"));
            }
            if c.organization == Organization::ColumnAssociative {
                let lines = c.size.0 / line;
                if c.ways != 1 || lines < 2 {
                    return Err(Error::config(
                        format!("{key}.organisation"),
                        format!("a column-associative cache is a direct-mapped array of at least 2 lines (ways = 1), not {}-way with {lines} lines", c.ways),
                    ));
                }
            } else if c.slow_latency.is_some() {
                return Err(Error::config(format!("{key}.slow_latency"), "only a column-associative cache has a second probe"));
            }
            if c.victim.as_ref().is_some_and(|v| v.entries == 0) {
                return Err(Error::config(format!("{key}.victim.entries"), "must be at least 1"));
            }
            if c.write_buffer > 0 && c.write_policy != WritePolicy::WriteThrough {
                return Err(Error::config(
                    format!("{key}.write_buffer"),
                    "a write buffer sits behind a write-through cache (write_policy = \"write-through\")",
                ));
            }
        }
        if self.machine.phys_mem.0 < 4096 {
            return Err(Error::config("machine.phys_mem", "must be at least 4K"));
        }
        if self.cache.len() > 64 {
            return Err(Error::config("cache", format!("{} cache structures; at most 64", self.cache.len())));
        }
        self.time.validate(self)?;
        Ok(())
    }

    /// Page-pair entries (`tlb.NAME.pairs`) as built so far: one page size, one level,
    /// and nothing that needs another kind of entry (any-size matching, splinters,
    /// region IDs). Policies that watch the TLB are refused when the engine starts.
    fn validate_pairs(&self, key: &str, t: &TlbConfig) -> Result<()> {
        let one_size = t.page_sizes.iter().all(|s| s.0 == t.page_sizes[0].0);
        let why = if !one_size {
            "a page-pair structure holds one page size"
        } else if t.any_size || t.splinter {
            "a page-pair structure cannot be any_size or splinter"
        } else if self.tlb.values().any(|o| o.level > 1) {
            "page-pair entries need a hierarchy of one level (no refill of a pair from a lower level yet)"
        } else if self.mmu.regions.share || self.mmu.regions.share_text {
            "page-pair entries do not work with region IDs (mmu.regions.share, share_text)"
        } else {
            return Ok(());
        };
        Err(Error::config(key, why))
    }

    /// The resolved configuration as JSON (part of every stats document).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("config serializes")
    }

    /// A stable hash of the resolved configuration (FNV-1a over canonical JSON).
    pub fn hash(&self) -> String {
        let text = serde_json::to_string(&self.to_json()).expect("json");
        format!("{:016x}", fnv1a(text.as_bytes()))
    }
}

/// The OS model's settings in a configuration: `[os]`, and what it needs of `[machine]`,
/// `[cache]` (the colour cache) and `[mmu.regions]`.
impl<'a> From<&'a Config> for crate::os::OsSettings<'a> {
    fn from(cfg: &'a Config) -> Self {
        crate::os::OsSettings {
            os: &cfg.os,
            phys_mem: cfg.machine.phys_mem.0,
            fragmentation: &cfg.machine.fragmentation,
            color_cache: crate::os::placement::ColorCache::of(&cfg.cache),
            share_keys: cfg.mmu.regions.share,
            share_text: cfg.mmu.regions.share_text,
        }
    }
}

/// The MMU's settings in a configuration: `[mmu]`, `[tlb]`, the cache hierarchy
/// (`[cache]`, `[memory]`), and what a software refill handler needs of the page table
/// and `[machine]`.
impl<'a> From<&'a Config> for crate::mmu::walker::MmuSettings<'a> {
    fn from(cfg: &'a Config) -> Self {
        crate::mmu::walker::MmuSettings {
            mmu: &cfg.mmu,
            tlb: &cfg.tlb,
            cache: &cfg.cache,
            memory: &cfg.memory,
            refill_table: crate::mmu::refill::RefillTable {
                kind: cfg.page_table.kind,
                subblock: cfg.page_table.hashed.subblock as u32,
                phys_mem: cfg.machine.phys_mem.0,
            },
        }
    }
}

/// FNV-1a, 64-bit: stable across platforms and versions (unlike std's hasher).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_extend(0xcbf2_9ce4_8422_2325, bytes)
}

/// Continue an FNV-1a hash `h` over more bytes.
pub fn fnv1a_extend(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn first_sentence(s: &str) -> String {
    s.lines().next().unwrap_or(s).to_string()
}

/// Deep-merge `over` into `base` (tables merge key by key; other values replace).
fn merge(base: &mut toml::Value, over: toml::Value) {
    match (base, over) {
        (toml::Value::Table(b), toml::Value::Table(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(bv) => merge(bv, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// Apply `a.b.c=value`. The value is parsed as TOML (numbers, booleans, arrays,
/// quoted strings) and otherwise taken as a bare string ("2M", "lru").
pub(crate) fn apply_override(root: &mut toml::Value, spec: &str) -> Result<()> {
    let (key, raw) = spec.split_once('=').ok_or_else(|| Error::config(spec, "an override must look like key=value"))?;
    let key = key.trim();
    if key.is_empty() || key.split('.').any(|p| p.is_empty()) {
        return Err(Error::config(spec, "empty key in override"));
    }
    let raw = raw.trim();
    let value =
        toml::from_str::<toml::Table>(&format!("v = {raw}")).ok().and_then(|mut t| t.remove("v")).unwrap_or_else(|| toml::Value::String(raw.to_string()));
    let parts: Vec<&str> = key.split('.').collect();
    let mut cur = root;
    for (i, p) in parts.iter().enumerate() {
        let table = cur.as_table_mut().ok_or_else(|| Error::config(parts[..i].join("."), "is not a table, cannot set a key inside it"))?;
        if i + 1 == parts.len() {
            table.insert(p.to_string(), value);
            return Ok(());
        }
        cur = table.entry(p.to_string()).or_insert_with(|| toml::Value::Table(Default::default()));
    }
    unreachable!("key has at least one part")
}

/// For `skip_serializing_if`: keys left at their default stay out of resolved configs,
/// so adding a key does not change the documents and hashes of runs that do not use it.
pub(crate) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// For `skip_serializing_if` on keys that default to true.
pub(crate) fn is_true(v: &bool) -> bool {
    *v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_and_validate() {
        for (name, _) in PRESETS {
            Config::load(name, &[]).unwrap_or_else(|e| panic!("preset {name}: {e}"));
        }
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = Config::load("tiny", &["tlb.l1d.entriez=4".into()]).unwrap_err();
        assert_eq!(e.to_string().split(':').next().unwrap(), "config key `tlb.l1d.entriez`");
        let e = Config::load("tiny", &["bogus=1".into()]).unwrap_err();
        assert!(e.to_string().contains("`bogus`"), "{e}");
        let e = Config::load("tiny", &["os.page_szie=4K".into()]).unwrap_err();
        assert!(e.to_string().contains("`os.page_szie`"), "{e}");
    }

    /// A missing required table or key is named as such; `[pwc]` may be left out.
    #[test]
    fn missing_keys_are_named_and_pwc_is_optional() {
        let tiny = PRESETS.iter().find(|p| p.0 == "tiny").unwrap().1;
        let without = |table: &str| {
            let mut v: toml::Table = toml::from_str(tiny).unwrap();
            v.remove(table);
            toml::to_string(&v).unwrap()
        };
        let e = Config::from_toml(&without("os"), "t.toml", &[]).unwrap_err();
        assert_eq!(e.to_string(), "config key `os`: required, but missing");
        let e = Config::from_toml(&tiny.replace("phys_mem", "phys_mam"), "t.toml", &[]).unwrap_err();
        assert!(e.to_string().starts_with("config key `machine.phys_mam`"), "{e}");
        let c = Config::from_toml(&without("pwc"), "t.toml", &[]).unwrap();
        assert_eq!(c.pwc, PwcConfig::default());
    }

    #[test]
    fn overrides_apply_and_type_errors_name_the_key() {
        let c = Config::load("tiny", &["tlb.l1d.entries=32".into(), "os.page_size=2M".into()]).unwrap();
        assert_eq!(c.tlb["l1d"].entries, 32);
        assert_eq!(c.os.page_size, Bytes(2 << 20));
        let e = Config::load("tiny", &["tlb.l1d.entries=many".into()]).unwrap_err();
        assert!(e.to_string().contains("tlb.l1d.entries"), "{e}");
        let e = Config::load("tiny", &["os.page_size=3K".into()]).unwrap_err();
        assert!(e.to_string().contains("os.page_size"), "{e}");
    }

    #[test]
    fn an_unknown_page_table_kind_names_the_key_and_the_kinds() {
        let e = Config::load("tiny", &["page_table.kind=foo".into()]).unwrap_err().to_string();
        assert!(e.contains("page_table.kind") && e.contains("foo"), "{e}");
        for k in PageTableKind::ALL {
            assert!(e.contains(k.as_str()), "{e} should list {k}");
            // Every kind's name reads back as itself.
            let c = Config::load("tiny", &[format!("page_table.kind={k}")]).unwrap();
            assert_eq!(c.page_table.kind, k);
        }
    }

    #[test]
    fn zero_entry_tlb_is_rejected() {
        let e = Config::load("tiny", &["tlb.l1d.entries=0".into()]).unwrap_err();
        assert!(e.to_string().contains("tlb.l1d.entries"), "{e}");
    }

    #[test]
    fn config_hash_is_stable_and_sensitive() {
        let a = Config::load("tiny", &[]).unwrap();
        let b = Config::load("tiny", &[]).unwrap();
        let c = Config::load("tiny", &["tlb.l1d.entries=16".into()]).unwrap();
        assert_eq!(a.hash(), b.hash());
        assert_ne!(a.hash(), c.hash());
    }
}
