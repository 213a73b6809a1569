//! Signed notes, checkpoints and static-ct-api checkpoint signatures.
//!
//! * [`SignedNote`] parses the c2sp.org/signed-note format: a UTF-8 text
//!   ending in a newline, a blank line, then one or more lines
//!   `— <key name> <base64(key ID ‖ signature)>`.
//! * [`Checkpoint`] parses the note text of a c2sp.org/tlog-checkpoint:
//!   origin line, decimal tree size, base64 root hash, optional extension
//!   lines.
//! * [`verify_checkpoint`] verifies a static-ct-api checkpoint
//!   (c2sp.org/static-ct-api "Checkpoints"): an `RFC6962NoteSignature`
//!   (note signature type 0x05) whose body is
//!   `uint64 timestamp ‖ DigitallySigned` over the RFC 6962 §3.5
//!   `TreeHeadSignature` for the checkpoint's size and root.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::ids::LogId;
use crate::merkle::{Hash, HASH_LEN};
use crate::sth::{
    decode_base64, tree_head_signature_input, DigitallySigned, LogKey, SignedTreeHead,
};
use crate::tls::{Reader, Writer};

/// Largest signed note accepted (c2sp.org/signed-note lets verifiers cap
/// the size; 1 MiB is far above any real checkpoint).
pub const MAX_NOTE_SIZE: usize = 1 << 20;
/// Largest number of signature lines accepted (the spec requires at least
/// 16 to be accepted).
pub const MAX_NOTE_SIGNATURES: usize = 100;
/// Largest decoded signature (key ID included) accepted on one line;
/// post-quantum signatures are "up to nearly 5kB" (c2sp.org/signed-note).
pub const MAX_NOTE_SIGNATURE_LEN: usize = 8 << 10;
/// Note signature type identifier of RFC 6962 `TreeHeadSignature`s
/// (c2sp.org/signed-note "Signature types").
pub const SIGNATURE_TYPE_RFC6962: u8 = 0x05;
/// The em dash (U+2014) and space that start a signature line.
const SIG_PREFIX: &str = "\u{2014} ";

/// One signature line of a signed note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoteSignature {
    /// Key name.
    pub name: String,
    /// Key ID (first four bytes of the decoded signature, big-endian).
    pub key_id: u32,
    /// Signature bytes after the key ID.
    pub signature: Vec<u8>,
}

impl NoteSignature {
    /// The signature line, without its trailing newline.
    pub fn to_line(&self) -> String {
        let mut raw = Vec::with_capacity(4 + self.signature.len());
        raw.extend_from_slice(&self.key_id.to_be_bytes());
        raw.extend_from_slice(&self.signature);
        format!("{SIG_PREFIX}{} {}", self.name, BASE64.encode(raw))
    }
}

/// A signed note (c2sp.org/signed-note). Signatures are *not* verified by
/// parsing; the text must be ignored until one from a trusted key is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedNote {
    /// The note text, including its final newline.
    pub text: String,
    /// The signature lines, in order.
    pub signatures: Vec<NoteSignature>,
}

/// True if `name` is a valid key name: non-empty, no Unicode spaces, no `+`.
pub fn is_valid_key_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c == '+')
}

impl SignedNote {
    /// Parses a signed note, rejecting anything malformed: over
    /// [`MAX_NOTE_SIZE`], invalid UTF-8, control characters other than
    /// newline, no blank line before the signatures, no signatures, a
    /// signature line without the `— ` prefix, an invalid key name, bad
    /// base64, or a signature shorter than key ID plus one byte.
    pub fn parse(note: &[u8]) -> Result<Self> {
        const WHAT: &str = "signed note";
        if note.len() > MAX_NOTE_SIZE {
            return Err(Error::TooLarge {
                what: WHAT,
                len: note.len(),
                max: MAX_NOTE_SIZE,
            });
        }
        let s = std::str::from_utf8(note)
            .map_err(|e| Error::malformed(WHAT, format!("not UTF-8: {e}")))?;
        if let Some(c) = s.chars().find(|&c| c < ' ' && c != '\n') {
            return Err(Error::malformed(
                WHAT,
                format!("control character U+{:04X}", u32::from(c)),
            ));
        }
        // The text is separated from the signatures by the last blank line.
        let split = s
            .rfind("\n\n")
            .ok_or_else(|| Error::malformed(WHAT, "no blank line before the signatures"))?;
        let text = &s[..=split];
        let sigs = &s[split + 2..];
        if sigs.is_empty() {
            return Err(Error::malformed(WHAT, "no signatures"));
        }
        let sigs = sigs
            .strip_suffix('\n')
            .ok_or_else(|| Error::malformed(WHAT, "signature block does not end in a newline"))?;
        let mut signatures = Vec::new();
        for line in sigs.split('\n') {
            if signatures.len() >= MAX_NOTE_SIGNATURES {
                return Err(Error::TooLarge {
                    what: "signed note signature count",
                    len: sigs.split('\n').count(),
                    max: MAX_NOTE_SIGNATURES,
                });
            }
            signatures.push(parse_signature_line(line)?);
        }
        Ok(SignedNote {
            text: text.to_owned(),
            signatures,
        })
    }

