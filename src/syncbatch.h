/*-------------------------------------------------------------------------
 *
 * syncbatch.h
 *	  The net change per key of a sync batch (syncbatch.c), for the targets
 *	  that apply a batch as a set (PostgreSQL, MySQL).
 *
 * IDENTIFICATION
 *		  src/syncbatch.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_FED_SYNCBATCH_H
#define CTAS_FED_SYNCBATCH_H

#include "lib/stringinfo.h"
#include "utils/hsearch.h"

#include "target.h"

/*
 * The net change per key of a batch (syncbatch.c, which tells the rules),
 * for a target that applies a batch as a set: its upsert, delete and
 * truncate put changes in, its commit reads the entries (hash_seq_search
 * over hash) and sends them, then resets the batch.
 */
typedef enum CtasSyncBatchKind
{
	CTAS_SYNC_BATCH_UPSERT = 'u',	/* the full row */
	CTAS_SYNC_BATCH_DELETE = 'd',	/* the key's deletion */
	CTAS_SYNC_BATCH_UNCHANGED = 'm' /* the row, some columns kept remotely */
} CtasSyncBatchKind;

/* the identity of a key: the text of its values */
typedef struct CtasSyncBatchKey
{
	const char *data;
	Size		len;
} CtasSyncBatchKey;

typedef struct CtasSyncBatchEntry
{
	CtasSyncBatchKey key;		/* hash key, first */
	char		kind;			/* a CtasSyncBatchKind */
	int32		order;			/* when it last changed in the batch */
	Datum	   *values;			/* every column (keys only for a delete) */
	bool	   *nulls;
	bool	   *unchanged;		/* CTAS_SYNC_BATCH_UNCHANGED: columns kept */
} CtasSyncBatchEntry;

typedef struct CtasSyncBatch
{
	CtasSyncTarget *t;
	const char *table;			/* the remote table, as messages show it */
	MemoryContext owner;		/* the arrays below */
	int		   *keycol;			/* column of each key */
	FmgrInfo   *keyout;			/* output function of each key */
	int16	   *typlen;			/* of each column */
	bool	   *typbyval;
	MemoryContext cxt;			/* entries and the hash table */
	HTAB	   *hash;			/* CtasSyncBatchEntry by key, or NULL */
	int32		order;			/* changes put in the batch */
	StringInfoData keybuf;		/* the key looked up, in owner; an entry
								 * keeps a copy of it in cxt */
} CtasSyncBatch;

extern void CtasSyncBatchInit(CtasSyncBatch *b, CtasSyncTarget *t,
							  MemoryContext cxt, const char *table);
extern void CtasSyncBatchColumns(CtasSyncBatch *b);
extern bool CtasSyncIsKey(CtasSyncTarget *t, int col);
extern void CtasSyncBatchUpsert(CtasSyncBatch *b, Datum *values, bool *nulls,
								const bool *unchanged);
extern void CtasSyncBatchDelete(CtasSyncBatch *b, Datum *keys);
extern bool CtasSyncBatchFull(CtasSyncBatch *b, long max_keys);
extern bool CtasSyncBatchEmpty(CtasSyncBatch *b);
extern void CtasSyncBatchReset(CtasSyncBatch *b);
extern void CtasSyncBatchCheckKept(CtasSyncBatch *b, uint64 unchanged_rows,
								   uint64 found);

#endif							/* CTAS_FED_SYNCBATCH_H */
