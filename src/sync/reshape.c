/*-------------------------------------------------------------------------
 *
 * reshape.c
 *		  The copy that follows a retype: a sync whose source changed the
 *		  type or the values of a column it reads is copied again, the job
 *		  and the remote table taking the new columns at that copy.
 *
 * A column the sync reads retyped so that
 * values may change, or rewritten by ALTER COLUMN ... TYPE ... USING, is
 * not in the WAL: the event trigger's message makes the worker apply the
 * source transactions committed before the DDL's, then mark the sync's
 * jobs "copying" (sync/ddl.c, sync/follow.c: CtasSyncResyncWanted), and
 * the job is copied again, as a resync, under a snapshot after the DDL.
 * At that copy the job takes the columns of its source as the catalog shows
 * them (CtasSyncReshapeForCopy, before the copy checks them), the remote
 * table takes them in the copy's remote transaction or on the table a
 * rebuild makes (reshape_remote, sync/resync.c), and the new columns are stored with the
 * job once the copy committed (CtasSyncReshapeSave).  A crash between the
 * copy's remote commit and that store copies again: the remote changes are
 * then found done (the targets' alter skips them).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/reshape.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "guc.h"
#include "sync/sync_int.h"

/* the columns a query sync's Vars read anew (retype_vars) */
typedef struct SyncRetype
{
	int			ncols;
	AttrNumber *attnums;
	bool	   *retyped;
	Oid		   *types;
	int32	   *typmods;
} SyncRetype;

static bool
retype_vars(Node *node, void *arg)
{
	SyncRetype *r = arg;

	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) node;
		int			i;

		for (i = 0; v->varno == 1 && v->varlevelsup == 0 && i < r->ncols; i++)
		{
			if (r->retyped[i] && r->attnums[i] == v->varattno)
			{
				v->vartype = r->types[i];
				v->vartypmod = r->typmods[i];
				v->varcollid = get_typcollation(r->types[i]);
			}
		}
		return false;
	}
	return expression_tree_walker(node, retype_vars, arg);
}

/* the text after "<key> <attnum> " in lines, or NULL */
static char *
attnum_text(List *lines, const char *key, AttrNumber attnum)
{
	ListCell   *lc;
	size_t		n = strlen(key);

	foreach(lc, lines)
	{
		char	   *line = lfirst(lc);
		char	   *end;

		if (strncmp(line, key, n) == 0 && line[n] == ' ' &&
			strtol(line + n + 1, &end, 10) == attnum && *end == ' ')
			return end + 1;
	}
	return NULL;
}

/*
 * reshape_query
 *		A query sync (not whole rows) at a copy: each column it reads takes
 *		its name and type as the catalog lines show them (a column gone is
 *		left to CtasSyncCheckSource), its Vars the new type and typmod, and
 *		each result column whose type changed a retype of the remote column
 *		(job->recopy).  A new type that an expression of the query reads
 *		fails the job.  In the job's memory.
 */
