/*-------------------------------------------------------------------------
 *
 * batch.c
 *		  The net change per key of a batch of continuous sync, for a
 *		  target that applies a batch as a set in one remote transaction
 *		  (target.h, "The net change per key"); the target sends and
 *		  applies it (its sync.c tells how).
 *
 * The remote transaction holds every source transaction of the batch, in
 * commit order, and is seen whole or not at all, so only the last state of
 * each key matters: a key's later change replaces its earlier one (an
 * upsert its full row, a delete the key's deletion), and a TRUNCATE
 * forgets every change before it (CtasSyncBatchReset; the target's own
 * statement removes whatever they would have left).
 *
 *	key			the text output of each key value, with its length, so
 *				that two remotely different keys are never one; where two
 *				different texts may be one key for the remote, the target
 *				applies the changes in their order (entry->order)
 *	upsert		the full row; columns the change did not carry (unchanged
 *				TOAST values) are taken from the key's earlier row in the
 *				batch when it has them, else kept remotely (kind 'm',
 *				entry->unchanged), where the row must then exist
 *				(CtasSyncBatchCheckKept); after the key's deletion in the
 *				same batch they cannot be had: ERROR
 *	delete		the key's values, every other column NULL
 *	size		the target applies the batch before it takes more when
 *				CtasSyncBatchFull says so, in the same remote transaction
 *
 * Generic code: calls nothing above L0 and names no target.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/syncbatch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "syncbatch.h"

/* a batch holding more memory than this is applied before it takes more */
#define BATCH_BYTES			(64 * 1024 * 1024)

static uint32
batch_key_hash(const void *key, Size keysize)
{
	const CtasSyncBatchKey *k = (const CtasSyncBatchKey *) key;

	return hash_bytes((const unsigned char *) k->data, (int) k->len);
}

static int
batch_key_match(const void *key1, const void *key2, Size keysize)
{
	const CtasSyncBatchKey *a = (const CtasSyncBatchKey *) key1;
	const CtasSyncBatchKey *b = (const CtasSyncBatchKey *) key2;

	if (a->len != b->len)
		return 1;
	return memcmp(a->data, b->data, a->len);
}

/*
 * CtasSyncBatchInit
 *		Make b the empty batch of t, its entries in cxt (a context of their
 *		own, reset with the batch; its hash table takes its name), the
 *		columns as CtasSyncBatchColumns takes them.  table is the remote
 *		table as the target's messages show it.
 */
void
CtasSyncBatchInit(CtasSyncBatch *b, CtasSyncTarget *t, MemoryContext cxt,
				  const char *table)
{
	memset(b, 0, sizeof(CtasSyncBatch));
	b->t = t;
	b->table = table;
	b->owner = CurrentMemoryContext;
	b->cxt = cxt;
	initStringInfo(&b->keybuf);
	CtasSyncBatchColumns(b);
}

/*
 * CtasSyncBatchColumns
 *		Take t's columns and keys as they are now (at open, and after a
 *		schema change followed with the batch empty): the column of each
 *		key, how to copy each column's values, the output function of each
 *		key.  In the context current at CtasSyncBatchInit.
 */
void
CtasSyncBatchColumns(CtasSyncBatch *b)
{
	CtasSyncTarget *t = b->t;
	MemoryContext oldcxt = MemoryContextSwitchTo(b->owner);
	int			i;

	b->keycol = palloc0(sizeof(int) * Max(t->nkeys, 1));
	b->keyout = palloc0(sizeof(FmgrInfo) * Max(t->nkeys, 1));
	for (i = 0; i < t->nkeys; i++)
	{
		Oid			func;
		bool		isvarlena;
		int			c;

		b->keycol[i] = -1;
		for (c = 0; c < t->ncolumns; c++)
		{
			if (strcmp(t->keys[i], t->columns[c]) == 0)
				b->keycol[i] = c;
		}
		if (b->keycol[i] < 0)
			elog(ERROR, "key column \"%s\" is not a column of the sync",
				 t->keys[i]);
		getTypeOutputInfo(t->types[b->keycol[i]], &func, &isvarlena);
		fmgr_info(func, &b->keyout[i]);
	}
	b->typlen = palloc0(sizeof(int16) * Max(t->ncolumns, 1));
	b->typbyval = palloc0(sizeof(bool) * Max(t->ncolumns, 1));
	for (i = 0; i < t->ncolumns; i++)
		get_typlenbyval(t->types[i], &b->typlen[i], &b->typbyval[i]);
	MemoryContextSwitchTo(oldcxt);
}

