//! What the log serves: the entries and tree (the *ledger*), the signed
//! head, and the alternative heads and trees the misbehaviours serve.

use crate::error::Result;
use ct_core::leaf::{encode_leaf_index_extension, TileLeaf};
use ct_core::merkle::Hash;
use ct_core::sth::SignedTreeHead;
use ct_core::LeafHash;

use crate::config::Misbehaviour;
use crate::signer::LogSigner;
use crate::tree::Tree;

/// One logged entry, stored once as its static-ct-api `TileLeaf` encoding;
/// the RFC 6962 `leaf_input` and `extra_data` are slices of it.
#[derive(Clone, Debug)]
pub(crate) struct StoredEntry {
    /// `TileLeaf` = `TimestampedEntry ‖ [pre_certificate] ‖ certificate_chain`.
    pub(crate) tile_leaf: Vec<u8>,
    /// Length of the `TimestampedEntry` prefix.
    te_len: usize,
    /// End of the `pre_certificate` field (`te_len` for x509 entries).
    pre_end: usize,
}

impl StoredEntry {
    pub(crate) fn new(leaf: &TileLeaf) -> Result<Self> {
        let tile_leaf = leaf.encode()?;
        let te_len = leaf.timestamped_entry().encode()?.len();
        let pre_end = te_len + leaf.pre_certificate().map_or(0, |p| 3 + p.len());
        Ok(StoredEntry {
            tile_leaf,
            te_len,
            pre_end,
        })
    }

    /// RFC 6962 §4.6 `leaf_input`: the `MerkleTreeLeaf` (`v1`,
    /// `timestamped_entry`, then the entry).
    pub(crate) fn leaf_input(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + self.te_len);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.tile_leaf[..self.te_len]);
        out
    }

    /// RFC 6962 §4.6 `extra_data`: `certificate_chain` for x509 entries,
    /// `PrecertChainEntry` (`pre_certificate ‖ precertificate_chain`) for
    /// precert entries. `chain` is the encoded `ASN.1Cert chain<0..2^24-1>`.
    pub(crate) fn extra_data(&self, chain: &[u8]) -> Vec<u8> {
        let pre = &self.tile_leaf[self.te_len..self.pre_end];
        let mut out = Vec::with_capacity(pre.len() + chain.len());
        out.extend_from_slice(pre);
        out.extend_from_slice(chain);
        out
    }
}

/// Entries and their tree.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ledger {
    pub(crate) entries: Vec<StoredEntry>,
    pub(crate) tree: Tree,
}

impl Ledger {
    pub(crate) fn push(&mut self, entry: StoredEntry, leaf_hash: LeafHash) {
        self.entries.push(entry);
        self.tree.push(leaf_hash.to_bytes());
    }

    pub(crate) fn size(&self) -> u64 {
        self.tree.size()
    }
}

/// A signed head in both encodings.
#[derive(Clone, Debug)]
pub(crate) struct Head {
    pub(crate) sth: SignedTreeHead,
    pub(crate) sth_json: String,
    pub(crate) checkpoint: String,
}

impl Head {
    pub(crate) fn sign(
        signer: &LogSigner,
        origin: &str,
        timestamp: u64,
        tree_size: u64,
        root: Hash,
    ) -> Result<Self> {
        let sth = signer.sign_tree_head(timestamp, tree_size, root);
        Ok(Head {
            sth_json: sth.to_json()?,
            checkpoint: signer.checkpoint_for(origin, &sth)?,
            sth,
        })
    }
}

/// Everything behind the log's lock.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) real: Ledger,
    pub(crate) head: Head,
    pub(crate) misbehaviour: Misbehaviour,
    /// `WrongRoot`: the real size signed with a wrong root.
    pub(crate) wrong_head: Option<Head>,
    /// `ForkedTree`: the forked head, the tree it is over, and the data
    /// served with it.
    pub(crate) fork: Option<Fork>,
    /// Latest head timestamp handed out (heads are strictly increasing).
    pub(crate) last_head_ms: u64,
}

/// What [`Misbehaviour::ForkedTree`] serves.
#[derive(Debug)]
pub(crate) struct Fork {
    /// The real entries plus the forked tree's two new ones: what the
    /// entries and tiles endpoints serve.
    data: Ledger,
    /// The forked tree the head is signed over; proofs come from it.
    tree: Tree,
    head: Head,
}

