-- The PostgreSQL migration 0005 lets an ingest role without ownership
-- create monthly partitions. SQLite has no roles and no partitions: nothing
-- to change. This file keeps both flavours at the same numbered versions.
SELECT 1;
