//! Graph500 (Kernel 2, BFS) and a GraphBIG-like PageRank on a Kronecker graph held in
//! memory: the addresses come from running the algorithm on the graph's real adjacency.
//!
//! The graph is the Graph500 specification's: 2^scale vertices, `edgefactor` x 2^scale
//! edges drawn by the Kronecker (R-MAT) recursion with initiator A = 0.57, B = 0.19,
//! C = 0.19, D = 0.05, vertex labels permuted at random, stored undirected in CSR (each
//! edge in both endpoints' lists, self-loops dropped, duplicates kept, each list sorted)
//! with 8-byte vertex ids and offsets, as the reference implementation's `xoff`/`xadj`.
//! The host keeps the adjacency (4 bytes an entry) and the offsets; the simulated
//! program's arrays are laid out one after another in one region.
//!
//! BFS follows the reference `bfs_simple`: each search first sets every parent to -1
//! (sequential writes), then pops the queue, reads the vertex's offsets and each
//! neighbour's id and parent, and claims unvisited neighbours (parent and queue
//! writes); searches start from pseudo-random roots with at least one edge, one after
//! another. PageRank pulls: each iteration reads every vertex's offsets, its
//! neighbours' ids and their contributions (rank / degree), writes its new rank, then
//! a sequential pass turns ranks into contributions.

use super::gen::{mix, page_round, BurstGen, Bursts, Generator, Permutation, Planned};
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::Dep;
use rayon::prelude::*;

pub(crate) fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "graph500",
        description: "Graph500 BFS (kernel=bfs) or GraphBIG-like PageRank (kernel=pagerank) on a Kronecker graph built in memory: 2^scale vertices, edgefactor x 2^scale edges, CSR with 8-byte ids",
        params: vec![
            param("scale", "20", "log2 of the vertex count (Graph500: 22 to 26 and up)"),
            param("edgefactor", "16", "edges per vertex (Graph500: 16)"),
            param("kernel", "bfs", "bfs | pagerank"),
            base_param(),
        ],
    }
}

/// Kronecker initiator probabilities A, A+B, A+B+C as 16-bit fractions (Graph500 spec
/// §3.3: A = 0.57, B = 0.19, C = 0.19).
const A: u64 = (0.57 * 65536.0) as u64;
const AB: u64 = (0.76 * 65536.0) as u64;
const ABC: u64 = (0.95 * 65536.0) as u64;

/// Bytes of a vertex id, an offset, a parent, a queue slot, a rank (int64 / double).
const WORD: u64 = 8;
/// Edges drawn at a time (in parallel) while building the graph, and of those, edges
/// hinted to the host cache, then stored, at a time.
const GEN_BATCH: usize = 1 << 16;
const BUILD_BATCH: usize = 256;
/// Vertices whose lists one parallel task sorts.
const SORT_BLOCK: usize = 1 << 12;
/// Parents set to -1 per burst at the start of a search.
const INIT_CHUNK: u64 = 512;

/// The graph in host memory: `offsets[v]..offsets[v + 1]` index `adj`.
struct Csr {
    offsets: Vec<u64>,
    adj: Vec<u32>,
}

/// Edge `e` of the Kronecker graph, endpoints before relabelling.
#[inline]
fn kronecker_edge(seed: u64, scale: u32, e: u64) -> (u64, u64) {
    let (mut u, mut v) = (0u64, 0u64);
    let mut bits = 0u64;
    for level in 0..scale {
        if level % 4 == 0 {
            bits = mix(seed, e.wrapping_mul(8).wrapping_add((level / 4) as u64));
        }
        let r = bits & 0xffff;
        bits >>= 16;
        // Quadrant (0,0) below A, (0,1) below A+B, (1,0) below A+B+C, else (1,1);
        // without branches, which the random draws would mispredict half the time.
        let du = (r >= AB) as u64;
        let dv = ((A..AB).contains(&r) | (r >= ABC)) as u64;
        u = u << 1 | du;
        v = v << 1 | dv;
    }
    (u, v)
}

