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
 *	col <attnum> <type> <name>		each live column, in attnum order
 *
 * What a sync follows (schema_changes = 'follow'): every DDL that leaves
 * what it reads as it was — the attnums it reads live with their types
 * and not rewritten, its key within the replica identity, no inheritance
 * child when the query reads them, and for a whole-row sync no column
 * added or renamed (those would have to change the remote table: not
 * followed yet).  A rename of a column it reads is followed: the query is
 * a parse tree by attnum, only the name the Relation messages carry
 * changes, and it is stored with the job.  Anything else, and any DDL at
 * all under schema_changes = 'fail', fails the job after the source
 * transactions committed before the DDL's (sync/apply.c).
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

#include "ctas_fed.h"
#include "jobs.h"
#include "sync/sync_int.h"

/* rows of ctas_fed.sync_schema_changes kept per sync */
#define CTAS_SYNC_SCHEMA_CHANGES_KEPT	100

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
 *		with a value per row (a volatile default, a domain with
 *		constraints), which the WAL does not carry; nothing when they are
 *		NULL.  Written for every column, read only for one the sync does
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
	else if (att->atthasdef)
	{
		/* a default not kept as a missing value: per row, or NULL */
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
	if (ident == REPLICA_IDENTITY_DEFAULT || ident == REPLICA_IDENTITY_INDEX)
	{
		Oid			indexoid = RelationGetReplicaIndex(rel);

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
					"WHERE i.inhrelid = d.objid) p "
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
 * identity_reason
 *		Why the replica identity of the message no longer carries the key of
 *		job, or NULL when it does.
 */
static char *
identity_reason(SyncJob *job, List *lines, const char *command)
{
	char	   *ident = message_line(lines, "identity");
	int			k;

	if (ident == NULL)
		elog(ERROR, "sync " INT64_FORMAT ": a schema change message without the replica identity",
			 job->id);
	if (ident[0] == REPLICA_IDENTITY_FULL)
		return NULL;
	for (k = 0; k < job->target.nkeys; k++)
	{
		AttrNumber	key = job->attnums[job->keycol[k]];
		bool		found = false;
		char	   *q = ident + 1;

		while (*q == ' ')
		{
			long		a = strtol(q + 1, &q, 10);

			found |= a == key;
		}
		if (!found)
			return psprintf("the replica identity of the source of sync " INT64_FORMAT " no longer contains the key column \"%s\": %s",
							job->id, job->attnames[job->keycol[k]],
							command);
	}
	return NULL;
}

/*
 * What a whole-row sync does for one schema change message: the remote
 * changes, in order, and the columns after them (in the memory context of
 * the message; CtasSyncSchemaFollow copies what stays).
 */
typedef struct SyncFollow
{
	int			nchanges;
	CtasSyncAlter *changes;
	char	  **what;			/* per change, for the record */
	int			ncols;			/* the columns after the message */
	AttrNumber *attnums;
	char	  **names;
	Oid		   *types;
	int32	   *typmods;
} SyncFollow;

/* the text of "<key> <attnum> <text>" for attnum, or NULL */
static char *
attnum_line(List *lines, const char *key, int attnum)
{
	ListCell   *lc;
	size_t		n = strlen(key);

	foreach(lc, lines)
	{
		char	   *line = lfirst(lc);
		char	   *end;

		if (strncmp(line, key, n) != 0 || line[n] != ' ')
			continue;
		if (strtol(line + n + 1, &end, 10) == attnum &&
			(*end == ' ' || *end == '\0'))
			return *end == ' ' ? end + 1 : end;
	}
	return NULL;
}

/* s with the escapes of append_escaped undone, palloc'd */
static char *
unescape(const char *s)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (; *s; s++)
	{
		if (*s == '\\' && s[1] == 'n')
			appendStringInfoChar(&buf, '\n'), s++;
		else if (*s == '\\' && s[1] == '\\')
			appendStringInfoChar(&buf, '\\'), s++;
		else
			appendStringInfoChar(&buf, *s);
	}
	return buf.data;
}

/*
 * retype_keeps_text
 *		Whether ALTER COLUMN ... TYPE from old to new (typmod newmod),
 *		without USING, leaves the text of every value as it was, so that
 *		the remote column can be retyped without sending a value again:
 *		integers widened, or made numeric without a scale or float8 (an
 *		int8 may not fit a float8 exactly), character varying and text
 *		among themselves.  Any other retype (a cast that rounds, pads,
 *		formats, or depends on a setting) fails the job.
 */
static bool
retype_keeps_text(Oid old, Oid new, int32 newmod)
{
	switch (old)
	{
		case INT2OID:
		case INT4OID:
			if (new == FLOAT8OID)
				return true;
			/* FALLTHROUGH */
		case INT8OID:
			return (new == INT8OID || (new == INT4OID && old == INT2OID) ||
					(new == NUMERICOID && newmod == -1));
		case TEXTOID:
		case VARCHAROID:
			return new == TEXTOID || new == VARCHAROID;
		default:
			return false;
	}
}

/*
 * add_change
 *		Append a change to f, and the columns after it (the current ones of
 *		cur, which it updates).
 */
static CtasSyncAlter *
add_change(SyncFollow *f, int *ncur, char **curnames, Oid *curtypes,
		   CtasSyncAlterKind kind, int at, const char *what)
{
	CtasSyncAlter *c;
	int			i;

	f->changes = repalloc(f->changes, sizeof(CtasSyncAlter) * (f->nchanges + 1));
	f->what = repalloc(f->what, sizeof(char *) * (f->nchanges + 1));
	c = &f->changes[f->nchanges];
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->column = at < *ncur ? curnames[at] : NULL;
	c->isnull = true;
	f->what[f->nchanges++] = pstrdup(what);
	if (kind == CTAS_SYNC_DROP_COLUMN)
	{
		for (i = at; i < *ncur - 1; i++)
		{
			curnames[i] = curnames[i + 1];
			curtypes[i] = curtypes[i + 1];
		}
		(*ncur)--;
	}
	else if (kind == CTAS_SYNC_ADD_COLUMN)
		(*ncur)++;
	return c;
}

/* freeze the columns of cur into c (after the caller set them) */
static void
set_after(CtasSyncAlter *c, int ncur, char **curnames, Oid *curtypes)
{
	c->ncolumns = ncur;
	c->columns = palloc(sizeof(char *) * Max(ncur, 1));
	c->types = palloc(sizeof(Oid) * Max(ncur, 1));
	memcpy(c->columns, curnames, sizeof(char *) * ncur);
	memcpy(c->types, curtypes, sizeof(Oid) * ncur);
}

/*
 * whole_row_change
 *		The message seen by a sync that takes whole rows (its columns are
 *		every live column of the source, in attnum order, under their own
 *		names): a column dropped, renamed, retyped (as retype_keeps_text
 *		allows) or added is followed on the remote table, in that order,
 *		the plan left in job->follow for CtasSyncSchemaFollow; NULL then,
 *		else why it cannot be followed.  An added column takes, in the
 *		rows there are, what PostgreSQL gave them (describe_fill): its
 *		missing value, or NULL; a per-row value (a volatile default) is
 *		not in the WAL, and fails the job.
 */
static char *
whole_row_change(SyncJob *job, List *lines, const char *command,
				 const char *table)
{
	SyncFollow *f = palloc0(sizeof(SyncFollow));
	int			nmsg = 0;
	AttrNumber *mattnums = palloc(sizeof(AttrNumber) * (job->ncols + 64));
	Oid		   *mtypes = palloc(sizeof(Oid) * (job->ncols + 64));
	char	  **mnames = palloc(sizeof(char *) * (job->ncols + 64));
	int			maxmsg = job->ncols + 64;
	int			ncur = job->target.ncolumns;
	char	  **curnames = palloc(sizeof(char *) * (job->ncols + maxmsg));
	Oid		   *curtypes = palloc(sizeof(Oid) * (job->ncols + maxmsg));
	Bitmapset  *whereatts = NULL;
	char	   *reason;
	ListCell   *lc;
	int			i;
	int			k;

	job->follow = NULL;
	f->changes = palloc(sizeof(CtasSyncAlter));
	f->what = palloc(sizeof(char *));
	memcpy(curnames, job->target.columns, sizeof(char *) * ncur);
	memcpy(curtypes, job->target.types, sizeof(Oid) * ncur);
	if (job->query->jointree->quals != NULL)
		pull_varattnos(job->query->jointree->quals, 1, &whereatts);

	foreach(lc, lines)
	{
		char	   *line = lfirst(lc);
		int			attnum;
		unsigned int typid;
		int			off = 0;

		if (sscanf(line, "col %d %u %n", &attnum, &typid, &off) != 2 ||
			off == 0)
			continue;
		if (nmsg == maxmsg)
		{
			maxmsg *= 2;
			mattnums = repalloc(mattnums, sizeof(AttrNumber) * maxmsg);
			mtypes = repalloc(mtypes, sizeof(Oid) * maxmsg);
			mnames = repalloc(mnames, sizeof(char *) * maxmsg);
			curnames = repalloc(curnames, sizeof(char *) * (job->ncols + maxmsg));
			curtypes = repalloc(curtypes, sizeof(Oid) * (job->ncols + maxmsg));
		}
		mattnums[nmsg] = attnum;
		mtypes[nmsg] = (Oid) typid;
		mnames[nmsg] = line + off;
		nmsg++;
	}

	/* dropped columns, from the last, so that places stay right */
	for (i = job->ncols - 1; i >= 0; i--)
	{
		CtasSyncAlter *c;

		for (k = 0; k < nmsg && mattnums[k] != job->attnums[i]; k++)
			;
		if (k < nmsg)
			continue;
		for (k = 0; k < job->target.nkeys; k++)
		{
			if (job->keycol[k] == i)
				return psprintf("key column \"%s\" of table \"%s\" read by sync " INT64_FORMAT " was dropped: %s",
								job->attnames[i], table, job->id, command);
		}
		if (bms_is_member(job->attnums[i] - FirstLowInvalidHeapAttributeNumber,
						  whereatts))
			return psprintf("column \"%s\" of table \"%s\", which the WHERE of sync " INT64_FORMAT " reads, was dropped: %s",
							job->attnames[i], table, job->id, command);
		c = add_change(f, &ncur, curnames, curtypes, CTAS_SYNC_DROP_COLUMN, i,
					   psprintf("DROP COLUMN %s",
								quote_identifier(job->attnames[i])));
		set_after(c, ncur, curnames, curtypes);
	}

	/* kept columns: renamed, retyped; the places after the drops */
	for (i = 0, k = 0; i < nmsg; i++)
	{
		int			j;
		int32		newmod;
		char	   *t;

		for (j = 0; j < job->ncols && job->attnums[j] != mattnums[i]; j++)
			;
		if (j == job->ncols)
			continue;			/* added */
		t = attnum_line(lines, "typmod", mattnums[i]);
		newmod = t ? atoi(t) : -1;
		if (strcmp(mnames[i], job->attnames[j]) != 0)
		{
			CtasSyncAlter *c;

			c = add_change(f, &ncur, curnames, curtypes,
						   CTAS_SYNC_RENAME_COLUMN, k,
						   psprintf("RENAME COLUMN %s TO %s",
									quote_identifier(job->attnames[j]),
									quote_identifier(mnames[i])));
			c->newname = mnames[i];
			curnames[k] = mnames[i];
			set_after(c, ncur, curnames, curtypes);
		}
		if (mtypes[i] != job->atttypes[j] ||
			attnum_line(lines, psprintf("sub %d", (int) AT_AlterColumnType),
						mattnums[i]) != NULL)
		{
			CtasSyncAlter *c;
			bool		is_key = false;
			int			kk;

			for (kk = 0; kk < job->target.nkeys; kk++)
				is_key |= job->keycol[kk] == j;
			if (attnum_line(lines, "using", mattnums[i]) != NULL)
				return psprintf("column \"%s\" of table \"%s\" read by sync " INT64_FORMAT " was rewritten by ALTER COLUMN ... TYPE ... USING, whose values the sync cannot tell: %s",
								mnames[i], table, job->id, command);
			if (is_key || !retype_keeps_text(job->atttypes[j], mtypes[i], newmod))
				return psprintf("column \"%s\" of table \"%s\" read by sync " INT64_FORMAT " changed its type from %s to %s, which changes values the sync cannot send again%s: %s",
								mnames[i], table, job->id,
								format_type_be(job->atttypes[j]),
								format_type_with_typemod(mtypes[i], newmod),
								is_key ? " (a key column)" : "", command);
			c = add_change(f, &ncur, curnames, curtypes,
						   CTAS_SYNC_RETYPE_COLUMN, k,
						   psprintf("ALTER COLUMN %s TYPE %s",
									quote_identifier(mnames[i]),
									format_type_with_typemod(mtypes[i], newmod)));
			c->typid = mtypes[i];
			c->typmod = newmod;
			curtypes[k] = mtypes[i];
			set_after(c, ncur, curnames, curtypes);
		}
		k++;
	}

	/* added columns, after the others (their attnums are the highest) */
	for (i = 0; i < nmsg; i++)
	{
		int			j;
		char	   *t;
		CtasSyncAlter *c;

		for (j = 0; j < job->ncols && job->attnums[j] != mattnums[i]; j++)
			;
		if (j < job->ncols)
			continue;
		if (attnum_line(lines, "rewritten", mattnums[i]) != NULL)
			return psprintf("column \"%s\" was added to table \"%s\" of sync " INT64_FORMAT " with a volatile default (or a domain type), which gave each existing row a value the WAL does not carry: %s",
							mnames[i], table, job->id, command);
		t = attnum_line(lines, "typmod", mattnums[i]);
		c = add_change(f, &ncur, curnames, curtypes, CTAS_SYNC_ADD_COLUMN,
					   ncur, psprintf("ADD COLUMN %s %s",
									  quote_identifier(mnames[i]),
									  format_type_with_typemod(mtypes[i],
															   t ? atoi(t) : -1)));
		c->column = mnames[i];
		c->typid = mtypes[i];
		c->typmod = t ? atoi(t) : -1;
		t = attnum_line(lines, "missing", mattnums[i]);
		if (t != NULL)
		{
			Oid			infunc;
			Oid			ioparam;

			/* under the settings the worker pins, as the trigger made it */
			getTypeInputInfo(c->typid, &infunc, &ioparam);
			c->value = OidInputFunctionCall(infunc, unescape(t), ioparam,
											c->typmod);
			c->isnull = false;
		}
		curnames[ncur - 1] = mnames[i];
		curtypes[ncur - 1] = mtypes[i];
		set_after(c, ncur, curnames, curtypes);
	}

	reason = identity_reason(job, lines, command);
	if (reason != NULL)
		return reason;
	if (f->nchanges == 0)
		return NULL;
	if (job->apply->alter == NULL)
		return psprintf("catalogs of type \"%s\" do not follow schema changes of whole-row syncs (sync " INT64_FORMAT "): %s",
						CtasCatalogRoutine(job->target.catalog)->type_name,
						job->id, command);

	f->ncols = nmsg;
	f->attnums = mattnums;
	f->names = mnames;
	f->types = mtypes;
	f->typmods = palloc(sizeof(int32) * Max(nmsg, 1));
	for (i = 0; i < nmsg; i++)
	{
		char	   *t = attnum_line(lines, "typmod", mattnums[i]);

		f->typmods[i] = t ? atoi(t) : -1;
	}
	job->follow = f;
	return NULL;
}

/*
 * CtasSyncSchemaFollow
 *		Do what the last message planned for a whole-row sync (job->follow,
 *		see whole_row_change): with remote, on the remote table, in the
 *		batch the caller has begun; then take the columns after it as the
 *		job's (the query, its columns, the target's), stored with the job
 *		by CtasSyncSaveNames after the remote commit.  Without remote (a
 *		source transaction applied before, whose columns were not stored),
 *		only the latter.  Returns NULL, or why the target cannot follow
 *		(nothing was done then).  Can ERROR.
 */
char *
CtasSyncSchemaFollow(SyncJob *job, bool remote)
{
	SyncFollow *f = job->follow;
	MemoryContext cxt = GetMemoryChunkContext(job->attnums);
	MemoryContext oldcxt;
	RangeTblEntry *rte = linitial_node(RangeTblEntry, job->query->rtable);
	List	   *tlist = NIL;
	AttrNumber *oldattnums = job->attnums;
	int			oldncols = job->ncols;
	int			i;
	int			k;

	job->follow = NULL;
	if (f == NULL || f->nchanges == 0)
		return NULL;
	if (remote)
	{
		char	   *reason = job->apply->alter(&job->target, f->changes,
											   f->nchanges);

		if (reason != NULL)
			return psprintf("sync " INT64_FORMAT ": %s", job->id, reason);
	}

	oldcxt = MemoryContextSwitchTo(cxt);
	job->ncols = f->ncols;
	job->attnums = palloc(sizeof(AttrNumber) * Max(f->ncols, 1));
	job->attnames = palloc(sizeof(char *) * Max(f->ncols, 1));
	job->atttypes = palloc(sizeof(Oid) * Max(f->ncols, 1));
	job->infuncs = palloc0(sizeof(FmgrInfo) * Max(f->ncols, 1));
	job->ioparams = palloc(sizeof(Oid) * Max(f->ncols, 1));
	job->msgcol = palloc(sizeof(int) * Max(f->ncols, 1));
	for (i = 0; i < f->ncols; i++)
	{
		Oid			infunc;
		Var		   *var;

		job->attnums[i] = f->attnums[i];
		job->attnames[i] = pstrdup(f->names[i]);
		job->atttypes[i] = f->types[i];
		getTypeInputInfo(f->types[i], &infunc, &job->ioparams[i]);
		fmgr_info_cxt(infunc, &job->infuncs[i], cxt);
		job->msgcol[i] = -1;
		var = makeVar(1, f->attnums[i], f->types[i], f->typmods[i],
					  get_typcollation(f->types[i]), 0);
		tlist = lappend(tlist, makeTargetEntry((Expr *) var, i + 1,
											   pstrdup(f->names[i]), false));
	}
	for (k = 0; k < job->target.nkeys; k++)
	{
		AttrNumber	a = oldattnums[job->keycol[k]];

		for (i = 0; i < job->ncols && job->attnums[i] != a; i++)
			;
		Assert(i < job->ncols);
		job->keycol[k] = i;
		job->target.keys[k] = job->attnames[i];
	}
	job->query = copyObject(job->query);
	job->query->targetList = tlist;
	rte = linitial_node(RangeTblEntry, job->query->rtable);
	rte->selectedCols = NULL;
	for (i = 0; i < job->ncols; i++)
		rte->selectedCols = bms_add_member(rte->selectedCols,
										   job->attnums[i] - FirstLowInvalidHeapAttributeNumber);
	job->target.ncolumns = job->ncols;
	job->target.columns = job->attnames;
	job->target.types = job->atttypes;
	job->tupdesc = CtasSyncRecordedTupdesc(job);
	for (i = 0; i < f->nchanges; i++)
		job->schema_log = lappend(job->schema_log,
								  psprintf("%X/%X %s",
										   LSN_FORMAT_ARGS(job->target.change_lsn),
										   f->what[i]));
	MemoryContextSwitchTo(oldcxt);
	(void) oldncols;
	job->reshaped = true;
	job->names_changed = true;
	return NULL;
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
	RangeTblEntry *rte = linitial_node(RangeTblEntry, job->query->rtable);
	char	  **names = palloc0(sizeof(char *) * Max(job->ncols, 1));
	Oid		   *types = palloc0(sizeof(Oid) * Max(job->ncols, 1));
	ListCell   *lc;
	int			i;

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

	child = message_line(lines, "child");
	if (child != NULL && rte->inh)
		return psprintf("inheritance child \"%s\" was made or attached to the source of sync " INT64_FORMAT ", whose query reads the children: %s",
						strchr(child, ' ') ? strchr(child, ' ') + 1 : child,
						job->id, command);
	if (job->whole_row)
		return whole_row_change(job, lines, command, table);

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
		if (types[i] != job->atttypes[i])
			return psprintf("column \"%s\" of table \"%s\" read by sync " INT64_FORMAT " changed its type: %s",
							job->attnames[i], table, job->id, command);
	}

	/* a column rewritten, even under the same type (USING) */
	foreach(lc, lines)
	{
		int			subtype;
		int			attnum;

		line = lfirst(lc);
		if (sscanf(line, "sub %d %d", &subtype, &attnum) != 2 ||
			subtype != (int) AT_AlterColumnType)
			continue;
		for (i = 0; i < job->ncols; i++)
		{
			if (job->attnums[i] == attnum)
				return psprintf("column \"%s\" of table \"%s\" read by sync " INT64_FORMAT " was rewritten by ALTER COLUMN ... TYPE: %s",
								job->attnames[i], table, job->id, command);
		}
	}

	/* the key within the replica identity */
	reason = identity_reason(job, lines, command);
	if (reason != NULL)
		return reason;

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
 * CtasSyncRecordedTupdesc
 *		The row type the query's expressions run on, built from what the
 *		job recorded (the attnums it reads and their types), never from the
 *		catalog of the moment: the worker may be reading WAL written before
 *		a DDL that the catalog already shows, and meets that DDL at its
 *		place (see the head of this file).  The columns the query does not
 *		read stay NULL.  In the current memory context.
 */
TupleDesc
CtasSyncRecordedTupdesc(SyncJob *job)
{
	int			natts = 1;
	int			i;
	TupleDesc	desc;

	for (i = 0; i < job->ncols; i++)
		natts = Max(natts, job->attnums[i]);
	desc = CreateTemplateTupleDesc(natts);
	for (i = 1; i <= natts; i++)
		TupleDescInitEntry(desc, i, NULL, INT4OID, -1, 0);
	for (i = 0; i < job->ncols; i++)
		TupleDescInitEntry(desc, job->attnums[i], NULL, job->atttypes[i],
						   -1, 0);
	return desc;
}

/* an array of n Datums of type typid (int2, oid or text) */
static Datum
datum_array(Datum *elems, int n, Oid typid)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(typid, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_array(elems, n, typid, typlen, typbyval,
										   typalign));
}

