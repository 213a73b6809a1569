-- Misbehaviour reports, and the log keys the auditor verifies them with.
-- Same meaning as ../postgres/0004_reports.sql; see docs/storage.md.

-- The log's public key (DER SubjectPublicKeyInfo), recorded by ct-ingest
-- from the log list it ingests with (its SHA-256 is the log id). NULL until
-- the ingester has recorded it.
ALTER TABLE logs ADD COLUMN public_key BLOB
    CHECK (public_key IS NULL OR length(public_key) BETWEEN 1 AND 2048);

-- Reports the auditor verified (POST /v1/reports): an SCT whose leaf was
-- absent from the auditor's epochs. One row per (log, leaf): a second
-- report of the same leaf is a duplicate. `status` is 'received' when the
-- auditor stores it; ct-ingest then asks the log and records 'confirmed'
-- (the log's verified tree past the SCT's timestamp + MMD does not hold the
-- leaf) or 'refuted' (it does).
CREATE TABLE reports (
    report_id        INTEGER PRIMARY KEY,
    log_id           BLOB    NOT NULL CHECK (length(log_id) = 32),
    leaf_hash        BLOB    NOT NULL CHECK (length(leaf_hash) = 32),
    sct_timestamp_ms INTEGER NOT NULL CHECK (sct_timestamp_ms >= 0),
    mmd_s            INTEGER NOT NULL CHECK (mmd_s >= 0),
    kind             TEXT    NOT NULL CHECK (kind IN ('precert', 'x509')),
    -- The SCT's TLS encoding.
    sct              BLOB    NOT NULL,
    -- The chain, leaf first: each DER certificate behind a 3-byte length.
    chain            BLOB    NOT NULL,
    -- The epochs whose sets did not hold the leaf, comma-separated.
    epochs           TEXT    NOT NULL,
    -- The leaf certificate's notAfter (Unix seconds).
    not_after        INTEGER NOT NULL,
    received_at_ms   INTEGER NOT NULL CHECK (received_at_ms >= 0),
    status           TEXT    NOT NULL DEFAULT 'received'
                     CHECK (status IN ('received', 'confirmed', 'refuted')),
    -- The last confirmation attempt: when, how many so far, what it found.
    checked_at_ms    INTEGER,
    attempts         INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    note             TEXT,
    UNIQUE (log_id, leaf_hash)
);

CREATE INDEX reports_status ON reports (status);