impl Csr {
    /// Build the graph, or `None` if the host cannot hold it.
    fn build(seed: u64, scale: u32, edgefactor: u64) -> Option<Csr> {
        let n = 1u64 << scale;
        let m = edgefactor << scale;
        let perm = Permutation::new(n, seed ^ 0x6772_6170_6835_3030);
        let edge = |e: u64| {
            let (u, v) = kronecker_edge(seed, scale, e);
            (perm.get(u), perm.get(v))
        };
        // Counts in offsets[v + 1], then prefix sums: offsets[v] = start of v's list.
        // Edges go in batches whose slots are hinted to the host cache first: the
        // counts and the lists are far larger than it, and a batch's misses then
        // overlap instead of queueing.
        let mut offsets = Vec::new();
        offsets.try_reserve_exact(n as usize + 1).ok()?;
        offsets.resize(n as usize + 1, 0u64);
        // Edges are drawn in parallel (each depends only on its index), then stored
        // in order.
        let mut edges = vec![(0u64, 0u64); GEN_BATCH];
        let next_edges = |from: u64, edges: &mut Vec<(u64, u64)>| {
            let k = (m - from).min(GEN_BATCH as u64) as usize;
            edges[..k].par_iter_mut().enumerate().for_each(|(j, slot)| *slot = edge(from + j as u64));
            k
        };
        let mut from = 0;
        while from < m {
            let k = next_edges(from, &mut edges);
            for batch in edges[..k].chunks(BUILD_BATCH) {
                for &(u, v) in batch {
                    crate::host::prefetch(offsets.as_ptr().wrapping_add(u as usize + 1));
                    crate::host::prefetch(offsets.as_ptr().wrapping_add(v as usize + 1));
                }
                for &(u, v) in batch {
                    if u != v {
                        offsets[u as usize + 1] += 1;
                        offsets[v as usize + 1] += 1;
                    }
                }
            }
            from += k as u64;
        }
        for i in 1..offsets.len() {
            offsets[i] += offsets[i - 1];
        }
        let entries = offsets[n as usize];
        let mut adj = Vec::new();
        adj.try_reserve_exact(entries as usize).ok()?;
        adj.resize(entries as usize, 0u32);
        // Fill with offsets[v] as v's cursor: it ends at the start of v + 1's list, so
        // shifting by one restores the starts.
        let mut from = 0;
        while from < m {
            let k = next_edges(from, &mut edges);
            for batch in edges[..k].chunks(BUILD_BATCH) {
                for &(u, v) in batch {
                    crate::host::prefetch(offsets.as_ptr().wrapping_add(u as usize));
                    crate::host::prefetch(offsets.as_ptr().wrapping_add(v as usize));
                }
                for &(u, v) in batch {
                    // A hint only: earlier edges of the batch may still move the cursor.
                    crate::host::prefetch(adj.as_ptr().wrapping_add(offsets[u as usize] as usize));
                    crate::host::prefetch(adj.as_ptr().wrapping_add(offsets[v as usize] as usize));
                }
                for &(u, v) in batch {
                    if u != v {
                        adj[offsets[u as usize] as usize] = v as u32;
                        offsets[u as usize] += 1;
                        adj[offsets[v as usize] as usize] = u as u32;
                        offsets[v as usize] += 1;
                    }
                }
            }
            from += k as u64;
        }
        for v in (1..=n as usize).rev() {
            offsets[v] = offsets[v - 1];
        }
        offsets[0] = 0;
        // Sort each list; blocks of lists in parallel.
        let mut blocks: Vec<(usize, &mut [u32])> = Vec::new();
        let mut rest: &mut [u32] = &mut adj;
        let mut first = 0usize;
        while first < n as usize {
            let last = (first + SORT_BLOCK).min(n as usize);
            let (block, tail) = std::mem::take(&mut rest).split_at_mut((offsets[last] - offsets[first]) as usize);
            blocks.push((first, block));
            rest = tail;
            first = last;
        }
        blocks.into_par_iter().for_each(|(first, block)| {
            let base = offsets[first];
            for v in first..(first + SORT_BLOCK).min(n as usize) {
                block[(offsets[v] - base) as usize..(offsets[v + 1] - base) as usize].sort_unstable();
            }
        });
        Some(Csr { offsets, adj })
    }

    fn vertices(&self) -> u64 {
        self.offsets.len() as u64 - 1
    }