/*
 * queue_schema_event
 *		The webhook event "schema_change" of a change that job followed, its
 *		text in the event's error field, if the job's catalog (or
 *		ctas_fed.notify_url) names a webhook; sent as the events of the
 *		job's states are (sync/worker.c), by the notifier.
 */
static void
queue_schema_event(SyncJob *job, const char *change)
{
	const CtasCatalog *catalog = job->target.catalog;
	const char *url = catalog->notify_url ? catalog->notify_url : CtasNotifyUrl;
	CtasJobEvent ev;

	if (url == NULL || url[0] == '\0')
		return;
	memset(&ev, 0, sizeof(ev));
	ev.job_id = job->job_id;
	ev.started_at = job->created_at;
	strlcpy(ev.mode, "sync", sizeof(ev.mode));
	strlcpy(ev.state_name, "schema_change", sizeof(ev.state_name));
	strlcpy(ev.error, change, sizeof(ev.error));
	strlcpy(ev.catalog, catalog->name, sizeof(ev.catalog));
	snprintf(ev.target, sizeof(ev.target), "%s.%s",
			 quote_identifier(job->target.schema),
			 quote_identifier(job->target.table));
	strlcpy(ev.notify_url, url, sizeof(ev.notify_url));
	ev.notify_trusted = !(catalog->notify_url_limited &&
						  url == catalog->notify_url);
	CtasJobsQueueEvent(&ev);
}

