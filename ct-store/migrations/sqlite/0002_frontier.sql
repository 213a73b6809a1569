-- ct-ingest: the CompactRange frontier of each log's verified prefix.
-- Same meaning as ../postgres/0002_frontier.sql; see docs/ingest.md.
--
-- `frontier` holds the roots of the maximal perfect subtrees of the Merkle
-- tree of the entries [0, verified_position), largest (leftmost) first, as
-- concatenated 32-byte hashes: popcount(verified_position) of them
-- (merkle::CompactRange::nodes). It is written in the same transaction that
-- advances verified_position (Store::commit_verified_with_frontier_at), so
-- a restart resumes hashing at verified_position without downloading the
-- prefix again, and the next signed tree head can be checked to extend the
-- verified prefix. NULL when unknown (before this migration, or after a
-- commit that did not supply it); the ingester then rebuilds it from 0.
ALTER TABLE logs ADD COLUMN frontier BLOB
    CHECK (frontier IS NULL OR length(frontier) % 32 = 0);
