/*-------------------------------------------------------------------------
 *
 * follow.c
 *		  The schema changes that a whole-row sync follows on its remote
 *		  table, and a new key of a sync (docs/sync-schema-changes.md): the
 *		  plan made from the event trigger's message (sync/ddl.c), the
 *		  job's columns and key after it.
 *
 * The record of what a sync followed (ctas_fed.sync_schema_changes, the
 * webhook event) is sync/schemalog.c.
 *
 * A sync whose query takes the source's rows whole (every live column, in
 * attnum order, under its own name) follows a column dropped, renamed,
 * retyped so that no value's text changes, or added, on its remote table,
 * through the target's alter (target.h), at the DDL's place among the
 * changes (sync/apply.c).  A retype that may change values (a cast that
 * rounds or formats, a USING, a key) asks for a copy again instead
 * (CtasSyncResyncWanted), at which the job takes the new columns
 * (sync/reshape.c).  Its columns, query and remote columns then
 * change in memory, and are stored with the job after the remote commit
 * (CtasSyncSaveShape, called by CtasSyncSaveNames), as a rename's names
 * are: a crash between the two commits reads the DDL's transaction again,
 * as applied, and the job takes the columns from its message again.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/follow.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"

#include "catalog.h"
#include "guc.h"
#include "jobs.h"
#include "sync/sync_int.h"
#include "targets.h"

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
	/* a new key (CtasSyncPlanRekey): its source attnums, remote names */
	int			nkeys;			/* 0: the key stays */
	AttrNumber *keyattnums;
	char	  **keynames;
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

/* what typmod_walker looks for, and finds */
typedef struct SyncTypmod
{
	AttrNumber	attnum;
	int32		typmod;
	bool		found;
} SyncTypmod;

static bool
typmod_walker(Node *node, void *arg)
{
	SyncTypmod *t = arg;

	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) node;

		if (v->varno == 1 && v->varlevelsup == 0 && v->varattno == t->attnum)
		{
			t->typmod = v->vartypmod;
			t->found = true;
			return true;
		}
		return false;
	}
	return expression_tree_walker(node, typmod_walker, arg);
}

/*
 * CtasSyncReadTypmod
 *		The typmod with which query reads column attnum of its table (its
 *		Vars carry the one the column had when the query was made or last
 *		followed a retype), -1 when it does not read it.
 */