    /// The note's encoding: text, blank line, signature lines.
    pub fn to_text(&self) -> String {
        let mut out = self.text.clone();
        out.push('\n');
        for s in &self.signatures {
            out.push_str(&s.to_line());
            out.push('\n');
        }
        out
    }

    /// Signatures whose key name and key ID both match.
    pub fn signatures_by<'a>(
        &'a self,
        name: &'a str,
        key_id: u32,
    ) -> impl Iterator<Item = &'a NoteSignature> + 'a {
        self.signatures
            .iter()
            .filter(move |s| s.name == name && s.key_id == key_id)
    }
}

fn parse_signature_line(line: &str) -> Result<NoteSignature> {
    const WHAT: &str = "signed note signature line";
    let rest = line
        .strip_prefix(SIG_PREFIX)
        .ok_or_else(|| Error::malformed(WHAT, "does not start with an em dash and a space"))?;
    let (name, b64) = rest
        .split_once(' ')
        .ok_or_else(|| Error::malformed(WHAT, "no space between key name and signature"))?;
    if !is_valid_key_name(name) {
        return Err(Error::malformed(WHAT, format!("invalid key name {name:?}")));
    }
    let raw = decode_base64(b64, "note signature", MAX_NOTE_SIGNATURE_LEN)?;
    let (id, sig) = raw
        .split_first_chunk::<4>()
        .ok_or_else(|| Error::malformed(WHAT, "signature shorter than a key ID"))?;
    if sig.is_empty() {
        return Err(Error::malformed(WHAT, "empty signature after the key ID"));
    }
    Ok(NoteSignature {
        name: name.to_owned(),
        key_id: u32::from_be_bytes(*id),
        signature: sig.to_vec(),
    })
}

/// A transparency log checkpoint (c2sp.org/tlog-checkpoint note text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The origin line: the log's identity.
    pub origin: String,
    /// Number of leaves.
    pub tree_size: u64,
    /// RFC 6962 Merkle Tree Hash at `tree_size`.
    pub root_hash: Hash,
    /// Extension lines (without newlines), usually none.
    pub extensions: Vec<String>,
}

impl Checkpoint {
    /// Parses checkpoint note text: at least three non-empty lines, each
    /// ending in a newline; a tree size in decimal without leading zeros;
    /// a root hash in standard base64 decoding to 32 bytes.
    pub fn parse(text: &str) -> Result<Self> {
        const WHAT: &str = "checkpoint";
        if text.len() > MAX_NOTE_SIZE {
            return Err(Error::TooLarge {
                what: WHAT,
                len: text.len(),
                max: MAX_NOTE_SIZE,
            });
        }
        let body = text
            .strip_suffix('\n')
            .ok_or_else(|| Error::malformed(WHAT, "text does not end in a newline"))?;
        let mut lines = body.split('\n');
        let origin = lines.next().unwrap_or("");
        let size = lines
            .next()
            .ok_or_else(|| Error::malformed(WHAT, "no tree size line"))?;
        let root = lines
            .next()
            .ok_or_else(|| Error::malformed(WHAT, "no root hash line"))?;
        if origin.is_empty() {
            return Err(Error::malformed(WHAT, "empty origin"));
        }
        let tree_size = parse_tree_size(size)?;
        let root_bytes = decode_base64(root, "checkpoint root hash", HASH_LEN)?;
        let root_hash: Hash = root_bytes.as_slice().try_into().map_err(|_| {
            Error::malformed(
                WHAT,
                format!("root hash is {} bytes, not {HASH_LEN}", root_bytes.len()),
            )
        })?;
        let mut extensions = Vec::new();
        for line in lines {
            if line.is_empty() {
                return Err(Error::malformed(WHAT, "empty extension line"));
            }
            extensions.push(line.to_owned());
        }
        Ok(Checkpoint {
            origin: origin.to_owned(),
            tree_size,
            root_hash,
            extensions,
        })
    }

    /// The note text.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "{}\n{}\n{}\n",
            self.origin,
            self.tree_size,
            BASE64.encode(self.root_hash)
        );
        for e in &self.extensions {
            out.push_str(e);
            out.push('\n');
        }
        out
    }
}

