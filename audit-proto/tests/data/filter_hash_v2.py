#!/usr/bin/env python3
"""Known answers of the V2 filter hash, computed independently of the Rust
code: SHA-256 from hashlib, ChaCha20 (RFC 8439) from the `cryptography`
package (pip install cryptography). Writes filter_hash_v2.json beside this
script; audit-proto's filter tests check every vector.

    key64 = SHA-256(E || seed || 0x00) || SHA-256(E || seed || 0x01)
    k_h   = SHA-256(key64 || leaf_hash)
    x_i   = little-endian u64 of bytes 8i..8i+8 of ChaCha20(k_h, nonce 0, counter 0)
    bit_i = (x_i * bits) >> 64
"""
import hashlib
import json
import os

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

E = b"ct-audit/entry-key/v1"


def key64(seed):
    return b"".join(hashlib.sha256(E + seed + bytes([c])).digest() for c in (0, 1))


def entry_key(k64, leaf):
    return hashlib.sha256(k64 + leaf).digest()


def word(k_h, i):
    # cryptography's ChaCha20 nonce is the 4-byte little-endian block
    # counter followed by the 12-byte RFC 8439 nonce.
    enc = Cipher(algorithms.ChaCha20(k_h, bytes(16)), mode=None).encryptor()
    stream = enc.update(bytes(8 * (i + 1)))
    return int.from_bytes(stream[8 * i : 8 * i + 8], "little")


def main():
    seed = bytes(range(32))
    k64 = key64(seed)
    leaves = [bytes([0xFF] * 32)] + [
        hashlib.sha256(b"leaf" + bytes([n])).digest() for n in range(3)
    ]
    filters = [0, 1, 7, 8, 9, 15, 16, 383, 767, 4095]
    bits_list = [8, 1000, 80_000_000, 1 << 36, 1 << 38]
    vectors = []
    for leaf in leaves:
        k_h = entry_key(k64, leaf)
        for i in filters:
            x = word(k_h, i)
            vectors.append(
                {
                    "leaf_hash": leaf.hex(),
                    "entry_key": k_h.hex(),
                    "filter": i,
                    "x": str(x),
                    "bits": [[str(b), str((x * b) >> 64)] for b in bits_list],
                }
            )
    out = {
        "generator": "filter_hash_v2.py (hashlib + cryptography "
        + __import__("cryptography").__version__
        + ")",
        "salt_seed": seed.hex(),
        "key64": k64.hex(),
        "vectors": vectors,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "filter_hash_v2.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
