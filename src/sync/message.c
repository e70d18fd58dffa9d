/*-------------------------------------------------------------------------
 *
 * message.c
 *		  The pgoutput messages of a peek as one job of a continuous sync
 *		  reads them: the query's expressions over a source row, the check
 *		  of a Relation message, the source row and the key of a tuple
 *		  message, a delete by key.  sync/apply.c reads the peek, routes
 *		  each message to its jobs and keeps their state; it calls these on
 *		  one message and one job at a time.
 *
 * The query is evaluated by the executor on the row of the source in a slot
 * of the source's shape: CtasSyncBuildEval prepares the ExprStates of its
 * WHERE and select list once per job, as the job's owner in a restricted
 * operation (as REFRESH MATERIALIZED VIEW does); CtasSyncEvaluate says
 * whether the row is in the WHERE and computes the select list.  A tuple
 * message is turned into that row (CtasSyncFillSlot) by the columns the
 * last Relation message placed (CtasSyncRelationOk, which also finds the
 * DDL the sync cannot follow), each parsed from its type's text output; a
 * value the change did not send (an unchanged TOAST value) is taken from
 * the old tuple when it carries it, else marked for sync/toast.c.  Keys are
 * handled as text (CtasSyncTupleKeys, CtasSyncSameKeys); a key column that
 * an UPDATE left unchanged and did not send is taken from the old key
 * PostgreSQL then logs.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/message.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/spi.h"
#include "libpq/pqformat.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"

#include "sync/sync_int.h"

/*
 * CtasSyncBuildEval
 *		The WHERE and the select list of the query as ExprStates over a row
 *		of the source, in a new EState under the current memory context.
 *		Can ERROR.
 */
