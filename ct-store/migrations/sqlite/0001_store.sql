-- ct-ingest storage, SQLite flavour (the embedded default).
-- PostgreSQL has its own DDL in ../postgres (partitioned entries table).
-- See docs/storage.md for the design; both flavours must stay semantically equal.

-- One row per CT log. `log_no` is a small surrogate key so that the (huge)
-- entries table does not repeat the 32-byte log id in every row.
CREATE TABLE logs (
    log_no              INTEGER PRIMARY KEY,          -- rowid alias
    log_id              BLOB    NOT NULL UNIQUE CHECK (length(log_id) = 32),
    url                 TEXT    NOT NULL,
    mmd_s               INTEGER NOT NULL CHECK (mmd_s >= 0),
    kind                TEXT    NOT NULL CHECK (kind IN ('rfc6962', 'static')),
    -- Advisory: how far the fetcher has downloaded (next leaf index).
    downloaded_position INTEGER NOT NULL DEFAULT 0 CHECK (downloaded_position >= 0),
    -- Authoritative: entries [0, verified_position) are verified and stored
    -- (or were expired when they were verified). Advanced only together with
    -- the entries, in one transaction.
    verified_position   INTEGER NOT NULL DEFAULT 0 CHECK (verified_position >= 0),
    -- Latest verified signed tree head.
    verified_tree_size  INTEGER NOT NULL DEFAULT 0 CHECK (verified_tree_size >= 0),
    verified_root_hash  BLOB CHECK (verified_root_hash IS NULL OR length(verified_root_hash) = 32),
    -- Largest SCT timestamp (ms) such that every entry of the log up to it is stored.
    ingested_until_ms   INTEGER NOT NULL DEFAULT 0 CHECK (ingested_until_ms >= 0),
    CHECK (verified_position <= verified_tree_size)
);

-- The active set S. Clustered by (log_no, leaf_index): appends per log are
-- sequential, and the primary key makes replays idempotent.
CREATE TABLE entries (
    log_no           INTEGER NOT NULL REFERENCES logs (log_no),
    leaf_index       INTEGER NOT NULL CHECK (leaf_index >= 0),
    leaf_hash        BLOB    NOT NULL CHECK (length(leaf_hash) = 32),
    sct_timestamp_ms INTEGER NOT NULL,
    not_after        INTEGER NOT NULL,              -- certificate notAfter, Unix seconds
    PRIMARY KEY (log_no, leaf_index)
) WITHOUT ROWID;

-- Expiry: DELETE ... WHERE not_after < now, and the active-set filters.
CREATE INDEX entries_not_after ON entries (not_after);
