//! CDKS LWE-to-RLWE packing (YPIR Construction 2.8) with the preprocessing of
//! YPIR §4.2.
//!
//! The d2 inputs of CDKS.Pack are the leaves of a binary tree: node (t, r)
//! at level t ∈ [1, log d2] covers the leaves ≡ r (mod 2^{log d2 − t}); its
//! even child is (t−1, r) and its odd child (t−1, r + 2^{log d2 − t}). Each
//! node computes, with k = d2/2^t and τ = τ_{2^t+1},
//!
//! ```text
//! c+ = c_even + x^k·c_odd,   c− = c_even − x^k·c_odd
//! G  = NTT(g_z^{-1}(τ(c−.a)))                      (t digit polynomials)
//! out.a = c+.a + Σ_k W_a[k] ⊙ G[k]                (Automorph, Eq. 2.2)
//! out.b = c+.b + τ(c−.b) + Σ_k W_b[k] ⊙ G[k]
//! ```
//!
//! Everything on the `a` side depends only on the public seed and the
//! database, except for the leaves that carry the κ rows of T. So at setup
//! we compute, for every node whose subtree holds no T leaf ("static"), its
//! `a` output and its cached digits G in NTT form. Online only the ≤ log d2
//! nodes on the T leaves' paths need NTTs (O(κ + log d2), §4.2), and every
//! other node costs pointwise products with the client's W_b rows.
//!
//! The `b` side is linear, so we split it: with a = 0 everywhere the tree
//! maps constant leaves b_i to d2·Σ b_i x^i exactly (Eq. 2.3), hence
//! out.b = d2·Σ_i b_i x^i + KS, where KS is the same tree run on the
//! key-switching terms alone. The server adds the leaf part directly in
//! coefficient form and runs the tree only for KS.
//!
//! A static level-1 node's KS is one key switch of its cached digits, so
//! its combination into the level-2 parent is linear in digits known at
//! setup: those are folded into the parent's (`fold_level1`), and Answer
//! sums the three nodes' key switches without combining the level-1 pairs.

use crate::arith::MODS;
use crate::rns::{self, Context};

/// Kind of a tree node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// All leaves below are zero: output is zero.
    Zero,
    /// No T leaf below: `a` side precomputed.
    Static,
    /// Holds a T leaf: `a` side computed online.
    Dynamic,
}

/// What a leaf holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaf {
    /// Unused slot.
    Zero,
    /// Dense hint row r (a-part known at setup).
    Hint(usize),
    /// Row r of T (a-part depends on the query).
    T(usize),
}

/// Setup-time state of the packing tree.
#[derive(Clone, Debug)]
pub struct PackPrecomp {
    log_d2: usize,
    d2: usize,
    t: usize,
    /// `kinds[level][r]`, level 0 = leaves.
    kinds: Vec<Vec<Kind>>,
    /// `leaves[i]`.
    leaves: Vec<Leaf>,
    /// Cached digits of static nodes: `g_off[level][r]` indexes `g_data`
    /// (t·2·d2 words per node) or is usize::MAX.
    g_off: Vec<Vec<usize>>,
    g_data: Vec<u32>,
    /// `a` outputs of static nodes (and leaves) whose parent is dynamic,
    /// and of the root if it is static, keyed by (level, r).
    a_static: Vec<((usize, usize), Vec<u32>)>,
    /// The static nodes whose parent is dynamic (and the root if static),
    /// in the order Answer visits them: the roots of the subtrees that
    /// [`PackPrecomp::static_ks`] sums.
    static_roots: Vec<(usize, usize)>,
    /// `folded[r]`: level-2 node r is static with two static children,
    /// whose cached digits were folded into it ([`fold_level1`]).
    folded: Vec<bool>,
}

/// Online inputs of one query.
pub struct PackInputs<'a> {
    /// Client's W_b rows, NTT and Montgomery form ([`Context::to_mont`]):
    /// (log d2)·t polynomials of 2·d2 words.
    pub wb: &'a [u32],
    /// Public W_a rows from the seed, same layout and form.
    pub wa: &'a [u32],
    /// `a` parts of the κ T leaves (NTT form), by T row.
    pub t_leaf_a: &'a [Vec<u32>],
}

/// Output of the tree: the packed ciphertext minus the leaf `b` part.
pub struct PackOutput {
    /// Random component c0 (NTT form).
    pub a: Vec<u32>,
    /// Key-switching part of c1 (NTT form).
    pub ks: Vec<u32>,
}

/// Digits of τ(c−.a) in NTT form (`buf`: 2·d2 words of scratch).
fn digits_ntt(ctx: &Context, level: usize, c_minus: &[u32], out: &mut [u32], buf: &mut [u32]) {
    let d2 = ctx.params.d2;
    let t = ctx.params.gadget_len();
    let perm = &ctx.levels[level - 1].perm;
    for h in 0..2 {
        let r = h * d2..(h + 1) * d2;
        crate::kernel::permute(&c_minus[r.clone()], perm, &mut buf[r]);
    }
    rns::inverse(&ctx.ntt2, buf);
    // digits are below z/2 (top digit below q2/(2·z^{t−1})) < p
    crate::kernel::crt_gadget_digits(&ctx.crt, buf, ctx.params.z_bits, t, out);
    for k in 0..t {
        rns::forward(&ctx.ntt2, &mut out[k * 2 * d2..(k + 1) * 2 * d2]);
    }
}

/// (c+, c−) of two children (None = zero), NTT form.
fn plus_minus(
    ctx: &Context,
    level: usize,
    e: Option<&[u32]>,
    o: Option<&[u32]>,
) -> (Vec<u32>, Vec<u32>) {
    let d2 = ctx.params.d2;
    let mut plus = vec![0u32; 2 * d2];
    let mut minus = vec![0u32; 2 * d2];
    plus_minus_into(ctx, level, e, o, &mut plus, &mut minus);
    (plus, minus)
}

