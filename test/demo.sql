-- test/demo.sql - the ctas_fed demo, run by test/demo.sh ("make demo")
--
-- psql variables set by demo.sh:
--   remote_port   port of the "remote" PostgreSQL on 127.0.0.1 (database dw,
--                 role loader / secret, max_prepared_transactions = 10)
--   ch_url        http://127.0.0.1:PORT of the ClickHouse server
--   ch_password   password of the ClickHouse user "default"

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
