/*-------------------------------------------------------------------------
 *
 * sync_keep.c
 *		  Unchanged TOAST values that a continuous sync into ClickHouse
 *		  takes from the remote row (src/clickhouse/sync.c,
 *		  docs/sync-toast.md).
 *
 * An UPDATE that leaves a large value unchanged does not send it; when the
 * sync's query projects the column as it is, has no WHERE and the key did
 * not change (sync/toast.c), the target gets an unchanged mask instead of
 * the value, as ClickHouse's MaterializedPostgreSQL does.  The value is
 * then the one the remote row holds as of the change before: an earlier
 * change of the same key in the same source transaction (sync_rows.c fills
 * it from there), else the row written for an earlier transaction, read here
 * with FINAL, in batches of up to CH_KEEP_BATCH keys, after everything
 * written before is sent.  Only String columns (text, varchar, jsonb,
 * bytea...) are kept so, read as hex, and keys whose toString() is the
 * local text of the value (integers, text, varchar): a key is matched by
 * that text.  Others are read from the source under its proof rule, or
 * fail the job (sync/toast.c).  A row that is not there fails the batch
 * (ERROR): a value not sent cannot be made up.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/sync_keep.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"

#include "clickhouse.h"

/*
 * CtasChSyncCanKeep
 *		Whether the remote row can give column col's value (a String, with
 *		keys matched by text), for sync/toast.c.
 */
bool
CtasChSyncCanKeep(CtasSyncTarget *t, ChColumn *cols, ChColumn *keycols,
				  int col)
{
	int			k;

	if (cols[col].enc.type->kind != CHK_STRING)
		return false;
	for (k = 0; k < t->nkeys; k++)
	{
		switch (keycols[k].enc.typid)
		{
			case INT2OID:
			case INT4OID:
			case INT8OID:
			case TEXTOID:
			case VARCHAROID:
				break;
			default:
				return false;
		}
	}
	return true;
}

/* the key's text fields of raw (length-prefixed, see CtasChSyncKeyText) */
static List *
key_fields(const char *raw)
{
	List	   *fields = NIL;

	while (*raw)
	{
		char	   *end;
		long		len = strtol(raw, &end, 10);

		if (*end != ':')
			elog(ERROR, "malformed kept key");
		fields = lappend(fields, pnstrdup(end + 1, len));
		raw = end + 1 + len;
	}
	return fields;
}

/*
 * CtasChSyncKeyText
 *		The key of a row (its key values, in the order of keys) as the text
 *		that matches it remotely: "<len>:<text>" per key column.
 */
char *
CtasChSyncKeyText(CtasSyncTarget *t, ChColumn *keycols, Datum *values,
				  const int *keypos)
{
	StringInfoData buf;
	int			k;

	initStringInfo(&buf);
	for (k = 0; k < t->nkeys; k++)
	{
		char	   *s = OutputFunctionCall(&keycols[k].enc.out,
										   values[keypos[k]]);

		appendStringInfo(&buf, "%d:%s", (int) strlen(s), s);
	}
	return buf.data;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	elog(ERROR, "malformed hex from ClickHouse");
	return 0;
}

/* the RowBinary of a String column's value given as hex (NULL: NULL) */
static void
put_string(StringInfo out, const ChType *type, const char *hex, bool isnull)
{
	size_t		len = hex ? strlen(hex) / 2 : 0;
	uint64		v = len;
	size_t		i;

	if (type->nullable)
	{
		appendStringInfoChar(out, isnull ? 1 : 0);
		if (isnull)
			return;
	}
	else if (isnull)
		elog(ERROR, "NULL in a column that is not Nullable");
	do
	{
		unsigned char b = v & 0x7f;

		v >>= 7;
		appendStringInfoChar(out, (char) (v ? b | 0x80 : b));
	} while (v);
	for (i = 0; i < len; i++)
		appendStringInfoChar(out, (char) (hexval(hex[2 * i]) * 16 +
										  hexval(hex[2 * i + 1])));
}

