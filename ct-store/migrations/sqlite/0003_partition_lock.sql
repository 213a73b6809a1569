-- 0003 is a PostgreSQL-only change (serialised partition creation, see
-- migrations/postgres/0003_partition_lock.sql). SQLite has no partitions;
-- this file keeps the two migration sequences numbered alike.
SELECT 1;
