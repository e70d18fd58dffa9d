/*-------------------------------------------------------------------------
 *
 * partition.c
 *		  Continuous sync of a partitioned table (or of a query over one):
 *		  the partition tree followed as one table (docs/sync.md,
 *		  "Partitioned sources").
 *
 * The stream's publication names the root with publish_via_partition_root
 * = true: pgoutput then sends the changes of every partition, present or
 * future, as changes of the root, in the root's row type (a Relation
 * message names the root, and the attnums of a partition never matter), so
 * that the apply side (sync/apply.c) sees one table.  An UPDATE that moves
 * a row to another partition comes as a DELETE and an INSERT of the root.
 *
 * What this file adds to the sync of a plain table:
 *
 *	eligibility		every partition is a permanent plain table (logical
 *					decoding sees no foreign or unlogged partition) whose
 *					replica identity holds the sync's key (the root's), so
 *					that an UPDATE or DELETE of it sends the old key;
 *					checked at statement time, at every copy, and for every
 *					partition a DDL makes or changes (from the DDL's message)
 *	the copy		the leaves under the slot's snapshot, each row converted
 *					to the root's row type by column name, read in parallel
 *					(sync/partcopy.c); the partition
 *					tree is locked (SHARE UPDATE EXCLUSIVE on the root, which
 *					CREATE ... PARTITION OF, ATTACH, DETACH and DROP of a
 *					partition all conflict with) from before the slot is
 *					made to the end of the copy, so that the leaves read are
 *					exactly those of the snapshot
 *	partition DDL	the event trigger (sync/ddl.c) describes a command on a
 *					partition, or one that attaches or detaches one, in its
 *					message ("partitioned", "leaf", "delkeys" and "k",
 *					"rows" and "r", "resync" lines, written by
 *					sync/partition_ddl.c, read here), and a second event
 *					trigger
 *					(ddl_command_start, ctas_fed_partition_drops) writes one
 *					for DROP TABLE of a partition, whose catalog rows are
 *					gone by ddl_command_end.  ATTACH, DETACH and DROP change
 *					the rows of the query without a change in the WAL; the
 *					worker meets the message after every source transaction
 *					committed before the DDL's and
 *		- a new partition (CREATE TABLE ... PARTITION OF): nothing (the
 *		  "leaf" lines are checked);
 *		- ATTACH: upserts the rows of the table attached, DETACH or DROP:
 *		  deletes the keys of the partition's rows, which the message
 *		  carries as the DDL's transaction commits them (read under the
 *		  latest snapshot while the DDL's lock keeps every other writer off
 *		  the table: exact at any isolation level);
 *		- more than CTAS_PARTITION_KEYS_MAX rows, DETACH ... CONCURRENTLY
 *		  (writers are not kept off), a name the trigger cannot resolve:
 *		  resyncs the stream (sync/resync.c), the remote table keeping the
 *		  state before the DDL until a copy under a snapshot after it
 *		  replaces it atomically.
 *
 * Not seen by pgoutput under publish_via_partition_root: TRUNCATE of one
 * partition (only a TRUNCATE of the root is sent).  docs/sync.md says so;
 * ctas_fed.verify_sync() finds it and ctas_fed.resync() repairs it.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/partition.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/tupconvert.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/indexing.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_event_trigger.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_publication.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "replication/message.h"
#include "storage/lmgr.h"
#include "tcop/deparse_utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "sync/sync_int.h"

/*
 * The settings under which the sync worker reads the text of values
 * (sync/worker.c pin_text_settings), and the event triggers make the text
 * of the rows their messages carry (sync/partition_ddl.c).
 */
const char *const CtasSyncTextSettings[][2] = {
	{"datestyle", "ISO, MDY"},
	{"intervalstyle", "postgres"},
	{"extra_float_digits", "3"},
	{"bytea_output", "hex"},
	{"timezone", "UTC"},
	{"lc_monetary", "C"},
};
const int	CtasSyncNTextSettings = lengthof(CtasSyncTextSettings);

/*
 * What the schema change in flight deletes (keys) and inserts (the values
 * of the columns the job reads) (CtasSyncPartitionChange).
 */
