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
 *					to the root's row type by column name; the partition
 *					tree is locked (SHARE UPDATE EXCLUSIVE on the root, which
 *					CREATE ... PARTITION OF, ATTACH, DETACH and DROP of a
 *					partition all conflict with) from before the slot is
 *					made to the end of the copy, so that the leaves read are
 *					exactly those of the snapshot
 *	partition DDL	the event trigger (sync/ddl.c) describes a command on a
 *					partition, or one that attaches or detaches one, in its
 *					message ("partitioned", "leaf", "delkeys" and "k",
 *					"rows" and "r", "resync" lines, written here), and a
 *					second event trigger
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
#include "access/table.h"
#include "access/tableam.h"
#include "access/tupconvert.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "access/stratnum.h"
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

PG_FUNCTION_INFO_V1(ctas_fed_partition_drop_trigger);

/* the schema change in flight asks for a resync, not a failure */
bool		CtasSyncResyncWanted = false;

/*
 * What the schema change in flight deletes (keys) and inserts (the values
 * of the columns the job reads) (CtasSyncPartitionChange).
 */
List	   *CtasSyncPartitionDeletes = NIL;
List	   *CtasSyncPartitionInserts = NIL;

/*
 * An ATTACH, DETACH or DROP of a partition with more rows than this
 * resyncs the stream rather than carry its rows or their keys in its
 * message.
 */
#define CTAS_PARTITION_KEYS_MAX		100000
/* ... or more text than this (a logical message is at most 1 GB) */
#define CTAS_PARTITION_BYTES_MAX	(64 * 1024 * 1024)

/*
 * identity_attnums
 *		The columns of leaf's replica identity as attnums of root (matched
 *		by name), into *attnums (palloc'd, *n of them); returns the
 *		identity's kind, REPLICA_IDENTITY_NOTHING when there is none to use.
 */
static char
identity_attnums(Relation leaf, Oid root, AttrNumber **attnums, int *n)
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
			 identity_attnums(rel, root, &ident, &n) != REPLICA_IDENTITY_FULL)
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
			if (list_member_oid(mine, lfirst_oid(lc)) ||
				list_member_oid(get_partition_ancestors(lfirst_oid(lc)), relid))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot sync table \"%s\" and its partition or partitioned ancestor \"%s\" in one stream",
								get_rel_name(relid),
								get_rel_name(lfirst_oid(lc))),
						 errdetail("The stream publishes the changes of a partition as those of its partitioned table."),
						 errhint("Sync them in separate statements.")));
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
 *		The copy of job's partitioned source rel (sync/worker.c copy_job):
 *		each leaf scanned under the active snapshot, each of its rows given
 *		to row (with arg) in a slot of the root's row type, in the
 *		current memory context.  A partition the sync cannot follow fails
 *		the job.
 */
void
CtasSyncPartitionCopy(SyncJob *job, Relation rel,
					  void (*row) (TupleTableSlot *slot, void *arg),
					  void *arg)
{
	Oid			root = RelationGetRelid(rel);
	TupleDesc	rootdesc = RelationGetDescr(rel);
	TupleTableSlot *rootslot = MakeSingleTupleTableSlot(rootdesc,
														&TTSOpsVirtual);
	AttrNumber *keys = palloc(sizeof(AttrNumber) * Max(job->target.nkeys, 1));
	List	   *rels = find_all_inheritors(root, AccessShareLock, NULL);
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
		Relation	leaf;
		TupleTableSlot *hslot;
		TableScanDesc scan;
		TupleConversionMap *map;

		if (get_rel_relkind(lfirst_oid(lc)) != RELKIND_RELATION)
			continue;
		leaf = table_open(lfirst_oid(lc), AccessShareLock);
		map = convert_tuples_by_name(RelationGetDescr(leaf), rootdesc);
		hslot = table_slot_create(leaf, NULL);
		scan = table_beginscan(leaf, GetActiveSnapshot(), 0, NULL);
		while (table_scan_getnextslot(scan, ForwardScanDirection, hslot))
		{
			CHECK_FOR_INTERRUPTS();
			row(map != NULL ?
				execute_attr_map_slot(map->attrMap, hslot, rootslot) : hslot,
				arg);
		}
		table_endscan(scan);
		ExecDropSingleTupleTableSlot(hslot);
		if (map != NULL)
			free_conversion_map(map);
		table_close(leaf, AccessShareLock);
	}
	ExecDropSingleTupleTableSlot(rootslot);
}

