--
-- Catalogs are foreign servers: option validation, descriptors, privileges
--
CREATE EXTENSION ctas_fed;
\dx ctas_fed
\dew ctas_fed

-- every option of a postgres catalog, accepted
CREATE SERVER pg_all FOREIGN DATA WRAPPER ctas_fed OPTIONS (
  type 'postgres', host '127.0.0.1', hostaddr '127.0.0.1', port '5432',
  dbname 'dw', options '-c work_mem=64MB', application_name 'ctas',
  connect_timeout '10', keepalives '1', keepalives_idle '30',
  keepalives_interval '10', keepalives_count '3', tcp_user_timeout '0',
  sslmode 'prefer', sslcompression '0', sslcert 'c.crt', sslkey 'c.key',
  sslrootcert 'root.crt', sslcrl 'c.crl', sslcrldir 'crl', sslsni '1',
  ssl_min_protocol_version 'TLSv1.2', ssl_max_protocol_version 'TLSv1.3',
  gssencmode 'disable', krbsrvname 'postgres', target_session_attrs 'any',
  two_phase 'auto', notify_url 'https://hooks.example.com/ctas?x=1');
ALTER SERVER pg_all OPTIONS (SET two_phase 'on');
ALTER SERVER pg_all OPTIONS (SET two_phase 'off');

-- every option of a clickhouse catalog, accepted
CREATE SERVER ch_all FOREIGN DATA WRAPPER ctas_fed OPTIONS (
  type 'clickhouse', url 'http://127.0.0.1:8123', database 'analytics',
  connect_timeout '5', timeout '600', notify_url 'http://127.0.0.1:9/hook');
ALTER SERVER ch_all OPTIONS (SET url 'https://ch.example.com/');
ALTER SERVER ch_all OPTIONS (SET url 'http://[::1]:8123');

-- user mapping options, accepted
CREATE USER MAPPING FOR CURRENT_USER SERVER pg_all
  OPTIONS (user 'loader', password 'secret', password_required 'true');
CREATE USER MAPPING FOR PUBLIC SERVER ch_all
  OPTIONS (user 'default', password 'chsecret');

-- type: missing, unknown, options of the other type
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (host 'x');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed;
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'mysql');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', url 'http://x');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://x', host 'x');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse');
ALTER SERVER ch_all OPTIONS (DROP url);
ALTER SERVER pg_all OPTIONS (SET type 'clickhouse');

-- unknown options, with the valid ones in the hint
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', hots 'x');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://x', x '1');
CREATE USER MAPPING FOR PUBLIC SERVER pg_all OPTIONS (username 'x');
CREATE USER MAPPING FOR PUBLIC SERVER pg_all OPTIONS (host 'x');
ALTER FOREIGN DATA WRAPPER ctas_fed OPTIONS (ADD debug 'on');
-- libpq keywords ctas_fed sets itself
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', client_encoding 'LATIN1');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', replication 'database');

-- credentials belong on the user mapping, and the value is never echoed
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', password 'hunter2');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://x', user 'default');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://default:hunter2@127.0.0.1:8123');

-- bad values name the option
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', port 'abc');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', port '70000');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', port '');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', connect_timeout '-1');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', two_phase 'maybe');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', sslmode 'always');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', host E'h\nx');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'postgres', application_name E'a\rb');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'ftp://127.0.0.1');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'file:///etc/passwd');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url '127.0.0.1:8123');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://127.0.0.1:port');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://127.0.0.1:8123/db?user=x');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://127.0.0.1:8123', timeout '0');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://127.0.0.1:8123', notify_url 'gopher://x');
CREATE SERVER bad FOREIGN DATA WRAPPER ctas_fed OPTIONS (type 'clickhouse', url 'http://127.0.0.1:8123', notify_url 'http://h/x#frag');
CREATE USER MAPPING FOR PUBLIC SERVER pg_all OPTIONS (password_required 'perhaps');
CREATE USER MAPPING FOR PUBLIC SERVER pg_all OPTIONS (password E'se\ncret');

-- no foreign tables on a catalog
CREATE FOREIGN TABLE ft (a int) SERVER pg_all;

-- nothing of the above was created
SELECT srvname FROM pg_foreign_server ORDER BY 1;

-- the catalogs view and descriptors show no secret
SELECT name, type, owner = current_user AS mine FROM ctas_fed.catalogs ORDER BY name;
SELECT options FROM ctas_fed.catalogs WHERE name = 'ch_all';
SELECT jsonb_pretty(ctas_fed.catalog_descriptor('pg_all'));
SELECT ctas_fed.catalog_descriptor('ch_all');
SELECT ctas_fed.catalog_descriptor('nosuch');
CREATE SERVER other_fdw_server FOREIGN DATA WRAPPER dummy;
CREATE FOREIGN DATA WRAPPER dummy;
CREATE SERVER other_fdw_server FOREIGN DATA WRAPPER dummy;
SELECT ctas_fed.catalog_descriptor('other_fdw_server');
SELECT count(*) FROM ctas_fed.catalogs WHERE name = 'other_fdw_server';

