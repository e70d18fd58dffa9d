/*-------------------------------------------------------------------------
 *
 * verify.c
 *		  Resync of a continuous sync into a ClickHouse catalog: the
 *		  optional rebuild and rebuilt members of CtasChSyncApply
 *		  (target.h, sync/resync.c).
 *
 * A synced table is a ReplacingMergeTree(_version) read with FINAL
 * (sync.c), and ClickHouse 18.16 has no transaction and no atomic exchange
 * of two tables (two RENAMEs leave a moment with no table at all, and a
 * crash between them leaves it gone).  A copy into a table that readers
 * already read therefore goes into the table itself, by version, without
 * the delete rows that a first copy's truncate writes:
 *
 *	rebuild		nothing: the copy's rows (version C - 2, sync.c) win over
 *				every older row of their key, one key at a time, so that a
 *				reader sees each key's old or new row, never none
 *	rebuilt		after the copy's rows are in: a delete row of version
 *				C - 2 for every key whose newest row is older than C - 2,
 *				that is every key the copy did not have (gone from the
 *				source since, or never there)
 *
 * The job is "streaming" again only after rebuilt (sync/worker.c records it
 * after the copy), so a failure anywhere copies again with a new slot and a
 * new C, which rebuilt then cleans up after: it is idempotent.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/verify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "clickhouse.h"

/*
 * CtasChSyncRebuild
 *		Before the rows of a resync: they go into the table as they are.
 */
void
CtasChSyncRebuild(CtasSyncTarget *t)
{
}

/*
 * CtasChSyncRebuilt
 *		After the copy committed at consistent point t->change_lsn: delete
 *		every key the copy did not write.  Its own HTTP client, freed with
 *		a memory context of its own.  ERROR on a failed request.
 */
void
CtasChSyncRebuilt(CtasSyncTarget *t)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "ctas_fed sync rebuilt",
											  ALLOCSET_SMALL_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	CtasHttp   *http = CtasHttpCreate(t->catalog, cxt);
	char	   *qtable = CtasChQname(t->schema, t->table);
	uint64		version = t->change_lsn - 2;
	StringInfoData keys;
	int			i;

	initStringInfo(&keys);
	for (i = 0; i < t->nkeys; i++)
	{
		CtasChAppendIdent(&keys, t->keys[i]);
		appendStringInfoString(&keys, ", ");
	}
	CtasHttpQuery(http,
				  psprintf("INSERT INTO %s (%s_version, _deleted) "
						   "SELECT %stoUInt64(" UINT64_FORMAT "), 1 FROM %s FINAL "
						   "WHERE _deleted = 0 AND _version < " UINT64_FORMAT,
						   qtable, keys.data, keys.data, version, qtable,
						   version),
				  "delete the rows a resync did not copy");
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);
}