/// [`plus_minus`] into given buffers (every word is written).
fn plus_minus_into(
    ctx: &Context,
    level: usize,
    e: Option<&[u32]>,
    o: Option<&[u32]>,
    plus: &mut [u32],
    minus: &mut [u32],
) {
    let d2 = ctx.params.d2;
    let lc = &ctx.levels[level - 1];
    match (e, o) {
        (Some(e), Some(o)) => {
            for h in 0..2 {
                let r = h * d2..(h + 1) * d2;
                let (ph, mh) = (&mut plus[r.clone()], &mut minus[r.clone()]);
                crate::kernel::plus_minus(
                    &ctx.mont[h],
                    &e[r.clone()],
                    &o[r.clone()],
                    &lc.mono_mont[r],
                    ph,
                    mh,
                );
            }
        }
        (Some(e), None) => {
            plus.copy_from_slice(e);
            minus.copy_from_slice(e);
        }
        (None, Some(o)) => {
            for (h, m) in MODS.iter().enumerate() {
                for i in h * d2..(h + 1) * d2 {
                    let xo = m.mul_shoup(o[i], lc.mono[i], lc.mono_shoup[i]);
                    plus[i] = xo;
                    minus[i] = m.neg(xo);
                }
            }
        }
        (None, None) => {
            plus.fill(0);
            minus.fill(0);
        }
    }
}

/// `out += Σ_k W[level][k] ⊙ G[k]`; `w` is in Montgomery form
/// ([`Context::to_mont`]).
fn add_keyswitch(ctx: &Context, w: &[u32], level: usize, g: &[u32], out: &mut [u32]) {
    let t = ctx.params.gadget_len();
    let n = 2 * ctx.params.d2;
    keyswitch_rows(ctx, &w[(level - 1) * t * n..level * t * n], t, g, out);
}

/// `out += Σ_k w[k] ⊙ g[k]` over `rows` polynomials of 2·d2 words (both
/// CRT halves), `w` in Montgomery form.
fn keyswitch_rows(ctx: &Context, w: &[u32], rows: usize, g: &[u32], out: &mut [u32]) {
    let d2 = ctx.params.d2;
    let n = 2 * d2;
    for h in 0..2 {
        let off = h * d2;
        crate::kernel::keyswitch_acc(
            &ctx.mont[h],
            &w[off..],
            &g[off..],
            rows,
            n,
            d2,
            &mut out[off..off + d2],
        );
    }
}

/// A batch's key-switching rows as [`PackPrecomp::eval_static`] reads
/// them: each query's W_b, and (when some level-2 node is folded) its
/// τ(W_1) ([`tau_w1`]).
struct Keys<'a> {
    wbs: &'a [&'a [u32]],
    tau_w1: &'a [Vec<u32>],
}

/// τ(W_1) of one query's W_b rows (τ of level 2, row by row and half by
/// half): the key a folded level-2 node sums against its odd child's run
/// ([`fold_level1`]); W_1 and W_2 are read from W_b itself.
fn tau_w1(ctx: &Context, wb: &[u32]) -> Vec<u32> {
    let d2 = ctx.params.d2;
    let tn = ctx.params.gadget_len() * 2 * d2;
    let mut out = vec![0u32; tn];
    for (src, dst) in wb[..tn].chunks_exact(d2).zip(out.chunks_exact_mut(d2)) {
        crate::kernel::permute(src, &ctx.levels[1].perm, dst);
    }
    out
}

/// Folds each level-2 static node with two static children into one
/// key-switching sum, and returns which nodes it folded.
///
/// A static level-1 node's KS side is W_1 ⊙ G (its leaves carry none), so
/// its level-2 parent's is (Construction 2.8, k = d2/4, τ = τ_5, all in
/// the NTT domain where τ permutes slots, τ(v)[i] = v[π(i)])
///
/// ```text
/// KS = W_1⊙G_e + x^k·W_1⊙G_o + τ(W_1⊙G_e − x^k·W_1⊙G_o) + W_2⊙G
///    = W_1 ⊙ (G_e + x^k·G_o) + τ(W_1) ⊙ τ(G_e − x^k·G_o) + W_2 ⊙ G,
/// ```
///
/// whose digit factors are all known at setup. The children's digit runs
/// (laid out even, odd, then the node: [`digit_offsets`]) are replaced by
/// A = G_e + x^k·G_o and B = τ(G_e − x^k·G_o), and Answer sums the three
/// runs against W_1, τ(W_1) ([`tau_w1`]) and W_2: the two children's
/// node combinations (and their buffers) go. The result is the same
/// polynomial, computed with the same exact arithmetic mod each prime.
/// Half of the tree's nodes are at level 1, a quarter at level 2.
fn fold_level1(
    ctx: &Context,
    kinds: &[Vec<Kind>],
    g_off: &[Vec<usize>],
    g_data: &mut [u32],
) -> Vec<bool> {
    if kinds.len() < 3 {
        return Vec::new();
    }
    let d2 = ctx.params.d2;
    let n = 2 * d2;
    let node_len = ctx.params.gadget_len() * n;
    let n2 = kinds[2].len();
    let lc = &ctx.levels[1];
    let folded: Vec<bool> = (0..n2)
        .map(|r| {
            kinds[2][r] == Kind::Static
                && kinds[1][r] == Kind::Static
                && kinds[1][r + n2] == Kind::Static
        })
        .collect();
    let (mut plus, mut minus) = (vec![0u32; d2], vec![0u32; d2]);
    for r in (0..n2).filter(|&r| folded[r]) {
        let (e, o) = (g_off[1][r], g_off[1][r + n2]);
        assert!(
            o == e + node_len && g_off[2][r] == o + node_len,
            "a static node's digits follow its children's"
        );
        let (ge, go) = g_data[e..o + node_len].split_at_mut(node_len);
        // row by row, half h of a row holding the residues mod MODS[h]
        for (i, (re, ro)) in ge
            .chunks_exact_mut(d2)
            .zip(go.chunks_exact_mut(d2))
            .enumerate()
        {
            let h = i % 2;
            let mono = &lc.mono_mont[h * d2..(h + 1) * d2];
            crate::kernel::plus_minus(&ctx.mont[h], re, ro, mono, &mut plus, &mut minus);
            re.copy_from_slice(&plus);
            crate::kernel::permute(&minus, &lc.perm, ro);
        }
    }
    folded
}

