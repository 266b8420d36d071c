-- Benchmark workload (tests/bench/run.sh deepstacks): a recursive CTE and an ORDER BY
-- in the Debian sqlite3 CLI, whose VDBE frames are big (about 2 s of CPU).
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000)
SELECT count(*), sum(y) FROM (SELECT x, (x * 2654435761) % 1000003 AS y FROM c ORDER BY y);