List	   *CtasSyncPartitionDeletes = NIL;
List	   *CtasSyncPartitionInserts = NIL;


/*
 * CtasSyncPartitionIdentity
 *		The columns of leaf's replica identity as attnums of root (matched
 *		by name), into *attnums (palloc'd, *n of them); returns the
 *		identity's kind, REPLICA_IDENTITY_NOTHING when there is none to use.
 */
char
CtasSyncPartitionIdentity(Relation leaf, Oid root, AttrNumber **attnums,
						  int *n)
{
	char		ident = leaf->rd_rel->relreplident;
	Oid			indexoid;
	Relation	index;
	int			i;

	*n = 0;
	*attnums = NULL;
	if (ident == REPLICA_IDENTITY_FULL || ident == REPLICA_IDENTITY_NOTHING)
		return ident;
	indexoid = RelationGetReplicaIndex(leaf);
	if (!OidIsValid(indexoid))
		return REPLICA_IDENTITY_NOTHING;
	index = index_open(indexoid, AccessShareLock);
	*attnums = palloc(sizeof(AttrNumber) * Max(index->rd_index->indnkeyatts, 1));
	for (i = 0; i < index->rd_index->indnkeyatts; i++)
	{
		AttrNumber	a = index->rd_index->indkey.values[i];

		(*attnums)[(*n)++] = a == 0 ? InvalidAttrNumber :
			get_attnum(root, get_attname(RelationGetRelid(leaf), a, false));
	}
	index_close(index, AccessShareLock);
	return ident;
}

/*
 * leaf_problem
 *		Why partition relid of root cannot be followed by a sync whose key
 *		is keys (attnums of root), or NULL when it can.
 */
static char *
leaf_problem(Oid root, Oid relid, const AttrNumber *keys, int nkeys)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	char	   *why = NULL;
	AttrNumber *ident;
	int			n;
	int			k;
	int			i;

	if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE)
		why = psprintf("partition \"%s\" is a foreign table, whose changes logical decoding does not see",
					   RelationGetRelationName(rel));
	else if (rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT)
		why = psprintf("partition \"%s\" is unlogged, and logical decoding does not see its changes",
					   RelationGetRelationName(rel));
	else if (rel->rd_rel->relkind == RELKIND_RELATION &&
			 CtasSyncPartitionIdentity(rel, root, &ident, &n) != REPLICA_IDENTITY_FULL)
	{
		for (k = 0; k < nkeys && why == NULL; k++)
		{
			for (i = 0; i < n && ident[i] != keys[k]; i++)
				;
			if (i == n)
				why = psprintf("the replica identity of partition \"%s\" does not contain the key column \"%s\"",
							   RelationGetRelationName(rel),
							   get_attname(root, keys[k], false));
		}
	}
	relation_close(rel, AccessShareLock);
	return why;
}

/*
 * tree_problem
 *		leaf_problem of each partition under relid (relid too when it is
 *		one), all levels; NULL when every one can be followed.
 */
static char *
tree_problem(Oid root, Oid relid, const AttrNumber *keys, int nkeys)
{
	List	   *rels = find_all_inheritors(relid, AccessShareLock, NULL);
	ListCell   *lc;

	foreach(lc, rels)
	{
		char	   *why;

		if (lfirst_oid(lc) == root)
			continue;
		why = leaf_problem(root, lfirst_oid(lc), keys, nkeys);
		if (why != NULL)
			return why;
	}
	return NULL;
}

/*
 * CtasSyncPartitionCheck
 *		At statement time: when relid is a partitioned table, every
 *		partition of it can be followed with the key key_attnums (a List of
 *		attnums of relid); ereport(ERROR) naming the first that cannot.
 */
void
CtasSyncPartitionCheck(Oid relid, List *key_attnums)
{
	AttrNumber *keys;
	int			nkeys = 0;
	ListCell   *lc;
	char	   *why;

	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return;
	keys = palloc(sizeof(AttrNumber) * Max(list_length(key_attnums), 1));
	foreach(lc, key_attnums)
		keys[nkeys++] = (AttrNumber) lfirst_int(lc);
	why = tree_problem(relid, relid, keys, nkeys);
	if (why != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot sync partitioned table \"%s\": %s",
						get_rel_name(relid), why),
				 errdetail("A sync follows every partition of a partitioned table through logical decoding, by the key of the partitioned table."),
				 errhint("Give the partition a replica identity that contains the key (the primary key of the partitioned table is the default), or sync the other partitions one by one.")));
}