fn parse_tree_size(s: &str) -> Result<u64> {
    let bad = |reason: &str| Error::malformed("checkpoint tree size", format!("{reason}: {s:?}"));
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("not a decimal number"));
    }
    if s.len() > 1 && s.starts_with('0') {
        return Err(bad("leading zero"));
    }
    s.parse().map_err(|_| bad("does not fit in 64 bits"))
}

/// The note key ID of a static-ct-api log (c2sp.org/static-ct-api
/// "Checkpoints"): the first four bytes, big-endian, of
/// `SHA-256(key name ‖ 0x0A ‖ 0x05 ‖ LogID)`, where `LogID` is the 32-byte
/// RFC 6962 log ID, itself `SHA-256(SubjectPublicKeyInfo)`.
pub fn rfc6962_key_id(name: &str, log_id: &LogId) -> u32 {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update([b'\n', SIGNATURE_TYPE_RFC6962]);
    h.update(log_id.as_bytes());
    let d = h.finalize();
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// The body of a static-ct-api note signature (c2sp.org/static-ct-api
/// "Checkpoints"):
///
/// ```text
/// struct {
///     uint64 timestamp;
///     TreeHeadSignature signature;   // a DigitallySigned
/// } RFC6962NoteSignature;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rfc6962NoteSignature {
    /// `TreeHeadSignature.timestamp`, milliseconds since the Unix epoch.
    pub timestamp: u64,
    /// The `digitally-signed` `TreeHeadSignature`.
    pub signature: DigitallySigned,
}

impl Rfc6962NoteSignature {
    /// Decodes the note signature body (after the key ID), rejecting
    /// trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let timestamp = r.read_u64("RFC6962NoteSignature.timestamp")?;
        let signature = DigitallySigned::decode_from(&mut r)?;
        r.finish("RFC6962NoteSignature")?;
        Ok(Rfc6962NoteSignature {
            timestamp,
            signature,
        })
    }

    /// The encoding.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let mut w = Writer::new();
        w.put_u64(self.timestamp);
        self.signature.encode_into(&mut w)?;
        Ok(w.into_bytes())
    }
}

/// A checkpoint whose static-ct-api signature verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedCheckpoint {
    /// The checkpoint (never has extension lines).
    pub checkpoint: Checkpoint,
    /// Timestamp of the verified signature (the latest one, if the log
    /// signed more than once with the same key).
    pub timestamp: u64,
    /// The verified `TreeHeadSignature`.
    pub signature: DigitallySigned,
}

impl VerifiedCheckpoint {
    /// The equivalent RFC 6962 signed tree head (c2sp.org/static-ct-api notes
    /// the two convert into each other without the private key).
    pub fn to_signed_tree_head(&self) -> SignedTreeHead {
        SignedTreeHead {
            tree_size: self.checkpoint.tree_size,
            timestamp: self.timestamp,
            root_hash: self.checkpoint.root_hash,
            signature: self.signature.clone(),
        }
    }
}

/// Verifies a static-ct-api checkpoint from the log with checkpoint origin
/// `origin` and public key `key`.
///
/// Following c2sp.org/signed-note and c2sp.org/static-ct-api "Checkpoints":
/// the origin line must equal `origin`; signatures whose key name or key ID
/// differ from (`origin`, [`rfc6962_key_id`]) are ignored; at least one
/// signature must match, and every matching one must verify; the checkpoint
/// must have no extension lines.
pub fn verify_checkpoint(note: &[u8], origin: &str, key: &LogKey) -> Result<VerifiedCheckpoint> {
    let note = SignedNote::parse(note)?;
    let checkpoint = Checkpoint::parse(&note.text)?;
    if checkpoint.origin != origin {
        return Err(Error::OriginMismatch {
            expected: origin.to_owned(),
            found: checkpoint.origin,
        });
    }
    let key_id = rfc6962_key_id(origin, &key.log_id());
    let mut best: Option<Rfc6962NoteSignature> = None;
    for s in note.signatures_by(origin, key_id) {
        if !checkpoint.extensions.is_empty() {
            return Err(Error::malformed(
                "checkpoint",
                "extension lines are not allowed with an RFC 6962 signature",
            ));
        }
        let body = Rfc6962NoteSignature::decode(&s.signature)?;
        let input =
            tree_head_signature_input(body.timestamp, checkpoint.tree_size, &checkpoint.root_hash);
        key.verify(&input, &body.signature, "checkpoint")?;
        let newer = match &best {
            Some(b) => body.timestamp > b.timestamp,
            None => true,
        };
        if newer {
            best = Some(body);
        }
    }
    let best = best.ok_or_else(|| Error::NoKnownSignature {
        name: origin.to_owned(),
        key_id,
    })?;
    Ok(VerifiedCheckpoint {
        checkpoint,
        timestamp: best.timestamp,
        signature: best.signature,
    })
}