/* the name of the partition an ATTACH or DETACH PARTITION names */
static const char *
partition_name(AlterTableCmd *at)
{
	PartitionCmd *pc = (PartitionCmd *) at->def;

	if (pc == NULL || !IsA(pc, PartitionCmd) || pc->name == NULL)
		return "?";
	return quote_identifier(pc->name->relname);
}

/*
 * named_table
 *		The table rv names, when the name tells it without a search_path
 *		(the event trigger runs under its own): qualified, or the only
 *		child of parent so named (attached), or the only table so named in
 *		the database (detached).  InvalidOid when it does not.
 */
static Oid
named_table(RangeVar *rv, Oid parent)
{
	Oid			found = InvalidOid;
	int			n = 0;
	ListCell   *lc;

	if (rv->schemaname != NULL)
	{
		Oid			nsp = get_namespace_oid(rv->schemaname, true);

		return OidIsValid(nsp) ? get_relname_relid(rv->relname, nsp) :
			InvalidOid;
	}
	if (OidIsValid(parent))
	{
		foreach(lc, find_inheritance_children(parent, NoLock))
		{
			if (strcmp(get_rel_name(lfirst_oid(lc)), rv->relname) == 0)
			{
				found = lfirst_oid(lc);
				n++;
			}
		}
	}
	else
	{
		Relation	pg_class = table_open(RelationRelationId, AccessShareLock);
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tup;

		ScanKeyInit(&key, Anum_pg_class_relname, BTEqualStrategyNumber,
					F_NAMEEQ, CStringGetDatum(rv->relname));
		scan = systable_beginscan(pg_class, ClassNameNspIndexId, true, NULL,
								  1, &key);
		while (HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			Form_pg_class c = (Form_pg_class) GETSTRUCT(tup);

			if (c->relkind == RELKIND_RELATION ||
				c->relkind == RELKIND_PARTITIONED_TABLE ||
				c->relkind == RELKIND_FOREIGN_TABLE)
			{
				found = c->oid;
				n++;
			}
		}
		systable_endscan(scan);
		table_close(pg_class, AccessShareLock);
	}
	return n == 1 ? found : InvalidOid;
}

/*
 * row_lines
 *		The rows of the leaves under relid, read under the latest snapshot:
 *		with whole, "rows" and a line "r <value>..." per row with each live
 *		column of root in attnum order (the order of the "col" lines of the
 *		message and of pgoutput's tuples), NULL as \N; else "delkeys
 *		<attnum>..." (the key of root: its replica identity index, else its
 *		primary key, as sync/statement.c derives a sync's key) and a line
 *		"k <value>..." per row.  Each value is the text of its type made
 *		under the sync worker's settings (sync/worker.c pin_text_settings),
 *		a space escaped as \s, a newline as \n, a backslash as \\.  The
 *		caller holds a lock that keeps every other writer off relid: the
 *		rows are those the DDL's transaction commits with.  False, having
 *		written nothing, when root has no such key, or relid more than max
 *		rows or than CTAS_PARTITION_BYTES_MAX of text.
 */
