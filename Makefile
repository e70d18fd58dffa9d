# contrib-style PGXS Makefile for ctas_fed
#
# make              build
# make install      install into the PostgreSQL found by PG_CONFIG
# make test         install what is missing (as root), build, install, then run
#                   pg_regress on a throwaway instance and every TAP test
# make demo         the same bootstrap, then a federated CTAS into each kind
#                   of catalog on throwaway servers

MODULE_big = ctas_fed
OBJS = \
	src/ctas_fed.o \
	src/catalog.o \
	src/ctas.o \
	src/clickhouse/client.o \
	src/clickhouse/ddl.o \
	src/clickhouse/resolve.o \
	src/clickhouse/rowbinary.o \
	src/clickhouse/types.o \
	src/clickhouse/writer.o \
	src/clickhouse/xact.o \
	src/guc.o \
	src/hosts.o \
	src/http/curl.o \
	src/jobs.o \
	src/metrics.o \
	src/postgres/connection.o \
	src/postgres/resolve.o \
	src/postgres/typemap.o \
	src/postgres/writer.o \
	src/remote.o \
	src/typemap.o \
	src/utility.o \
	src/worker.o \
	src/xact.o

EXTENSION = ctas_fed
DATA = ctas_fed--0.1.sql
PGFILEDESC = "ctas_fed - federated CREATE TABLE AS into external catalogs"

REGRESS = catalog postgres types
REGRESS_OPTS = --temp-config=$(srcdir)/test/ctas_fed.conf

PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)

PG_CPPFLAGS = -I$(libpq_srcdir) -I$(srcdir)/src
PG_CFLAGS = -Werror
SHLIB_LINK_INTERNAL = $(libpq)
SHLIB_LINK = -lcurl

include $(PGXS)

.PHONY: test demo bench
test:
	bash test/run.sh

demo:
	bash test/demo.sh

bench:
	bash test/bench/run.sh