int32
CtasSyncReadTypmod(Query *query, AttrNumber attnum)
{
	SyncTypmod	t;

	t.attnum = attnum;
	t.typmod = -1;
	t.found = false;
	if (!typmod_walker((Node *) query->targetList, &t))
		(void) typmod_walker(query->jointree->quals, &t);
	return t.typmod;
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
 * CtasSyncWholeRowChange
 *		The message seen by a sync that takes whole rows (its columns are
 *		every live column of the source, in attnum order, under their own
 *		names): a column dropped, renamed, retyped (as retype_keeps_text
 *		allows) or added is followed on the remote table, in that order,
 *		the plan left in job->follow for CtasSyncSchemaFollow; NULL then,
 *		else why it cannot be followed.  The caller checks the replica
 *		identity (sync/ddl.c).  An added column takes, in the
 *		rows there are, what PostgreSQL gave them (describe_fill): its
 *		missing value, or NULL; a per-row value (a volatile default) is
 *		not in the WAL, and fails the job.
 */
char *
CtasSyncWholeRowChange(SyncJob *job, List *lines, const char *command,
					   const char *table, bool recopy)
{
	char	   *recopy_why = NULL;
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
			newmod != CtasSyncReadTypmod(job->query, mattnums[i]) ||
			attnum_line(lines, psprintf("sub %d", (int) AT_AlterColumnType),
						mattnums[i]) != NULL)
		{
			CtasSyncAlter *c;
			bool		is_key = false;
			int			kk;

			for (kk = 0; kk < job->target.nkeys; kk++)
				is_key |= job->keycol[kk] == j;
			/* the WHERE's operators are bound to the old type */
			if (mtypes[i] != job->atttypes[j] &&
				bms_is_member(mattnums[i] - FirstLowInvalidHeapAttributeNumber,
							  whereatts))
				return psprintf("column \"%s\" of table \"%s\", which the WHERE of sync " INT64_FORMAT " reads, changed its type from %s to %s: %s",
								mnames[i], table, job->id,
								format_type_be(job->atttypes[j]),
								format_type_be(mtypes[i]), command);

			/*
			 * Values that may have changed (a cast that rounds, pads or
			 * formats, a USING, a key, a column of the WHERE whose rows
			 * may move in or out): the sync's table is copied again from
			 * a snapshot after the DDL, which retypes the remote column
			 * first (CtasSyncReshapeForCopy).
			 */
			if (attnum_line(lines, "using", mattnums[i]) != NULL ||
				is_key ||
				bms_is_member(mattnums[i] - FirstLowInvalidHeapAttributeNumber,
							  whereatts) ||
				!retype_keeps_text(job->atttypes[j], mtypes[i], newmod))
			{
				if (!recopy && recopy_why == NULL)
					recopy_why = psprintf("column \"%s\" of table \"%s\" read by sync " INT64_FORMAT " changed its type from %s to %s or was rewritten, its values are copied again from a snapshot after the change: %s",
										  mnames[i], table, job->id,
										  format_type_be(job->atttypes[j]),
										  format_type_with_typemod(mtypes[i], newmod),
										  command);
			}
			c = add_change(f, &ncur, curnames, curtypes,
						   CTAS_SYNC_RETYPE_COLUMN, k,
						   psprintf("ALTER COLUMN %s TYPE %s%s",
									quote_identifier(mnames[i]),
									format_type_with_typemod(mtypes[i], newmod),
									recopy ? " (values copied again)" : ""));
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
		/* a copy reads the values the rows were given */
		if (attnum_line(lines, "rewritten", mattnums[i]) != NULL &&
			!recopy && recopy_why == NULL)
			return psprintf("column \"%s\" was added to table \"%s\" of sync " INT64_FORMAT " with a volatile default (or as an identity, or of a domain type with constraints), which gave each existing row a value the WAL does not carry: %s",
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

	if (f->nchanges == 0)
		return NULL;
	if (job->apply->alter == NULL)
		return psprintf("catalogs of type \"%s\" do not follow schema changes of whole-row syncs (sync " INT64_FORMAT "): %s",
						CtasCatalogRoutine(job->target.catalog)->type_name,
						job->id, command);
	/* a copy follows it all (the caller fails it on a wrong identity) */
	if (recopy_why != NULL)
	{
		CtasSyncResyncWanted = true;
		return recopy_why;
	}

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
 * CtasSyncPlannedChanges
 *		The remote changes of the plan CtasSyncWholeRowChange left in
 *		job->follow, and their number in *n; NULL when there is none.
 */
CtasSyncAlter *
CtasSyncPlannedChanges(SyncJob *job, int *n)
{
	*n = job->follow ? job->follow->nchanges : 0;
	return job->follow ? job->follow->changes : NULL;
}

/*
 * CtasSyncPlanRekey
 *		The replica identity of job's source became the unique index on
 *		ids[0..nids - 1], which does not contain the job's key (REPLICA
 *		IDENTITY USING INDEX, a primary key replaced): the remote key
 *		follows it when the query outputs each of its columns as a column
 *		of its result (a whole-row sync always).  The change is added to
 *		job->follow (made, keeping the columns, for a query sync), after
 *		the column changes of the same message.  A target without
 *		transactions cannot change its key in place: the job is copied
 *		again (CtasSyncResyncWanted) into a table made with the new key,
 *		and at that copy (recopy) the plan is made.  Returns NULL, or why
 *		the key cannot follow (reason of the caller's, sync/ddl.c).
 */
char *
CtasSyncPlanRekey(SyncJob *job, List *lines, const AttrNumber *ids, int nids,
				  const char *command, bool recopy)
{
	SyncFollow *f = job->follow;
	char	  **names = palloc(sizeof(char *) * nids);
	Oid		   *types = palloc(sizeof(Oid) * nids);
	StringInfoData what;
	CtasSyncAlter *c;
	int			i;

	initStringInfo(&what);
	for (i = 0; i < nids; i++)
	{
		char	   *col = attnum_line(lines, "col", ids[i]);
		char	   *name = col ? strchr(col, ' ') : NULL;

		if (name == NULL)
			return psprintf("its new replica identity names column %d, which the table does not have",
							ids[i]);
		name++;
		names[i] = NULL;
		if (job->whole_row)
		{
			names[i] = name;
			types[i] = (Oid) strtoul(col, NULL, 10);
		}
		else
		{
			ListCell   *lc;
			int			k = 0;

			foreach(lc, job->query->targetList)
			{
				TargetEntry *te = lfirst(lc);
				Var		   *v = (Var *) te->expr;

				if (te->resjunk || k >= job->target.ncolumns)
					break;
				if (names[i] == NULL && IsA(v, Var) && v->varno == 1 &&
					v->varlevelsup == 0 && v->varattno == ids[i])
				{
					names[i] = job->target.columns[k];
					types[i] = v->vartype;
				}
				k++;
			}
			if (names[i] == NULL)
				return psprintf("the query does not output column \"%s\" of the new replica identity as a column of its result",
								name);
		}
		appendStringInfo(&what, "%s%s", i ? ", " : "", quote_identifier(names[i]));
	}
	if (job->apply->alter == NULL)
		return psprintf("catalogs of type \"%s\" do not follow a new key",
						CtasCatalogRoutine(job->target.catalog)->type_name);
	if (!job->apply->transactional && !recopy)
	{
		CtasSyncResyncWanted = true;
		return psprintf("the replica identity of the source of sync " INT64_FORMAT " moved to (%s), a new key: the remote table is made again with it by a copy from a snapshot after the change: %s",
						job->id, what.data, command);
	}

	if (f == NULL)
	{
		f = palloc0(sizeof(SyncFollow));
		f->ncols = -1;			/* the columns stay */
		f->changes = palloc(sizeof(CtasSyncAlter));
		f->what = palloc(sizeof(char *));
		job->follow = f;
	}
	f->changes = repalloc(f->changes, sizeof(CtasSyncAlter) * (f->nchanges + 1));
	f->what = repalloc(f->what, sizeof(char *) * (f->nchanges + 1));
	c = &f->changes[f->nchanges];
	memset(c, 0, sizeof(*c));
	c->kind = CTAS_SYNC_REKEY;
	c->isnull = true;
	c->nkeys = nids;
	c->keys = names;
	c->key_types = types;
	if (f->nchanges > 0)
	{
		c->ncolumns = f->changes[f->nchanges - 1].ncolumns;
		c->columns = f->changes[f->nchanges - 1].columns;
		c->types = f->changes[f->nchanges - 1].types;
	}
	else
	{
		c->ncolumns = job->target.ncolumns;
		c->columns = job->target.columns;
		c->types = job->target.types;
	}
	f->what[f->nchanges++] = psprintf("KEY (%s)%s", what.data,
									  recopy && !job->apply->transactional ?
									  " (rows copied again)" : "");
	f->nkeys = nids;
	f->keyattnums = palloc(sizeof(AttrNumber) * nids);
	memcpy(f->keyattnums, ids, sizeof(AttrNumber) * nids);
	f->keynames = names;
	return NULL;
}

static void take_follow_columns(SyncJob *job, SyncFollow *f,
								AttrNumber *oldattnums);

/* The columns of a job before the changes it followed in a reading */
typedef struct SyncShape
{
	int			ncols;
	AttrNumber *attnums;
	char	  **attnames;
	Oid		   *atttypes;
	FmgrInfo   *infuncs;
	Oid		   *ioparams;
	int		   *msgcol;
	int			nkeys;
	int		   *keycol;			/* a copy: changed in place */
	char	  **keys;			/* a copy: changed in place */
	Oid		   *key_types;
	Query	   *query;
	TupleDesc	tupdesc;
	int			ncolumns;
	char	  **columns;
	Oid		   *types;
} SyncShape;

/* keep the job's columns as they are, in job->before (its memory) */
static void
save_before(SyncJob *job, MemoryContext cxt)
{
	SyncShape  *b = MemoryContextAllocZero(cxt, sizeof(SyncShape));
	int			nkeys = job->target.nkeys;

	b->ncols = job->ncols;
	b->attnums = job->attnums;
	b->attnames = job->attnames;
	b->atttypes = job->atttypes;
	b->infuncs = job->infuncs;
	b->ioparams = job->ioparams;
	b->msgcol = job->msgcol;
	b->keycol = MemoryContextAlloc(cxt, sizeof(int) * Max(nkeys, 1));
	memcpy(b->keycol, job->keycol, sizeof(int) * nkeys);
	b->keys = MemoryContextAlloc(cxt, sizeof(char *) * Max(nkeys, 1));
	memcpy(b->keys, job->target.keys, sizeof(char *) * nkeys);
	b->nkeys = nkeys;
	b->key_types = job->target.key_types;
	b->query = job->query;
	b->tupdesc = job->tupdesc;
	b->ncolumns = job->target.ncolumns;
	b->columns = job->target.columns;
	b->types = job->target.types;
	job->before = b;
}

/*
 * CtasSyncSchemaUndo
 *		A reading of the stream that is read again (sync/apply.c): the job
 *		takes back the columns it had before the changes it followed in it,
 *		unrecorded.  The caller opens the targets again, for those columns.
 */
void
CtasSyncSchemaUndo(SyncJob *job)
{
	SyncShape  *b = job->before;

	job->follow = NULL;
	if (!job->reshaped || b == NULL)
		return;
	job->ncols = b->ncols;
	job->attnums = b->attnums;
	job->attnames = b->attnames;
	job->atttypes = b->atttypes;
	job->infuncs = b->infuncs;
	job->ioparams = b->ioparams;
	job->msgcol = b->msgcol;
	/* the copies: a new key (CtasSyncPlanRekey) made new arrays */
	job->target.nkeys = b->nkeys;
	job->keycol = b->keycol;
	job->target.keys = b->keys;
	job->target.key_types = b->key_types;
	job->query = b->query;
	job->tupdesc = b->tupdesc;
	job->target.ncolumns = b->ncolumns;
	job->target.columns = b->columns;
	job->target.types = b->types;
	job->schema_log = NIL;
	job->reshaped = false;
	job->before = NULL;
}

/*
 * CtasSyncSchemaFollow
 *		Do what the last message planned for a whole-row sync (job->follow,
 *		see CtasSyncWholeRowChange): with remote, on the remote table, in the
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
	AttrNumber *oldattnums = job->attnums;
	int			i;
	int			k;

	job->follow = NULL;
	if (f == NULL || f->nchanges == 0)
		return NULL;
	if (!job->reshaped)
		save_before(job, cxt);
	if (remote)
	{
		char	   *reason = job->apply->alter(&job->target, f->changes,
											   f->nchanges);

		if (reason != NULL)
			return psprintf("sync " INT64_FORMAT ": %s", job->id, reason);
	}

	oldcxt = MemoryContextSwitchTo(cxt);
	if (f->ncols >= 0)
		take_follow_columns(job, f, oldattnums);
	if (f->nkeys > 0)
	{
		int		   *keycol = palloc(sizeof(int) * f->nkeys);
		char	  **keys = palloc(sizeof(char *) * f->nkeys);
		Oid		   *key_types = palloc(sizeof(Oid) * f->nkeys);

		for (k = 0; k < f->nkeys; k++)
		{
			for (i = 0; i < job->ncols && job->attnums[i] != f->keyattnums[k]; i++)
				;
			if (i == job->ncols)
				elog(ERROR, "sync " INT64_FORMAT ": key column %d is not read",
					 job->id, f->keyattnums[k]);
			keycol[k] = i;
			keys[k] = pstrdup(f->keynames[k]);
			key_types[k] = job->atttypes[i];
		}
		job->keycol = keycol;
		job->target.nkeys = f->nkeys;
		job->target.keys = keys;
		job->target.key_types = key_types;
	}
	for (i = 0; i < f->nchanges; i++)
		job->schema_log = lappend(job->schema_log,
								  psprintf("%X/%X %s",
										   LSN_FORMAT_ARGS(job->target.change_lsn),
										   f->what[i]));
	MemoryContextSwitchTo(oldcxt);
	job->reshaped = true;
	job->names_changed = true;
	return NULL;
}

/*
 * take_follow_columns
 *		The columns of a whole-row sync after the changes of f: its query,
 *		its columns, the target's; the key columns where they are now
 *		(oldattnums: the columns before).  In the job's memory.
 */
static void
take_follow_columns(SyncJob *job, SyncFollow *f, AttrNumber *oldattnums)
{
	MemoryContext cxt = CurrentMemoryContext;
	RangeTblEntry *rte;
	List	   *tlist = NIL;
	int			i;
	int			k;

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
	/* a new key: set by the caller */
	for (k = 0; f->nkeys == 0 && k < job->target.nkeys; k++)
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
}