/// What the endpoints serve: entries and tiles from `data`, proofs from
/// `proofs`, and `head`. Honest and `WrongRoot` views take both from the
/// real ledger.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub(crate) data: &'a Ledger,
    pub(crate) proofs: &'a Tree,
    pub(crate) head: &'a Head,
}

impl View<'_> {
    /// The size the served head commits to (and the data covers).
    pub(crate) fn size(&self) -> u64 {
        self.head.sth.tree_size.min(self.data.size())
    }
}

impl State {
    /// What is served under the current misbehaviour.
    pub(crate) fn view(&self) -> View<'_> {
        let honest = View {
            data: &self.real,
            proofs: &self.real.tree,
            head: &self.head,
        };
        match (&self.misbehaviour, &self.wrong_head, &self.fork) {
            (Misbehaviour::WrongRoot, Some(h), _) => View { head: h, ..honest },
            (Misbehaviour::ForkedTree, _, Some(f)) => View {
                data: &f.data,
                proofs: &f.tree,
                head: &f.head,
            },
            _ => honest,
        }
    }

    /// A head timestamp later than every earlier one and than `floor`.
    pub(crate) fn next_head_ms(&mut self, now_ms: u64, floor: u64) -> u64 {
        let t = now_ms.max(floor).max(self.last_head_ms.saturating_add(1));
        self.last_head_ms = t;
        t
    }

    /// Signs a new head for the real ledger and refreshes the misbehaving
    /// views.
    pub(crate) fn publish(
        &mut self,
        signer: &LogSigner,
        origin: &str,
        now_ms: u64,
        newest_entry_ms: u64,
    ) -> Result<()> {
        let ts = self.next_head_ms(now_ms, newest_entry_ms);
        let size = self.real.size();
        self.head = Head::sign(signer, origin, ts, size, self.real.tree.root_at(size))?;
        self.refresh_views(signer, origin, now_ms)
    }

    /// Rebuilds the alternative head or tree the current misbehaviour
    /// serves (and drops the others).
    pub(crate) fn refresh_views(
        &mut self,
        signer: &LogSigner,
        origin: &str,
        now_ms: u64,
    ) -> Result<()> {
        self.wrong_head = None;
        self.fork = None;
        match self.misbehaviour {
            Misbehaviour::WrongRoot => {
                let size = self.real.size();
                let mut root = self.real.tree.root_at(size);
                for b in &mut root {
                    *b ^= 0x5a;
                }
                let ts = self.next_head_ms(now_ms, 0);
                self.wrong_head = Some(Head::sign(signer, origin, ts, size, root)?);
            }
            Misbehaviour::ForkedTree if self.real.size() > 0 => {
                let forked = fork_of(&self.real)?;
                let size = forked.size();
                let ts = self.next_head_ms(now_ms, 0);
                let head = Head::sign(signer, origin, ts, size, forked.tree.root_at(size))?;
                let mut data = self.real.clone();
                let n = data.entries.len();
                for e in &forked.entries[n..] {
                    let hash = ct_core::leaf::leaf_hash_of_encoded_entry(&e.tile_leaf[..e.te_len]);
                    data.push(e.clone(), hash);
                }
                self.fork = Some(Fork {
                    data,
                    tree: forked.tree,
                    head,
                });
            }
            _ => {}
        }
        Ok(())
    }
}

/// A different tree, two entries larger than `real`: every entry is a real
/// one (cycled) with its timestamp moved by one millisecond and its
/// `leaf_index` extension set to its new position. It shares no leaf with
/// `real`, so no consistency proof from any head of `real` verifies.
fn fork_of(real: &Ledger) -> Result<Ledger> {
    let mut out = Ledger::default();
    let n = real.entries.len();
    for i in 0..n + 2 {
        let base = TileLeaf::decode(&real.entries[i % n].tile_leaf)?;
        let (mut te, pre, chain) = base.into_parts();
        te.timestamp = te.timestamp.saturating_add(1 + (i / n) as u64);
        te.extensions = encode_leaf_index_extension(i as u64)?;
        let leaf = TileLeaf::new(te, pre, chain)?;
        out.push(StoredEntry::new(&leaf)?, leaf.leaf_hash());
    }
    Ok(out)
}