-- register_catalog is CREATE SERVER: same rows, same validation
SELECT ctas_fed.register_catalog('reg_pg', 'postgres',
  '{"host": "127.0.0.1", "port": 5433, "dbname": "dw", "two_phase": "off"}') > 0 AS created;
CREATE SERVER sql_pg FOREIGN DATA WRAPPER ctas_fed
  OPTIONS (type 'postgres', host '127.0.0.1', port '5433', dbname 'dw', two_phase 'off');
SELECT a.srvoptions = b.srvoptions AS same_options, a.srvfdw = b.srvfdw AS same_fdw,
       a.srvowner = b.srvowner AS same_owner
  FROM pg_foreign_server a, pg_foreign_server b
 WHERE a.srvname = 'reg_pg' AND b.srvname = 'sql_pg';
SELECT ctas_fed.register_catalog('reg_bad', 'postgres', '{"port": "x"}');
SELECT ctas_fed.register_catalog('reg_bad', 'postgres', '{"password": "hunter2"}');
SELECT ctas_fed.register_catalog('reg_bad', 'nosuch', '{}');
SELECT ctas_fed.register_catalog('reg_bad', 'postgres', '[1, 2]');
SELECT ctas_fed.register_catalog('reg_bad', 'postgres', '{"port": [5432]}');
SELECT ctas_fed.register_catalog('reg_bad', 'postgres', '{"host": null}');
SELECT ctas_fed.register_catalog('reg_bad', 'postgres', '{"type": "clickhouse"}');
SELECT ctas_fed.register_catalog('reg_pg', 'postgres', '{}');
SELECT count(*) FROM pg_foreign_server WHERE srvname = 'reg_bad';

-- a descriptor round-trips
SELECT ctas_fed.register_catalog('ch_copy', d->>'type', d->'options') > 0 AS created
  FROM ctas_fed.catalog_descriptor('ch_all') d;
SELECT (SELECT array_agg(o ORDER BY o) FROM unnest(a.srvoptions) o) =
       (SELECT array_agg(o ORDER BY o) FROM unnest(b.srvoptions) o) AS same_options
  FROM pg_foreign_server a, pg_foreign_server b
 WHERE a.srvname = 'ch_all' AND b.srvname = 'ch_copy';
SELECT ctas_fed.register_catalog('pg_copy', d->>'type', d->'options') > 0 AS created
  FROM ctas_fed.catalog_descriptor('pg_all') d;
SELECT (SELECT array_agg(o ORDER BY o) FROM unnest(a.srvoptions) o) =
       (SELECT array_agg(o ORDER BY o) FROM unnest(b.srvoptions) o) AS same_options
  FROM pg_foreign_server a, pg_foreign_server b
 WHERE a.srvname = 'pg_all' AND b.srvname = 'pg_copy';
SELECT (SELECT options FROM ctas_fed.catalogs WHERE name = 'pg_all') =
       ctas_fed.catalog_descriptor('pg_all')->'options' AS view_matches_descriptor;

-- a non-superuser
CREATE ROLE ctas_analyst LOGIN;
GRANT USAGE ON FOREIGN SERVER ch_all TO ctas_analyst;
SET ROLE ctas_analyst;
-- sees catalogs and descriptors, never a password
SELECT name, options::text LIKE '%secret%' AS leaks FROM ctas_fed.catalogs ORDER BY name;
SELECT ctas_fed.catalog_descriptor('pg_all')::text LIKE '%secret%' AS leaks;
SELECT count(*) FROM pg_user_mappings WHERE umoptions::text LIKE '%secret%';
-- cannot create catalogs without USAGE on the wrapper
SELECT ctas_fed.register_catalog('mine', 'postgres', '{}');
-- cannot switch off password_required
CREATE USER MAPPING FOR ctas_analyst SERVER ch_all
  OPTIONS (user 'u', password_required 'false');
CREATE USER MAPPING FOR ctas_analyst SERVER ch_all
  OPTIONS (user 'u', password 'p', password_required 'true');
ALTER USER MAPPING FOR ctas_analyst SERVER ch_all
  OPTIONS (SET password_required 'false');
RESET ROLE;
-- a superuser can
ALTER USER MAPPING FOR ctas_analyst SERVER ch_all
  OPTIONS (SET password_required 'false');

-- clean up
DROP USER MAPPING FOR ctas_analyst SERVER ch_all;
REVOKE USAGE ON FOREIGN SERVER ch_all FROM ctas_analyst;
DROP ROLE ctas_analyst;
DROP SERVER other_fdw_server;
DROP FOREIGN DATA WRAPPER dummy;
DROP SERVER reg_pg, sql_pg, ch_copy, pg_copy;
SELECT name FROM ctas_fed.catalogs ORDER BY name;