static void
reshape_query(SyncJob *job, List *lines, const char *table)
{
	MemoryContext cxt = GetMemoryChunkContext(job->attnums);
	MemoryContext oldcxt;
	SyncRetype	r;
	Query	   *q;
	Oid		   *types;
	int			nchanges = 0;
	bool		any = false;
	ListCell   *lc;
	int			i;
	int			k;

	r.ncols = job->ncols;
	r.attnums = job->attnums;
	r.retyped = palloc0(sizeof(bool) * Max(job->ncols, 1));
	r.types = palloc0(sizeof(Oid) * Max(job->ncols, 1));
	r.typmods = palloc0(sizeof(int32) * Max(job->ncols, 1));
	for (i = 0; i < job->ncols; i++)
	{
		char	   *col = attnum_text(lines, "col", job->attnums[i]);
		char	   *mod = attnum_text(lines, "typmod", job->attnums[i]);
		char	   *name;
		unsigned long typid;

		if (col == NULL)
			return;				/* dropped: CtasSyncCheckSource says so */
		typid = strtoul(col, &name, 10);
		name++;
		r.types[i] = (Oid) typid;
		r.typmods[i] = mod ? atoi(mod) : -1;
		if (strcmp(name, job->attnames[i]) != 0)
		{
			job->attnames[i] = MemoryContextStrdup(cxt, name);
			job->names_changed = true;
		}
		if (r.types[i] != job->atttypes[i] ||
			r.typmods[i] != CtasSyncReadTypmod(job->query, job->attnums[i]))
		{
			/* the expressions are bound to the old type */
			if (r.types[i] != job->atttypes[i])
			{
				if (CtasSyncReadsInExpression(job->query, job->attnums[i]))
					SYNC_FAIL(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							  errmsg("column \"%s\" of table \"%s\" read by sync " INT64_FORMAT " changed its type from %s to %s, which the query reads in an expression or its WHERE",
									 name, table, job->id,
									 format_type_be(job->atttypes[i]),
									 format_type_be(r.types[i])),
							  errhint("Stop the sync with ctas_fed.stop_sync() and create it again (docs/sync.md, \"Schema changes\")."));
			}
			r.retyped[i] = true;
			any = true;
		}
	}
	if (!any)
		return;

	oldcxt = MemoryContextSwitchTo(cxt);
	q = copyObject(job->query);
	(void) retype_vars((Node *) q->targetList, &r);
	(void) retype_vars(q->jointree->quals, &r);
	types = palloc(sizeof(Oid) * Max(job->target.ncolumns, 1));
	memcpy(types, job->target.types, sizeof(Oid) * job->target.ncolumns);
	job->recopy = palloc0(sizeof(CtasSyncAlter) * Max(job->target.ncolumns, 1));
	k = 0;
	foreach(lc, q->targetList)
	{
		TargetEntry *te = lfirst(lc);
		TargetEntry *old = list_nth(job->query->targetList, k);
		Oid			type = exprType((Node *) te->expr);
		int32		typmod = exprTypmod((Node *) te->expr);

		if (te->resjunk || k >= job->target.ncolumns)
			break;
		if (type != exprType((Node *) old->expr) ||
			typmod != exprTypmod((Node *) old->expr))
		{
			CtasSyncAlter *c = &job->recopy[nchanges++];
			char	   *what;

			c->kind = CTAS_SYNC_RETYPE_COLUMN;
			c->column = job->target.columns[k];
			c->typid = type;
			c->typmod = typmod;
			c->isnull = true;
			types[k] = type;
			c->ncolumns = job->target.ncolumns;
			c->columns = job->target.columns;
			c->types = types;
			what = psprintf("%X/%X ALTER COLUMN %s TYPE %s (values copied again)",
							LSN_FORMAT_ARGS(job->target.change_lsn),
							quote_identifier(c->column),
							format_type_with_typemod(type, typmod));
			job->schema_log = lappend(job->schema_log, what);
		}
		k++;
	}
	job->nrecopy = nchanges;
	if (nchanges == 0)
		job->recopy = NULL;

	/* the job reads the new types */
	for (i = 0; i < job->ncols; i++)
	{
		Oid			infunc;

		if (!r.retyped[i])
			continue;
		job->atttypes[i] = r.types[i];
		getTypeInputInfo(r.types[i], &infunc, &job->ioparams[i]);
		fmgr_info_cxt(infunc, &job->infuncs[i], cxt);
	}
	job->query = q;
	job->target.types = types;
	for (k = 0; k < job->target.nkeys; k++)
		job->target.key_types[k] = job->atttypes[job->keycol[k]];
	job->tupdesc = CtasSyncRecordedTupdesc(job);
	job->reshaped = true;
	job->names_changed = true;
	MemoryContextSwitchTo(oldcxt);
}

/*
 * rekey_at_copy
 *		A query sync whose source has a new key (CtasSyncPlanRekey, planned
 *		in job->follow): the change joins the copy's remote changes
 *		(job->recopy, after the retypes of reshape_query) and the job takes
 *		the key in memory.
 */
