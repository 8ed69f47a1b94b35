//! YCSB transactions over an in-memory table and its index, as DBx1000 (Yu et al.,
//! "Staring into the Abyss", VLDB 2014) runs them: the OLTP load of the Tailored Page
//! Sizes paper's DBx1000 runs.
//!
//! The table (DBx1000 ycsb_wl.cpp) holds `rows` rows with primary keys 0..rows-1, each a
//! 64 B header whose first word is the concurrency-control word (TicToc's packed
//! timestamp and lock, DBx1000's default CC_ALG) followed by FIELD_PER_TUPLE = 10 fields
//! of 100 B (YCSB_schema.txt); an `itemid_t` (32 B) per row points at it from the index.
//!
//! A transaction (ycsb_query.cpp, ycsb_txn.cpp) makes `requests` requests on distinct
//! keys drawn from a Zipfian of skew `theta` over keys 1..rows-1 (DBx1000 draws
//! `zipf(table_size - 1)`; the hottest keys are the lowest, unscrambled); each is a read
//! with probability `read_ratio`, else a write. A request looks the key up in the index
//! (`index_read`), follows the item to the row, reads its concurrency-control word, then
//! reads the 10 fields (the row copied for the transaction) or writes one.
//!
//! Index (`index`): `btree` is DBx1000's IDX_BTREE, a B+-tree of `btree_order` keys per
//! node (BTREE_ORDER = 16) in the shape ascending-key insertion with splits in half
//! leaves it: every node but the last of its level holds order/2 entries (keys in a
//! leaf, children in an inner node), the last the rest. Its keys are the row keys, so a
//! node's keys follow from its position and the tree is computed, not stored.
//! `find_leaf` reads each node from the root down: the node, its keys one by one until
//! the first above the key (`key < keys[i]`), then the child pointer; in the leaf the
//! keys up to the equal one, then the item pointer. `hash` is DBx1000's IDX_HASH with one
//! bucket per row: a key's bucket header, then its chain's single node, then the item.

use super::gen::{page_round, rng, BurstGen, Bursts, Generator, Planned, Zipf};
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::Dep;
use rand::RngCore;
use rand_xoshiro::Xoshiro256PlusPlus;

pub(crate) fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "ycsb",
        description: "DBx1000-like YCSB transactions: Zipfian requests that descend a B+-tree (or hash) index, then read a row's concurrency-control word and fields or write a field",
        params: vec![
            param("rows", "10485760", "rows in the table (DBx1000 SYNTH_TABLE_SIZE: 10 x 2^20)"),
            param("theta", "0.6", "Zipfian skew of the keys (0 = uniform, < 1)"),
            param("read_ratio", "0.9", "fraction of requests that read (the rest write)"),
            param("requests", "16", "requests per transaction (DBx1000 REQ_PER_QUERY)"),
            param("index", "btree", "btree | hash (DBx1000 IDX_BTREE | IDX_HASH)"),
            param("btree_order", "16", "keys per B+-tree node (DBx1000 BTREE_ORDER)"),
            base_param(),
        ],
    }
}

/// DBx1000 YCSB_schema.txt: 10 fields of 100 B.
const FIELDS: u64 = 10;
const FIELD: u64 = 100;
/// A row: its header (the concurrency-control word first), then the fields; a whole
/// number of 64 B lines, as DBx1000 aligns rows (`_mm_malloc(…, 64)`).
const ROW_HEADER: u64 = 64;
const ROW: u64 = (ROW_HEADER + FIELDS * FIELD).div_ceil(64) * 64;
/// `itemid_t` (type, location, valid, next) and where `location` sits in it.
const ITEM: u64 = 32;
const ITEM_LOCATION: u64 = 8;
/// A `bt_node` (pointers, is_leaf, keys, parent, num_keys, next, latch, mutex, ...),
/// padded to two lines; its keys and pointers arrays follow it (`make_node`).
const BT_NODE: u64 = 128;
/// The header fields a search reads (pointers, is_leaf, keys, parent, num_keys).
const BT_NODE_READ: u16 = 40;
/// `BucketHeader` (first_node, node_cnt, locked) and `BucketNode` (key, next, items).
const BUCKET: u64 = 24;
const BUCKET_NODE: u64 = 24;
/// The most requests a transaction makes (DBx1000 MAX_ROW_PER_TXN).
const MAX_REQUESTS: u64 = 64;

