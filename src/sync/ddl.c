/*-------------------------------------------------------------------------
 *
 * ddl.c
 *		  Schema changes of synced sources in WAL order: the event trigger
 *		  that describes each DDL on a synced source table in a
 *		  transactional logical message, and the reading of that message
 *		  by the sync worker (docs/sync-schema-changes.md).
 *
 * Logical decoding carries no DDL.  The event trigger of the extension
 * (ctas_fed_schema_changes, ddl_command_end, ENABLE ALWAYS) writes, in the
 * DDL's own transaction, a transactional message with prefix "ctas_fed"
 * for each command on a table that a running sync reads, or on a table
 * that inherits from one.  The stream's peek asks pgoutput for messages, so
 * that the worker meets the message exactly between the data changes
 * before and after the DDL; a DDL rolled back (with its transaction or
 * subtransaction) leaves no message.
 *
 * The message is text, one fact per line, and describes the table as the
 * DDL left it, so that the worker decides from the message alone, never
 * from the catalog of a later moment:
 *
 *	relid <oid>						the synced source
 *	table <schema>.<name>			its name, for the job's error
 *	command <tag> <object>			the command, for the job's error
 *	child <oid> <name>				the command was on a child of it
 *	sub <AlterTableType> <attnum>	each subcommand of an ALTER TABLE, with
 *									the column it touched (0: none)
 *	identity <d|i|f|n> <attnum>...	the replica identity and its columns
 *									(FULL: those of the primary key)
 *	col <attnum> <type> <name>		each live column, in attnum order
 *
 * What a sync follows (schema_changes = 'follow'): every DDL that leaves
 * what it reads as it was — the attnums it reads live with their types
 * and not rewritten, its key within the replica identity (or a new key
 * the query outputs, which the remote key follows: sync/follow.c,
 * CtasSyncPlanRekey), no inheritance child when the query reads them.  A rename of a column it reads is
 * followed: the query is a parse tree by attnum, only the name the
 * Relation messages carry changes, and it is stored with the job.  A
 * sync that takes whole rows also follows columns added, dropped, renamed
 * and retyped on its remote table (sync/follow.c).  A column it reads
 * retyped so that values may change, or rewritten (USING), is followed by
 * a copy again from a snapshot after the DDL (sync/reshape.c), when the
 * query's expressions take the new type.  Anything else, and
 * any DDL at all under schema_changes = 'fail', fails the job after the
 * source transactions committed before the DDL's (sync/apply.c).
 *
 * Besides the lines above, each live column has "typmod <attnum> <typmod>",
 * and, for a whole-row sync that adds it, "missing <attnum> <text>" or
 * "rewritten <attnum>" (describe_fill); an ALTER COLUMN ... TYPE with USING
 * has "using <attnum>".
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/ddl.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/sysattr.h"
#include "access/xlog.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_event_trigger.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "replication/message.h"
#include "tcop/deparse_utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "access/xact.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"

#include "catalog.h"
#include "guc.h"
#include "jobs.h"
#include "sync/sync_int.h"

PG_FUNCTION_INFO_V1(ctas_fed_schema_change_trigger);

/* s with backslash and newline escaped, so that it stays on one line */
static void
append_escaped(StringInfo buf, const char *s)
{
	for (; *s; s++)
	{
		if (*s == '\\')
			appendStringInfoString(buf, "\\\\");
		else if (*s == '\n')
			appendStringInfoString(buf, "\\n");
		else
			appendStringInfoChar(buf, *s);
	}
}

/*
 * describe_fill
 *		What the rows that existed before the column att was added hold in
 *		it, for a whole-row sync that adds it remotely: "missing <attnum>
 *		<text>" when PostgreSQL keeps one value for all of them (a default
 *		evaluated once, attmissingval), its text under the settings the
 *		sync worker pins; "rewritten <attnum>" when the table was rewritten
 *		with a value per row (a volatile default, an identity, a domain
 *		with constraints), which the WAL does not carry; nothing when they
 *		are NULL.  Written for every column, read only for one the sync does
 *		not have yet (an earlier column's facts are stale but unused).
 */