static bool
row_lines(StringInfo buf, Oid root, Oid relid, int64 max, bool whole)
{
	Relation	rootrel = relation_open(root, AccessShareLock);
	TupleDesc	rootdesc = RelationGetDescr(rootrel);
	int			ncols = 0;
	AttrNumber *cols = palloc(sizeof(AttrNumber) * Max(rootdesc->natts, 1));
	AttrNumber *leafcols = palloc(sizeof(AttrNumber) * Max(rootdesc->natts, 1));
	FmgrInfo   *out_funcs;
	StringInfoData out;
	Snapshot	snap;
	MemoryContext rowcxt;
	int64		rows = 0;
	int			nestlevel;
	int			i;
	ListCell   *lc;
	static const char *const pinned[][2] = {
		{"datestyle", "ISO, MDY"},
		{"intervalstyle", "postgres"},
		{"extra_float_digits", "3"},
		{"bytea_output", "hex"},
		{"timezone", "UTC"},
		{"lc_monetary", "C"},
	};

	if (whole)
	{
		for (i = 0; i < rootdesc->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(rootdesc, i);

			if (!att->attisdropped && !att->attgenerated)
				cols[ncols++] = att->attnum;
		}
	}
	else
	{
		Oid			indexoid = RelationGetReplicaIndex(rootrel);
		Relation	index;

		if (!OidIsValid(indexoid))
			indexoid = RelationGetPrimaryKeyIndex(rootrel);
		if (!OidIsValid(indexoid))
		{
			relation_close(rootrel, AccessShareLock);
			return false;
		}
		index = index_open(indexoid, AccessShareLock);
		for (i = 0; i < index->rd_index->indnkeyatts; i++)
			cols[ncols++] = index->rd_index->indkey.values[i];
		index_close(index, AccessShareLock);
	}
	relation_close(rootrel, AccessShareLock);
	out_funcs = palloc(sizeof(FmgrInfo) * Max(ncols, 1));
	for (i = 0; i < ncols; i++)
	{
		Oid			typoutput;
		bool		isvarlena;

		getTypeOutputInfo(get_atttype(root, cols[i]), &typoutput, &isvarlena);
		fmgr_info(typoutput, &out_funcs[i]);
	}

	initStringInfo(&out);
	appendStringInfoString(&out, whole ? "rows" : "delkeys");
	for (i = 0; !whole && i < ncols; i++)
		appendStringInfo(&out, " %d", cols[i]);
	appendStringInfoChar(&out, '\n');

	nestlevel = NewGUCNestLevel();
	for (i = 0; i < lengthof(pinned); i++)
		(void) set_config_option(pinned[i][0], pinned[i][1], PGC_SUSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
								 false);
	snap = RegisterSnapshot(GetLatestSnapshot());
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "ctas_fed partition row",
								   ALLOCSET_DEFAULT_SIZES);
	foreach(lc, find_all_inheritors(relid, AccessShareLock, NULL))
	{
		Relation	leaf;
		TupleTableSlot *slot;
		TableScanDesc scan;

		if (get_rel_relkind(lfirst_oid(lc)) != RELKIND_RELATION)
			continue;
		leaf = table_open(lfirst_oid(lc), AccessShareLock);
		for (i = 0; i < ncols; i++)
			leafcols[i] = get_attnum(RelationGetRelid(leaf),
									 get_attname(root, cols[i], false));
		slot = table_slot_create(leaf, NULL);
		scan = table_beginscan(leaf, snap, 0, NULL);
		while (rows <= max &&
			   table_scan_getnextslot(scan, ForwardScanDirection, slot))
		{
			MemoryContext oldcxt;

			CHECK_FOR_INTERRUPTS();
			if (++rows > max || out.len > CTAS_PARTITION_BYTES_MAX)
			{
				rows = max + 1;
				break;
			}
			MemoryContextReset(rowcxt);
			oldcxt = MemoryContextSwitchTo(rowcxt);
			appendStringInfoChar(&out, whole ? 'r' : 'k');
			for (i = 0; i < ncols; i++)
			{
				bool		isnull;
				Datum		d = slot_getattr(slot, leafcols[i], &isnull);
				char	   *v;

				appendStringInfoChar(&out, ' ');
				if (isnull)
				{
					appendStringInfoString(&out, "\\N");
					continue;
				}
				for (v = OutputFunctionCall(&out_funcs[i], d); *v; v++)
				{
					if (*v == ' ')
						appendStringInfoString(&out, "\\s");
					else if (*v == '\n')
						appendStringInfoString(&out, "\\n");
					else if (*v == '\\')
						appendStringInfoString(&out, "\\\\");
					else
						appendStringInfoChar(&out, *v);
				}
			}
			appendStringInfoChar(&out, '\n');
			MemoryContextSwitchTo(oldcxt);
		}
		table_endscan(scan);
		ExecDropSingleTupleTableSlot(slot);
		table_close(leaf, AccessShareLock);
	}
	UnregisterSnapshot(snap);
	MemoryContextDelete(rowcxt);
	AtEOXact_GUC(true, nestlevel);
	if (rows > max)
	{
		pfree(out.data);
		return false;
	}
	if (buf != NULL)
		appendBinaryStringInfo(buf, out.data, out.len);
	pfree(out.data);
	return true;
}

/* "leaf" lines: each partition under relid as it is now, for the worker */
static void
leaf_lines(StringInfo buf, Oid source, Oid relid)
{
	ListCell   *lc;

	foreach(lc, find_all_inheritors(relid, AccessShareLock, NULL))
	{
		Relation	rel = relation_open(lfirst_oid(lc), AccessShareLock);
		AttrNumber *ident;
		int			n;
		int			i;

		appendStringInfo(buf, "leaf %u ", lfirst_oid(lc));
		if (rel->rd_rel->relkind == RELKIND_FOREIGN_TABLE)
			appendStringInfoString(buf, "foreign\n");
		else if (rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT)
			appendStringInfoString(buf, "unlogged\n");
		else if (rel->rd_rel->relkind != RELKIND_RELATION)
			appendStringInfoString(buf, "-\n");
		else
		{
			char		kind = identity_attnums(rel, source, &ident, &n);

			appendStringInfo(buf, "ident %c", kind);
			for (i = 0; i < n; i++)
				appendStringInfo(buf, " %d", ident[i]);
			appendStringInfoChar(buf, '\n');
		}
		relation_close(rel, AccessShareLock);
	}
}