static void
rekey_at_copy(SyncJob *job)
{
	MemoryContext cxt = GetMemoryChunkContext(job->attnums);
	int			n;
	CtasSyncAlter *planned = CtasSyncPlannedChanges(job, &n);
	CtasSyncAlter *all;
	char	   *reason;

	all = MemoryContextAlloc(cxt, sizeof(CtasSyncAlter) * (job->nrecopy + n));
	if (job->nrecopy > 0)
		memcpy(all, job->recopy, sizeof(CtasSyncAlter) * job->nrecopy);
	memcpy(all + job->nrecopy, planned, sizeof(CtasSyncAlter) * n);
	reason = CtasSyncSchemaFollow(job, false);
	if (reason != NULL)
		SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				  errmsg_internal("%s", reason));
	job->recopy = all;
	job->nrecopy += n;
}

/*
 * CtasSyncReshapeForCopy
 *		In copy_job (sync/join.c), before the copy checks the source's
 *		columns: when the catalog shows the columns the job reads with
 *		another name, type or typmod than it recorded (a retype whose values
 *		the copy sends again, see above), the job takes them in memory, the
 *		remote changes that follow are kept in job->recopy for
 *		CtasSyncCopyStart, and the changes are logged at consistent, the
 *		copy's point.  A whole-row sync follows columns added, dropped,
 *		renamed and retyped at once (sync/follow.c); a change it cannot
 *		follow fails the job.  In the copy's transaction.
 */
void
CtasSyncReshapeForCopy(SyncJob *job, XLogRecPtr consistent)
{
	const char *command = "copy after a schema change";
	Relation	rel;
	List	   *lines;
	char	   *table;
	char	   *reason;
	int			i;

	job->recopy = NULL;
	job->nrecopy = 0;
	rel = try_relation_open(job->relid, AccessShareLock);
	if (rel == NULL)
		return;					/* CtasSyncCheckSource fails it */
	table = psprintf("%s.%s",
					 get_namespace_name(RelationGetNamespace(rel)),
					 RelationGetRelationName(rel));
	relation_close(rel, AccessShareLock);
	CtasSyncCurrentJob = job;
	lines = CtasSyncDescribeTable(job->relid);
	job->target.change_lsn = consistent;

	if (!job->whole_row)
	{
		reshape_query(job, lines, table);
		/* a new key: the job takes it, the remote at the copy */
		reason = CtasSyncIdentityReason(job, lines, command, true);
		if (reason != NULL)
			SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					  errmsg_internal("%s", reason),
					  errhint("Stop the sync with ctas_fed.stop_sync() and create it again (docs/sync.md, \"Schema changes\")."));
		if (job->follow != NULL)
			rekey_at_copy(job);
		return;
	}
	reason = CtasSyncWholeRowChange(job, lines, command, table, true);
	if (reason == NULL)
		reason = CtasSyncIdentityReason(job, lines, command, true);
	if (reason != NULL)
		SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				  errmsg_internal("%s", reason),
				  errhint("Stop the sync with ctas_fed.stop_sync() and create it again (docs/sync.md, \"Schema changes\")."));
	if (job->follow == NULL)
		return;
	job->recopy = CtasSyncPlannedChanges(job, &job->nrecopy);
	/* the job's columns, in memory: no remote yet (reshape_remote) */
	reason = CtasSyncSchemaFollow(job, false);
	if (reason != NULL)
		SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				  errmsg_internal("%s", reason));
	for (i = 0; i < job->target.nkeys; i++)
		job->target.key_types[i] = job->atttypes[job->keycol[i]];
}

/*
 * CtasSyncReshapeSave
 *		After the local transaction of a copy committed (sync/join.c): the
 *		columns CtasSyncReshapeForCopy gave the job are stored with it, and
 *		the changes recorded (ctas_fed.sync_schema_changes, webhook), in a
 *		transaction of its own, before the job is marked streaming.
 *		Outside a transaction.  Can ERROR.
 */
void
CtasSyncReshapeSave(SyncJob *job)
{
	job->recopy = NULL;
	job->nrecopy = 0;
	if (!job->reshaped && !job->names_changed)
		return;
	/* tests: a worker killed with the copy committed, its shape not stored */
	CtasFaultPointWait("sync_reshape_unsaved");
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	CtasSyncSaveNames(job);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
}