/// The B+-tree's shape: node counts per level, leaves first.
struct BTree {
    order: u64,
    /// Entries per node but the last of each level.
    fan: u64,
    levels: Vec<u64>,
    /// The number of the first node of each level, the root being node 0.
    first: Vec<u64>,
    node_bytes: u64,
}

impl BTree {
    fn new(rows: u64, order: u64) -> BTree {
        let fan = order / 2;
        let nodes = |m: u64| if m <= order { 1 } else { m / fan };
        let mut levels = vec![nodes(rows)];
        while *levels.last().unwrap() > 1 {
            levels.push(nodes(*levels.last().unwrap()));
        }
        let mut first = vec![0; levels.len()];
        let mut above = 0;
        for l in (0..levels.len()).rev() {
            first[l] = above;
            above += levels[l];
        }
        let node_bytes = (BT_NODE + order * 8 + (order + 1) * 8).div_ceil(64) * 64;
        BTree { order, fan, levels, first, node_bytes }
    }

    fn nodes(&self) -> u64 {
        self.levels.iter().sum()
    }

    /// Entries of node `idx` of a level of `count` nodes over `m` entries.
    fn entries(&self, m: u64, count: u64, idx: u64) -> u64 {
        if idx + 1 < count {
            self.fan
        } else {
            m - self.fan * (count - 1)
        }
    }

    /// Node `idx` of `level` on `level`, holding `key`: the node its entry of the level
    /// below lies in.
    fn node_of(&self, level: usize, key: u64) -> u64 {
        (key / self.fan.pow(level as u32 + 1)).min(self.levels[level] - 1)
    }

    fn keys_at(&self) -> u64 {
        BT_NODE
    }

    fn pointers_at(&self) -> u64 {
        BT_NODE + self.order * 8
    }
}

enum Index {
    BTree(BTree),
    Hash,
}

struct Layout {
    /// The index object: the root pointer (B+-tree) or the bucket array's (hash).
    index: u64,
    /// B+-tree nodes, root first, level by level; or the bucket headers.
    nodes: u64,
    /// Hash: the bucket nodes.
    chain: u64,
    items: u64,
    rows: u64,
    end: u64,
}

struct Ycsb {
    rows: u64,
    zipf: Zipf,
    read_per_mille: u64,
    requests: u64,
    index: Index,
    rng: Xoshiro256PlusPlus,
    at: Layout,
    /// The current transaction's keys (DBx1000 draws distinct keys).
    keys: [u64; MAX_REQUESTS as usize],
}

pub(crate) fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
    Ok(BurstGen::boxed(build(p)?))
}

fn build(p: &mut Params) -> Result<Ycsb> {
    let rows = p.count("rows")?;
    let theta = p.float("theta")?;
    let read_ratio = p.float("read_ratio")?;
    let requests = p.int("requests")?;
    let index = p.choice("index", &["btree", "hash"])?;
    let order = p.int("btree_order")?;
    p.require((0.0..1.0).contains(&theta), "theta", "a skew in [0, 1)")?;
    p.require((0.0..=1.0).contains(&read_ratio), "read_ratio", "a fraction in [0, 1]")?;
    p.require((1..=MAX_REQUESTS).contains(&requests), "requests", "1 to 64 requests per transaction (DBx1000 MAX_ROW_PER_TXN)")?;
    // Distinct keys per transaction among keys 1..rows-1: room to spare.
    p.require((16..=1 << 40).contains(&rows) && rows > 4 * requests, "rows", "16 to 2^40 rows, more than 4 x requests")?;
    p.require((4..=1024).contains(&order), "btree_order", "4 to 1024 keys per node")?;
    let base = p.base()?;
    let index = if index == "btree" { Index::BTree(BTree::new(rows, order)) } else { Index::Hash };
    let nodes = base + 4096;
    let (chain, items) = match &index {
        Index::BTree(t) => {
            let items = nodes + page_round(t.nodes() * t.node_bytes);
            (items, items)
        }
        Index::Hash => {
            let chain = nodes + page_round(rows * BUCKET);
            (chain, chain + page_round(rows * BUCKET_NODE))
        }
    };
    let rows_at = items + page_round(rows * ITEM);
    let end = rows_at + page_round(rows * ROW);
    p.require(end - base <= 1 << 56, "rows", "a footprint of at most 2^56 bytes")?;
    Ok(Ycsb {
        rows,
        zipf: Zipf::new(rows - 1, theta),
        read_per_mille: (read_ratio * 1000.0).round() as u64,
        requests,
        index,
        rng: rng(p.seed()?),
        at: Layout { index: base, nodes, chain, items, rows: rows_at, end },
        keys: [0; MAX_REQUESTS as usize],
    })
}

