-- Serialise on-demand partition creation (0001_store.sql): two ingesters
-- creating the same month raced in the catalog ("type entries_pYYYYMM
-- already exists", SQLSTATE 42710, which 0001 did not catch), and a loser
-- could insert before the winner's ATTACH committed. A transaction-scoped
-- advisory lock makes creators queue; the second one then finds the
-- partition attached and skips it.
CREATE OR REPLACE FUNCTION ct_ensure_entries_partitions(p_months integer[])
RETURNS integer
LANGUAGE plpgsql
AS $fn$
DECLARE
    m       integer;
    part    text;
    created integer := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('ct_ensure_entries_partitions'));
    FOREACH m IN ARRAY coalesce(p_months, '{}') LOOP
        IF m < 0 OR m >= 25200 THEN
            RAISE EXCEPTION 'ct_ensure_entries_partitions: month % out of range', m;
        END IF;
        part := format('entries_p%s%s', lpad((m / 12)::text, 4, '0'),
                       lpad((m % 12 + 1)::text, 2, '0'));
        CONTINUE WHEN to_regclass(quote_ident(part)) IS NOT NULL;
        BEGIN
            EXECUTE format(
                'CREATE TABLE %I (LIKE entries INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                part);
            EXECUTE format(
                'ALTER TABLE entries ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)',
                part, m, m + 1);
            created := created + 1;
        EXCEPTION WHEN duplicate_table OR duplicate_object OR unique_violation THEN
            NULL; -- created by someone else before we took the lock
        END;
    END LOOP;
    RETURN created;
END
$fn$;
