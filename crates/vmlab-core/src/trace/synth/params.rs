//! Workload parameters: `key=value` strings checked against each workload's declared
//! parameters, whose defaults live in one place (the `ParamInfo` list).

use super::Common;
use crate::addr::parse_bytes;
use crate::error::{Error, Result};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct ParamInfo {
    pub name: &'static str,
    pub(crate) default: String,
    pub(crate) help: &'static str,
}

#[derive(Clone, Debug, Serialize)]
pub struct WorkloadInfo {
    pub name: &'static str,
    pub(crate) description: &'static str,
    pub params: Vec<ParamInfo>,
}

pub(crate) fn param(name: &'static str, default: impl Into<String>, help: &'static str) -> ParamInfo {
    ParamInfo { name, default: default.into(), help }
}

/// The `base` parameter of a workload's data region.
pub(crate) fn base_param() -> ParamInfo {
    param("base", format!("{:#x}", super::DEFAULT_BASE), "virtual base address of the region (4 KiB aligned)")
}

/// Parameters every workload accepts, appended to each workload's own list.
pub(crate) fn common_params() -> Vec<ParamInfo> {
    vec![
        param("accesses", "10M", "number of data accesses to emit (k/M/G = 10^3/10^6/10^9)"),
        param("seed", "1", "random seed"),
        param("instrs_per_access", "4", "non-memory instructions per access, emitted as ticks"),
        param("pid", "1", "process id"),
        param("code", "0", "bytes of code fetched sequentially, one 4-byte fetch per access (0 = no fetches)"),
    ]
}

pub(crate) struct Params {
    workload: String,
    values: Vec<(String, String)>,
    /// The parameters given (the rest hold their defaults).
    given: Vec<String>,
}

impl Params {
    pub(crate) fn new(workload: &str, info: &WorkloadInfo, given: &[(String, String)]) -> Result<Params> {
        let mut values: Vec<(String, String)> = info.params.iter().chain(common_params().iter()).map(|p| (p.name.to_string(), p.default.clone())).collect();
        for (k, v) in given {
            match values.iter_mut().find(|(n, _)| n == k) {
                Some(slot) => slot.1 = v.clone(),
                None => {
                    let known: Vec<&str> = values.iter().map(|(n, _)| n.as_str()).collect();
                    return Err(Error::Workload { name: workload.into(), msg: format!("unknown parameter `{k}` (known: {})", known.join(", ")) });
                }
            }
        }
        Ok(Params { workload: workload.into(), values, given: given.iter().map(|(k, _)| k.clone()).collect() })
    }

    /// Whether `key` was given rather than left at its default.
    pub(crate) fn given(&self, key: &str) -> bool {
        self.given.iter().any(|k| k == key)
    }

    /// Set a parameter a workload derives from others (sysbench's `total_size` sets
    /// `accesses`), so the run and its metadata carry the derived value.
    pub(crate) fn set(&mut self, key: &str, value: String) {
        if let Some(slot) = self.values.iter_mut().find(|(n, _)| n == key) {
            slot.1 = value;
        }
    }

    fn raw(&self, key: &str) -> &str {
        &self.values.iter().find(|(n, _)| n == key).expect("declared parameter").1
    }

    pub(crate) fn err(&self, key: &str, what: &str) -> Error {
        Error::Workload { name: self.workload.clone(), msg: format!("parameter `{key}` = `{}`: expected {what}", self.raw(key)) }
    }

    /// A byte size: 4096, 4K, 2M, 1G, 4GiB.
    pub(crate) fn bytes(&self, key: &str) -> Result<u64> {
        parse_bytes(self.raw(key)).map_err(|_| self.err(key, "a size such as 4096, 64K, 2M or 4G"))
    }