/*
 * attach_lines
 *		ATTACH PARTITION under parent (source or one of its partitions):
 *		the rows of the table attached, which join the query's result
 *		(row_lines; the ATTACH holds the lock that keeps writers off it),
 *		and its partitions ("leaf" lines); a resync when it has more than
 *		CTAS_PARTITION_KEYS_MAX rows or the trigger cannot name it.
 */
static void
attach_lines(StringInfo buf, Oid source, Oid parent, AlterTableCmd *at)
{
	PartitionCmd *pc = (PartitionCmd *) at->def;
	Oid			part = InvalidOid;

	if (pc != NULL && IsA(pc, PartitionCmd) && pc->name != NULL)
		part = named_table(pc->name, parent);
	if (OidIsValid(part) &&
		row_lines(buf, source, part, CTAS_PARTITION_KEYS_MAX, true))
		leaf_lines(buf, source, part);
	else
		appendStringInfo(buf, "resync attach %s\n", partition_name(at));
}

/*
 * detach_lines
 *		DETACH PARTITION: the keys of the detached table's rows, which leave
 *		the query's result (row_lines), or a resync when it has more than
 *		CTAS_PARTITION_KEYS_MAX rows, when the trigger cannot name it, or
 *		for DETACH ... CONCURRENTLY (writers are not kept off it).
 */
static void
detach_lines(StringInfo buf, Oid source, AlterTableCmd *at)
{
	PartitionCmd *pc = (PartitionCmd *) at->def;
	Oid			part = InvalidOid;

	if (at->subtype == AT_DetachPartition && pc != NULL &&
		IsA(pc, PartitionCmd) && !pc->concurrent && pc->name != NULL)
		part = named_table(pc->name, InvalidOid);
	if (!OidIsValid(part) ||
		!row_lines(buf, source, part, CTAS_PARTITION_KEYS_MAX, false))
		appendStringInfo(buf, "resync detach %s\n", partition_name(at));
}

/*
 * CtasSyncPartitionLines
 *		In the event trigger's message about a command on source or on
 *		objid, one of its partitions (sync/ddl.c): nothing unless source is
 *		partitioned; else "partitioned 1", a line "resync <what>" for each
 *		partition the command attached or detached, and, for a command on a
 *		partition, "leaf <oid> <problem-or-dash>" for each partition under
 *		it as the command left it ("-": none; the key is the job's, so the
 *		identity goes as root attnums: "leaf <oid> ident <kind> <attnum>...").
 */