impl Ycsb {
    /// A key as DBx1000's `zipf(table_size - 1, theta)` draws it: 1..rows-1, 1 the
    /// hottest.
    fn draw_key(&mut self) -> u64 {
        let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        1 + self.zipf.sample(u)
    }

    /// `index_read` of a B+-tree. Dependences: the root pointer is at a fixed place; a
    /// node's header is where the pointer read before it points (load 1); its keys and
    /// the chosen pointer are in arrays the header locates (load 1 + the reads since).
    fn find_leaf(&self, t: &BTree, key: u64, out: &mut Vec<Planned>) {
        out.push(Planned::read(self.at.index, 8, Dep::NONE));
        for level in (0..t.levels.len()).rev() {
            let idx = t.node_of(level, key);
            let node = self.at.nodes + (t.first[level] + idx) * t.node_bytes;
            // Entries below this level: the rows (a leaf's keys) or the nodes beneath.
            let below = if level == 0 { self.rows } else { t.levels[level - 1] };
            let n = t.entries(below, t.levels[level], idx);
            // The entry holding the key, its position in the node, and the keys read to
            // find it: a leaf compares keys up to the equal one; an inner node up to the
            // first above the key (n - 1 separators; the last child after all of them).
            let (pos, scanned) = if level == 0 {
                let pos = key - idx * t.fan;
                (pos, pos + 1)
            } else {
                let child = (key / t.fan.pow(level as u32)).min(below - 1);
                let pos = child - idx * t.fan;
                (pos, (pos + 1).min(n - 1))
            };
            debug_assert!(pos < n);
            out.push(Planned::read(node, BT_NODE_READ, Dep::on_load(1)));
            for i in 0..scanned {
                out.push(Planned::read(node + t.keys_at() + i * 8, 8, Dep::on_load(1 + i)));
            }
            out.push(Planned::read(node + t.pointers_at() + pos * 8, 8, Dep::on_load(1 + scanned)));
        }
    }

    /// One request. Dependences after the index: the item's location through the
    /// pointer the index gave (load 1), the row's concurrency-control word through the
    /// location (load 1), each field through it too (load 2 + the fields read before).
    fn request(&self, key: u64, read: bool, out: &mut Vec<Planned>) {
        match &self.index {
            Index::BTree(t) => self.find_leaf(t, key, out),
            Index::Hash => {
                // DBx1000's hash (key mod buckets): with a bucket per row, the key's own.
                out.push(Planned::read(self.at.index, 8, Dep::NONE));
                out.push(Planned::read(self.at.nodes + key * BUCKET, 8, Dep::on_load(1)));
                out.push(Planned::read(self.at.chain + key * BUCKET_NODE, BUCKET_NODE as u16, Dep::on_load(1)));
            }
        }
        out.push(Planned::read(self.at.items + key * ITEM + ITEM_LOCATION, 8, Dep::on_load(1)));
        let row = self.at.rows + key * ROW;
        out.push(Planned::read(row, 8, Dep::on_load(1)));
        if read {
            for f in 0..FIELDS {
                out.push(Planned::read(row + ROW_HEADER + f * FIELD, FIELD as u16, Dep::on_load(2 + f)));
            }
        } else {
            out.push(Planned::write(row + ROW_HEADER, FIELD as u16, Dep::on_load(2)));
        }
    }