static void
describe_fill(StringInfo buf, Relation rel, Form_pg_attribute att)
{
	if (att->atthasmissing)
	{
		bool		isnull;
		HeapTuple	tup = SearchSysCache2(ATTNUM,
										  ObjectIdGetDatum(RelationGetRelid(rel)),
										  Int16GetDatum(att->attnum));
		Datum		missing;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for attribute %d of relation %u",
				 att->attnum, RelationGetRelid(rel));
		missing = SysCacheGetAttr(ATTNUM, tup, Anum_pg_attribute_attmissingval,
								  &isnull);
		if (!isnull)
		{
			ArrayType  *arr = DatumGetArrayTypeP(missing);
			Datum		value;
			bool		vnull;
			int			idx = 1;
			Oid			outfunc;
			bool		isvarlena;

			value = array_get_element(PointerGetDatum(arr), 1, &idx, -1,
									  att->attlen, att->attbyval,
									  att->attalign, &vnull);
			if (!vnull)
			{
				getTypeOutputInfo(att->atttypid, &outfunc, &isvarlena);
				appendStringInfo(buf, "missing %d ", att->attnum);
				/* one line: the text goes escaped */
				append_escaped(buf, OidOutputFunctionCall(outfunc, value));
				appendStringInfoChar(buf, '\n');
			}
		}
		ReleaseSysCache(tup);
	}
	else
	{
		/*
		 * A default not kept as a missing value (the column's, its
		 * domain's, an identity's): per row, or NULL.
		 */
		Node	   *expr = build_column_default(rel, att->attnum);

		if (expr != NULL &&
			(contain_volatile_functions(expr) ||
			 get_typtype(att->atttypid) == TYPTYPE_DOMAIN))
			appendStringInfo(buf, "rewritten %d\n", att->attnum);
	}
}

/*
 * describe_table
 *		The lines of the message that describe table relid as it is now (in
 *		the DDL's transaction): its replica identity and live columns.
 */
static void
describe_table(StringInfo buf, Oid relid)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	char		ident = rel->rd_rel->relreplident;
	int			i;

	appendStringInfo(buf, "identity %c", ident);
	if (ident != REPLICA_IDENTITY_NOTHING)
	{
		/* FULL: the primary key's columns, the key known unique */
		Oid			indexoid = ident == REPLICA_IDENTITY_FULL ?
			RelationGetPrimaryKeyIndex(rel) : RelationGetReplicaIndex(rel);

		if (OidIsValid(indexoid))
		{
			Relation	index = relation_open(indexoid, AccessShareLock);

			for (i = 0; i < index->rd_index->indnkeyatts; i++)
				appendStringInfo(buf, " %d",
								 index->rd_index->indkey.values[i]);
			relation_close(index, AccessShareLock);
		}
	}
	appendStringInfoChar(buf, '\n');
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped || att->attgenerated)
			continue;
		appendStringInfo(buf, "col %d %u %s\n", att->attnum, att->atttypid,
						 NameStr(att->attname));
		appendStringInfo(buf, "typmod %d %d\n", att->attnum, att->atttypmod);
		describe_fill(buf, rel, att);
	}
	relation_close(rel, AccessShareLock);
}

/*
 * CtasSyncDescribeTable
 *		The lines a message would carry about table relid as the catalog
 *		shows it now (describe_table), as a List of palloc'd strings: for
 *		the copy that follows a retype (sync/follow.c,
 *		CtasSyncReshapeForCopy), under the settings the worker pins.
 */
List *
CtasSyncDescribeTable(Oid relid)
{
	StringInfoData buf;
	List	   *lines = NIL;
	char	   *p;

	initStringInfo(&buf);
	describe_table(&buf, relid);
	for (p = strtok(buf.data, "\n"); p != NULL; p = strtok(NULL, "\n"))
		lines = lappend(lines, p);
	return lines;
}

/*
 * ctas_fed_schema_change_trigger
 *		The event trigger (ddl_command_end): one transactional logical
 *		message per command on a table a running sync reads, or on a child
 *		of one.  Such a table is in the publication of its sync's stream
 *		(a stopped or failed job's table leaves it in the same transaction):
 *		the catalogs tell, without reading ctas_fed.syncs, which a DDL must
 *		never wait for.  As the bootstrap superuser, with a fixed
 *		search_path.  Nothing when wal_level is below logical: no sync can
 *		stream then.  A table in a publication that someone else named like
 *		ours gets messages that no job reads.
 */
