//! Breadth-first search over a generated power-law graph in CSR layout (Graph500-like).
//!
//! Degrees follow a discrete power law (exponent 2.1, minimum 1, scaled to the
//! requested average); neighbour ids are drawn from a hash with a skew towards low ids,
//! so a few hubs collect many edges (RMAT-like). Adjacency is never stored: the
//! neighbours of v are `hash(seed, v, i)`. Only the offsets array (V+1 words), the BFS
//! queue and a visited bitmap live in memory.

use super::gen::{mix, page_round, BurstGen, Bursts, Generator, Planned};
use super::params::{base_param, param, Params, WorkloadInfo};
use crate::error::Result;
use crate::trace::Dep;

pub(crate) fn info() -> WorkloadInfo {
    WorkloadInfo {
        name: "graph",
        description: "BFS over a power-law graph in CSR layout: offsets, edges, distance array and frontier queue accesses",
        params: vec![param("vertices", "1M", "number of vertices V"), param("degree", "16", "average degree"), base_param()],
    }
}

struct Bfs {
    seed: u64,
    vertices: u64,
    offsets: Vec<u64>,
    // Array bases: offsets (8 B each), edges (4 B), dist (4 B), queue (4 B).
    base: u64,
    edges_at: u64,
    dist_at: u64,
    queue_at: u64,
    end: u64,
    visited: Vec<u64>,
    queue: Vec<u32>,
    head: usize,
    round: u64,
}

fn degree_of(seed: u64, v: u64, scale: f64) -> u64 {
    // Inverse-CDF sample of a Pareto tail with exponent 2.1.
    let u = ((mix(seed, v) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    ((u.powf(-1.0 / 1.1) * scale) as u64).clamp(1, 1 << 20)
}

pub(crate) fn new(p: &mut Params) -> Result<Box<dyn Generator>> {
    let vertices = p.count("vertices")?;
    let degree = p.count("degree")?;
    p.require((2..=1 << 31).contains(&vertices), "vertices", "2 to 2^31 vertices")?;
    p.require((1..=1024).contains(&degree), "degree", "1 to 1024")?;
    let seed = p.seed()?;
    // Mean of the unscaled sampler is ~ 1.1/0.1 = 11; scale to the requested average.
    let scale = degree as f64 / 11.0;
    // Host memory: 8 bytes of offset per vertex (the BFS queue grows as it fills).
    let mut offsets = Vec::new();
    offsets
        .try_reserve_exact(vertices as usize + 1)
        .map_err(|_| p.err("vertices", &format!("a graph whose {} GiB of vertex offsets fit in host memory", ((vertices + 1) * 8) >> 30)))?;
    let mut acc = 0u64;
    for v in 0..vertices {
        offsets.push(acc);
        acc += degree_of(seed, v, scale);
    }
    offsets.push(acc);
    let base = p.base()?;
    let edges_at = base + page_round((vertices + 1) * 8);
    let dist_at = edges_at + page_round(acc * 4);
    let queue_at = dist_at + page_round(vertices * 4);
    let end = queue_at + page_round(vertices * 4);
    Ok(BurstGen::boxed(Bfs {
        seed,
        vertices,
        offsets,
        base,
        edges_at,
        dist_at,
        queue_at,
        end,
        visited: vec![0; vertices.div_ceil(64) as usize],
        queue: Vec::new(),
        head: 0,
        round: 0,
    }))
}

impl Bfs {
    fn neighbor(&self, v: u64, i: u64) -> u64 {
        // Squaring a uniform value skews targets towards low ids (hubs).
        let u = (mix(self.seed ^ v, i) >> 11) as f64 / (1u64 << 53) as f64;
        ((u * u) * self.vertices as f64) as u64 % self.vertices
    }

    fn visit(&mut self, v: u64) -> bool {
        let (w, b) = ((v / 64) as usize, v % 64);
        let seen = self.visited[w] & (1 << b) != 0;
        self.visited[w] |= 1 << b;
        !seen
    }

    /// The accesses of expanding the next frontier vertex. Dependences: the queue slot
    /// (read at a counter) names the vertex, whose offsets are read next; its offsets
    /// locate each edge entry; an edge entry names the neighbour, whose distance is
    /// read and maybe written. The queue append is at a counter: independent.
    fn expand(&mut self, out: &mut Vec<Planned>) {
        if self.head == self.queue.len() {
            // Start a new BFS from a fresh root.
            self.visited.iter_mut().for_each(|w| *w = 0);
            self.queue.clear();
            self.head = 0;
            let root = mix(self.seed, 0xb0f5 + self.round) % self.vertices;
            self.round += 1;
            self.visit(root);
            self.queue.push(root as u32);
        }
        let u = self.queue[self.head] as u64;
        let qslot = self.head as u64;
        self.head += 1;
        let (lo, hi) = (self.offsets[u as usize], self.offsets[u as usize + 1]);
        out.push(Planned::read(self.queue_at + qslot * 4, 4, Dep::NONE));
        out.push(Planned::read(self.base + u * 8, 16, Dep::on_load(1)));
        for i in 0..(hi - lo) {
            let v = self.neighbor(u, i);
            // Since the offsets: this vertex's earlier edges, two reads each.
            out.push(Planned::read(self.edges_at + (lo + i) * 4, 4, Dep::on_load(1 + 2 * i)));
            out.push(Planned::read(self.dist_at + v * 4, 4, Dep::on_load(1)));
            if self.visit(v) {
                out.push(Planned::write(self.dist_at + v * 4, 4, Dep::on_load(2)));
                out.push(Planned::write(self.queue_at + self.queue.len() as u64 * 4, 4, Dep::NONE));
                self.queue.push(v as u32);
            }
        }
    }
}

impl Bursts for Bfs {
    fn region(&self) -> (u64, u64) {
        (self.base, self.end)
    }
    fn next_burst(&mut self, out: &mut Vec<Planned>) {
        self.expand(out)
    }
}
