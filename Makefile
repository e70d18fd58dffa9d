# contrib-style PGXS Makefile for ctas_fed
#
# make              build (PG_CONFIG: pg_config on PATH, else the Debian one)
# make install      install into the PostgreSQL found by PG_CONFIG
# make deps         as root: apt-get install the build and test packages
#                   that are missing (test/bootstrap.sh)
# make test         make deps, then build with -Werror, install, and run
#                   pg_regress on a throwaway instance and every TAP test
# make demo         make deps, then a federated CTAS into each kind of
#                   catalog on throwaway servers
#
# CTAS_WERROR=1 turns compiler warnings into errors (make test and CI do);
# a plain "make" does not, so that a newer compiler cannot break a build.

MODULE_big = ctas_fed
OBJS = \
	src/ctas_fed.o \
	src/catalog.o \
	src/ctas.o \
	src/ctas_prepare.o \
	src/targets.o \
	src/staged.o \
	src/clickhouse/answer.o \
	src/clickhouse/cityhash.o \
	src/clickhouse/client.o \
	src/clickhouse/cluster.o \
	src/clickhouse/ddl.o \
	src/clickhouse/record.o \
	src/clickhouse/resolve.o \
	src/clickhouse/rowbinary.o \
	src/clickhouse/shardkey.o \
	src/clickhouse/stage.o \
	src/clickhouse/sync.o \
	src/clickhouse/sync_rows.o \
	src/clickhouse/sync_keep.o \
	src/clickhouse/sync_alter.o \
	src/clickhouse/types.o \
	src/clickhouse/verify.o \
	src/clickhouse/writer.o \
	src/clickhouse/xact.o \
	src/gid.o \
	src/guc.o \
	src/hosts.o \
	src/http/curl.o \
	src/jobs.o \
	src/jobs_file.o \
	src/jobshards.o \
	src/metrics.o \
	src/options.o \
	src/multi.o \
	src/mysql/conn.o \
	src/mysql/resolve.o \
	src/mysql/sync.o \
	src/mysql/types.o \
	src/mysql/verify.o \
	src/mysql/writer.o \
	src/mysql/xact.o \
	src/parallel.o \
	src/parallel_worker.o \
	src/postgres/connection.o \
	src/postgres/exec.o \
	src/postgres/copy.o \
	src/postgres/deparse.o \
	src/postgres/parallel.o \
	src/postgres/pipeline.o \
	src/postgres/resolve.o \
	src/postgres/sync.o \
	src/postgres/sync_batch.o \
	src/postgres/sync_sql.o \
	src/postgres/typemap.o \
	src/postgres/verify.o \
	src/postgres/writer.o \
	src/postgres/xact.o \
	src/sqlfuncs.o \
	src/sync/apply.o \
	src/syncbatch.o \
	src/sync/check.o \
	src/sync/copy.o \
	src/sync/ddl.o \
	src/sync/follow.o \
	src/sync/schemalog.o \
	src/sync/join.o \
	src/sync/joincopy.o \
	src/sync/merge.o \
	src/sync/message.o \
	src/sync/partcopy.o \
	src/sync/partition.o \
	src/sync/partition_ddl.o \
	src/sync/resync.o \
	src/sync/reshape.o \
	src/sync/slot.o \
	src/sync/statement.o \
	src/sync/status.o \
	src/sync/syncs.o \
	src/sync/syncs_query.o \
	src/sync/tick.o \
	src/sync/toast.o \
	src/sync/verify.o \
	src/sync/worker.o \
	src/typemap.o \
	src/utility.o \
	src/workers/bgworker.o \
	src/workers/launcher.o \
	src/workers/notifier.o \
	src/workers/resolver.o \
	src/xact.o \
	src/xrecord.o

EXTENSION = ctas_fed
DATA = ctas_fed--0.1.sql ctas_fed--0.1--0.2.sql ctas_fed--0.2--0.3.sql
PGFILEDESC = "ctas_fed - federated CREATE TABLE AS into external catalogs"

REGRESS = catalog postgres types clickhouse mysql
REGRESS_OPTS = --temp-config=$(srcdir)/test/ctas_fed.conf

PG_CONFIG ?= pg_config
ifeq ($(PG_CONFIG),pg_config)
ifeq ($(shell command -v pg_config 2>/dev/null),)
PG_CONFIG = /usr/lib/postgresql/15/bin/pg_config
endif
endif
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)

PG_CPPFLAGS = -I$(libpq_srcdir) -I$(srcdir)/src
ifeq ($(CTAS_WERROR),1)
PG_CFLAGS = -Werror
endif
SHLIB_LINK_INTERNAL = $(libpq)
SHLIB_LINK = -lcurl $(shell pkg-config --libs libmariadb 2>/dev/null || mariadb_config --libs)
PG_CPPFLAGS += $(shell pkg-config --cflags libmariadb 2>/dev/null || mariadb_config --include)

# "make deps" (and "make test" or "make demo" on a fresh machine) must work
# before pg_config is installed
ifneq ($(PGXS),)
include $(PGXS)
else ifneq ($(filter-out deps test demo,$(or $(MAKECMDGOALS),all)),)
$(error $(PG_CONFIG) not found: install postgresql-server-dev-15 ("make deps" as root) or set PG_CONFIG)
endif

# PGXS tracks header dependencies only when PostgreSQL was configured with
# --enable-depend: make every object depend on every header of ours, so that
# a changed struct never meets an object compiled against the old one.
$(OBJS): $(wildcard src/*.h src/*/*.h)

.PHONY: deps test demo bench
deps:
	bash test/bootstrap.sh

test: deps
	bash test/run.sh

demo: deps
	bash test/demo.sh

bench:
	bash test/bench/run.sh