    #[inline]
    fn list(&self, v: u64) -> (u64, u64) {
        (self.offsets[v as usize], self.offsets[v as usize + 1])
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kernel {
    Bfs,
    PageRank,
}

/// Where the simulated program's arrays sit.
struct Layout {
    xoff: u64,
    xadj: u64,
    /// BFS: parents; PageRank: contributions.
    per_vertex: u64,
    /// BFS: the queue; PageRank: the new ranks.
    second: u64,
    end: u64,
}

struct Graph500 {
    seed: u64,
    kernel: Kernel,
    csr: Csr,
    at: Layout,
    /// BFS: searches started; PageRank: iterations started.
    round: u64,
    /// Vertices whose parent was reset (BFS) or whose rank was applied (PageRank) in
    /// the current sequential pass (the vertex count once the pass is over).
    swept: u64,
    /// BFS: the host's visited bits and queue (head index into `queue`).
    visited: Vec<u64>,
    queue: Vec<u32>,
    head: usize,
    /// PageRank: the next vertex to gather.
    next: u64,
}

pub(crate) fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
    Ok(BurstGen::boxed(build(p)?))
}

fn build(p: &mut Params) -> Result<Graph500> {
    let scale = p.int("scale")?;
    let edgefactor = p.count("edgefactor")?;
    p.require((1..=31).contains(&scale), "scale", "1 to 31 (2^scale vertices)")?;
    p.require((1..=1024).contains(&edgefactor), "edgefactor", "1 to 1024")?;
    let kernel = match p.choice("kernel", &["bfs", "pagerank"])?.as_str() {
        "bfs" => Kernel::Bfs,
        _ => Kernel::PageRank,
    };
    let seed = p.seed()?;
    let base = p.base()?;
    let n = 1u64 << scale;
    // Host memory: 8 bytes of offset a vertex, 4 bytes of adjacency per edge end.
    let host_gib = ((n * 8 + (edgefactor << scale) * 8) as f64 / (1u64 << 30) as f64).ceil();
    let csr = Csr::build(seed, scale as u32, edgefactor)
        .ok_or_else(|| p.err("scale", &format!("a graph whose adjacency (about {host_gib} GiB) fits in host memory")))?;
    let xoff = base;
    let xadj = xoff + page_round((n + 1) * WORD);
    let per_vertex = xadj + page_round(csr.adj.len().max(1) as u64 * WORD);
    let second = per_vertex + page_round(n * WORD);
    let end = second + page_round(n * WORD);
    Ok(Graph500 {
        seed,
        kernel,
        at: Layout { xoff, xadj, per_vertex, second, end },
        round: 0,
        swept: 0,
        visited: if kernel == Kernel::Bfs { vec![0; n.div_ceil(64) as usize] } else { Vec::new() },
        queue: Vec::new(),
        head: 0,
        next: 0,
        csr,
    })
}

impl Graph500 {
    /// A pseudo-random root with at least one edge (Graph500 §5: roots of degree 0 are
    /// not searched), or any vertex if none has one.
    fn root(&self) -> u64 {
        let n = self.csr.vertices();
        let start = mix(self.seed, 0x726f_6f74 + self.round) % n;
        (0..n.min(1 << 16)).map(|k| (start + k) % n).find(|&v| self.csr.list(v).0 != self.csr.list(v).1).unwrap_or(start)
    }

    /// The next chunk of a sequential pass over every vertex (`write_at`: the array
    /// written, one word each; `read_at`: one read first, or none). Returns false once
    /// the pass is over.
    fn sweep(&mut self, out: &mut Vec<Planned>, read_at: Option<u64>, write_at: u64) -> bool {
        let n = self.csr.vertices();
        if self.swept >= n {
            return false;
        }
        let to = (self.swept + INIT_CHUNK).min(n);
        for v in self.swept..to {
            if let Some(r) = read_at {
                out.push(Planned::read(r + v * WORD, 8, Dep::NONE));
                out.push(Planned::read(self.at.xoff + v * WORD, 16, Dep::NONE));
            }
            out.push(Planned::write(write_at + v * WORD, 8, if read_at.is_some() { Dep::on_load(2) } else { Dep::NONE }));
        }
        self.swept = to;
        true
    }