    /// A count: plain integer or k/M/G (10^3/10^6/10^9) suffix, or scientific 1e6.
    pub(crate) fn count(&self, key: &str) -> Result<u64> {
        let s = self.raw(key).trim();
        let (num, mult) = match s.chars().last() {
            Some('k') | Some('K') => (&s[..s.len() - 1], 1_000u64),
            Some('M') => (&s[..s.len() - 1], 1_000_000),
            Some('G') => (&s[..s.len() - 1], 1_000_000_000),
            _ => (s, 1),
        };
        if let Ok(n) = num.parse::<u64>() {
            return n.checked_mul(mult).ok_or_else(|| self.err(key, "a count that fits 64 bits"));
        }
        match num.parse::<f64>() {
            Ok(f) if f >= 0.0 && f.fract() == 0.0 && f * (mult as f64) < 1.8e19 => Ok((f * mult as f64) as u64),
            _ => Err(self.err(key, "a non-negative integer count such as 1000, 10k, 5M or 1e6")),
        }
    }

    /// An integer, decimal or 0x-hex.
    pub(crate) fn int(&self, key: &str) -> Result<u64> {
        let s = self.raw(key).trim().replace('_', "");
        let r = match s.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => s.parse().ok(),
        };
        r.ok_or_else(|| self.err(key, "an integer (decimal or 0x hex)"))
    }

    pub(crate) fn float(&self, key: &str) -> Result<f64> {
        self.raw(key).trim().parse::<f64>().ok().filter(|f| f.is_finite()).ok_or_else(|| self.err(key, "a number"))
    }

    /// One of `choices`.
    pub(crate) fn choice(&self, key: &str, choices: &[&str]) -> Result<String> {
        let v = self.raw(key).trim();
        if choices.contains(&v) {
            Ok(v.to_string())
        } else {
            Err(self.err(key, &format!("one of {}", choices.join(", "))))
        }
    }

    /// Check a constraint on already-parsed values.
    pub(crate) fn require(&self, ok: bool, key: &str, what: &str) -> Result<()> {
        if ok {
            Ok(())
        } else {
            Err(self.err(key, what))
        }
    }

    pub(crate) fn common(&self) -> Result<Common> {
        let pid = self.int("pid")?;
        self.require(pid <= u32::MAX as u64, "pid", "a 32-bit process id")?;
        let code = self.bytes("code")?;
        self.require(code % 4 == 0, "code", "a multiple of 4 bytes")?;
        Ok(Common { accesses: self.count("accesses")?, instrs_per_access: self.int("instrs_per_access")?, pid: pid as u32, code })
    }

    pub(crate) fn seed(&self) -> Result<u64> {
        self.int("seed")
    }

    /// Region base: default 1 GiB aligned, and must be 4 KiB aligned.
    /// The data region's base. Below 2^57 (the largest space a page table here maps),
    /// so a region of up to 2^58 bytes after it never wraps.
    pub(crate) fn base(&self) -> Result<u64> {
        let b = self.int("base")?;
        self.require(b % 4096 == 0 && b < 1 << 57, "base", "a 4 KiB-aligned address below 2^57")?;
        Ok(b)
    }

    /// The `footprint` parameter: at most 2^56 bytes (64 PiB).
    pub(crate) fn footprint(&self) -> Result<u64> {
        let f = self.bytes("footprint")?;
        self.require(f <= 1 << 56, "footprint", "at most 2^56 bytes (64P)")?;
        Ok(f)
    }

    pub(crate) fn finish(&self) -> Result<()> {
        Ok(())
    }

    /// Every parameter with its resolved value (for the trace metadata).
    pub(crate) fn resolved(&self) -> Vec<(String, String)> {
        self.values.clone()
    }
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;

    /// The `Params` of workload `info` from `key=value` pairs, as `open` makes them.
    pub(crate) fn params(info: &WorkloadInfo, kv: &[(&str, &str)]) -> Result<Params> {
        let given: Vec<(String, String)> = kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Params::new(info.name, info, &given)
    }

    /// Each case is refused with an error naming its parameter.
    pub(crate) fn assert_refused<T>(build: impl Fn(&[(&str, &str)]) -> Result<T>, cases: &[(&[(&str, &str)], &str)]) {
        for (kv, key) in cases {
            let e = build(kv).err().unwrap_or_else(|| panic!("{kv:?} accepted")).to_string();
            assert!(e.contains(&format!("`{key}`")), "{kv:?}: {e}");
        }
    }
}
