-- test/demo.sql - the ctas_fed demo, run by test/demo.sh ("make demo")
--
-- psql variables set by demo.sh:
--   remote_port   port of the "remote" PostgreSQL on 127.0.0.1 (database dw,
--                 role loader / secret, max_prepared_transactions = 10)
--   ch_url        http://127.0.0.1:PORT of the ClickHouse server
--   ch_password   password of the ClickHouse user "default"
--   my_port       port of the MariaDB server on 127.0.0.1 (database shop,
--                 user loader / secret)

CREATE EXTENSION ctas_fed;

CREATE SERVER warehouse FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port :'remote_port', dbname 'dw');
CREATE USER MAPPING FOR CURRENT_USER SERVER warehouse
  OPTIONS (user 'loader', password 'secret');

CREATE SERVER lake FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'clickhouse', url :'ch_url');
CREATE USER MAPPING FOR CURRENT_USER SERVER lake
  OPTIONS (user 'default', password :'ch_password');

SELECT * FROM ctas_fed.catalogs;
SELECT ctas_fed.catalog_descriptor('warehouse');

-- some local data
CREATE TABLE sales AS
  SELECT date '2026-11-01' + (g % 7) AS day, (g % 100) * 1.25 AS amount
    FROM generate_series(1, 10000) g;

-- what a federated CTAS will do, without doing it
EXPLAIN (COSTS OFF)
CREATE TABLE warehouse.public.daily_sales AS
  SELECT day, sum(amount) AS total, count(*) AS n FROM sales GROUP BY day;

-- federated CTAS into the PostgreSQL catalog: created and filled on the
-- remote server, committed with the local transaction (two-phase commit)
CREATE TABLE warehouse.public.daily_sales AS
  SELECT day, sum(amount) AS total, count(*) AS n FROM sales GROUP BY day;

-- the remote catalog, read back through ctas_fed
SELECT * FROM ctas_fed.remote_tables('warehouse', 'public');
SELECT * FROM ctas_fed.remote_columns('warehouse', 'public', 'daily_sales');

-- a rolled-back CTAS leaves nothing behind
BEGIN;
CREATE TABLE warehouse.public.never AS SELECT * FROM sales;
ROLLBACK;
SELECT * FROM ctas_fed.remote_tables('warehouse', 'public');

-- federated CTAS into the ClickHouse catalog: rows streamed into a staging
-- table, published with RENAME TABLE when the local transaction commits
EXPLAIN (COSTS OFF)
CREATE TABLE lake.default.daily_sales
  WITH (order_by = 'day')
  AS SELECT day, sum(amount) AS total, count(*) AS n FROM sales GROUP BY day;

CREATE TABLE lake.default.daily_sales
  WITH (order_by = 'day')
  AS SELECT day, sum(amount) AS total, count(*) AS n FROM sales GROUP BY day;

SELECT * FROM ctas_fed.remote_columns('lake', 'default', 'daily_sales');

-- a rolled-back CTAS leaves no table and no staging table in ClickHouse
BEGIN;
CREATE TABLE lake.default.never AS SELECT * FROM sales;
ROLLBACK;
SELECT * FROM ctas_fed.remote_tables('lake', 'default');

-- a whole schema of tables in one call: one remote table per table, the
-- source's primary key as the remote key (ClickHouse: the sorting key),
-- atomic with the transaction across both catalogs
CREATE SCHEMA shop;
CREATE TABLE shop.customers (id int PRIMARY KEY, name text NOT NULL,
                             country text);
CREATE TABLE shop.orders (id int PRIMARY KEY,
                          customer_id int REFERENCES shop.customers,
                          ordered_at timestamptz NOT NULL,
                          amount numeric(12,2));
INSERT INTO shop.customers
  SELECT g, 'customer ' || g, (ARRAY['fr', 'de', NULL])[g % 3 + 1]
    FROM generate_series(1, 100) g;
INSERT INTO shop.orders
  SELECT g, g % 100 + 1, timestamptz '2026-11-01 00:00:00+00' + g * interval '1 hour',
         (g % 50) * 2.5
    FROM generate_series(1, 1000) g;