SyncEval *
CtasSyncBuildEval(SyncJob *job)
{
	SyncEval   *ev = palloc0(sizeof(SyncEval));
	Node	   *quals = job->query->jointree->quals;
	ListCell   *lc;
	int			n = 0;
	Oid			save_userid;
	int			save_sec;
	int			gucnest;

	/*
	 * As the owner, restricted: preparing the expressions folds immutable
	 * functions of constants (the owner's code) and checks EXECUTE.  A
	 * setting the owner's code changes (set_config(..., false) is allowed
	 * in a restricted operation) is undone after it, as REFRESH
	 * MATERIALIZED VIEW does, so that the worker's own SPI, as the bootstrap
	 * superuser, never runs under the owner's search_path.  An ERROR here
	 * restores the identity and the settings with the transaction's abort.
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(job->owner, save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	gucnest = NewGUCNestLevel();
	ev->estate = CreateExecutorState();
	ev->econtext = GetPerTupleExprContext(ev->estate);
	if (quals != NULL)
		ev->qual = ExecPrepareQual(make_ands_implicit((Expr *) copyObject(quals)),
								   ev->estate);
	ev->exprs = palloc(sizeof(ExprState *) * list_length(job->query->targetList));
	foreach(lc, job->query->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		if (tle->resjunk)
			continue;
		ev->exprs[n] = ExecPrepareExpr((Expr *) copyObject(tle->expr),
									   ev->estate);
		n++;
	}
	AtEOXact_GUC(false, gucnest);
	SetUserIdAndSecContext(save_userid, save_sec);
	ev->nexprs = n;
	if (n != job->target.ncolumns)
		elog(ERROR, "sync " INT64_FORMAT ": query has %d columns, the remote table %d",
			 job->id, n, job->target.ncolumns);
	ev->slot = MakeSingleTupleTableSlot(job->tupdesc, &TTSOpsVirtual);
	ev->values = palloc0(sizeof(Datum) * n);
	ev->nulls = palloc0(sizeof(bool) * n);
	ev->keys = palloc0(sizeof(char *) * job->target.nkeys);
	ev->oldkeys = palloc0(sizeof(char *) * job->target.nkeys);
	ev->keyvals = palloc0(sizeof(Datum) * job->target.nkeys);
	return ev;
}

/* free what CtasSyncBuildEval made */
void
CtasSyncFreeEval(SyncEval *ev)
{
	ExecDropSingleTupleTableSlot(ev->slot);
	FreeExecutorState(ev->estate);
}

/*
 * CtasSyncEvaluate
 *		The query on the row in slot: false when the WHERE rejects it,
 *		else true with the remote values in ev->values (per-tuple memory).
 *		Can ERROR (the query's own expressions).
 */
bool
CtasSyncEvaluate(SyncEval *ev, TupleTableSlot *slot)
{
	int			i;

	ev->econtext->ecxt_scantuple = slot;
	if (ev->qual != NULL && !ExecQual(ev->qual, ev->econtext))
		return false;
	for (i = 0; i < ev->nexprs; i++)
		ev->values[i] = ExecEvalExpr(ev->exprs[i], ev->econtext,
									 &ev->nulls[i]);
	return true;
}

/*
 * CtasSyncRelationOk
 *		A Relation message of the source: find each column the query reads
 *		by name, with its type, into job->msgcol.  False, with *bad the
 *		index of the column at fault, when one is gone or has another type
 *		(a DDL the sync cannot follow), or when the columns the query reads
 *		no longer come in the order of their attnums (names exchanged by
 *		renames it did not follow).  With *bad = -1: the sync's key is no
 *		longer within the table's replica identity, so that an UPDATE of
 *		the key would arrive without the old key, and the old row stay on
 *		the remote (a replica identity moved to another unique index).
 *		The Relation message is decoded at its place in the WAL, after the
 *		DDL that changed what it describes and before the changes that
 *		follow it.
 */
bool
CtasSyncRelationOk(SyncJob *job, LogicalRepRelation *rel, int *bad)
{
	int			i;
	int			k;

	for (i = 0; i < job->ncols; i++)
	{
		int			j;

		job->msgcol[i] = -1;
		for (j = 0; j < rel->natts; j++)
		{
			if (strcmp(rel->attnames[j], job->attnames[i]) == 0)
				job->msgcol[i] = j;
		}
		if (job->msgcol[i] < 0 ||
			rel->atttyps[job->msgcol[i]] != job->atttypes[i])
		{
			*bad = i;
			return false;
		}
	}
	/* pgoutput sends the live columns in attnum order */
	for (i = 0; i < job->ncols; i++)
	{
		int			j;

		for (j = 0; j < job->ncols; j++)
		{
			if (job->attnums[i] < job->attnums[j] &&
				job->msgcol[i] >= job->msgcol[j])
			{
				*bad = i;
				return false;
			}
		}
	}
	for (k = 0; k < job->target.nkeys; k++)
	{
		if (!bms_is_member(job->msgcol[job->keycol[k]], rel->attkeys))
		{
			*bad = -1;
			return false;
		}
	}
	return true;
}

/*
 * CtasSyncCheckRelationMessage
 *		CtasSyncRelationOk, or the job fails.
 */
void
CtasSyncCheckRelationMessage(SyncJob *job, LogicalRepRelation *rel)
{
	int			bad;

	if (CtasSyncRelationOk(job, rel, &bad))
		return;
	if (bad < 0)
		SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				  errmsg("the replica identity of table \"%s.%s\" no longer contains the key of sync " INT64_FORMAT,
						 rel->nspname, rel->relname, job->id),
				  errdetail("An UPDATE of the key would not send the old key, and the old row would stay in the remote table.  The remote table keeps the changes of the source transactions that committed before the change."),
				  errhint("Stop the sync with ctas_fed.stop_sync() and create it again."));
	SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			  errmsg("column \"%s\" of table \"%s.%s\" read by sync " INT64_FORMAT " was dropped, renamed or changed its type",
					 job->attnames[bad], rel->nspname, rel->relname,
					 job->id),
			  errdetail("The remote table keeps the changes of the source transactions that committed before the change."),
			  errhint("Stop the sync with ctas_fed.stop_sync() and create it again."));
}

/*
 * CtasSyncPeekedMessage
 *		The pgoutput message of row i of SPI_tuptable (lsn, data) into msg,
 *		pointing into the row; returns its type.
 */
char
CtasSyncPeekedMessage(uint64 i, StringInfo msg)
{
	bool		isnull;
	bytea	   *data = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[i],
													 SPI_tuptable->tupdesc,
													 2, &isnull));

	msg->data = VARDATA_ANY(data);
	msg->len = VARSIZE_ANY_EXHDR(data);
	msg->maxlen = msg->len;
	msg->cursor = 0;
	return pq_getmsgbyte(msg);
}

/*
 * CtasSyncFillSlot
 *		The source row of a tuple message (and, for an unchanged TOAST
 *		value, of the old tuple when it carries it: REPLICA IDENTITY FULL,
 *		or a key column) into ev->slot, in per-tuple memory.  A value that
 *		neither carries is left NULL and marked in unchanged (per column
 *		the query reads), whose count is returned; with unchanged NULL (an
 *		INSERT) it fails the job.
 */