Datum
ctas_fed_schema_change_trigger(PG_FUNCTION_ARGS)
{
	/* as the sync worker pins them (sync/worker.c, pin_text_settings) */
	static const char *const pinned[][2] = {
		{"datestyle", "ISO, MDY"},
		{"intervalstyle", "postgres"},
		{"extra_float_digits", "3"},
		{"bytea_output", "hex"},
		{"timezone", "UTC"},
		{"lc_monetary", "C"},
	};
	Oid			save_userid;
	int			save_sec;
	int			nestlevel;
	uint64		i;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "ctas_fed_schema_change_trigger: not fired by the event trigger manager");
	if (!XLogLogicalInfoActive())
		PG_RETURN_VOID();

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   save_sec | SECURITY_LOCAL_USERID_CHANGE);
	nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	/* the text of a missing value as the sync worker parses it */
	for (i = 0; i < lengthof(pinned); i++)
		(void) set_config_option(pinned[i][0], pinned[i][1],
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/* not read-only: a new snapshot, which sees the DDL's catalog rows */
	if (SPI_execute("SELECT d.command, d.objid, p.source, d.command_tag, "
					"coalesce(d.object_identity, '') "
					"FROM pg_catalog.pg_event_trigger_ddl_commands() d, "
					"LATERAL (SELECT d.objid AS source UNION "
					"SELECT i.inhparent FROM pg_catalog.pg_inherits i "
					"WHERE i.inhrelid = d.objid UNION "
					"SELECT a.relid FROM "
					"pg_catalog.pg_partition_ancestors(d.objid) a) p "
					"WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass "
					"AND EXISTS (SELECT FROM pg_catalog.pg_publication_rel r "
					"JOIN pg_catalog.pg_publication b ON b.oid = r.prpubid "
					"WHERE r.prrelid = p.source "
					"AND pg_catalog.starts_with(b.pubname::pg_catalog.text, "
					"'" CTAS_SYNC_PREFIX "'))",
					false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the commands of the event trigger");

	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	tupdesc = SPI_tuptable->tupdesc;
		bool		isnull;
		CollectedCommand *cmd;
		Oid			objid;
		Oid			source;
		StringInfoData buf;

		cmd = (CollectedCommand *) DatumGetPointer(SPI_getbinval(tup, tupdesc, 1, &isnull));
		objid = DatumGetObjectId(SPI_getbinval(tup, tupdesc, 2, &isnull));
		source = DatumGetObjectId(SPI_getbinval(tup, tupdesc, 3, &isnull));

		initStringInfo(&buf);
		appendStringInfo(&buf, "relid %u\ntable %s.%s\ncommand %s %s\n",
						 source, get_namespace_name(get_rel_namespace(source)),
						 get_rel_name(source), SPI_getvalue(tup, tupdesc, 4),
						 SPI_getvalue(tup, tupdesc, 5));
		if (objid != source)
			appendStringInfo(&buf, "child %u %s\n", objid,
							 get_rel_name(objid));
		else if (cmd != NULL && cmd->type == SCT_AlterTable)
		{
			ListCell   *lc;

			foreach(lc, cmd->d.alterTable.subcmds)
			{
				CollectedATSubcmd *sub = lfirst(lc);
				AlterTableCmd *at = (AlterTableCmd *) sub->parsetree;

				if (!IsA(at, AlterTableCmd))
					continue;
				appendStringInfo(&buf, "sub %d %d\n", (int) at->subtype,
								 sub->address.classId == RelationRelationId &&
								 sub->address.objectId == source ?
								 sub->address.objectSubId : 0);
				/* ALTER COLUMN ... TYPE ... USING: values the sync cannot tell */
				if (at->subtype == AT_AlterColumnType &&
					at->def != NULL && IsA(at->def, ColumnDef) &&
					(((ColumnDef *) at->def)->raw_default != NULL ||
					 ((ColumnDef *) at->def)->cooked_default != NULL))
					appendStringInfo(&buf, "using %d\n",
									 sub->address.objectSubId);
			}
		}
		/* partitions made, changed, attached, detached (sync/partition.c) */
		CtasSyncPartitionLines(&buf, source, objid, cmd);
		describe_table(&buf, source);
		(void) LogLogicalMessage("ctas_fed", buf.data, buf.len, true);
		pfree(buf.data);
	}
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec);
	PG_RETURN_VOID();
}

