-- An ingest role without ownership (docs/operator.md, "Database roles").
--
-- Attaching a monthly partition needs ownership of `entries`. The
-- partition function now runs with its owner's rights (the owner role that
-- ran this migration), so the ingest role needs only EXECUTE on it, which
-- no one else has: it creates partitions of the fixed name and range the
-- function allows and nothing else. Its search_path is pinned to the
-- store's schema, with pg_temp last, so that no caller's schema or
-- temporary table is consulted.
ALTER FUNCTION ct_ensure_entries_partitions(integer[]) SECURITY DEFINER;
DO $$
BEGIN
    EXECUTE format(
        'ALTER FUNCTION ct_ensure_entries_partitions(integer[]) SET search_path = %I, pg_temp',
        current_schema());
END
$$;
REVOKE EXECUTE ON FUNCTION ct_ensure_entries_partitions(integer[]) FROM PUBLIC;