/* whether column col of t is one of its keys */
bool
CtasSyncIsKey(CtasSyncTarget *t, int col)
{
	int			k;

	for (k = 0; k < t->nkeys; k++)
	{
		if (strcmp(t->keys[k], t->columns[col]) == 0)
			return true;
	}
	return false;
}

/*
 * batch_entry
 *		The entry of the key whose values (of the key types, in the order of
 *		t->keys) are given, made empty (kind 0) if the batch has none, and
 *		stamped with the batch's next order.  Memory: b->cxt.
 */
static CtasSyncBatchEntry *
batch_entry(CtasSyncBatch *b, Datum *keyvals)
{
	CtasSyncTarget *t = b->t;
	MemoryContext oldcxt = MemoryContextSwitchTo(b->cxt);
	CtasSyncBatchKey key;
	CtasSyncBatchEntry *entry;
	bool		found;
	int			k;

	if (b->hash == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(CtasSyncBatchKey);
		ctl.entrysize = sizeof(CtasSyncBatchEntry);
		ctl.hash = batch_key_hash;
		ctl.match = batch_key_match;
		ctl.hcxt = b->cxt;
		b->hash = hash_create(b->cxt->name, 1024, &ctl,
							  HASH_ELEM | HASH_FUNCTION | HASH_COMPARE |
							  HASH_CONTEXT);
	}

	/*
	 * Each value's text, with its length: never two keys in one.  Built in
	 * the batch's one buffer (this runs for every change); only a key new
	 * to the batch is copied, exactly, into its entry.
	 */
	resetStringInfo(&b->keybuf);
	for (k = 0; k < t->nkeys; k++)
	{
		char	   *text = OutputFunctionCall(&b->keyout[k], keyvals[k]);
		uint32		len = strlen(text);

		appendBinaryStringInfo(&b->keybuf, (char *) &len, sizeof(len));
		appendBinaryStringInfo(&b->keybuf, text, len);
		pfree(text);
	}
	key.data = b->keybuf.data;
	key.len = b->keybuf.len;
	entry = hash_search(b->hash, &key, HASH_ENTER, &found);
	if (!found)
	{
		char	   *copy = palloc(key.len);

		memcpy(copy, key.data, key.len);
		entry->key.data = copy;
		entry->kind = 0;
		entry->values = NULL;
		entry->nulls = NULL;
		entry->unchanged = NULL;
	}
	entry->order = ++b->order;
	MemoryContextSwitchTo(oldcxt);
	return entry;
}

/*
 * CtasSyncBatchUpsert
 *		The row as it is now becomes the net change of its key.  Columns in
 *		unchanged (NULL: none) keep their value: the batch's earlier row of
 *		the key, else the remote row's; ERROR when the key was deleted
 *		earlier in the batch.  The values are copied into b->cxt.
 */