    /// One transaction: its keys drawn first (distinct, as `ycsb_query::gen_requests`),
    /// then its requests in order.
    fn transaction(&mut self, out: &mut Vec<Planned>) {
        let n = self.requests as usize;
        for r in 0..n {
            let mut key = self.draw_key();
            while self.keys[..r].contains(&key) {
                key = self.draw_key();
            }
            self.keys[r] = key;
        }
        for r in 0..n {
            let read = self.rng.next_u64() % 1000 < self.read_per_mille;
            self.request(self.keys[r], read, out);
        }
    }
}

impl Bursts for Ycsb {
    fn region(&self) -> (u64, u64) {
        (self.at.index, self.at.end)
    }
    fn next_burst(&mut self, out: &mut Vec<Planned>) {
        self.transaction(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::params::testing::{assert_refused, params};
    use super::*;

    fn ycsb(kv: &[(&str, &str)]) -> Result<Ycsb> {
        build(&mut params(&info(), kv)?)
    }

    /// The tree holds every key once, in order: each leaf holds order/2 keys but the
    /// last, each inner node order/2 children but the last, up to one root.
    #[test]
    fn the_btree_has_the_ascending_insertion_shape() {
        let t = BTree::new(10 * 1024 * 1024, 16);
        // 10 x 2^20 keys: 2^20 x 10 / 8 leaves, then / 8 per level up to one root.
        assert_eq!(t.levels, [1_310_720, 163_840, 20_480, 2_560, 320, 40, 5, 1]);
        assert_eq!(t.node_bytes, 448);
        for rows in [16u64, 17, 100, 1000, 4099] {
            let t = BTree::new(rows, 4);
            let mut m = rows;
            for (l, &count) in t.levels.iter().enumerate() {
                let sizes: Vec<u64> = (0..count).map(|i| t.entries(m, count, i)).collect();
                assert_eq!(sizes.iter().sum::<u64>(), m, "level {l}");
                assert!(sizes.iter().all(|&s| s >= t.fan.min(m) && s <= t.order), "level {l}: {sizes:?}");
                m = count;
            }
            assert_eq!(*t.levels.last().unwrap(), 1);
        }
    }

    fn per_request(out: &[Planned]) -> usize {
        out.iter().filter(|a| a.size == 8 && a.dep == Dep::NONE).count()
    }

    /// Every request reads the root pointer, one node per level, the keys a linear
    /// search compares and one pointer per node, the item, the row's word, then 10
    /// fields or one write; the leaf reached holds the key.
    #[test]
    fn a_request_descends_one_node_per_level_to_its_key() {
        let y = ycsb(&[("rows", "5000"), ("btree_order", "6")]).unwrap();
        let Index::BTree(t) = &y.index else { unreachable!() };
        assert_eq!(t.levels, [1666, 555, 185, 61, 20, 6, 1]);
        let mut out = Vec::new();
        for key in 0..y.rows {
            for read in [true, false] {
                out.clear();
                y.request(key, read, &mut out);
                let headers: Vec<&Planned> = out.iter().filter(|a| a.size == BT_NODE_READ).collect();
                assert_eq!(headers.len(), t.levels.len());
                let leaf = (headers.last().unwrap().vaddr - y.at.nodes) / t.node_bytes - t.first[0];
                assert!(leaf * t.fan <= key && key < leaf * t.fan + t.entries(y.rows, t.levels[0], leaf), "key {key} in leaf {leaf}");
                let key_reads = out.iter().filter(|a| a.size == 8 && a.vaddr >= y.at.nodes && a.vaddr < y.at.items).count();
                // Per node: its keys compared plus one pointer; the leaf compares up to the key.
                assert!(key_reads >= 2 * t.levels.len() && key_reads <= (t.order as usize + 1) * t.levels.len(), "{key_reads}");
                // The root pointer, the nodes, the item, the row's word, then the row.
                assert_eq!(out.len(), 1 + headers.len() + key_reads + 2 + if read { FIELDS as usize } else { 1 });
                assert_eq!(per_request(&out), 1);
                let last = out.last().unwrap();
                assert_eq!((last.write, last.vaddr), (!read, y.at.rows + key * ROW + ROW_HEADER + if read { 9 * FIELD } else { 0 }));
            }
        }
    }

    #[test]
    fn a_hash_request_reads_bucket_node_item_then_the_row() {
        let y = ycsb(&[("rows", "1000"), ("index", "hash")]).unwrap();
        let mut out = Vec::new();
        y.request(7, true, &mut out);
        let want = [y.at.index, y.at.nodes + 7 * BUCKET, y.at.chain + 7 * BUCKET_NODE, y.at.items + 7 * ITEM + ITEM_LOCATION, y.at.rows + 7 * ROW];
        assert_eq!(out[..5].iter().map(|a| a.vaddr).collect::<Vec<_>>(), want);
        assert_eq!(out.len(), 5 + FIELDS as usize);
        assert!(out[1..].iter().take(4).all(|a| a.dep == Dep::on_load(1)));
    }

    /// Footprint: the index object, the index, the items and the rows, page-rounded.
    #[test]
    fn the_footprint_is_the_tables_arrays() {
        let y = ycsb(&[("rows", "100000")]).unwrap();
        let Index::BTree(t) = &y.index else { unreachable!() };
        let nodes: u64 = t.levels.iter().sum();
        assert_eq!(y.at.end - y.at.index, 4096 + page_round(nodes * 448) + page_round(100_000 * 32) + page_round(100_000 * 1088));
        let h = ycsb(&[("rows", "100000"), ("index", "hash")]).unwrap();
        assert_eq!(h.at.end - h.at.index, 4096 + page_round(100_000 * 24) * 2 + page_round(100_000 * 32) + page_round(100_000 * 1088));
    }

    /// A transaction: `requests` distinct keys, never key 0, about `read_ratio` reads;
    /// theta concentrates the keys on the lowest.
    #[test]
    fn transactions_draw_distinct_zipfian_keys() {
        let mut y = ycsb(&[("rows", "100000"), ("index", "hash"), ("theta", "0.9")]).unwrap();
        let mut out = Vec::new();
        let (mut writes, mut requests, mut hot) = (0, 0, 0);
        for _ in 0..2000 {
            out.clear();
            y.next_burst(&mut out);
            let keys: Vec<u64> = out.iter().filter(|a| a.size == BUCKET_NODE as u16).map(|a| (a.vaddr - y.at.chain) / BUCKET_NODE).collect();
            assert_eq!(keys.len(), 16);
            assert!(keys.iter().all(|&k| k >= 1 && keys.iter().filter(|&&o| o == k).count() == 1), "{keys:?}");
            hot += keys.iter().filter(|&&k| k <= 1000).count();
            requests += keys.len();
            writes += out.iter().filter(|a| a.write).count();
        }
        let w = writes as f64 / requests as f64;
        assert!((w - 0.1).abs() < 0.01, "{w}");
        // Zipf 0.9 over 10^5 keys: the lowest 1% take far more than 1% of requests.
        assert!(hot * 4 > requests, "{hot} of {requests}");
    }

    #[test]
    fn bad_parameters_name_themselves() {
        assert_refused(
            ycsb,
            &[
                (&[("rows", "10")], "rows"),
                (&[("rows", "2000G")], "rows"),
                (&[("theta", "1")], "theta"),
                (&[("read_ratio", "1.5")], "read_ratio"),
                (&[("requests", "0")], "requests"),
                (&[("requests", "65")], "requests"),
                (&[("index", "art")], "index"),
                (&[("btree_order", "3")], "btree_order"),
            ],
        );
    }

    #[test]
    fn a_seed_gives_one_stream() {
        let run = |seed: &str| {
            let mut y = ycsb(&[("rows", "20000"), ("seed", seed)]).unwrap();
            let mut out = Vec::new();
            for _ in 0..20 {
                y.next_burst(&mut out);
            }
            out.iter().map(|a| (a.vaddr, a.write)).collect::<Vec<_>>()
        };
        assert_eq!(run("3"), run("3"));
        assert_ne!(run("3"), run("4"));
    }
}