/*
 * CtasSyncSchemaTriggerOn
 *		Whether the event trigger exists and fires always (also under
 *		session_replication_role = replica): without it a rewrite under the
 *		same type, a column dropped and added again, or a new inheritance
 *		child would not show in the stream.  The sync worker checks it
 *		every round, in a transaction.
 */
bool
CtasSyncSchemaTriggerOn(void)
{
	HeapTuple	tup = SearchSysCache1(EVENTTRIGGERNAME,
									  CStringGetDatum("ctas_fed_schema_changes"));
	bool		on;

	if (!HeapTupleIsValid(tup))
		return false;
	on = ((Form_pg_event_trigger) GETSTRUCT(tup))->evtenabled ==
		TRIGGER_FIRES_ALWAYS;
	ReleaseSysCache(tup);
	return on;
}

/* the text of the first line of content that starts with key, or NULL */
static char *
message_line(List *lines, const char *key)
{
	ListCell   *lc;
	size_t		n = strlen(key);

	foreach(lc, lines)
	{
		char	   *line = lfirst(lc);

		if (strncmp(line, key, n) == 0 && line[n] == ' ')
			return line + n + 1;
	}
	return NULL;
}

/*
 * CtasSyncIdentityReason
 *		Why the replica identity of the message (or of the lines of
 *		CtasSyncDescribeTable) no longer carries the key of job, or NULL
 *		when it does.  An identity index that does not contain the key
 *		(REPLICA IDENTITY USING INDEX, a primary key replaced) is a new key
 *		the job follows when the query outputs its columns
 *		(CtasSyncPlanRekey: the plan is added to job->follow); recopy: at
 *		the copy after a schema change, which takes it in memory.
 */
char *
CtasSyncIdentityReason(SyncJob *job, List *lines, const char *command,
					   bool recopy)
{
	char	   *ident = message_line(lines, "identity");
	AttrNumber	ids[INDEX_MAX_KEYS];
	int			nids = 0;
	char	   *q;
	int			k;

	if (ident == NULL)
		elog(ERROR, "sync " INT64_FORMAT ": a schema change message without the replica identity",
			 job->id);
	q = ident + 1;
	while (*q == ' ' && nids < INDEX_MAX_KEYS)
		ids[nids++] = (AttrNumber) strtol(q + 1, &q, 10);
	for (k = 0; k < job->target.nkeys; k++)
	{
		AttrNumber	key = job->attnums[job->keycol[k]];
		bool		found = false;
		int			i;

		for (i = 0; i < nids; i++)
			found |= ids[i] == key;
		if (!found)
			break;
	}

	/*
	 * The identity index (FULL: the primary key) is the key: kept.  One
	 * that holds more columns no longer makes the key alone unique (a
	 * primary key replaced by a wider one): a new key, as one that does not
	 * contain it.
	 */
	if (k == job->target.nkeys && nids == job->target.nkeys)
		return NULL;
	if (nids == 0)
	{
		if (ident[0] == REPLICA_IDENTITY_FULL)
			return psprintf("the replica identity of the source of sync " INT64_FORMAT " is FULL and it has no primary key: its key is no longer known to be unique: %s",
							job->id, command);
		return psprintf("the replica identity of the source of sync " INT64_FORMAT " no longer contains the key column \"%s\": %s",
						job->id, job->attnames[job->keycol[Min(k, job->target.nkeys - 1)]],
						command);
	}

	/*
	 * a partitioned source: REPLICA IDENTITY on it does not reach its
	 * partitions, and theirs are not checked against a new key
	 */
	if (get_rel_relkind(job->relid) == RELKIND_PARTITIONED_TABLE)
		return psprintf("the key of partitioned source of sync " INT64_FORMAT " changed, and a new key of a partitioned table is not followed: %s",
						job->id, command);
	{
		char	   *why = CtasSyncPlanRekey(job, lines, ids, nids,
											command, recopy);

		if (why == NULL || CtasSyncResyncWanted)
			return why;
		if (k < job->target.nkeys)
			return psprintf("the replica identity of the source of sync " INT64_FORMAT " no longer contains the key column \"%s\", and %s: %s",
							job->id, job->attnames[job->keycol[k]], why,
							command);
		return psprintf("the replica identity of the source of sync " INT64_FORMAT " holds more columns than its key, which is no longer unique alone, and %s: %s",
						job->id, why, command);
	}
}