/*
 * CtasChSyncFetchKept
 *		Fill the missing columns of each row of rows (ChKeptRow) from the
 *		remote row of its key, read with FINAL in one query.  ERROR when a
 *		row is not there.
 */
void
CtasChSyncFetchKept(CtasChHttp *http, CtasSyncTarget *t, const char *qtable,
					ChColumn *cols, List *rows)
{
	StringInfoData sql;
	bool	   *wanted = palloc0(sizeof(bool) * Max(t->ncolumns, 1));
	int		   *field = palloc0(sizeof(int) * Max(t->ncolumns, 1));
	int			nfields = t->nkeys;
	List	   *result;
	ListCell   *lc;
	int			nf;
	int			i;
	int			k;

	foreach(lc, rows)
	{
		ChKeptRow  *r = lfirst(lc);

		for (i = 0; i < t->ncolumns; i++)
			wanted[i] |= r->missing[i];
	}
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (k = 0; k < t->nkeys; k++)
	{
		appendStringInfoString(&sql, k ? ", toString(" : "toString(");
		CtasChAppendIdent(&sql, t->keys[k]);
		appendStringInfoChar(&sql, ')');
	}
	for (i = 0; i < t->ncolumns; i++)
	{
		if (!wanted[i])
			continue;
		field[i] = nfields;
		nfields += 2;
		appendStringInfoString(&sql, ", isNull(");
		CtasChAppendIdent(&sql, t->columns[i]);
		appendStringInfoString(&sql, "), hex(ifNull(");
		CtasChAppendIdent(&sql, t->columns[i]);
		appendStringInfoString(&sql, ", ''))");
	}
	appendStringInfo(&sql, " FROM %s FINAL WHERE _deleted = 0 AND ", qtable);
	appendStringInfoString(&sql, t->nkeys > 1 ? "tuple(" : "(");
	for (k = 0; k < t->nkeys; k++)
	{
		appendStringInfoString(&sql, k ? ", toString(" : "toString(");
		CtasChAppendIdent(&sql, t->keys[k]);
		appendStringInfoChar(&sql, ')');
	}
	appendStringInfoString(&sql, ") IN (");
	foreach(lc, rows)
	{
		ChKeptRow  *r = lfirst(lc);
		List	   *f = key_fields(r->keyraw);
		ListCell   *fc;

		if (lc != list_head(rows))
			appendStringInfoString(&sql, ", ");
		if (t->nkeys > 1)
			appendStringInfoChar(&sql, '(');
		foreach(fc, f)
		{
			if (fc != list_head(f))
				appendStringInfoString(&sql, ", ");
			appendStringInfoString(&sql, CtasChLit(lfirst(fc)));
		}
		if (t->nkeys > 1)
			appendStringInfoChar(&sql, ')');
	}
	appendStringInfoString(&sql, ") FORMAT TabSeparated");
	result = CtasChTsv(CtasChHttpQuery(http, sql.data,
									 "read unchanged values of synced rows"),
					   &nf);

	foreach(lc, rows)
	{
		ChKeptRow  *r = lfirst(lc);
		List	   *f = key_fields(r->keyraw);
		char	  **found = NULL;
		ListCell   *rc;

		foreach(rc, result)
		{
			char	  **fields = lfirst(rc);
			bool		match = nf == nfields;

			for (k = 0; match && k < t->nkeys; k++)
				match = fields[k] != NULL &&
					strcmp(fields[k], list_nth(f, k)) == 0;
			if (match)
				found = fields;
		}
		if (found == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("unchanged values cannot be kept in table %s of catalog \"%s\": a row is missing",
							qtable, t->catalog->name),
					 errdetail("A change that did not carry every value of its row found no row to take them from."),
					 errhint("Set REPLICA IDENTITY FULL on the source table.")));
		for (i = 0; i < t->ncolumns; i++)
		{
			if (!r->missing[i])
				continue;
			resetStringInfo(&r->segs[i]);
			put_string(&r->segs[i], cols[i].enc.type, found[field[i] + 1],
					   strcmp(found[field[i]], "1") == 0);
			r->missing[i] = false;
		}
	}
}
