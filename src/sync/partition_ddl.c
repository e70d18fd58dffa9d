/*-------------------------------------------------------------------------
 *
 * partition_ddl.c
 *		  The event triggers' side of a partitioned source (sync/partition.c
 *		  says what a sync does with it): the lines that describe a
 *		  partition made, changed, attached or detached in the message of
 *		  ctas_fed_schema_changes (sync/ddl.c), and the message of
 *		  ctas_fed_partition_drops (ddl_command_start) for DROP TABLE of a
 *		  partition, written before the catalog forgets whose partition it
 *		  was.
 *
 * The rows of a table attached, and the keys of the rows of a partition
 * detached or dropped, travel in the message: read under the latest
 * snapshot while the DDL's lock (ACCESS EXCLUSIVE on that table, taken
 * here first for DROP in the DROP's own order) keeps every other writer
 * off it, so that they are the rows the DDL's transaction commits with,
 * at any isolation level, and made text under the sync worker's fixed
 * settings.  Past CTAS_PARTITION_KEYS_MAX rows or CTAS_PARTITION_BYTES_MAX
 * of text, for DETACH ... CONCURRENTLY (which keeps no writer off) and
 * for a name the trigger cannot resolve, the message asks for a resync.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/partition_ddl.c
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

PG_FUNCTION_INFO_V1(ctas_fed_partition_drop_trigger);

/*
 * An ATTACH, DETACH or DROP of a partition with more rows than this
 * resyncs the stream rather than carry its rows or their keys in its
 * message.
 */
#define CTAS_PARTITION_KEYS_MAX		100000
/* ... or more text than this (a logical message is at most 1 GB) */
#define CTAS_PARTITION_BYTES_MAX	(64 * 1024 * 1024)

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
	for (i = 0; i < CtasSyncNTextSettings; i++)
		(void) set_config_option(CtasSyncTextSettings[i][0],
								 CtasSyncTextSettings[i][1], PGC_SUSET,
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
			char		kind = CtasSyncPartitionIdentity(rel, source, &ident, &n);

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
	CtasSyncSpiAs as;
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

	/* the catalogs as the extension's owner, with a fixed search_path */
	CtasSyncAsOwnerBegin(&as);
	foreach(lc, relids)
		drop_message(lfirst_oid(lc));
	CtasSyncSpiEndAs(&as);
	PG_RETURN_VOID();
}
