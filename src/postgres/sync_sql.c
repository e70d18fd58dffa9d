/*-------------------------------------------------------------------------
 *
 * sync_sql.c
 *		  The SQL text of a sync's apply into PostgreSQL (sync.c runs it):
 *		  the initial copy's COPY, and the batch table and the statements
 *		  that apply a batch from it, made once per connection.
 *
 * The batch table, pg_temp._ctas_fed_sync_batch, has the remote table's
 * columns with their remote types (CREATE TEMP TABLE ... AS SELECT ...
 * WITH NO DATA: no constraints) and three more: the change's kind ('u' a
 * full row, 'd' a key's deletion, 'm' a row some of whose columns the
 * remote keeps), its order in the batch, and which columns are unchanged
 * (a text of 't'/'f', one per column).  ON COMMIT DELETE ROWS empties it.
 *
 * Names are quoted with quote_identifier; functions and operators the
 * statements call by name are schema-qualified.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/sync_sql.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "postgres_target.h"

#define BATCH_TABLE		"pg_temp._ctas_fed_sync_batch"
#define KIND_COLUMN		"_ctas_fed_kind"
#define ORDER_COLUMN	"_ctas_fed_order"
#define UNCHANGED_COLUMN "_ctas_fed_unchanged"

/*
 * canonical_key_type
 *		Whether two values of type that the remote finds equal always have
 *		the same text output, so that the batch needs no DISTINCT ON.
 */
static bool
canonical_key_type(Oid type)
{
	switch (getBaseType(type))
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case BOOLOID:
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
		case BYTEAOID:
		case UUIDOID:
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return true;
		default:
			return false;
	}
}

/* "a", "b", ... of the n names, each prefixed by prefix */
static char *
name_list(int n, char **names, const char *prefix)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	for (i = 0; i < n; i++)
		appendStringInfo(&buf, "%s%s%s", i ? ", " : "", prefix,
						 quote_identifier(names[i]));
	return buf.data;
}

/*
 * unchanged_update_sql
 *		The UPDATE of the batch's rows whose unchanged columns the remote
 *		keeps (kind 'm'): each other column takes the batch's value.  NULL
 *		when every column is a key.
 */
static char *
unchanged_update_sql(CtasSyncTarget *t, CtasPgSyncSql *sql,
					 const char *qualified, const char *key_match)
{
	StringInfoData buf;
	bool		first = true;
	int			i;

	if (t->ncolumns == t->nkeys)
		return NULL;
	initStringInfo(&buf);
	appendStringInfo(&buf, "UPDATE %s t SET ", qualified);
	for (i = 0; i < t->ncolumns; i++)
	{
		const char *c = quote_identifier(t->columns[i]);

		if (CtasSyncIsKey(t, i))
			continue;
		appendStringInfo(&buf, "%s%s = CASE WHEN pg_catalog.substr(s."
						 UNCHANGED_COLUMN ", %d, 1) OPERATOR(pg_catalog.=) 't' "
						 "THEN t.%s ELSE s.%s END",
						 first ? "" : ", ", c, i + 1, c, c);
		first = false;
	}
	appendStringInfo(&buf, " FROM %s s WHERE s." KIND_COLUMN " = 'm' AND %s",
					 sql->batch_source, key_match);
	return buf.data;
}

/*
 * CtasPgSyncBuildSql
 *		Fill sql with the statements of the sync t into the remote table
 *		qualified ("schema"."table"), COPY in binary format if binary, in
 *		the current memory context.  Where two different texts of a key
 *		type can be equal keys (canonical_key_type), the batch is read
 *		through DISTINCT ON (key) ... ORDER BY the change's order,
 *		descending, and the upsert sets the key column too.
 */
void
CtasPgSyncBuildSql(CtasPgSyncSql *sql, CtasSyncTarget *t,
				   const char *qualified, bool binary)
{
	StringInfoData buf;
	char	   *keys = name_list(t->nkeys, t->keys, "");
	const char *format = binary ? " (FORMAT binary)" : "";
	char	   *key_match;
	bool		dedupe = false;
	bool		first = true;
	int			i;

	sql->column_list = name_list(t->ncolumns, t->columns, "");
	sql->copy = psprintf("COPY %s (%s) FROM STDIN%s", qualified,
						 sql->column_list, format);
	sql->batch_create = psprintf("CREATE TEMP TABLE IF NOT EXISTS "
								 "_ctas_fed_sync_batch ON COMMIT DELETE ROWS "
								 "AS SELECT %s, "
								 "NULL::pg_catalog.\"char\" AS " KIND_COLUMN ", "
								 "NULL::pg_catalog.int4 AS " ORDER_COLUMN ", "
								 "NULL::pg_catalog.text AS " UNCHANGED_COLUMN " "
								 "FROM %s WITH NO DATA",
								 sql->column_list, qualified);
	sql->batch_copy = psprintf("COPY " BATCH_TABLE " (%s, " KIND_COLUMN
							   ", " ORDER_COLUMN ", " UNCHANGED_COLUMN
							   ") FROM STDIN%s", sql->column_list, format);
	sql->batch_truncate = "TRUNCATE " BATCH_TABLE;

	for (i = 0; i < t->nkeys; i++)
		dedupe |= !canonical_key_type(t->key_types[i]);
	if (dedupe)
		sql->batch_source = psprintf("(SELECT DISTINCT ON (%s) * FROM "
									 BATCH_TABLE " ORDER BY %s, "
									 ORDER_COLUMN " DESC)", keys, keys);
	else
		sql->batch_source = BATCH_TABLE;

	initStringInfo(&buf);
	for (i = 0; i < t->nkeys; i++)
		appendStringInfo(&buf, "%st.%s = s.%s", i ? " AND " : "",
						 quote_identifier(t->keys[i]),
						 quote_identifier(t->keys[i]));
	key_match = buf.data;

	sql->apply_delete = psprintf("DELETE FROM %s t USING %s s WHERE s."
								 KIND_COLUMN " = 'd' AND %s",
								 qualified, sql->batch_source, key_match);

	initStringInfo(&buf);
	appendStringInfo(&buf, "INSERT INTO %s (%s) SELECT %s FROM %s s "
					 "WHERE s." KIND_COLUMN " = 'u' ON CONFLICT (%s) DO ",
					 qualified, sql->column_list,
					 name_list(t->ncolumns, t->columns, "s."),
					 sql->batch_source, keys);

	/*
	 * Where equal keys may differ (dedupe), the key takes the batch's value
	 * too: the source deleted the old one and inserted the new one.
	 */
	if (t->ncolumns == t->nkeys && !dedupe)
		appendStringInfoString(&buf, "NOTHING");
	else
		appendStringInfoString(&buf, "UPDATE SET ");
	for (i = 0; i < t->ncolumns; i++)
	{
		if (CtasSyncIsKey(t, i) && !dedupe)
			continue;
		appendStringInfo(&buf, "%s%s = EXCLUDED.%s", first ? "" : ", ",
						 quote_identifier(t->columns[i]),
						 quote_identifier(t->columns[i]));
		first = false;
	}
	sql->apply_upsert = buf.data;

	sql->apply_unchanged = unchanged_update_sql(t, sql, qualified, key_match);
	sql->count_unchanged = psprintf("SELECT pg_catalog.count(*) FROM %s t, %s s "
									"WHERE s." KIND_COLUMN " = 'm' AND %s",
									qualified, sql->batch_source, key_match);
}