BEGIN;
SELECT * FROM ctas_fed.create_tables_as('warehouse', 'public',
                                        source_schema => 'shop');
SELECT * FROM ctas_fed.create_tables_as('lake', 'default',
    tables => ARRAY['shop.customers', 'shop.orders']::regclass[],
    options => '{"rename": {"shop.orders": "shop_orders"}}');
COMMIT;

SELECT * FROM ctas_fed.remote_columns('lake', 'default', 'shop_orders');

-- continuous sync: the remote table is created with the statement, then a
-- background worker copies the rows and keeps applying the source's changes
CREATE TABLE orders (id int PRIMARY KEY, customer text, amount numeric(10,2),
                     region text);
INSERT INTO orders
  SELECT g, 'customer ' || g % 5, g * 10, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END
    FROM generate_series(1, 10) g;
CREATE TABLE warehouse.public.eu_orders
  WITH (sync = 'continuous')
  AS SELECT id, upper(customer) AS customer, amount FROM orders WHERE region = 'eu';

-- updates, deletes, and rows moving into and out of the WHERE
UPDATE orders SET amount = amount + 1 WHERE id = 2;
DELETE FROM orders WHERE id = 4;
UPDATE orders SET region = 'eu' WHERE id = 5;
UPDATE orders SET region = 'us' WHERE id = 6;
INSERT INTO orders VALUES (11, 'new customer', 99, 'eu');

-- wait (at most 30 s) until the worker has applied all of it
CREATE TEMP TABLE demo_clock AS SELECT clock_timestamp() AS t;
DO $$
BEGIN
  FOR i IN 1 .. 300 LOOP
    EXIT WHEN EXISTS (SELECT FROM ctas_fed.sync_status()
                       WHERE caught_up_at > (SELECT t FROM demo_clock));
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT job_id, target, mode, state, rows, lag_bytes, lag_seconds < 1 AS keeping_up
  FROM ctas_fed.jobs WHERE mode = 'sync';

-- every federated CTAS and DROP is a job, visible live from any session and
-- kept in a bounded history that survives restarts
SELECT job_id, catalog, target, mode, state, rows, bytes, error
  FROM ctas_fed.jobs ORDER BY job_id;

-- the jobs of one create_tables_as call share a group
SELECT group_id, catalog, count(*) AS tables, sum(rows) AS rows
  FROM ctas_fed.jobs WHERE group_id IS NOT NULL
 GROUP BY group_id, catalog ORDER BY group_id;

-- the same registry in the Prometheus text format
SELECT ctas_fed.metrics();

-- stop the sync: its slot and publication go, the remote rows stay
SELECT ctas_fed.stop_sync('warehouse.public.eu_orders');

-- a MariaDB / MySQL catalog: three-part names are catalog.database.table
CREATE SERVER shop FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'mysql', host '127.0.0.1', port :'my_port');
CREATE USER MAPPING FOR CURRENT_USER SERVER shop
  OPTIONS (user 'loader', password 'secret');
EXPLAIN (COSTS OFF)
CREATE TABLE shop.shop.daily_sales AS
  SELECT day, sum(amount) AS total, count(*) AS n FROM sales GROUP BY day;
-- a staging table filled by LOAD DATA LOCAL INFILE from memory, published by
-- one RENAME TABLE when the local transaction commits
CREATE TABLE shop.shop.daily_sales AS
  SELECT day, sum(amount) AS total, count(*) AS n FROM sales GROUP BY day;
-- an append is an XA transaction: XA PREPARE before the local commit,
-- XA COMMIT after it; a rollback leaves nothing
BEGIN;
CREATE TABLE shop.shop.daily_sales WITH (if_exists = 'append') AS
  SELECT date '2026-12-01' AS day, 0.00 AS total, 0 AS n;
ROLLBACK;
SELECT * FROM ctas_fed.remote_columns('shop', 'shop', 'daily_sales');
SELECT job_id, catalog, target, state, rows FROM ctas_fed.jobs
 WHERE catalog = 'shop' ORDER BY job_id;