/*
 * CtasSyncReadsInExpression
 *		Whether query reads column attnum of its source inside an
 *		expression of its result or in its WHERE (not as a plain column of
 *		the result): there its functions and operators are bound to the
 *		column's type.
 */
bool
CtasSyncReadsInExpression(Query *query, AttrNumber attnum)
{
	Bitmapset  *atts = NULL;
	ListCell   *lc;

	if (query->jointree->quals != NULL)
		pull_varattnos(query->jointree->quals, 1, &atts);
	foreach(lc, query->targetList)
	{
		TargetEntry *te = lfirst(lc);

		if (!IsA(te->expr, Var))
			pull_varattnos((Node *) te->expr, 1, &atts);
	}
	return bms_is_member(attnum - FirstLowInvalidHeapAttributeNumber, atts);
}

/*
 * query_takes_type
 *		Whether the query of job reads column attnum, retyped from old to
 *		new, so that the same expressions run on the new type: the type is
 *		the same (a typmod or a USING changed values, not the type), or the
 *		column is read only as a column of the result, never inside an
 *		expression or the WHERE, whose functions and operators are bound to
 *		the old type.
 */
static bool
query_takes_type(SyncJob *job, AttrNumber attnum, Oid old, Oid new)
{
	return old == new || !CtasSyncReadsInExpression(job->query, attnum);
}

/*
 * CtasSyncSchemaChange
 *		The message of the event trigger (content, len bytes) as seen by
 *		job.  *mine is false when it is about another table (nothing else is
 *		done).  Returns NULL when the job follows the DDL (a rename of a
 *		column it reads is then taken into job->attnames, and
 *		job->names_changed set), else why it cannot, palloc'd in the current
 *		memory context.  Can ERROR on a message it cannot read.
 */
