/*-------------------------------------------------------------------------
 *
 * record.c
 *		  The durable records of the ClickHouse target's transactions:
 *		  written before the first remote effect of each action, read by
 *		  the resolver after a crash (resolve.c).  The format and its
 *		  rules are in the section banner below.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/record.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "clickhouse.h"
#include "xrecord.h"

/* ------------------------------------------------------------------------
 * Durable records
 *
 * Before the first remote effect of an action (its staging table, or for
 * DROP TABLE the rename at pre-commit) the participant writes the list of
 * its actions, oldest first, with every table name each one uses, to
 * pg_ctas_fed/ch_<full xid>_<server oid>_<user mapping oid> in the data
 * directory: a new file is written and fsync'd, then renamed over the old
 * one (durable_rename).  The file goes when the transaction is finished
 * (post_commit) or undone (abort); if that does not happen (a crash, an
 * unreachable server) the resolver reads it, decides from the local
 * transaction's status, and finishes or undoes the transaction as a whole.
 * The resolver acts on nothing else: a table that no record names is
 * never touched, whatever its name.
 *
 * The writing backend holds an exclusive flock() on the record from the
 * first write until the transaction is over (the kernel drops it if the
 * backend dies), so that a resolver never works on a transaction whose
 * own backend is still finishing it.
 *
 * The file is written, locked, checksummed and removed by xrecord.c, as
 * the MySQL target's records are.  Format: tab-separated lines, escaped as
 * ClickHouse's TabSeparated (read back with CtasChTsv).  The first line is
 *		ctas_fed clickhouse	1	<full xid>	<database oid>	<server oid>
 *		<user mapping oid>	<gid>
 * and each action is
 *		<kind>	<database>	<table>	<stage>	<old>	<marker>	<shard>
 * with \N for a name the action does not have; shard is 0 for the
 * catalog's url, else the shard (from 1) of a cluster catalog
 * (shard_urls) the action is on.  Version 1 records, written before
 * clusters, have no shard field.  The last line is
 *		crc32c	<CRC-32C of every byte before this line, 8 hex digits>
 * A record that does not end so, or whose lines do not have these fields,
 * is damaged (a disk, a copy or a hand went wrong): the resolver does not
 * act on a part of a transaction, nor on names it cannot trust, and keeps
 * the file, with a WARNING, for someone to look at.
 * ------------------------------------------------------------------------
 */

/* by ChActionKind */
const char *const CtasChActionNames[CH_DROP + 1] = {
	"create", "replace", "append", "drop"
};

/*
 * CtasChRecordGid
 *		What ctas_fed.jobs and the resolver call this participant's remote
 *		work: db.name of the first action's marker, old or staging table.
 *		NULL without actions.  Palloc'd.
 */
char *
CtasChRecordGid(ChXact *xs)
{
	ChAction   *first;

	if (xs->staged.actions == NIL)
		return NULL;
	first = linitial(xs->staged.actions);
	return CtasChDisplay(first->base.db,
					  first->base.marker ? first->base.marker :
					  first->base.old ? first->base.old : first->base.stage);
}

/*
 * CtasChRecordWrite
 *		Write the durable record of part (see above; xrecord.c writes,
 *		locks and checksums it) with the actions of xs as they are now.
 *		ERROR on an I/O failure, before any remote effect of the newest
 *		action.
 */
void
CtasChRecordWrite(CtasParticipant *part, ChXact *xs)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	CtasRecordHeader(&buf, CH_RECORD_MAGIC, CH_RECORD_VERSION,
					 part->serverid, part->umid, CtasChRecordGid(xs));
	foreach(lc, xs->staged.actions)
	{
		ChAction   *a = lfirst(lc);

		CtasRecordField(&buf, CtasChActionNames[a->kind], false);
		CtasRecordField(&buf, a->base.db, false);
		CtasRecordField(&buf, a->base.table, false);
		CtasRecordField(&buf, a->base.stage, false);
		CtasRecordField(&buf, a->base.old, false);
		CtasRecordField(&buf, a->base.marker, false);
		appendStringInfo(&buf, "%d\n", a->shard);
	}
	CtasRecordWrite(xs->staged.record_path, &xs->staged.record_fd, CH_RECORD_PREFIX,
					part->serverid, part->umid, &buf);
	pfree(buf.data);
}