thread_local! {
    /// Per-thread (plus, minus, digit buffer) scratch of the tree's setup
    /// (`BuildTree::subtree`), so that no static node allocates and zeroes
    /// three polynomials (~2000 nodes per rebuild at d2 = 2048).
    static BUILD_SCRATCH: std::cell::RefCell<(Vec<u32>, Vec<u32>, Vec<u32>)> = const {
        std::cell::RefCell::new((Vec::new(), Vec::new(), Vec::new()))
    };
    /// Per-thread (plus, minus) scratch of the online tree, so that a query
    /// does not allocate and zero two polynomials per node.
    static SCRATCH: std::cell::RefCell<(Vec<u32>, Vec<u32>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// KS side of a node: ks_e + x^k ks_o + τ(ks_e − x^k ks_o). The even
/// child's buffer is reused for the output.
fn combine_b(ctx: &Context, level: usize, e: Option<Vec<u32>>, o: Option<&[u32]>) -> Vec<u32> {
    let d2 = ctx.params.d2;
    let lc = &ctx.levels[level - 1];
    let (e, o) = match (e, o) {
        (None, None) => return vec![0u32; 2 * d2],
        (Some(e), Some(o)) => (e, o),
        (e, o) => {
            // one child is zero: rare (edges of the used slots), keep simple
            let (plus, minus) = plus_minus(ctx, level, e.as_deref(), o);
            let mut out = vec![0u32; 2 * d2];
            for (h, m) in MODS.iter().enumerate() {
                let r = h * d2..(h + 1) * d2;
                crate::kernel::add_permuted(
                    m.p,
                    &plus[r.clone()],
                    &minus[r.clone()],
                    &lc.perm,
                    &mut out[r],
                );
            }
            return out;
        }
    };
    SCRATCH.with(|cell| {
        let mut guard = cell.borrow_mut();
        let (plus, minus) = &mut *guard;
        plus.resize(2 * d2, 0);
        minus.resize(2 * d2, 0);
        let mut out = e;
        for h in 0..2 {
            let r = h * d2..(h + 1) * d2;
            crate::kernel::plus_minus(
                &ctx.mont[h],
                &out[r.clone()],
                &o[r.clone()],
                &lc.mono_mont[r.clone()],
                &mut plus[r.clone()],
                &mut minus[r.clone()],
            );
            crate::kernel::add_permuted(
                MODS[h].p,
                &plus[r.clone()],
                &minus[r.clone()],
                &lc.perm,
                &mut out[r],
            );
        }
        out
    })
}

/// Offsets in the digit cache (in words, `node_len` per node) of the
/// static nodes of subtree (level, r), whose run starts at node `start`:
/// post-order (even subtree, odd subtree, then the node), the order Answer
/// visits them, so the online pass streams the cache sequentially. Derived
/// from the same [`static_counts`] that the setup splits the cache by.
fn digit_offsets(
    counts: &[Vec<usize>],
    kinds: &[Vec<Kind>],
    node_len: usize,
    (level, r): (usize, usize),
    start: usize,
    g_off: &mut [Vec<usize>],
) {
    if level == 0 || kinds[level][r] == Kind::Zero {
        return;
    }
    let odd_r = r + counts[level].len();
    let (even, odd) = (counts[level - 1][r], counts[level - 1][odd_r]);
    digit_offsets(counts, kinds, node_len, (level - 1, r), start, g_off);
    digit_offsets(
        counts,
        kinds,
        node_len,
        (level - 1, odd_r),
        start + even,
        g_off,
    );
    if kinds[level][r] == Kind::Static {
        g_off[level][r] = (start + even + odd) * node_len;
    }
}

/// Static nodes whose parent is dynamic (or the root if static), even
/// child first: the order Answer visits their subtrees.
fn order_static_roots(
    kinds: &[Vec<Kind>],
    d2: usize,
    level: usize,
    r: usize,
) -> Vec<(usize, usize)> {
    match kinds[level][r] {
        Kind::Zero => Vec::new(),
        Kind::Static => vec![(level, r)],
        Kind::Dynamic if level == 0 => Vec::new(),
        Kind::Dynamic => {
            let n_nodes = d2 >> level;
            let mut v = order_static_roots(kinds, d2, level - 1, r);
            v.extend(order_static_roots(kinds, d2, level - 1, r + n_nodes));
            v
        }
    }
}

/// Kinds of the tree's nodes, `kinds[level][r]` (level 0: the leaves).
fn node_kinds(leaves: &[Leaf]) -> Vec<Vec<Kind>> {
    let d2 = leaves.len();
    let log_d2 = d2.trailing_zeros() as usize;
    let mut kinds = vec![leaves
        .iter()
        .map(|l| match l {
            Leaf::Zero => Kind::Zero,
            Leaf::Hint(_) => Kind::Static,
            Leaf::T(_) => Kind::Dynamic,
        })
        .collect::<Vec<_>>()];
    for level in 1..=log_d2 {
        let n_nodes = d2 >> level;
        let prev = &kinds[level - 1];
        let here = (0..n_nodes)
            .map(|r| {
                let (ke, ko) = (prev[r], prev[r + n_nodes]);
                if ke == Kind::Dynamic || ko == Kind::Dynamic {
                    Kind::Dynamic
                } else if ke == Kind::Zero && ko == Kind::Zero {
                    Kind::Zero
                } else {
                    Kind::Static
                }
            })
            .collect();
        kinds.push(here);
    }
    kinds
}

/// `counts[level][r]`: static non-leaf nodes in the subtree of (level, r),
/// i.e. its share of the cached digits, in nodes.
fn static_counts(kinds: &[Vec<Kind>], d2: usize) -> Vec<Vec<usize>> {
    let mut counts: Vec<Vec<usize>> = vec![vec![0; d2]];
    for level in 1..kinds.len() {
        let n_nodes = d2 >> level;
        let prev = &counts[level - 1];
        let here = (0..n_nodes)
            .map(|r| usize::from(kinds[level][r] == Kind::Static) + prev[r] + prev[r + n_nodes])
            .collect();
        counts.push(here);
    }
    counts
}

/// `a` output of a subtree's root (if static) and the `a` outputs of its
/// static nodes whose parent is dynamic.
type SubtreeA = (Option<Vec<u32>>, Vec<((usize, usize), Vec<u32>)>);

/// What the setup of the packing tree reads while it recurses.
struct BuildTree<'a> {
    ctx: &'a Context,
    kinds: &'a [Vec<Kind>],
    counts: &'a [Vec<usize>],
    d2: usize,
    node_len: usize,
    wa: &'a [u32],
}

impl BuildTree<'_> {
    /// Builds the static nodes of subtree (level, r): `leaf_a[k]` is the
    /// `a` part of its leaf r + k·2^{log d2 − level} (None unless a hint
    /// leaf), `g` the subtree's run of cached digits (even subtree, odd
    /// subtree, then the node itself, as [`digit_offsets`] lays them out).
    fn subtree(
        &self,
        level: usize,
        r: usize,
        mut leaf_a: Vec<Option<Vec<u32>>>,
        g: &mut [u32],
    ) -> SubtreeA {
        let kind = self.kinds[level][r];
        debug_assert_eq!(g.len(), self.counts[level][r] * self.node_len);
        if kind == Kind::Zero {
            return (None, Vec::new());
        }
        if level == 0 {
            return (leaf_a.pop().flatten(), Vec::new());
        }
        let n_nodes = self.d2 >> level;
        let (odd_r, even_r) = (r + n_nodes, r);
        // the even child's leaves are the even k, the odd child's the odd k
        let mut even_a = Vec::with_capacity(leaf_a.len() / 2);
        let mut odd_a = Vec::with_capacity(leaf_a.len() / 2);
        for (k, a) in leaf_a.into_iter().enumerate() {
            if k % 2 == 0 {
                even_a.push(a);
            } else {
                odd_a.push(a);
            }
        }
        let (g_even, rest) = g.split_at_mut(self.counts[level - 1][even_r] * self.node_len);
        let (g_odd, g_own) = rest.split_at_mut(self.counts[level - 1][odd_r] * self.node_len);
        let (((a_e, mut below), (a_o, below_odd)), _) = crate::join_if(
            level >= STATIC_FORK_LEVEL,
            || self.subtree(level - 1, even_r, even_a, g_even),
            || self.subtree(level - 1, odd_r, odd_a, g_odd),
        );
        below.extend(below_odd);
        match kind {
            Kind::Dynamic => {
                for (child, a) in [(even_r, a_e), (odd_r, a_o)] {
                    if let Some(a) = a {
                        below.push(((level - 1, child), a));
                    }
                }
                (None, below)
            }
            _ => {
                // (c+, c−) and the digit buffer in per-thread scratch,
                // every word written, so no node allocates and zeroes
                // them; c+ becomes this node's `a` and a child's buffer
                // takes its place in the scratch
                let mut a = BUILD_SCRATCH.with(|cell| {
                    let mut guard = cell.borrow_mut();
                    let (plus, minus, buf) = &mut *guard;
                    for v in [&mut *plus, &mut *minus, &mut *buf] {
                        v.resize(2 * self.d2, 0);
                    }
                    let (e, o) = (a_e.as_deref(), a_o.as_deref());
                    plus_minus_into(self.ctx, level, e, o, plus, minus);
                    digits_ntt(self.ctx, level, minus, g_own, buf);
                    let spare = a_e.or(a_o).unwrap_or_default();
                    std::mem::replace(plus, spare)
                });
                add_keyswitch(self.ctx, self.wa, level, g_own, &mut a);
                (Some(a), below)
            }
        }
    }
}