/*
 * CtasSyncPartitionPublication
 *		At statement time, for the publication name of a stream that is to
 *		carry relid: the options its CREATE PUBLICATION takes (a partitioned
 *		table publishes its partitions' changes as its own), or, when
 *		joining, the ALTER PUBLICATION that sets them (NULL: none).  A
 *		stream cannot carry a table and one of its partitions (pgoutput
 *		would send the partition's changes as the ancestor's only):
 *		ereport(ERROR) then.
 */
char *
CtasSyncPartitionPublication(const char *name, Oid relid, bool joining)
{
	bool		partitioned = get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE;
	Oid			pubid = joining ? get_publication_oid(name, false) : InvalidOid;

	if (joining)
	{
		List	   *rels = GetPublicationRelations(pubid, PUBLICATION_PART_ROOT);
		List	   *mine = get_partition_ancestors(relid);
		ListCell   *lc;

		if (partitioned)
			mine = list_concat(mine, find_all_inheritors(relid, NoLock, NULL));
		foreach(lc, rels)
		{
			/* another sync of the same table shares its membership */
			if (lfirst_oid(lc) == relid)
				continue;
			if (list_member_oid(mine, lfirst_oid(lc)) ||
				list_member_oid(get_partition_ancestors(lfirst_oid(lc)), relid))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot sync table \"%s\" and its partition or partitioned ancestor \"%s\" in one stream",
								get_rel_name(relid),
								get_rel_name(lfirst_oid(lc))),
						 errdetail("The stream publishes the changes of a partition as those of its partitioned table."),
						 errhint("Give one of the two syncs a stream of its own with the option stream = 'name'.")));
		}
		if (!partitioned)
			return NULL;
		return psprintf("ALTER PUBLICATION %s SET (publish_via_partition_root = true)",
						quote_identifier(name));
	}
	return partitioned ? " WITH (publish_via_partition_root = true)" : "";
}

/*
 * CtasSyncPartitionTriggerOn
 *		Whether a sync of relid sees every partition DDL: always for a table
 *		that is not partitioned; else the event trigger
 *		ctas_fed_partition_drops must exist and fire always, or a DROP of a
 *		partition would leave its rows on the remote.  In a transaction.
 */
bool
CtasSyncPartitionTriggerOn(Oid relid)
{
	HeapTuple	tup;
	bool		on;

	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
		return true;
	tup = SearchSysCache1(EVENTTRIGGERNAME,
						  CStringGetDatum("ctas_fed_partition_drops"));
	if (!HeapTupleIsValid(tup))
		return false;
	on = ((Form_pg_event_trigger) GETSTRUCT(tup))->evtenabled ==
		TRIGGER_FIRES_ALWAYS;
	ReleaseSysCache(tup);
	return on;
}

/*
 * CtasSyncPartitionLock
 *		In the copy's transaction, before the slot is made: lock the
 *		partition tree of each partitioned source of jobs (SyncJob
 *		pointers) against CREATE ... PARTITION OF, ATTACH, DETACH and DROP
 *		until the copy ends, so that the catalog shows the partitions of
 *		the slot's snapshot.  A DDL already waiting is applied before.
 */
void
CtasSyncPartitionLock(List *jobs)
{
	ListCell   *lc;

	foreach(lc, jobs)
	{
		SyncJob    *job = lfirst(lc);

		if (get_rel_relkind(job->relid) == RELKIND_PARTITIONED_TABLE)
			LockRelationOid(job->relid, ShareUpdateExclusiveLock);
	}
	/* the slot's snapshot must be the transaction's first */
	InvalidateCatalogSnapshot();
}