/*
 * save_shape
 *		Store the columns a whole-row sync has after the schema changes it
 *		followed (CtasSyncSchemaFollow) in its ctas_fed.syncs row, record
 *		each change in ctas_fed.sync_schema_changes and queue its webhook
 *		event (schema_change), in the current transaction, connected to
 *		SPI.
 */
static void
save_shape(SyncJob *job)
{
	Oid			types[6] = {INT8OID, INT2ARRAYOID, OIDARRAYOID, TEXTARRAYOID,
	TEXTOID, TEXTARRAYOID};
	Datum		values[6];
	Datum	   *elems = palloc(sizeof(Datum) * Max(job->ncols, 1));
	Datum	   *oids = palloc(sizeof(Datum) * Max(job->ncols, 1));
	Datum	   *keys = palloc(sizeof(Datum) * Max(job->target.nkeys, 1));
	ListCell   *lc;
	int			i;

	for (i = 0; i < job->ncols; i++)
	{
		elems[i] = Int16GetDatum(job->attnums[i]);
		oids[i] = ObjectIdGetDatum(job->atttypes[i]);
	}
	for (i = 0; i < job->target.nkeys; i++)
		keys[i] = CStringGetTextDatum(job->target.keys[i]);
	values[0] = Int64GetDatum(job->id);
	values[1] = datum_array(elems, job->ncols, INT2OID);
	values[2] = datum_array(oids, job->ncols, OIDOID);
	for (i = 0; i < job->ncols; i++)
		elems[i] = CStringGetTextDatum(job->target.columns[i]);
	values[3] = datum_array(elems, job->ncols, TEXTOID);
	values[4] = CStringGetTextDatum(nodeToString(job->query));
	values[5] = datum_array(keys, job->target.nkeys, TEXTOID);
	if (SPI_execute_with_args("UPDATE ctas_fed.syncs SET source_attnums = $2, "
							  "source_types = $3, remote_columns = $4, "
							  "query_tree = $5, key_columns = $6 "
							  "WHERE sync_id = $1", 6, types, values, NULL,
							  false, 0) < 0)
		elog(ERROR, "could not store the columns of sync " INT64_FORMAT,
			 job->id);

	foreach(lc, job->schema_log)
	{
		char	   *entry = lfirst(lc);
		char	   *change = strchr(entry, ' ') + 1;
		Oid			ltypes[3] = {INT8OID, TEXTOID, TEXTOID};
		Datum		lvalues[3];

		lvalues[0] = Int64GetDatum(job->id);
		lvalues[1] = CStringGetTextDatum(pnstrdup(entry, change - 1 - entry));
		lvalues[2] = CStringGetTextDatum(change);
		if (SPI_execute_with_args("INSERT INTO ctas_fed.sync_schema_changes "
								  "(sync_id, lsn, change, followed) "
								  "VALUES ($1, $2::pg_catalog.pg_lsn, $3, true)",
								  3, ltypes, lvalues, NULL, false, 0) < 0)
			elog(ERROR, "could not record a schema change of sync " INT64_FORMAT,
				 job->id);
		queue_schema_event(job, change);
	}
	list_free_deep(job->schema_log);
	job->schema_log = NIL;
	job->reshaped = false;
	/* rows recorded: at most CTAS_SYNC_SCHEMA_CHANGES_KEPT per sync */
	if (SPI_execute_with_args("DELETE FROM ctas_fed.sync_schema_changes "
							  "WHERE sync_id = $1 AND change_id <= "
							  "(SELECT change_id FROM ctas_fed.sync_schema_changes "
							  "WHERE sync_id = $1 ORDER BY change_id DESC "
							  "OFFSET " CppAsString2(CTAS_SYNC_SCHEMA_CHANGES_KEPT) " LIMIT 1)",
							  1, types, values, NULL, false, 0) < 0)
		elog(ERROR, "could not trim the schema changes of sync " INT64_FORMAT,
			 job->id);
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
	Oid			types[2] = {INT8OID, TEXTARRAYOID};
	Datum		values[2];
	Datum	   *elems = palloc(sizeof(Datum) * Max(job->ncols, 1));
	int			i;

	for (i = 0; i < job->ncols; i++)
		elems[i] = CStringGetTextDatum(job->attnames[i]);
	values[0] = Int64GetDatum(job->id);
	values[1] = PointerGetDatum(construct_array(elems, job->ncols, TEXTOID,
												-1, false, TYPALIGN_INT));
	if (SPI_execute_with_args("UPDATE ctas_fed.syncs SET source_columns = $2 "
							  "WHERE sync_id = $1", 2, types, values, NULL,
							  false, 0) < 0)
		elog(ERROR, "could not store the column names of sync " INT64_FORMAT,
			 job->id);
	job->names_changed = false;
	if (job->reshaped)
		save_shape(job);
}

/*
 * CtasSyncRecordSchemaFailure
 *		The schema change at which job failed (job->schema_failed_at, set by
 *		sync/apply.c) as a row of ctas_fed.sync_schema_changes, with error,
 *		the reason, in a transaction of its own: the worker's, after the
 *		job's failure is recorded.
 */
void
CtasSyncRecordSchemaFailure(SyncJob *job, const char *error)
{
	Oid			types[3] = {INT8OID, PG_LSNOID, TEXTOID};
	Datum		values[3];

	values[0] = Int64GetDatum(job->id);
	values[1] = LSNGetDatum(job->schema_failed_at);
	values[2] = CStringGetTextDatum(error);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute_with_args("INSERT INTO ctas_fed.sync_schema_changes "
							  "(sync_id, lsn, change, followed) "
							  "VALUES ($1, $2, $3, false)",
							  3, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not record the schema change sync " INT64_FORMAT " failed at",
			 job->id);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}