    fn bfs_burst(&mut self, out: &mut Vec<Planned>) {
        if self.head == self.queue.len() && self.swept >= self.csr.vertices() {
            // The search is over: the next one resets every parent first.
            self.swept = 0;
        }
        if self.sweep(out, None, self.at.per_vertex) {
            if self.swept >= self.csr.vertices() {
                let root = self.root();
                self.round += 1;
                self.visited.iter_mut().for_each(|w| *w = 0);
                self.queue.clear();
                self.head = 0;
                self.visited[(root / 64) as usize] |= 1 << (root % 64);
                self.queue.push(root as u32);
                out.push(Planned::write(self.at.per_vertex + root * WORD, 8, Dep::NONE));
                out.push(Planned::write(self.at.second, 8, Dep::NONE));
            }
            return;
        }
        let u = self.queue[self.head] as u64;
        let slot = self.head as u64;
        self.head += 1;
        let (lo, hi) = self.csr.list(u);
        out.push(Planned::read(self.at.second + slot * WORD, 8, Dep::NONE));
        out.push(Planned::read(self.at.xoff + u * WORD, 16, Dep::on_load(1)));
        for (i, e) in (lo..hi).enumerate() {
            let v = self.csr.adj[e as usize] as u64;
            // Since the offsets: this vertex's earlier neighbours, two reads each.
            out.push(Planned::read(self.at.xadj + e * WORD, 8, Dep::on_load(1 + 2 * i as u64)));
            out.push(Planned::read(self.at.per_vertex + v * WORD, 8, Dep::on_load(1)));
            let (w, b) = ((v / 64) as usize, v % 64);
            if self.visited[w] & (1 << b) == 0 {
                self.visited[w] |= 1 << b;
                out.push(Planned::write(self.at.per_vertex + v * WORD, 8, Dep::on_load(2)));
                out.push(Planned::write(self.at.second + self.queue.len() as u64 * WORD, 8, Dep::NONE));
                self.queue.push(v as u32);
            }
        }
    }