int
CtasSyncFillSlot(SyncJob *job, SyncEval *ev, LogicalRepTupleData *tup,
				 LogicalRepTupleData *old, bool *unchanged)
{
	TupleTableSlot *slot = ev->slot;
	int			nunchanged = 0;
	int			i;

	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, sizeof(bool) * slot->tts_tupleDescriptor->natts);
	for (i = 0; i < job->ncols; i++)
	{
		int			c = job->msgcol[i];
		int			a = job->attnums[i] - 1;
		StringInfo	value;

		if (unchanged != NULL)
			unchanged[i] = false;
		if (c < 0 || c >= tup->ncols)
			elog(ERROR, "sync " INT64_FORMAT ": a change came before its relation",
				 job->id);
		value = &tup->colvalues[c];
		if (tup->colstatus[c] == LOGICALREP_COLUMN_UNCHANGED)
		{
			if (old != NULL && c < old->ncols &&
				old->colstatus[c] == LOGICALREP_COLUMN_TEXT)
				value = &old->colvalues[c];
			else if (unchanged != NULL)
			{
				unchanged[i] = true;
				nunchanged++;
				continue;
			}
			else
				SYNC_FAIL(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						  errmsg("sync " INT64_FORMAT " received an unchanged TOAST value of column \"%s\"",
								 job->id, job->attnames[i]),
						  errdetail("Logical decoding does not send a large value that an UPDATE did not change."),
						  errhint("Set REPLICA IDENTITY FULL on the source table, then create the sync again."));
		}
		else if (tup->colstatus[c] == LOGICALREP_COLUMN_NULL)
			continue;
		else if (tup->colstatus[c] != LOGICALREP_COLUMN_TEXT)
			elog(ERROR, "sync " INT64_FORMAT ": unexpected column status \"%c\"",
				 job->id, tup->colstatus[c]);
		slot->tts_values[a] = InputFunctionCall(&job->infuncs[i], value->data,
												job->ioparams[i], -1);
		slot->tts_isnull[a] = false;
	}
	ExecStoreVirtualTuple(slot);
	return nunchanged;
}

/*
 * CtasSyncTupleKeys
 *		The key of a tuple message, as text, into keys.  A toasted key
 *		column that an UPDATE left unchanged is not in the new tuple, but
 *		PostgreSQL then logs the old key (heap_update: a replica identity
 *		stored externally), and "unchanged" means equal to it: it is taken
 *		from old.
 */
void
CtasSyncTupleKeys(SyncJob *job, LogicalRepTupleData *tup,
				  LogicalRepTupleData *old, char **keys)
{
	int			k;

	for (k = 0; k < job->target.nkeys; k++)
	{
		int			c = job->msgcol[job->keycol[k]];
		LogicalRepTupleData *from = tup;

		if (c >= 0 && c < tup->ncols &&
			tup->colstatus[c] == LOGICALREP_COLUMN_UNCHANGED &&
			old != NULL && c < old->ncols)
			from = old;
		if (c < 0 || c >= from->ncols ||
			from->colstatus[c] != LOGICALREP_COLUMN_TEXT)
			SYNC_FAIL(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					  errmsg("a change of the source of sync " INT64_FORMAT " does not carry the sync's key",
							 job->id),
					  errdetail("The replica identity of the source table no longer contains the key columns."),
					  errhint("Stop the sync with ctas_fed.stop_sync() and create it again."));
		keys[k] = from->colvalues[c].data;
	}
}

/* delete the row of a key given as text (per-tuple memory) */
void
CtasSyncDeleteKey(SyncJob *job, SyncEval *ev, char **keys)
{
	int			k;

	for (k = 0; k < job->target.nkeys; k++)
	{
		int			j = job->keycol[k];

		ev->keyvals[k] = InputFunctionCall(&job->infuncs[j], keys[k],
										   job->ioparams[j], -1);
	}
	job->apply->delete(&job->target, ev->keyvals);
}

bool
CtasSyncSameKeys(SyncJob *job, char **a, char **b)
{
	int			k;

	for (k = 0; k < job->target.nkeys; k++)
	{
		if (strcmp(a[k], b[k]) != 0)
			return false;
	}
	return true;
}

/*
 * apply_update
 *		The new row of an UPDATE, whose old key is oldkeys: a changed key is
 *		deleted first; the row is upserted when the WHERE takes it, else its
 *		key is deleted.  A TOAST value the UPDATE left unchanged and did not
 *		send is kept by the target, or read from the source, or the job
 *		fails (sync/toast.c).
 */