impl PackPrecomp {
    /// Setup: builds the tree over `leaves` whose hint leaves have `a` parts
    /// `hint_a[r]` (NTT form), using the public W_a rows `wa` (NTT and
    /// Montgomery form). The a parts are consumed (they become the a parts
    /// of the leaves' parents).
    pub fn new(ctx: &Context, leaves: Vec<Leaf>, hint_a: Vec<Vec<u32>>, wa: &[u32]) -> Self {
        Self::build(ctx, leaves, hint_a, wa, Vec::new(), true)
    }

    /// Like [`PackPrecomp::new`], reusing the digit buffer of a previous
    /// precomputation (an update rebuilds the tree without reallocating).
    pub fn rebuild(
        self,
        ctx: &Context,
        leaves: Vec<Leaf>,
        hint_a: Vec<Vec<u32>>,
        wa: &[u32],
    ) -> Self {
        Self::build(ctx, leaves, hint_a, wa, self.g_data, true)
    }

    /// `fold`: fold the level-1 pairs into level 2 ([`fold_level1`]);
    /// without, every node is evaluated on its own (the tests' reference).
    fn build(
        ctx: &Context,
        leaves: Vec<Leaf>,
        hint_a: Vec<Vec<u32>>,
        wa: &[u32],
        mut g_data: Vec<u32>,
        fold: bool,
    ) -> Self {
        let d2 = ctx.params.d2;
        let log_d2 = ctx.params.log_d2();
        let t = ctx.params.gadget_len();
        let node_len = t * 2 * d2;
        assert_eq!(leaves.len(), d2);
        // Node kinds first (they depend on the leaves only).
        let kinds = node_kinds(&leaves);
        // Cached digits are laid out in the order Answer visits the nodes
        // (depth first, even child first, node after its children), so the
        // online pass streams them sequentially; offsets are fixed up front
        // and the buffer is allocated once.
        let counts = static_counts(&kinds, d2);
        let n_static = counts[log_d2][0];
        let mut g_off: Vec<Vec<usize>> = (0..=log_d2).map(|l| vec![usize::MAX; d2 >> l]).collect();
        digit_offsets(&counts, &kinds, node_len, (log_d2, 0), 0, &mut g_off);
        // (a first build allocates it with the transparent-huge-page advice:
        // the online pass streams all of it per query). Every static node
        // writes all of its run (`digits_ntt`), and the runs tile the
        // buffer, so a rebuild of the same length (an update: the layout
        // depends on the parameters only) reuses it without clearing 98 MB.
        if g_data.capacity() < n_static * node_len {
            g_data = crate::mem::zeroed_huge(n_static * node_len);
        } else if g_data.len() != n_static * node_len {
            g_data.clear();
            g_data.resize(n_static * node_len, 0);
        }

        // The leaves' a parts, by leaf position; the tree is built subtree
        // by subtree (each subtree's static digits are one contiguous run
        // of `g_data`, in the order above), forking across threads.
        let mut hint_a: Vec<Option<Vec<u32>>> = hint_a.into_iter().map(Some).collect();
        let leaf_a: Vec<Option<Vec<u32>>> = leaves
            .iter()
            .map(|l| match l {
                Leaf::Hint(r) => Some(hint_a[*r].take().expect("each hint row is one leaf")),
                _ => None,
            })
            .collect();
        let tree = BuildTree {
            ctx,
            kinds: &kinds,
            counts: &counts,
            d2,
            node_len,
            wa,
        };
        let (root_a, mut a_static) = tree.subtree(log_d2, 0, leaf_a, &mut g_data);
        if let Some(a) = root_a {
            a_static.push(((log_d2, 0), a));
        }
        let static_roots = order_static_roots(&kinds, d2, log_d2, 0);
        let folded = if fold {
            fold_level1(ctx, &kinds, &g_off, &mut g_data)
        } else {
            Vec::new()
        };
        PackPrecomp {
            log_d2,
            d2,
            t,
            kinds,
            leaves,
            g_off,
            g_data,
            a_static,
            static_roots,
            folded,
        }
    }

