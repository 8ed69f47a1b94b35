//! A key-value store (hash index + record heap) under a Zipfian GET/PUT load, the shape
//! of memcached- or database-like workloads.
//!
//! Layout: a bucket array (8 B per bucket, keys/2 buckets), one 32 B chain node per key,
//! and one `value_size` value per key. A GET reads the bucket, one or two chain nodes
//! (half the keys sit second in their chain), then the value; a PUT writes the value.
//! Popularity is Zipfian (Gray et al. 1994, as in YCSB) and scrambled by a hash so hot
//! keys are spread over the heap.

use super::gen::{mix, page_round, rng, BurstGen, Bursts, Generator, Planned, Zipf};
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::Dep;
use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;

const NODE: u64 = 32;

pub(crate) fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "kv",
        description: "key-value store: hashed bucket array, chain nodes and values under a Zipfian GET/PUT mix",
        params: vec![
            param("keys", "10M", "number of keys"),
            param("theta", "0.99", "Zipfian skew (0 = uniform, < 1)"),
            param("value_size", "256", "bytes per value (1..65535)"),
            param("write_ratio", "0.05", "fraction of operations that are PUTs"),
            base_param(),
        ],
    }
}

struct KeyValue {
    seed: u64,
    keys: u64,
    zipf: Option<Zipf>,
    value_size: u64,
    write_per_mille: u64,
    rng: Xoshiro256PlusPlus,
    base: u64,
    nodes_at: u64,
    values_at: u64,
    end: u64,
}

pub(crate) fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
    let keys = p.count("keys")?;
    let theta = p.float("theta")?;
    let value_size = p.bytes("value_size")?;
    let write_ratio = p.float("write_ratio")?;
    p.require((2..=1 << 32).contains(&keys), "keys", "2 to 2^32 keys")?;
    p.require((0.0..1.0).contains(&theta), "theta", "a skew in [0, 1)")?;
    p.require((1..=65535).contains(&value_size), "value_size", "1 to 65535 bytes")?;
    p.require((0.0..=1.0).contains(&write_ratio), "write_ratio", "a fraction in [0, 1]")?;
    let base = p.base()?;
    let buckets = keys / 2;
    let nodes_at = base + page_round(buckets * 8);
    let values_at = nodes_at + page_round(keys * NODE);
    let end = values_at + page_round(keys * value_size);
    let seed = p.seed()?;
    Ok(BurstGen::boxed(KeyValue {
        seed,
        keys,
        zipf: (theta > 0.0).then(|| Zipf::new(keys, theta)),
        value_size,
        write_per_mille: (write_ratio * 1000.0).round() as u64,
        rng: rng(seed),
        base,
        nodes_at,
        values_at,
        end,
    }))
}

impl KeyValue {
    /// One GET or PUT. Dependences: the bucket's address is a hash of the key
    /// (independent); each chain node is found through the pointer read before it (the
    /// bucket, then the node ahead), and the value through its node.
    fn operation(&mut self, out: &mut Vec<Planned>) {
        let r = self.rng.next_u64();
        let u = (r >> 11) as f64 / (1u64 << 53) as f64;
        let rank = match &self.zipf {
            Some(z) => z.sample(u),
            None => (u * self.keys as f64) as u64,
        };
        let key = mix(self.seed, rank) % self.keys;
        let h = mix(key, 0x6b76);
        let bucket = h % (self.keys / 2);
        let put = mix(r, 3) % 1000 < self.write_per_mille;
        out.push(Planned::read(self.base + bucket * 8, 8, Dep::NONE));
        if h & (1 << 40) != 0 {
            // Second in its chain: first read the node ahead of it.
            out.push(Planned::read(self.nodes_at + (key ^ 1) % self.keys * NODE, NODE as u16, Dep::on_load(1)));
        }
        out.push(Planned::read(self.nodes_at + key * NODE, NODE as u16, Dep::on_load(1)));
        out.push(Planned { vaddr: self.values_at + key * self.value_size, size: self.value_size as u16, write: put, dep: Dep::on_load(1) });
    }
}

impl Bursts for KeyValue {
    fn region(&self) -> (u64, u64) {
        (self.base, self.end)
    }
    fn next_burst(&mut self, out: &mut Vec<Planned>) {
        self.operation(out)
    }
}