char *
CtasSyncSchemaChange(SyncJob *job, const char *content, int len, bool *mine)
{
	char	   *text = pnstrdup(content, len);
	List	   *lines = NIL;
	char	   *p;
	char	   *line;
	char	   *command;
	char	   *table;
	char	   *child;
	char	   *reason;
	char	   *recopy_why = NULL;
	RangeTblEntry *rte = linitial_node(RangeTblEntry, job->query->rtable);
	char	  **names = palloc0(sizeof(char *) * Max(job->ncols, 1));
	Oid		   *types = palloc0(sizeof(Oid) * Max(job->ncols, 1));
	ListCell   *lc;
	int			i;

	CtasSyncResyncWanted = false;
	CtasSyncPartitionDeletes = NIL;
	CtasSyncPartitionInserts = NIL;
	for (p = strtok(text, "\n"); p != NULL; p = strtok(NULL, "\n"))
		lines = lappend(lines, p);
	line = message_line(lines, "relid");
	*mine = line != NULL && strtoul(line, NULL, 10) == job->relid;
	if (!*mine)
		return NULL;
	command = message_line(lines, "command");
	if (command == NULL)
		command = "?";
	table = message_line(lines, "table");
	if (table == NULL)
		table = "?";

	if (job->fail_on_ddl)
		return psprintf("schema change of the source of sync " INT64_FORMAT " (schema_changes = 'fail'): %s",
						job->id, command);

	/* a partitioned source follows its partitions (sync/partition.c) */
	if (message_line(lines, "partitioned") != NULL)
	{
		char	   *why = CtasSyncPartitionChange(job, lines, command);

		/* a partition dropped: nothing else in the message */
		if (why != NULL || message_line(lines, "identity") == NULL)
			return why;
	}
	child = message_line(lines, "child");
	if (child != NULL && rte->inh &&
		message_line(lines, "partitioned") == NULL)
		return psprintf("inheritance child \"%s\" was made or attached to the source of sync " INT64_FORMAT ", whose query reads the children: %s",
						strchr(child, ' ') ? strchr(child, ' ') + 1 : child,
						job->id, command);
	if (job->whole_row)
	{
		reason = CtasSyncWholeRowChange(job, lines, command, table, false);
		/* a failure wins over a copy (CtasSyncResyncWanted) */
		if (reason == NULL || CtasSyncResyncWanted)
		{
			bool		resync = CtasSyncResyncWanted;
			char	   *why;

			CtasSyncResyncWanted = false;
			why = CtasSyncIdentityReason(job, lines, command, false);
			if (why != NULL && !CtasSyncResyncWanted)
				reason = why;	/* a failure */
			else if (why != NULL)
			{
				/* a new key followed by a copy again */
				if (reason == NULL)
					reason = why;
			}
			else
				CtasSyncResyncWanted = resync;
		}
		if (reason != NULL)
			job->follow = NULL;
		return reason;
	}

	/* the columns as the DDL left them */
	foreach(lc, lines)
	{
		int			attnum;
		unsigned int typid;
		int			off = 0;

		line = lfirst(lc);
		if (sscanf(line, "col %d %u %n", &attnum, &typid, &off) != 2 ||
			off == 0)
			continue;
		for (i = 0; i < job->ncols; i++)
		{
			if (job->attnums[i] == attnum)
			{
				names[i] = line + off;
				types[i] = (Oid) typid;
			}
		}
	}
	for (i = 0; i < job->ncols; i++)
	{
		if (names[i] == NULL)
			return psprintf("column \"%s\" of table \"%s\" read by sync " INT64_FORMAT " was dropped: %s",
							job->attnames[i], table, job->id, command);
	}

	/*
	 * A column retyped, or rewritten under the same type (USING): its
	 * values may have changed, which the WAL does not carry.  The sync's
	 * table is copied again from a snapshot after the DDL
	 * (CtasSyncResyncWanted), the query reading the new type, when its
	 * expressions take it: same type, or a new one read as a column of the
	 * result and nowhere else.
	 */
	for (i = 0; i < job->ncols; i++)
	{
		bool		retyped = types[i] != job->atttypes[i];

		foreach(lc, lines)
		{
			int			subtype;
			int			attnum;

			if (sscanf((char *) lfirst(lc), "sub %d %d", &subtype,
					   &attnum) == 2 &&
				subtype == (int) AT_AlterColumnType &&
				attnum == job->attnums[i])
				retyped = true;
		}
		if (!retyped)
			continue;
		if (!query_takes_type(job, job->attnums[i], job->atttypes[i],
							  types[i]))
			return psprintf("column \"%s\" of table \"%s\" read by sync " INT64_FORMAT " changed its type from %s to %s, which the query reads in an expression or its WHERE: %s",
							names[i], table, job->id,
							format_type_be(job->atttypes[i]),
							format_type_be(types[i]), command);
		if (recopy_why == NULL)
			recopy_why = psprintf("column \"%s\" of table \"%s\" read by sync " INT64_FORMAT " was retyped or rewritten, its values are copied again from a snapshot after the change: %s",
								  names[i], table, job->id, command);
	}

	/* the key within the replica identity, or a new key followed */
	reason = CtasSyncIdentityReason(job, lines, command, false);
	if (reason != NULL)
	{
		job->follow = NULL;
		return reason;
	}
	if (recopy_why != NULL)
	{
		job->follow = NULL;
		CtasSyncResyncWanted = true;
		return recopy_why;
	}

	/* followed: the names the next Relation messages carry */
	for (i = 0; i < job->ncols; i++)
	{
		if (strcmp(names[i], job->attnames[i]) != 0)
		{
			job->attnames[i] =
				MemoryContextStrdup(GetMemoryChunkContext(job->attnames),
									names[i]);
			job->names_changed = true;
		}
	}
	return NULL;
}

/*
 * CtasSyncSaveNames
 *		Store the names of the columns job reads, as followed renames left
 *		them, in its ctas_fed.syncs row, in the current transaction
 *		(connected to SPI), which the worker commits after the remote
 *		transaction that applied the rename's.
 *
 * The slot is advanced in that same local transaction: a crash between
 * the two commits reads the rename's transaction again, and the job, which
 * skips its changes, takes the names from its message again (sync/apply.c).
 */
void
CtasSyncSaveNames(SyncJob *job)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(job->ncols, 1));
	int			i;

	for (i = 0; i < job->ncols; i++)
		elems[i] = CStringGetTextDatum(job->attnames[i]);
	CtasSyncStoreNames(job->id,
					   PointerGetDatum(construct_array(elems, job->ncols, TEXTOID,
													   -1, false, TYPALIGN_INT)));
	job->names_changed = false;
	if (job->reshaped)
		CtasSyncSaveShape(job);
}