    /// A placeholder before the first build.
    pub(crate) fn empty() -> Self {
        PackPrecomp {
            log_d2: 0,
            d2: 0,
            t: 0,
            kinds: Vec::new(),
            leaves: Vec::new(),
            g_off: Vec::new(),
            g_data: Vec::new(),
            a_static: Vec::new(),
            static_roots: Vec::new(),
            folded: Vec::new(),
        }
    }

    /// What [`PackPrecomp::size_bytes`] will be for a tree over `leaves`
    /// (d2 = `leaves.len()`, a power of two) with gadget length `t`,
    /// without building it: the cached digits of every static node
    /// (t·2·d2 words each) and the `a` outputs kept for Answer (2·d2
    /// words per static subtree root). Depends only on the leaf layout,
    /// i.e. on the parameter set, not on the database.
    pub fn size_for(leaves: &[Leaf], t: usize) -> usize {
        let d2 = leaves.len();
        let log_d2 = d2.trailing_zeros() as usize;
        let kinds = node_kinds(leaves);
        let n_static = static_counts(&kinds, d2)[log_d2][0];
        let roots = order_static_roots(&kinds, d2, log_d2, 0).len();
        4 * (n_static * t * 2 * d2 + roots * 2 * d2)
    }

    /// Bytes of precomputed state.
    pub fn size_bytes(&self) -> usize {
        self.g_data.len() * 4
            + self
                .a_static
                .iter()
                .map(|(_, a)| a.len() * 4)
                .sum::<usize>()
    }

    fn static_a(&self, level: usize, r: usize) -> &[u32] {
        &self
            .a_static
            .iter()
            .find(|(k, _)| *k == (level, r))
            .expect("static child of a dynamic node is cached")
            .1
    }

    /// Online packing for one query (Answer step 3 with §4.2).
    pub fn pack(&self, ctx: &Context, inp: &PackInputs<'_>) -> PackOutput {
        self.pack_batch(ctx, std::slice::from_ref(inp)).remove(0)
    }