/*
 * CtasSyncPartitionCopy
 *		The copy of job's partitioned source rel (sync/join.c copy_job):
 *		each leaf scanned under the active snapshot, each of its rows given
 *		to row (with arg) in a slot of the root's row type, in the
 *		current memory context.  With parallel, and two leaves or more,
 *		the leaves are read by parallel workers (sync/partcopy.c), row
 *		still called here; else, or when no worker starts, one after the
 *		other.  A partition the sync cannot follow fails the job.
 */
void
CtasSyncPartitionCopy(SyncJob *job, Relation rel, bool parallel,
					  void (*row) (TupleTableSlot *slot, void *arg),
					  void *arg)
{
	Oid			root = RelationGetRelid(rel);
	TupleDesc	rootdesc = RelationGetDescr(rel);
	TupleTableSlot *rootslot;
	AttrNumber *keys = palloc(sizeof(AttrNumber) * Max(job->target.nkeys, 1));
	List	   *rels = find_all_inheritors(root, AccessShareLock, NULL);
	List	   *leaves = NIL;
	ListCell   *lc;
	int			k;
	char	   *why;

	for (k = 0; k < job->target.nkeys; k++)
		keys[k] = job->attnums[job->keycol[k]];
	why = tree_problem(root, root, keys, job->target.nkeys);
	if (why != NULL)
		SYNC_FAIL(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				  errmsg("sync " INT64_FORMAT " cannot follow partitioned table \"%s\": %s",
						 job->id, RelationGetRelationName(rel), why),
				  errhint("Stop the sync with ctas_fed.stop_sync(), fix the partition and create it again (docs/sync.md, \"Partitioned sources\")."));

	foreach(lc, rels)
	{
		if (get_rel_relkind(lfirst_oid(lc)) == RELKIND_RELATION)
			leaves = lappend_oid(leaves, lfirst_oid(lc));
	}
	if (parallel && list_length(leaves) >= 2 &&
		CtasSyncPartitionCopyParallel(rel, leaves, row, arg))
		return;

	rootslot = MakeSingleTupleTableSlot(rootdesc, &TTSOpsVirtual);
	foreach(lc, leaves)
		CtasSyncPartitionScan(lfirst_oid(lc), rootdesc, rootslot, row, arg);
	ExecDropSingleTupleTableSlot(rootslot);
}

/*
 * decode_keys
 *		The n values of a "k" or "r" line (row_lines), each after a space,
 *		as text, palloc'd (NULL for \N).
 */
static char **
decode_keys(const char *p, int n)
{
	char	  **keys = palloc0(sizeof(char *) * Max(n, 1));
	int			k;

	for (k = 0; k < n; k++)
	{
		StringInfoData v;

		initStringInfo(&v);
		if (*p == ' ')
			p++;
		/* NULL (only in "r" lines) */
		if (p[0] == '\\' && p[1] == 'N' && (p[2] == ' ' || p[2] == '\0'))
		{
			keys[k] = NULL;
			p += 2;
			continue;
		}
		for (; *p != '\0' && *p != ' '; p++)
		{
			if (*p == '\\' && p[1] != '\0')
			{
				p++;
				appendStringInfoChar(&v, *p == 's' ? ' ' :
									 *p == 'n' ? '\n' : *p);
			}
			else
				appendStringInfoChar(&v, *p);
		}
		keys[k] = v.data;
	}
	return keys;
}

/*
 * CtasSyncPartitionChange
 *		In the worker, the lines of an event trigger's message about
 *		job's partitioned source: NULL when the partitions it describes
 *		can be followed as they are, else why not; a command that
 *		attached, detached or dropped a partition returns why and sets
 *		CtasSyncResyncWanted (the caller resyncs the stream rather than
 *		fail the job).
 */