void
CtasSyncPartitionLines(StringInfo buf, Oid source, Oid objid,
					   CollectedCommand *cmd)
{
	ListCell   *lc;

	if (get_rel_relkind(source) != RELKIND_PARTITIONED_TABLE)
		return;
	appendStringInfoString(buf, "partitioned 1\n");
	if (cmd != NULL && cmd->type == SCT_AlterTable)
	{
		foreach(lc, cmd->d.alterTable.subcmds)
		{
			CollectedATSubcmd *sub = lfirst(lc);
			AlterTableCmd *at = (AlterTableCmd *) sub->parsetree;

			if (!IsA(at, AlterTableCmd))
				continue;
			if (at->subtype == AT_AttachPartition)
				attach_lines(buf, source, objid, at);
			else if (at->subtype == AT_DetachPartition ||
					 at->subtype == AT_DetachPartitionFinalize)
				detach_lines(buf, source, at);
		}
	}
	if (objid == source || get_rel_relkind(objid) == RELKIND_INDEX ||
		get_rel_relkind(objid) == RELKIND_PARTITIONED_INDEX)
		return;
	leaf_lines(buf, source, objid);
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
 *		resync (CtasSyncResyncWanted): the jobs of stream_id that stream are
 *		marked "copying" in a transaction of its own, so that the next
 *		worker copies them again under a new slot (sync/resync.c).  The
 *		remote tables keep the source transactions committed before the
 *		DDL's until then.  Outside a transaction.
 */
void
CtasSyncPartitionResync(int64 stream_id, const char *why)
{
	Datum		args[1];

	args[0] = Int64GetDatum(stream_id);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute_with_args("UPDATE ctas_fed.syncs SET state = 'copying', "
							  "error = NULL WHERE stream_id = $1 "
							  "AND state = 'streaming'",
							  1, (Oid[]) {INT8OID}, args, NULL, false, 0) < 0)
		elog(ERROR, "could not mark stream " INT64_FORMAT " for a resync",
			 stream_id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	ereport(LOG,
			(errmsg("ctas_fed stream " INT64_FORMAT ": %s, resyncing the remote tables from a new snapshot",
					stream_id, why)));
}

/*
 * drop_message
 *		For DROP of relation relid: when it is a partition of a table a
 *		running sync reads, the message that makes the sync resync, after
 *		the changes committed before the DROP's transaction.
 */
static void
drop_message(Oid relid)
{
	Datum		args[1];
	uint64		i;

	if (!get_rel_relispartition(relid))
		return;

	/*
	 * As the DROP will, in its order (the parent first): no writer then
	 * changes the rows whose keys the message carries.
	 */
	LockRelationOid(get_partition_parent(relid, true), AccessExclusiveLock);
	LockRelationOid(relid, AccessExclusiveLock);
	args[0] = ObjectIdGetDatum(relid);
	if (SPI_execute_with_args("SELECT a.relid FROM "
							  "pg_catalog.pg_partition_ancestors($1) a "
							  "WHERE a.relid <> $1 AND EXISTS (SELECT "
							  "FROM pg_catalog.pg_publication_rel r "
							  "JOIN pg_catalog.pg_publication b "
							  "ON b.oid = r.prpubid WHERE r.prrelid = a.relid "
							  "AND pg_catalog.starts_with("
							  "b.pubname::pg_catalog.text, '"
							  CTAS_SYNC_PREFIX "'))",
							  1, (Oid[]) {OIDOID}, args, NULL, false, 0)
		!= SPI_OK_SELECT)
		elog(ERROR, "could not read the ancestors of relation %u", relid);
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			source = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															SPI_tuptable->tupdesc,
															1, &isnull));
		StringInfoData msg;

		initStringInfo(&msg);
		appendStringInfo(&msg, "relid %u\ntable %s.%s\ncommand DROP TABLE %s\n"
						 "partitioned 1\n", source,
						 get_namespace_name(get_rel_namespace(source)),
						 get_rel_name(source), get_rel_name(relid));
		if (!row_lines(&msg, source, relid, CTAS_PARTITION_KEYS_MAX, false))
			appendStringInfo(&msg, "resync drop %s\n",
							 quote_identifier(get_rel_name(relid)));
		(void) LogLogicalMessage("ctas_fed", msg.data, msg.len, true);
		pfree(msg.data);
	}
}

/*
 * ctas_fed_partition_drop_trigger
 *		The event trigger ctas_fed_partition_drops (ddl_command_start, DROP
 *		TABLE and DROP FOREIGN TABLE): a message for each partition the
 *		statement names of a table a running sync reads (drop_message),
 *		while the catalog still tells whose partition it is.  Transactional:
 *		a DROP that fails or is rolled back leaves none.  DROP SCHEMA ...
 *		CASCADE and DROP OWNED of a partition are not seen
 *		(docs/sync-schema-changes.md).
 */
Datum
ctas_fed_partition_drop_trigger(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	DropStmt   *stmt;
	Oid			save_userid;
	int			save_sec;
	int			nestlevel;
	List	   *relids = NIL;
	ListCell   *lc;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "ctas_fed_partition_drop_trigger: not fired by the event trigger manager");
	trigdata = (EventTriggerData *) fcinfo->context;
	stmt = (DropStmt *) trigdata->parsetree;
	if (!XLogLogicalInfoActive() || stmt == NULL || !IsA(stmt, DropStmt) ||
		(stmt->removeType != OBJECT_TABLE &&
		 stmt->removeType != OBJECT_FOREIGN_TABLE))
		PG_RETURN_VOID();

	/* the names as the statement resolves them: the caller's search_path */
	foreach(lc, stmt->objects)
	{
		Oid			relid;

		relid = RangeVarGetRelid(makeRangeVarFromNameList((List *) lfirst(lc)),
								 NoLock, true);
		if (OidIsValid(relid) && get_rel_relispartition(relid))
			relids = lappend_oid(relids, relid);
	}
	if (relids == NIL)
		PG_RETURN_VOID();

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE);
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	foreach(lc, relids)
		drop_message(lfirst_oid(lc));
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec);
	PG_RETURN_VOID();
}