    /// Online packing for a batch of queries in one walk of the tree: each
    /// node's cached digits are read from memory once for the whole batch
    /// (§4.3 applied to the packing step). Equal to [`PackPrecomp::static_ks`]
    /// followed by [`PackPrecomp::pack_dynamic`].
    pub fn pack_batch(&self, ctx: &Context, inps: &[PackInputs<'_>]) -> Vec<PackOutput> {
        let wbs: Vec<&[u32]> = inps.iter().map(|i| i.wb).collect();
        let sks = self.static_ks(ctx, &wbs);
        self.pack_dynamic(ctx, inps, &sks)
    }

    /// The part of online packing that depends only on the clients' W_b
    /// rows: the key-switching sums of the static subtrees (every node off
    /// the T leaves' paths, which is all but ≤ κ·log d2 of them, and nearly
    /// all of the cached digits the online pass reads). The server runs it
    /// beside the SimplePIR pass, which it does not depend on.
    pub fn static_ks(&self, ctx: &Context, wbs: &[&[u32]]) -> StaticKs {
        let tau_w1: Vec<Vec<u32>> = if self.folded.contains(&true) {
            wbs.iter().map(|wb| tau_w1(ctx, wb)).collect()
        } else {
            Vec::new()
        };
        let keys = Keys {
            wbs,
            tau_w1: &tau_w1,
        };
        let ks = self
            .static_roots
            .iter()
            .map(|&(level, r)| {
                self.eval_static(ctx, &keys, level, r)
                    .unwrap_or_else(|| vec![None; wbs.len()])
            })
            .collect();
        StaticKs {
            ks,
            queries: wbs.len(),
        }
    }

    /// The rest of online packing: the nodes on the T leaves' paths, whose
    /// `a` side depends on the query (O(κ + log d2) NTTs, §4.2), combined
    /// with the static subtrees' sums `sks` computed by
    /// [`PackPrecomp::static_ks`] for the same queries, in the same order.
    pub fn pack_dynamic(
        &self,
        ctx: &Context,
        inps: &[PackInputs<'_>],
        sks: &StaticKs,
    ) -> Vec<PackOutput> {
        assert!(
            sks.queries == inps.len() && sks.ks.len() == self.static_roots.len(),
            "static sums of this tree for these queries"
        );
        let zero = || vec![0u32; 2 * self.d2];
        let root = (self.log_d2, 0);
        let outs = match self.kinds[self.log_d2][0] {
            Kind::Zero => None,
            Kind::Static => Some(
                sks.of(self, root)
                    .iter()
                    .map(|ks| (Some(self.static_a(root.0, root.1).to_vec()), ks.clone()))
                    .collect(),
            ),
            Kind::Dynamic => Some(self.eval_dynamic(ctx, inps, sks, root.0, root.1)),
        };
        match outs {
            Some(outs) => outs
                .into_iter()
                .map(|(a, ks)| PackOutput {
                    a: a.unwrap_or_else(zero),
                    ks: ks.unwrap_or_else(zero),
                })
                .collect(),
            None => inps
                .iter()
                .map(|_| PackOutput {
                    a: zero(),
                    ks: zero(),
                })
                .collect(),
        }
    }

    /// KS side of a static node, per query; None for a zero node. Leaves
    /// carry no key-switching term.
    fn eval_static(
        &self,
        ctx: &Context,
        keys: &Keys<'_>,
        level: usize,
        r: usize,
    ) -> Option<Vec<Option<Vec<u32>>>> {
        let wbs = keys.wbs;
        match self.kinds[level][r] {
            Kind::Zero => return None,
            Kind::Dynamic => unreachable!("static subtrees hold no T leaf"),
            Kind::Static if level == 0 => return Some(vec![None; wbs.len()]),
            Kind::Static => {}
        }
        if level == 2 && self.folded.get(r) == Some(&true) {
            // the subtree's three digit runs (both children's, folded, and
            // its own) against W_1, τ(W_1) and W_2, as three key switches
            // of t rows into one sum: the key switch is bound by its loads,
            // so fewer reductions save nothing, and one switch of all 3t
            // rows would run 6t row streams 16 KiB apart that contend for
            // L1 sets
            let len = self.t * 2 * self.d2;
            let off = self.g_off[1][r];
            let (a, rest) = self.g_data[off..off + 3 * len].split_at(len);
            let (b, own) = rest.split_at(len);
            return Some(
                wbs.iter()
                    .zip(keys.tau_w1)
                    .map(|(wb, tw)| {
                        let mut ks = vec![0u32; 2 * self.d2];
                        add_keyswitch(ctx, wb, 1, a, &mut ks);
                        keyswitch_rows(ctx, tw, self.t, b, &mut ks);
                        add_keyswitch(ctx, wb, 2, own, &mut ks);
                        Some(ks)
                    })
                    .collect(),
            );
        }
        let n_nodes = self.d2 >> level;
        // Subtrees of ≥ 64 leaves fork, so the static sums of one query
        // spread over the threads (a node costs ~10 µs; a fork ~1 µs).
        let ((e, o), _) = crate::join_if(
            level >= STATIC_FORK_LEVEL,
            || self.eval_static(ctx, keys, level - 1, r),
            || self.eval_static(ctx, keys, level - 1, r + n_nodes),
        );
        let none = || vec![None; wbs.len()];
        let (e, o) = (e.unwrap_or_else(none), o.unwrap_or_else(none));
        let off = self.g_off[level][r];
        let g = &self.g_data[off..off + self.t * 2 * self.d2];
        Some(
            wbs.iter()
                .zip(e)
                .zip(o)
                .map(|((wb, ks_e), ks_o)| {
                    let mut ks = combine_b(ctx, level, ks_e, ks_o.as_deref());
                    add_keyswitch(ctx, wb, level, g, &mut ks);
                    Some(ks)
                })
                .collect(),
        )
    }

    /// Per query (a, ks) of a dynamic node; a child that is static takes
    /// its precomputed `a` and its KS sum from `sks`.
    #[allow(clippy::type_complexity)]
    fn eval_dynamic(
        &self,
        ctx: &Context,
        inps: &[PackInputs<'_>],
        sks: &StaticKs,
        level: usize,
        r: usize,
    ) -> Vec<(Option<Vec<u32>>, Option<Vec<u32>>)> {
        debug_assert_eq!(self.kinds[level][r], Kind::Dynamic);
        if level == 0 {
            return inps
                .iter()
                .map(|inp| match self.leaves[r] {
                    Leaf::T(row) => (Some(inp.t_leaf_a[row].clone()), None),
                    _ => unreachable!("a dynamic leaf is a T leaf"),
                })
                .collect();
        }
        let n_nodes = self.d2 >> level;
        let child = |c: usize| -> Vec<(Option<Vec<u32>>, Option<Vec<u32>>)> {
            match self.kinds[level - 1][c] {
                Kind::Zero => vec![(None, None); inps.len()],
                Kind::Static => sks
                    .of(self, (level - 1, c))
                    .iter()
                    .map(|ks| (Some(self.static_a(level - 1, c).to_vec()), ks.clone()))
                    .collect(),
                Kind::Dynamic => self.eval_dynamic(ctx, inps, sks, level - 1, c),
            }
        };
        // where two T paths meet, they run in parallel
        let both_dynamic = self.kinds[level - 1][r] == Kind::Dynamic
            && self.kinds[level - 1][r + n_nodes] == Kind::Dynamic;
        let ((e, o), _) = crate::join_if(both_dynamic, || child(r), || child(r + n_nodes));
        let mut out = Vec::with_capacity(inps.len());
        for ((inp, (a_e, ks_e)), (a_o, ks_o)) in inps.iter().zip(e).zip(o) {
            let mut ks = combine_b(ctx, level, ks_e, ks_o.as_deref());
            let (plus, minus) = plus_minus(ctx, level, a_e.as_deref(), a_o.as_deref());
            let mut g = vec![0u32; self.t * 2 * self.d2];
            digits_ntt(ctx, level, &minus, &mut g, &mut vec![0u32; 2 * self.d2]);
            let mut a = plus;
            add_keyswitch(ctx, inp.wa, level, &g, &mut a);
            add_keyswitch(ctx, inp.wb, level, &g, &mut ks);
            out.push((Some(a), Some(ks)));
        }
        out
    }
}

/// Level from which a static subtree's two halves run in parallel (64
/// leaves and more).
const STATIC_FORK_LEVEL: usize = 6;

/// KS sums of the static subtrees for a batch of queries
/// ([`PackPrecomp::static_ks`]).
#[derive(Clone, Debug)]
pub struct StaticKs {
    /// Per static root (in `PackPrecomp::static_roots` order), per query;
    /// None where the root is a leaf.
    ks: Vec<Vec<Option<Vec<u32>>>>,
    queries: usize,
}

impl StaticKs {
    fn of(&self, pre: &PackPrecomp, node: (usize, usize)) -> &[Option<Vec<u32>>] {
        let i = pre
            .static_roots
            .iter()
            .position(|&n| n == node)
            .expect("static child of a dynamic node is a static root");
        &self.ks[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arith::{centre, reduce_signed, Crt, Q2};
    use crate::client::packing_key;
    use crate::params::{Params, SMALL, TOY};
    use crate::sampler::{GaussianSampler, PublicSeed, SecretRng};
    use rand_core::RngCore;

    /// Packs random LWE encodings under s2 with the precomputed tree and
    /// checks the packed RLWE ciphertext decrypts, slot by slot, to the direct
    /// decryption b_i − ⟨α_i, s2⟩ of each unpacked encoding (Theorem 2.9).
    fn check(params: Params, leaves: Vec<Leaf>) {
        let ctx = Context::new(params);
        let d2 = params.d2;
        let mut rng = SecretRng::from_test_seed(17);
        let chi2 = GaussianSampler::new(params.s2);
        let mut s2 = vec![0i64; d2];
        chi2.fill(&mut rng, &mut s2);
        let mut s2_ntt = vec![0u32; 2 * d2];
        rns::from_signed(&s2, &mut s2_ntt);
        rns::forward(&ctx.ntt2, &mut s2_ntt);
        let seed = PublicSeed([9u8; 32]);
        let pack_a = seed.expand_pack(params.log_d2(), params.gadget_len(), d2);
        let wb = ctx.to_mont(&packing_key(&ctx, &s2_ntt, &pack_a, &chi2, &mut rng));
        let wa = ctx.to_mont(&pack_a);
        let crt = Crt::new();
        let dinv = [MODS[0].inv(d2 as u32), MODS[1].inv(d2 as u32)];

        // One LWE encoding per non-zero leaf.
        let mut hint_a = Vec::new();
        let mut t_a = vec![Vec::new(); leaves.iter().filter(|l| matches!(l, Leaf::T(_))).count()];
        let mut direct = vec![0u64; d2]; // b_i − ⟨α_i, s2⟩ mod q2
        let mut leaf_b = vec![0u32; 2 * d2];
        let mut leaves_fixed = leaves.clone();
        for (i, leaf) in leaves.iter().enumerate() {
            if *leaf == Leaf::Zero {
                continue;
            }
            let alpha: Vec<u64> = (0..d2).map(|_| rng.next_u64() % Q2).collect();
            let mu = (rng.next_u64() % (1 << 15)) * params.delta2() % Q2;
            let dot: u128 = alpha
                .iter()
                .zip(&s2)
                .map(|(&a, &s)| a as u128 * (s.rem_euclid(Q2 as i64) as u128))
                .sum();
            let b = ((dot + mu as u128) % Q2 as u128) as u64;
            direct[i] = ((b as u128 + Q2 as u128 * 2 - dot % Q2 as u128) % Q2 as u128) as u64;
            assert_eq!(direct[i], mu);
            // ã = Σ_j α_j x^{−j}, scaled by d2^{-1}; leaf b contributes b·x^i
            let mut a = vec![0u32; 2 * d2];
            for h in 0..2 {
                let m = MODS[h];
                for (j, &al) in alpha.iter().enumerate() {
                    let v = m.mul(m.reduce(al), dinv[h]);
                    if j == 0 {
                        a[h * d2] = v;
                    } else {
                        a[h * d2 + d2 - j] = m.neg(v);
                    }
                }
                leaf_b[h * d2 + i] = m.reduce(b);
            }
            rns::forward(&ctx.ntt2, &mut a);
            match leaf {
                Leaf::Hint(_) => {
                    leaves_fixed[i] = Leaf::Hint(hint_a.len());
                    hint_a.push(a);
                }
                Leaf::T(r) => t_a[*r] = a,
                Leaf::Zero => {}
            }
        }
        let pre = PackPrecomp::new(&ctx, leaves_fixed, hint_a, &wa);
        let out = pre.pack(
            &ctx,
            &PackInputs {
                wb: &wb,
                wa: &wa,
                t_leaf_a: &t_a,
            },
        );
        // decrypt: c1 − s2·c0
        let mut sa = vec![0u32; 2 * d2];
        rns::mul(&out.a, &s2_ntt, &mut sa);
        let mut c1 = out.ks.clone();
        rns::inverse(&ctx.ntt2, &mut c1);
        rns::inverse(&ctx.ntt2, &mut sa);
        let mut max_err = 0i64;
        for i in 0..d2 {
            let v0 = MODS[0].sub(MODS[0].add(c1[i], leaf_b[i]), sa[i]);
            let v1 = MODS[1].sub(MODS[1].add(c1[d2 + i], leaf_b[d2 + i]), sa[d2 + i]);
            let got = crt.combine(v0, v1);
            let err = centre((got + Q2 - direct[i]) % Q2, Q2);
            max_err = max_err.max(err.abs());
        }
        // Packing noise is ~2^31 (d2 = 128) to ~2^35 (d2 = 512); a wrong
        // tree would give uniformly random errors of ~2^55.
        assert!(
            max_err < 1 << 40,
            "max error 2^{:.1}",
            (max_err as f64).log2()
        );
        let _ = reduce_signed;
    }

    #[test]
    fn packing_matches_direct_decryption_real_layout() {
        for params in [TOY, SMALL] {
            let layout = params.layout();
            let mut leaves = vec![Leaf::Zero; params.d2];
            for (r, &p) in layout.pos_hint.iter().enumerate() {
                leaves[p] = Leaf::Hint(r);
            }
            for (r, &p) in layout.pos_t.iter().enumerate() {
                leaves[p] = Leaf::T(r);
            }
            check(params, leaves);
        }
    }

    /// A rebuild over an old precomputation's digit buffer (the update
    /// path, which does not clear it when the length is unchanged) equals
    /// a fresh build, for the same layout and for one of another length.
    #[test]
    fn rebuild_equals_fresh_build() {
        let params = TOY;
        let ctx = Context::new(params);
        let d2 = params.d2;
        let wa = ctx.to_mont(&PublicSeed([3u8; 32]).expand_pack(
            params.log_d2(),
            params.gadget_len(),
            d2,
        ));
        let mut rng = SecretRng::from_test_seed(5);
        let mut random_a = |n: usize| -> Vec<Vec<u32>> {
            (0..n)
                .map(|_| {
                    (0..2 * d2)
                        .map(|i| (rng.next_u64() % u64::from(MODS[i / d2].p)) as u32)
                        .collect()
                })
                .collect()
        };
        let layout = |step: usize| -> (Vec<Leaf>, usize) {
            let mut leaves = vec![Leaf::Zero; d2];
            let mut n = 0;
            for i in (0..d2).step_by(step) {
                leaves[i] = Leaf::Hint(n);
                n += 1;
            }
            leaves[1] = Leaf::T(0);
            (leaves, n)
        };
        let (leaves, n) = layout(2);
        let old = PackPrecomp::new(&ctx, leaves.clone(), random_a(n), &wa);
        let new_a = random_a(n);
        let fresh = PackPrecomp::new(&ctx, leaves.clone(), new_a.clone(), &wa);
        let rebuilt = old.rebuild(&ctx, leaves, new_a, &wa);
        assert!(rebuilt.g_data == fresh.g_data && rebuilt.g_off == fresh.g_off);
        // another layout: fewer static nodes, a shorter buffer
        let (leaves, n) = layout(5);
        let a = random_a(n);
        let fresh = PackPrecomp::new(&ctx, leaves.clone(), a.clone(), &wa);
        let rebuilt = rebuilt.rebuild(&ctx, leaves, a, &wa);
        assert!(rebuilt.g_data == fresh.g_data && rebuilt.g_off == fresh.g_off);
    }

    /// Folding level 1 into level 2 changes how Answer sums the key
    /// switches, not what: the same outputs, word for word, as the tree
    /// evaluated node by node, for single queries and a batch.
    #[test]
    fn folded_tree_equals_node_by_node() {
        for params in [TOY, SMALL] {
            let ctx = Context::new(params);
            let d2 = params.d2;
            let mut rng = SecretRng::from_test_seed(11);
            let mut poly = || -> Vec<u32> {
                (0..2 * d2)
                    .map(|i| (rng.next_u64() % u64::from(MODS[i / d2].p)) as u32)
                    .collect()
            };
            let keys_len = params.log_d2() * params.gadget_len();
            let wa: Vec<u32> = (0..keys_len).flat_map(|_| poly()).collect();
            // the real layout, and one with zero gaps, two T paths and
            // level-2 nodes with a zero child
            let real = {
                let layout = params.layout();
                let mut leaves = vec![Leaf::Zero; d2];
                for (r, &p) in layout.pos_hint.iter().enumerate() {
                    leaves[p] = Leaf::Hint(r);
                }
                for (r, &p) in layout.pos_t.iter().enumerate() {
                    leaves[p] = Leaf::T(r);
                }
                leaves
            };
            let mut gaps = vec![Leaf::Zero; d2];
            let mut n_hint = 0;
            for i in (0..d2).filter(|i| i % 7 != 3) {
                gaps[i] = match i {
                    9 => Leaf::T(0),
                    i if i == d2 - 2 => Leaf::T(1),
                    _ => {
                        n_hint += 1;
                        Leaf::Hint(n_hint - 1)
                    }
                };
            }
            for leaves in [real, gaps] {
                let hints = leaves.iter().filter(|l| matches!(l, Leaf::Hint(_))).count();
                let ts = leaves.iter().filter(|l| matches!(l, Leaf::T(_))).count();
                let hint_a: Vec<Vec<u32>> = (0..hints).map(|_| poly()).collect();
                let folded =
                    PackPrecomp::build(&ctx, leaves.clone(), hint_a.clone(), &wa, Vec::new(), true);
                let plain = PackPrecomp::build(&ctx, leaves, hint_a, &wa, Vec::new(), false);
                assert!(folded.folded.iter().filter(|&&f| f).count() > 0);
                let wbs: Vec<Vec<u32>> = (0..3)
                    .map(|_| (0..keys_len).flat_map(|_| poly()).collect())
                    .collect();
                let t_a: Vec<Vec<Vec<u32>>> =
                    (0..3).map(|_| (0..ts).map(|_| poly()).collect()).collect();
                let inputs: Vec<PackInputs<'_>> = wbs
                    .iter()
                    .zip(&t_a)
                    .map(|(wb, ta)| PackInputs {
                        wb,
                        wa: &wa,
                        t_leaf_a: ta,
                    })
                    .collect();
                let a = folded.pack_batch(&ctx, &inputs);
                let b = plain.pack_batch(&ctx, &inputs);
                for (q, (x, y)) in a.iter().zip(&b).enumerate() {
                    assert!(x.a == y.a && x.ks == y.ks, "{} query {q}", params.name);
                }
                let one = folded.pack(&ctx, &inputs[1]);
                assert!(one.a == b[1].a && one.ks == b[1].ks);
            }
        }
    }

    #[test]
    fn packing_matches_direct_decryption_arbitrary_layouts() {
        let d2 = TOY.d2;
        // T leaves with unrelated paths, zero gaps, a lone static leaf
        let mut leaves = vec![Leaf::Zero; d2];
        for i in (0..d2).step_by(3) {
            leaves[i] = Leaf::Hint(0);
        }
        leaves[5] = Leaf::T(0);
        leaves[77] = Leaf::T(1);
        leaves[126] = Leaf::T(2);
        check(TOY, leaves);
        // everything static but one leaf; one static and one dynamic leaf
        let mut leaves = vec![Leaf::Hint(0); d2];
        leaves[0] = Leaf::T(0);
        check(TOY, leaves);
        let mut leaves = vec![Leaf::Zero; d2];
        leaves[64] = Leaf::T(0);
        leaves[3] = Leaf::Hint(0);
        check(TOY, leaves);
        // no T leaf: the root itself is static
        let mut leaves = vec![Leaf::Zero; d2];
        for i in (1..d2).step_by(2) {
            leaves[i] = Leaf::Hint(0);
        }
        check(TOY, leaves);
    }
}
