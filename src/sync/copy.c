/*-------------------------------------------------------------------------
 *
 * copy.c
 *		  The initial copy of a continuous sync without the executor's
 *		  expression machinery, when it has nothing to compute.
 *
 * The sync worker (sync/worker.c) copies the rows of the source under the
 * slot's snapshot and hands each row of the query's result to the target.
 * A query whose select list is plain columns of the source and that has no
 * WHERE, the common "SELECT * FROM t" or a projection of some columns,
 * needs no evaluation at all: the columns of the heap tuple are the row.
 * Expressions and WHERE clauses still go through ExecQual/ExecEvalExpr,
 * both in the copy and in the stream.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/sync/copy.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/tuptable.h"
#include "nodes/parsenodes.h"
#include "nodes/primnodes.h"

#include "sync/sync.h"

/*
 * CtasSyncPlainColumns
 *		When the query has no WHERE and each of the ncolumns entries of its
 *		select list (junk entries aside) is a plain column of the source
 *		table, the attribute number of each, in the order of the select
 *		list, palloc'd in the current memory context; otherwise NULL.
 *		Does not ERROR.
 */
AttrNumber *
CtasSyncPlainColumns(Query *query, int ncolumns)
{
	AttrNumber *attnums;
	ListCell   *lc;
	int			n = 0;

	if (query->jointree == NULL || query->jointree->quals != NULL)
		return NULL;
	attnums = palloc(sizeof(AttrNumber) * Max(ncolumns, 1));
	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		Var		   *var = (Var *) tle->expr;

		if (tle->resjunk)
			continue;
		if (n >= ncolumns || !IsA(var, Var) || var->varlevelsup != 0 ||
			var->varattno <= 0)
		{
			pfree(attnums);
			return NULL;
		}
		attnums[n++] = var->varattno;
	}
	if (n != ncolumns)
	{
		pfree(attnums);
		return NULL;
	}
	return attnums;
}

/*
 * CtasSyncPlainRow
 *		The row of the query for the source row in slot, given the
 *		attribute numbers of CtasSyncPlainColumns: values and nulls point
 *		into the slot, and stay valid as long as its tuple.
 */
void
CtasSyncPlainRow(TupleTableSlot *slot, int ncolumns, const AttrNumber *attnums,
				 Datum *values, bool *nulls)
{
	int			i;

	slot_getallattrs(slot);
	for (i = 0; i < ncolumns; i++)
	{
		values[i] = slot->tts_values[attnums[i] - 1];
		nulls[i] = slot->tts_isnull[attnums[i] - 1];
	}
}