    fn pagerank_burst(&mut self, out: &mut Vec<Planned>) {
        let n = self.csr.vertices();
        if self.next < n {
            // Gather: the new rank of `u` from its neighbours' contributions.
            let u = self.next;
            self.next += 1;
            let (lo, hi) = self.csr.list(u);
            out.push(Planned::read(self.at.xoff + u * WORD, 16, Dep::NONE));
            for (i, e) in (lo..hi).enumerate() {
                out.push(Planned::read(self.at.xadj + e * WORD, 8, Dep::on_load(1 + 2 * i as u64)));
                out.push(Planned::read(self.at.per_vertex + self.csr.adj[e as usize] as u64 * WORD, 8, Dep::on_load(1)));
            }
            out.push(Planned::write(self.at.second + u * WORD, 8, Dep::NONE));
            if self.next == n {
                self.swept = 0;
            }
            return;
        }
        // Apply: contributions from the new ranks and the degrees, then the next
        // iteration.
        if !self.sweep(out, Some(self.at.second), self.at.per_vertex) || self.swept >= n {
            self.next = 0;
            self.round += 1;
        }
    }
}

impl Bursts for Graph500 {
    fn region(&self) -> (u64, u64) {
        (self.at.xoff, self.at.end)
    }
    fn next_burst(&mut self, out: &mut Vec<Planned>) {
        match self.kernel {
            Kernel::Bfs => self.bfs_burst(out),
            Kernel::PageRank => self.pagerank_burst(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csr_holds_every_edge_twice_sorted_and_relabeled() {
        let (scale, ef) = (10u32, 16u64);
        let g = Csr::build(7, scale, ef).unwrap();
        let n = 1u64 << scale;
        let perm = Permutation::new(n, 7 ^ 0x6772_6170_6835_3030);
        let self_loops = (0..ef << scale).filter(|&e| {
            let (u, v) = kronecker_edge(7, scale, e);
            u == v
        });
        let kept = (ef << scale) - self_loops.count() as u64;
        assert_eq!(g.adj.len() as u64, 2 * kept);
        // Undirected: v in u's list as often as u in v's.
        for u in 0..n {
            let (lo, hi) = g.list(u);
            assert!(g.adj[lo as usize..hi as usize].is_sorted());
            for &v in &g.adj[lo as usize..hi as usize] {
                let (vl, vh) = g.list(v as u64);
                let back = g.adj[vl as usize..vh as usize].iter().filter(|&&w| w as u64 == u).count();
                let fwd = g.adj[lo as usize..hi as usize].iter().filter(|&&w| w == v).count();
                assert_eq!(back, fwd, "{u} -- {v}");
            }
        }
        // The first edge is where the recursion and the relabelling put it.
        let (u, v) = kronecker_edge(7, scale, 0);
        let (u, v) = (perm.get(u), perm.get(v));
        if u != v {
            let (lo, hi) = g.list(u);
            assert!(g.adj[lo as usize..hi as usize].contains(&(v as u32)));
        }
    }

    fn graph(params: &[(&str, &str)]) -> Result<Graph500> {
        let given: Vec<(String, String)> = params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        build(&mut Params::new("graph500", &info(), &given)?)
    }

    /// One whole search: the parents reset in order, then every vertex of the root's
    /// component claimed exactly once (parent and queue writes), every list of a
    /// claimed vertex read once, nothing outside the component touched.
    #[test]
    fn a_search_resets_the_parents_then_claims_the_roots_component() {
        let mut g = graph(&[("scale", "12"), ("edgefactor", "8")]).unwrap();
        let n = g.csr.vertices();
        let mut out = Vec::new();
        while g.round == 0 {
            g.next_burst(&mut out);
        }
        let reset: Vec<u64> = out.iter().map(|a| a.vaddr).collect();
        assert_eq!(reset[..n as usize], (0..n).map(|v| g.at.per_vertex + v * WORD).collect::<Vec<_>>()[..]);
        let root = g.queue[0] as u64;
        out.clear();
        while g.head < g.queue.len() {
            g.next_burst(&mut out);
        }
        // The component, by an independent search over the host's lists.
        let mut seen = vec![false; n as usize];
        let mut stack = vec![root];
        seen[root as usize] = true;
        while let Some(u) = stack.pop() {
            let (lo, hi) = g.csr.list(u);
            for &v in &g.csr.adj[lo as usize..hi as usize] {
                if !std::mem::replace(&mut seen[v as usize], true) {
                    stack.push(v as u64);
                }
            }
        }
        let component: u64 = seen.iter().filter(|&&s| s).count() as u64;
        assert_eq!(g.queue.len() as u64, component);
        assert!(component > n / 2, "a Kronecker graph's giant component holds most vertices ({component} of {n})");
        let in_array = |a: &Planned, base: u64, len: u64| a.vaddr >= base && a.vaddr < base + len * WORD;
        let claims = out.iter().filter(|a| a.write && in_array(a, g.at.per_vertex, n)).count() as u64;
        let pushes = out.iter().filter(|a| a.write && in_array(a, g.at.second, n)).count() as u64;
        // The root was claimed when the search started.
        assert_eq!((claims, pushes), (component - 1, component - 1));
        let list_reads = out.iter().filter(|a| !a.write && in_array(a, g.at.xadj, g.csr.adj.len() as u64)).count() as u64;
        let claimed_lists: u64 = (0..n).filter(|&v| seen[v as usize]).map(|v| g.csr.list(v).1 - g.csr.list(v).0).sum();
        assert_eq!(list_reads, claimed_lists);
        assert!(out.iter().all(|a| a.vaddr >= g.at.xoff && a.vaddr + a.size as u64 <= g.at.end));
    }

    /// A PageRank iteration reads every list once and writes every new rank, then
    /// applies them in order.
    #[test]
    fn a_pagerank_iteration_gathers_every_list_then_applies_in_order() {
        let mut g = graph(&[("scale", "11"), ("kernel", "pagerank")]).unwrap();
        let n = g.csr.vertices();
        let mut out = Vec::new();
        while g.round == 0 {
            g.next_burst(&mut out);
        }
        let list_reads = out.iter().filter(|a| a.vaddr >= g.at.xadj && a.vaddr < g.at.per_vertex && !a.write).count();
        assert_eq!(list_reads, g.csr.adj.len());
        let new_ranks: Vec<u64> = out.iter().filter(|a| a.write && a.vaddr >= g.at.second).map(|a| (a.vaddr - g.at.second) / WORD).collect();
        assert_eq!(new_ranks, (0..n).collect::<Vec<_>>());
        let applied: Vec<u64> =
            out.iter().filter(|a| a.write && a.vaddr >= g.at.per_vertex && a.vaddr < g.at.second).map(|a| (a.vaddr - g.at.per_vertex) / WORD).collect();
        assert_eq!(applied, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn bad_parameters_name_themselves() {
        for (params, key) in [
            (&[("scale", "0")][..], "`scale`"),
            (&[("scale", "32")][..], "`scale`"),
            (&[("edgefactor", "0")][..], "`edgefactor`"),
            (&[("kernel", "sssp")][..], "`kernel`"),
        ] {
            let e = graph(params).err().expect("refused").to_string();
            assert!(e.contains(key), "{e}");
        }
    }

    #[test]
    fn kronecker_degrees_are_skewed() {
        // R-MAT with A = 0.57 concentrates edges: the top 1% of vertices hold far more
        // than 1% of the edge ends.
        let g = Csr::build(3, 14, 16).unwrap();
        let mut deg: Vec<u64> = (0..g.vertices()).map(|v| g.list(v).1 - g.list(v).0).collect();
        deg.sort_unstable_by(|a, b| b.cmp(a));
        let top: u64 = deg[..deg.len() / 100].iter().sum();
        assert!(top * 5 > g.adj.len() as u64, "top 1% hold {top} of {}", g.adj.len());
    }
}