char *
CtasSyncPartitionChange(SyncJob *job, List *lines, const char *command)
{
	ListCell   *lc;
	bool		keys_ok = false;
	int			ncols = 0;
	int		   *pos = palloc(sizeof(int) * Max(job->ncols, 1));
	int			i;

	CtasSyncPartitionDeletes = NIL;
	CtasSyncPartitionInserts = NIL;

	/* where each column the job reads is in an "r" line: the "col" order */
	for (i = 0; i < job->ncols; i++)
		pos[i] = -1;
	foreach(lc, lines)
	{
		int			attnum;
		unsigned int typid;

		if (sscanf((char *) lfirst(lc), "col %d %u", &attnum, &typid) != 2)
			continue;
		for (i = 0; i < job->ncols; i++)
		{
			if (job->attnums[i] == attnum)
				pos[i] = ncols;
		}
		ncols++;
	}

	foreach(lc, lines)
	{
		char	   *line = lfirst(lc);
		unsigned int oid;
		int			off = 0;
		int			k;

		if (strncmp(line, "delkeys", 7) == 0)
		{
			char	   *q = line + 7;

			/* the keys of the rows that leave: the job's key? */
			keys_ok = true;
			for (k = 0; k < job->target.nkeys && keys_ok; k++)
				keys_ok = *q == ' ' &&
					strtol(q + 1, &q, 10) == job->attnums[job->keycol[k]];
			keys_ok &= *q == '\0';
			if (!keys_ok)
			{
				CtasSyncResyncWanted = true;
				return psprintf("the rows of a partition left the source of sync " INT64_FORMAT " by a key other than the sync's: %s",
								job->id, command);
			}
			continue;
		}
		if (keys_ok && line[0] == 'k' && (line[1] == ' ' || line[1] == '\0'))
		{
			CtasSyncPartitionDeletes = lappend(CtasSyncPartitionDeletes,
											   decode_keys(line + 1,
														   job->target.nkeys));
			continue;
		}
		if (line[0] == 'r' && (line[1] == ' ' || line[1] == '\0'))
		{
			char	  **all = decode_keys(line + 1, ncols);
			char	  **values = palloc0(sizeof(char *) * Max(job->ncols, 1));

			for (i = 0; i < job->ncols; i++)
			{
				/* a column gone: the checks of the message fail the job */
				if (pos[i] < 0)
					return NULL;
				values[i] = all[pos[i]];
			}
			CtasSyncPartitionInserts = lappend(CtasSyncPartitionInserts,
											   values);
			continue;
		}
		if (strncmp(line, "resync ", 7) == 0)
		{
			CtasSyncResyncWanted = true;
			return psprintf("partition %s of the source of sync " INT64_FORMAT ": %s",
							line + 7, job->id, command);
		}
		if (sscanf(line, "leaf %u %n", &oid, &off) != 1 || off == 0)
			continue;
		line += off;
		if (strcmp(line, "-") == 0)
			continue;
		if (strncmp(line, "ident ", 6) != 0)
			return psprintf("a partition of the source of sync " INT64_FORMAT " is %s, and logical decoding does not see its changes: %s",
							job->id, line, command);
		if (line[6] == REPLICA_IDENTITY_FULL)
			continue;
		for (k = 0; k < job->target.nkeys; k++)
		{
			AttrNumber	key = job->attnums[job->keycol[k]];
			bool		found = false;
			char	   *q = line + 7;

			while (*q == ' ')
				found |= strtol(q + 1, &q, 10) == key;
			if (!found)
				return psprintf("the replica identity of a partition of the source of sync " INT64_FORMAT " does not contain the key column \"%s\": %s",
								job->id, job->attnames[job->keycol[k]],
								command);
		}
	}
	return NULL;
}

/*
 * CtasSyncPartitionResync
 *		In the worker, after the error of a partition DDL that asked for a
 *		resync (CtasSyncResyncWanted): the jobs of stream_id that stream
 *		and read source (every one of the stream when source is InvalidOid)
 *		are marked "copying" in a transaction of their own, so that the
 *		next worker copies them again under a snapshot after the DDL (a
 *		join of the running stream, sync/worker.c; or the stream's new slot
 *		when no job is left streaming).  The other syncs of the stream go
 *		on.  The remote tables keep the source transactions committed before
 *		the DDL's until then.  Outside a transaction.
 */
void
CtasSyncPartitionResync(int64 stream_id, Oid source, const char *why)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	CtasSyncMarkCopyAgain(stream_id, source);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	ereport(LOG,
			(errmsg("ctas_fed stream " INT64_FORMAT ": %s, resyncing the remote tables of %s from a new snapshot",
					stream_id, why,
					OidIsValid(source) ? "its source" : "every sync")));
}
