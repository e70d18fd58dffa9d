/*-------------------------------------------------------------------------
 *
 * follow.c
 *		  The schema changes that a whole-row sync follows on its remote
 *		  table, and their record (docs/sync-schema-changes.md): the plan
 *		  made from the event trigger's message (sync/ddl.c), the job's
 *		  columns after it, ctas_fed.sync_schema_changes and the webhook
 *		  event schema_change.
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

/* rows of ctas_fed.sync_schema_changes kept per sync */
#define CTAS_SYNC_SCHEMA_CHANGES_KEPT	100

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
	int		   *keycol;			/* a copy: changed in place */
	char	  **keys;			/* a copy: changed in place */
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
	memcpy(job->keycol, b->keycol, sizeof(int) * job->target.nkeys);
	memcpy(job->target.keys, b->keys, sizeof(char *) * job->target.nkeys);
	job->query = b->query;
	job->tupdesc = b->tupdesc;
	job->target.ncolumns = b->ncolumns;
	job->target.columns = b->columns;
	job->target.types = b->types;
	job->schema_log = NIL;
	job->reshaped = false;
	job->before = NULL;
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
	RangeTblEntry *rte = linitial_node(RangeTblEntry, job->query->rtable);
	List	   *tlist = NIL;
	AttrNumber *oldattnums = job->attnums;
	int			oldncols = job->ncols;
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
 * CtasSyncSaveShape
 *		Store the columns a whole-row sync has after the schema changes it
 *		followed (CtasSyncSchemaFollow) in its ctas_fed.syncs row, record
 *		each change in ctas_fed.sync_schema_changes and queue its webhook
 *		event (schema_change), in the current transaction, connected to
 *		SPI.
 */
void
CtasSyncSaveShape(SyncJob *job)
{
	Datum		shape[5];
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
	shape[0] = datum_array(elems, job->ncols, INT2OID);
	shape[1] = datum_array(oids, job->ncols, OIDOID);
	/* the remote columns: as many as the query's result, not its sources */
	elems = palloc(sizeof(Datum) * Max(job->target.ncolumns, 1));
	for (i = 0; i < job->target.ncolumns; i++)
		elems[i] = CStringGetTextDatum(job->target.columns[i]);
	shape[2] = datum_array(elems, job->target.ncolumns, TEXTOID);
	shape[3] = CStringGetTextDatum(nodeToString(job->query));
	shape[4] = datum_array(keys, job->target.nkeys, TEXTOID);
	CtasSyncStoreShape(job->id, shape);

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
							  1, (Oid[]) {INT8OID},
							  (Datum[]) {Int64GetDatum(job->id)}, NULL, false,
							  0) < 0)
		elog(ERROR, "could not trim the schema changes of sync " INT64_FORMAT,
			 job->id);
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