void
CtasSyncBatchUpsert(CtasSyncBatch *b, Datum *values, bool *nulls,
					const bool *unchanged)
{
	CtasSyncTarget *t = b->t;
	Datum		keyvals[INDEX_MAX_KEYS];
	CtasSyncBatchEntry *entry;
	MemoryContext oldcxt;
	Datum	   *v;
	bool	   *n;
	bool	   *u;
	bool		any_unchanged = false;
	int			i;

	Assert(t->nkeys <= INDEX_MAX_KEYS);
	for (i = 0; i < t->nkeys; i++)
		keyvals[i] = values[b->keycol[i]];
	entry = batch_entry(b, keyvals);

	/* a key deleted earlier in the batch: its values are gone */
	if (unchanged != NULL && entry->kind == CTAS_SYNC_BATCH_DELETE)
	{
		for (i = 0; i < t->ncolumns; i++)
		{
			if (unchanged[i])
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("the unchanged value of column \"%s\" cannot be kept in table %s of catalog \"%s\"",
								t->columns[i], b->table, t->catalog->name),
						 errdetail("The row was deleted earlier in the same batch, and the change did not carry the value."),
						 errhint("Set REPLICA IDENTITY FULL on the source table.")));
		}
	}

	oldcxt = MemoryContextSwitchTo(b->cxt);
	v = palloc(sizeof(Datum) * t->ncolumns);
	n = palloc(sizeof(bool) * t->ncolumns);
	u = palloc0(sizeof(bool) * t->ncolumns);
	for (i = 0; i < t->ncolumns; i++)
	{
		if (unchanged != NULL && unchanged[i])
		{
			/* the earlier row of the batch has it, or the remote keeps it */
			if (entry->kind == CTAS_SYNC_BATCH_UPSERT ||
				(entry->kind == CTAS_SYNC_BATCH_UNCHANGED &&
				 !entry->unchanged[i]))
			{
				v[i] = entry->values[i];
				n[i] = entry->nulls[i];
			}
			else
			{
				v[i] = (Datum) 0;
				n[i] = true;
				u[i] = true;
				any_unchanged = true;
			}
			continue;
		}
		n[i] = nulls[i];
		v[i] = nulls[i] ? (Datum) 0 :
			datumCopy(values[i], b->typbyval[i], b->typlen[i]);
	}
	entry->values = v;
	entry->nulls = n;
	entry->unchanged = any_unchanged ? u : NULL;
	entry->kind = any_unchanged ? CTAS_SYNC_BATCH_UNCHANGED :
		CTAS_SYNC_BATCH_UPSERT;
	MemoryContextSwitchTo(oldcxt);
}

/*
 * CtasSyncBatchDelete
 *		The deletion of the key becomes its net change: the key's values,
 *		every other column NULL.
 */
void
CtasSyncBatchDelete(CtasSyncBatch *b, Datum *keys)
{
	CtasSyncTarget *t = b->t;
	CtasSyncBatchEntry *entry = batch_entry(b, keys);
	MemoryContext oldcxt = MemoryContextSwitchTo(b->cxt);
	int			k;

	entry->kind = CTAS_SYNC_BATCH_DELETE;
	entry->values = palloc0(sizeof(Datum) * t->ncolumns);
	entry->nulls = palloc(sizeof(bool) * t->ncolumns);
	memset(entry->nulls, true, sizeof(bool) * t->ncolumns);
	entry->unchanged = NULL;
	for (k = 0; k < t->nkeys; k++)
	{
		int			c = b->keycol[k];

		entry->values[c] = datumCopy(keys[k], b->typbyval[c], b->typlen[c]);
		entry->nulls[c] = false;
	}
	MemoryContextSwitchTo(oldcxt);
}

/*
 * CtasSyncBatchFull
 *		Whether the batch should be applied before it takes more: max_keys
 *		keys, or BATCH_BYTES of memory (looked at every 1024 changes).
 */
bool
CtasSyncBatchFull(CtasSyncBatch *b, long max_keys)
{
	return hash_get_num_entries(b->hash) >= max_keys ||
		((b->order & 1023) == 0 &&
		 MemoryContextMemAllocated(b->cxt, true) >= BATCH_BYTES);
}

/* whether the batch holds no change */
bool
CtasSyncBatchEmpty(CtasSyncBatch *b)
{
	return b->hash == NULL || hash_get_num_entries(b->hash) == 0;
}

/* forget the batch */
void
CtasSyncBatchReset(CtasSyncBatch *b)
{
	b->hash = NULL;
	b->order = 0;
	MemoryContextReset(b->cxt);
}

/*
 * CtasSyncBatchCheckKept
 *		A value not sent cannot be made up: each of the batch's rows of kind
 *		'm' (unchanged_rows of them) must have found its remote row (found
 *		of them did).  ERROR otherwise.
 */
void
CtasSyncBatchCheckKept(CtasSyncBatch *b, uint64 unchanged_rows, uint64 found)
{
	if (found != unchanged_rows)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("unchanged values cannot be kept in table %s of catalog \"%s\": " UINT64_FORMAT " of its rows are missing",
						b->table, b->t->catalog->name,
						unchanged_rows - found),
				 errdetail("A change that did not carry every value of its row found no row to keep them from."),
				 errhint("Set REPLICA IDENTITY FULL on the source table.")));
}
