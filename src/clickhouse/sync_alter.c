/*-------------------------------------------------------------------------
 *
 * sync_alter.c
 *		  The synced ClickHouse table changing shape: the schema changes a
 *		  whole-row sync follows (CtasChSyncAlter), the table rebuilt under
 *		  new column names, and the rebuild of a resync (a staging table
 *		  swapped in by RENAME TABLE); sync.c has the protocol of a batch.
 *
 * A rebuild fills a staging table `db`._ctas_fed_resync_new_<table>, made
 * as the synced table is, which readers do not read, and puts it in the
 * synced table's place by two renames (swap_in).  The staging table is
 * its own durable record: a worker that dies before the swap leaves it,
 * and the next one drops it and makes it again (the rows it was given come
 * again: the copy of a resync, or the DDL's source transaction, whose
 * progress was not stored); a server that dies between the two renames
 * leaves no synced table, and the next worker renames the staging table in
 * before it opens the table (CtasChSyncSettle).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/sync_alter.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "clickhouse.h"
#include "guc.h"

#define VERSION_COLUMN	"_version"
#define DELETED_COLUMN	"_deleted"

static char *resync_table(CtasSyncTarget *t, const char *what);

/*
 * the remote types of columns of `db`.`table`, in the order of names; with
 * gone, a missing one is marked there (else an ERROR)
 */
static char **
remote_types(CtasSyncTarget *t, ChSyncState *st, int n, char **names,
			 bool *gone)
{
	char	   *body;
	List	   *rows;
	int			nf;
	char	  **types = palloc0(sizeof(char *) * Max(n, 1));
	int			i;

	body = CtasChHttpQuery(st->http,
						 psprintf("SELECT name, type FROM system.columns WHERE database = %s AND table = %s",
								  CtasChLit(t->schema),
								  CtasChLit(st->rebuilding ? st->rebuilding : t->table)),
						 "read the columns of the synced table");
	rows = CtasChTsv(body, &nf);
	for (i = 0; i < n; i++)
	{
		ListCell   *lc;

		foreach(lc, rows)
		{
			char	  **f = lfirst(lc);

			if (nf == 2 && f[0] && strcmp(f[0], names[i]) == 0)
				types[i] = f[1];
		}
		if (types[i] == NULL && gone != NULL)
			gone[i] = true;
		else if (types[i] == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("column \"%s\" does not exist in table \"%s\" of catalog \"%s\"",
							names[i], CtasChDisplay(t->schema, t->table),
							t->catalog->name)));
	}
	return types;
}

/*
 * encoders of n columns named names, of local types types; with gone, a
 * column the remote table does not have is marked there, with the encoder
 * of the type the type map gives it (never used)
 */
ChColumn *
CtasChSyncEncoders(CtasSyncTarget *t, ChSyncState *st, int n, char **names, Oid *types,
		 bool *gone)
{
	CtasLoad	load;
	char	  **rtypes;
	int			i;

	memset(&load, 0, sizeof(load));
	load.catalog = t->catalog;
	load.cxt = st->cxt;
	load.ncolumns = n;
	load.columns = palloc0(sizeof(CtasColumn) * Max(n, 1));
	for (i = 0; i < n; i++)
	{
		load.columns[i].name = names[i];
		load.columns[i].typid = types[i];
		load.columns[i].typmod = -1;
		load.columns[i].basetypmod = -1;
		load.columns[i].basetypid = getBaseTypeAndTypmod(types[i],
														 &load.columns[i].basetypmod);
	}
	rtypes = remote_types(t, st, n, names, gone);
	for (i = 0; i < n; i++)
	{
		if (rtypes[i] == NULL)
			rtypes[i] = CtasChSyncColumnType(types[i], -1, names[i]);
		if (rtypes[i] == NULL)
			rtypes[i] = "String";
	}
	return CtasChSetupColumns(&load, rtypes);
}

/*
 * INSERT INTO qtable (names..., _version, _deleted) FORMAT RowBinary,
 * without the columns gone marks (NULL: none)
 */
char *
CtasChSyncInsertSql(ChSyncState *st, int n, char **names, const bool *gone)
{
	StringInfoData sql;
	int			i;

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (", st->qtable);
	for (i = 0; i < n; i++)
	{
		if (gone != NULL && gone[i])
			continue;
		CtasChAppendIdent(&sql, names[i]);
		appendStringInfoString(&sql, ", ");
	}
	appendStringInfoString(&sql, VERSION_COLUMN ", " DELETED_COLUMN ") FORMAT RowBinary");
	return sql.data;
}

/*
 * CtasChSyncSettle
 *		A server that died between the two renames of a swap (swap_in)
 *		left the rebuilt table and no synced table: the rebuilt one is put
 *		in its place before the table is opened.
 */
void
CtasChSyncSettle(CtasSyncTarget *t, CtasChHttp *http)
{
	char	   *qtable = CtasChQname(t->schema, t->table);
	char	   *stage = resync_table(t, "new");

	if (atoi(CtasChHttpQuery(http, psprintf("EXISTS TABLE %s", qtable),
							 "find the synced table")) == 0 &&
		atoi(CtasChHttpQuery(http, psprintf("EXISTS TABLE %s", stage),
							 "find the staging table of a rebuild")) == 1)
		CtasChHttpQuery(http, psprintf("RENAME TABLE %s TO %s", stage, qtable),
						"put the rebuilt table in place");
}

/*
 * ch_default_literal
 *		The ClickHouse expression of an added column's value for the rows
 *		there are: its text under the pinned settings, cast by ClickHouse,
 *		for the types whose text ClickHouse reads as PostgreSQL writes it;
 *		NULL for another type.
 */
static char *
ch_default_literal(const CtasSyncAlter *c, const char *type)
{
	Oid			outfunc;
	bool		isvarlena;

	switch (getBaseType(c->typid))
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case NUMERICOID:
		case TEXTOID:
		case VARCHAROID:
		case DATEOID:
			break;
		default:
			return NULL;
	}
	getTypeOutputInfo(c->typid, &outfunc, &isvarlena);
	return psprintf("CAST(%s AS %s)",
					CtasChLit(OidOutputFunctionCall(outfunc, c->value)), type);
}

/* the columns of `db`.table: rows of (name, type) */
static List *
table_columns(CtasSyncTarget *t, ChSyncState *st, const char *table)
{
	char	   *body;
	int			nf;

	body = CtasChHttpQuery(st->http,
						   psprintf("SELECT name, type FROM system.columns WHERE database = %s AND table = %s",
									CtasChLit(t->schema), CtasChLit(table)),
						   "read the columns of the synced table");
	return CtasChTsv(body, &nf);
}

/* the type of column name among rows of table_columns, or NULL */
static char *
column_type(List *rows, const char *name)
{
	ListCell   *lc;

	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		if (f[0] != NULL && strcmp(f[0], name) == 0)
			return f[1] ? f[1] : "";
	}
	return NULL;
}

/*
 * rekey_table
 *		A new key (CTAS_SYNC_REKEY) on the empty table of a rebuild,
 *		qtable: ClickHouse does not change the sorting key of a table, so
 *		one made as it is (its columns as the changes before left them)
 *		ordered by the new key takes its place.  A column of a sorting key
 *		cannot be Nullable: the new key's columns, NOT NULL in the source
 *		(a replica identity index's columns are), lose it first.  Nothing
 *		reads the table yet; a worker that dies in between makes the
 *		rebuild's table again.
 */
static void
rekey_table(CtasSyncTarget *t, ChSyncState *st, const char *table,
			const char *qtable, const CtasSyncAlter *c)
{
	char	   *tmp = CtasChQname(t->schema,
								  psprintf("_ctas_fed_resync_key_%s", t->table));
	List	   *rows = table_columns(t, st, table);
	StringInfoData keys;
	StringInfoData sql;
	int			i;

	initStringInfo(&keys);
	for (i = 0; i < c->nkeys; i++)
	{
		char	   *type = column_type(rows, c->keys[i]);
		size_t		n;

		if (i > 0)
			appendStringInfoString(&keys, ", ");
		CtasChAppendIdent(&keys, c->keys[i]);
		if (type == NULL || strncmp(type, "Nullable(", 9) != 0)
			continue;
		n = strlen(type);
		initStringInfo(&sql);
		appendStringInfo(&sql, "ALTER TABLE %s MODIFY COLUMN ", qtable);
		CtasChAppendIdent(&sql, c->keys[i]);
		appendStringInfo(&sql, " %s", pnstrdup(type + 9, n - 10));
		CtasChHttpQuery(st->http, sql.data,
						"make a column of the new key not nullable");
	}
	CtasChHttpQuery(st->http, psprintf("DROP TABLE IF EXISTS %s", tmp),
					"drop the table of a new key");
	CtasChHttpQuery(st->http,
					psprintf("CREATE TABLE %s AS %s ENGINE = ReplacingMergeTree(" VERSION_COLUMN ") ORDER BY (%s)",
							 tmp, qtable, keys.data),
					"create the table of a new key");
	CtasChHttpQuery(st->http, psprintf("DROP TABLE %s", qtable),
					"drop the table of a rebuild");
	CtasChHttpQuery(st->http, psprintf("RENAME TABLE %s TO %s", tmp, qtable),
					"rename the table of a new key");
}

/*
 * alter_table
 *		The changes on `db`.table, each skipped when found done (a batch
 *		applied again after a crash).  A rename adds the column under its
 *		new name after the old one and drops the old one: only on a table
 *		that holds no row (the table of a rebuild, filled after).
 */
static void
alter_table(CtasSyncTarget *t, ChSyncState *st, const char *table,
			const CtasSyncAlter *changes, int nchanges, char **types,
			char **defaults)
{
	char	   *qtable = CtasChQname(t->schema, table);
	int			n;

	for (n = 0; n < nchanges; n++)
	{
		const CtasSyncAlter *c = &changes[n];
		List	   *rows;
		char	   *type;
		StringInfoData sql;

		if (c->kind == CTAS_SYNC_REKEY)
		{
			rekey_table(t, st, table, qtable, c);
			continue;
		}
		rows = table_columns(t, st, table);
		type = column_type(rows, c->column);
		initStringInfo(&sql);
		appendStringInfo(&sql, "ALTER TABLE %s ", qtable);
		if (c->kind == CTAS_SYNC_ADD_COLUMN && type == NULL)
		{
			appendStringInfoString(&sql, "ADD COLUMN ");
			CtasChAppendIdent(&sql, c->column);
			appendStringInfo(&sql, " %s", types[n]);
			if (defaults[n] != NULL)
				appendStringInfo(&sql, " DEFAULT %s", defaults[n]);
		}
		else if (c->kind == CTAS_SYNC_DROP_COLUMN && type != NULL)
		{
			appendStringInfoString(&sql, "DROP COLUMN ");
			CtasChAppendIdent(&sql, c->column);
		}
		else if (c->kind == CTAS_SYNC_RETYPE_COLUMN && type != NULL)
		{
			appendStringInfoString(&sql, "MODIFY COLUMN ");
			CtasChAppendIdent(&sql, c->column);
			appendStringInfo(&sql, " %s", types[n]);
		}
		else if (c->kind == CTAS_SYNC_RENAME_COLUMN && type != NULL &&
				 column_type(rows, c->newname) == NULL)
		{
			appendStringInfoString(&sql, "ADD COLUMN ");
			CtasChAppendIdent(&sql, c->newname);
			appendStringInfo(&sql, " %s AFTER ", type);
			CtasChAppendIdent(&sql, c->column);
			CtasChHttpQuery(st->http, sql.data, "change the synced table");
			resetStringInfo(&sql);
			appendStringInfo(&sql, "ALTER TABLE %s DROP COLUMN ", qtable);
			CtasChAppendIdent(&sql, c->column);
		}
		else
			continue;
		CtasChHttpQuery(st->http, sql.data, "change the synced table");
	}
}

/*
 * swap_in
 *		Put the filled table stage (qualified) in the place of the synced
 *		table, the old one renamed to old and dropped: two renames in one
 *		statement, which ClickHouse 18.16 does one after the other (it has
 *		no EXCHANGE TABLES), so that a query that looks the table up
 *		between them finds none (an error, not wrong rows); a server that
 *		dies between them leaves only the new table, which is then renamed
 *		in (here, or by CtasChSyncSettle when the worker opens the table
 *		again).  Idempotent: a stage that is gone was renamed already.
 */
static void
swap_in(ChSyncState *st, const char *stage, const char *old)
{
	char	   *body;

	body = CtasChHttpQuery(st->http, psprintf("EXISTS TABLE %s", stage),
						   "find the staging table of a rebuild");
	if (atoi(body) == 1)
	{
		body = CtasChHttpQuery(st->http, psprintf("EXISTS TABLE %s", st->qtable),
							   "find the synced table");
		if (atoi(body) == 1)
		{
			CtasChHttpQuery(st->http, psprintf("DROP TABLE IF EXISTS %s", old),
							"drop the table a rebuild replaced");
			CtasChHttpQuery(st->http,
							psprintf("RENAME TABLE %s TO %s, %s TO %s",
									 st->qtable, old, stage, st->qtable),
							"put the rebuilt table in place");
		}
		else
			CtasChHttpQuery(st->http,
							psprintf("RENAME TABLE %s TO %s", stage, st->qtable),
							"put the rebuilt table in place");
	}
	CtasChHttpQuery(st->http, psprintf("DROP TABLE IF EXISTS %s", old),
					"drop the table a rebuild replaced");
}

/*
 * rename_rebuild
 *		A rename, which ClickHouse 18.16 cannot do in place (no RENAME
 *		COLUMN): the table is rebuilt under the new names, as a resync
 *		rebuilds it (CtasChSyncRebuild, CtasChSyncRebuilt): a staging table
 *		made as the synced table is, given the changes while it is empty
 *		(alter_table), filled with every row of the synced table (every
 *		version, _version and _deleted kept, so that FINAL reads the same),
 *		then swapped in (swap_in).  Readers see the old table or the new
 *		one.  The worker is the table's only writer and has written the
 *		transactions before: nothing is written to the old table meanwhile.
 *		Crashes: before the swap, the DDL's transaction is read again (its
 *		progress was not stored), the staging table dropped and made again;
 *		after it, every rename is found done, and the other changes are
 *		(alter_table); between the two renames of the swap, the worker that
 *		opens the table next renames the staging table in (CtasChSyncSettle).
 */
static void
rename_rebuild(CtasSyncTarget *t, ChSyncState *st,
			   const CtasSyncAlter *changes, int nchanges, char **types,
			   char **defaults)
{
	char	   *stage = resync_table(t, "new");
	char	   *old = resync_table(t, "old");
	char	   *stage_name = psprintf("_ctas_fed_resync_new_%s", t->table);
	List	   *rows = table_columns(t, st, t->table);
	int			ncur = 0;
	char	  **cur = palloc(sizeof(char *) * (t->ncolumns + nchanges + 1));
	char	  **orig = palloc(sizeof(char *) * (t->ncolumns + nchanges + 1));
	StringInfoData into;
	StringInfoData from;
	bool		done = true;
	int			n;
	int			i;

	for (n = 0; n < nchanges; n++)
	{
		if (changes[n].kind == CTAS_SYNC_RENAME_COLUMN)
			done &= column_type(rows, changes[n].column) == NULL &&
				column_type(rows, changes[n].newname) != NULL;
	}
	if (done)
	{
		alter_table(t, st, t->table, changes, nchanges, types, defaults);
		return;
	}

	/* each column after the changes, and the column before it came from */
	for (i = 0; i < t->ncolumns; i++)
	{
		cur[ncur] = t->columns[i];
		orig[ncur++] = column_type(rows, t->columns[i]) ? t->columns[i] : NULL;
	}
	for (n = 0; n < nchanges; n++)
	{
		const CtasSyncAlter *c = &changes[n];

		for (i = 0; i < ncur && strcmp(cur[i], c->column ? c->column : "") != 0; i++)
			;
		if (c->kind == CTAS_SYNC_ADD_COLUMN)
		{
			cur[ncur] = (char *) c->column;
			orig[ncur++] = NULL;
		}
		else if (i < ncur && c->kind == CTAS_SYNC_RENAME_COLUMN)
			cur[i] = (char *) c->newname;
		else if (i < ncur && c->kind == CTAS_SYNC_DROP_COLUMN)
		{
			memmove(&cur[i], &cur[i + 1], sizeof(char *) * (ncur - i - 1));
			memmove(&orig[i], &orig[i + 1], sizeof(char *) * (ncur - i - 1));
			ncur--;
		}
	}

	CtasChHttpQuery(st->http, psprintf("DROP TABLE IF EXISTS %s", stage),
					"drop the staging table of a rebuild");
	CtasChHttpQuery(st->http, psprintf("CREATE TABLE %s AS %s", stage, st->qtable),
					"create the staging table of a rebuild");
	alter_table(t, st, stage_name, changes, nchanges, types, defaults);
	initStringInfo(&into);
	initStringInfo(&from);
	for (i = 0; i < ncur; i++)
	{
		if (orig[i] == NULL)
			continue;			/* added: its DEFAULT */
		CtasChAppendIdent(&into, cur[i]);
		appendStringInfoString(&into, ", ");
		CtasChAppendIdent(&from, orig[i]);
		appendStringInfoString(&from, ", ");
	}
	CtasChHttpQuery(st->http,
					psprintf("INSERT INTO %s (%s" VERSION_COLUMN ", " DELETED_COLUMN ") "
							 "SELECT %s" VERSION_COLUMN ", " DELETED_COLUMN " FROM %s",
							 stage, into.data, from.data, st->qtable),
					"copy the rows into the rebuilt table");
	/* tests: a worker killed with the rebuilt table filled, not swapped */
	CtasFaultPointWait("sync_rename_swap");
	swap_in(st, stage, old);
}

/* whether name is one of t's key columns */
static bool
is_key_column(CtasSyncTarget *t, const char *name)
{
	int			k;

	for (k = 0; name != NULL && k < t->nkeys; k++)
	{
		if (strcmp(t->keys[k], name) == 0)
			return true;
	}
	return false;
}

/*
 * CtasChSyncAlter
 *		Schema changes of a whole-row sync (target.h), and the columns of
 *		a copy that follows a retype (sync/resync.c).  In the stream, called
 *		between source transactions (sync/apply.c refuses one after
 *		changes of its own transaction): the rows of the transactions
 *		before are written first, then each ALTER TABLE, which ClickHouse
 *		applies to the table's metadata at once, so that a reader never sees
 *		a row of one shape in a table of the other; a rename rebuilds the
 *		table under the new names (rename_rebuild).  An added column gets
 *		the value of the rows there are as its DEFAULT, which ClickHouse
 *		reads for the parts written before it (the sync always writes every
 *		column after).  At a rebuild (a resync's copy), the changes go to
 *		the empty table the copy fills, which readers do not read.  A change
 *		found done is skipped.  Refused, with nothing done: a key column
 *		renamed or retyped (it orders the table, and ClickHouse does not
 *		alter a column of the sorting key), a default ClickHouse could read
 *		differently, a table of a cluster catalog.
 */
char *
CtasChSyncAlter(CtasSyncTarget *t, const CtasSyncAlter *changes, int nchanges)
{
	ChSyncState *st = (ChSyncState *) t->private;
	char	  **types = palloc0(sizeof(char *) * nchanges);
	char	  **defaults = palloc0(sizeof(char *) * nchanges);
	bool		rename = false;
	MemoryContext oldcxt;
	int			n;
	int			i;

	/* every shard's local and Distributed tables would have to follow */
	if (st->cluster != NULL)
		return pstrdup("schema changes of the source are not followed into a table of a cluster catalog");
	for (n = 0; n < nchanges; n++)
	{
		const CtasSyncAlter *c = &changes[n];

		if ((c->kind == CTAS_SYNC_RENAME_COLUMN ||
			 c->kind == CTAS_SYNC_RETYPE_COLUMN) && is_key_column(t, c->column))
			return psprintf("key column \"%s\" cannot be %s in a ClickHouse table (it is in the sorting key)",
							c->column, c->kind == CTAS_SYNC_RENAME_COLUMN ?
							"renamed" : "retyped");
		/* the sorting key: only on the empty table of a rebuild */
		if (c->kind == CTAS_SYNC_REKEY && st->rebuilding == NULL)
			return pstrdup("the key of a ClickHouse table (its sorting key) changes only when a copy makes the table again");
		rename |= c->kind == CTAS_SYNC_RENAME_COLUMN;
		if (c->kind != CTAS_SYNC_ADD_COLUMN && c->kind != CTAS_SYNC_RETYPE_COLUMN)
			continue;
		types[n] = CtasChSyncColumnType(c->typid, c->typmod, c->column);
		if (types[n] == NULL)
			return psprintf("column \"%s\" of type %s has no ClickHouse type",
							c->column, format_type_be(c->typid));
		/* a copy writes every row: no default to give */
		if (c->kind == CTAS_SYNC_ADD_COLUMN && !c->isnull &&
			st->rebuilding == NULL &&
			(defaults[n] = ch_default_literal(c, types[n])) == NULL)
			return psprintf("column \"%s\" was added with a default of type %s, which is not given to the rows of a ClickHouse table",
							c->column, format_type_be(c->typid));
	}
	if (st->rebuilding != NULL)
		alter_table(t, st, st->rebuilding, changes, nchanges, types, defaults);
	else
	{
		if (st->changes != NULL && st->lsn == t->change_lsn)
			elog(ERROR, "a schema change after changes of its source transaction");
		if (st->changes != NULL || st->truncated)
			CtasChSyncWriteChanges(t, st);
		CtasChSyncSendPending(st);
		if (rename)
			rename_rebuild(t, st, changes, nchanges, types, defaults);
		else
			alter_table(t, st, t->table, changes, nchanges, types, defaults);
	}

	/* the columns after the changes, and what depends on them */
	oldcxt = MemoryContextSwitchTo(st->cxt);
	t->ncolumns = changes[nchanges - 1].ncolumns;
	t->columns = palloc(sizeof(char *) * Max(t->ncolumns, 1));
	t->types = palloc(sizeof(Oid) * Max(t->ncolumns, 1));
	for (i = 0; i < t->ncolumns; i++)
	{
		t->columns[i] = pstrdup(changes[nchanges - 1].columns[i]);
		t->types[i] = changes[nchanges - 1].types[i];
	}
	/* a new key: the rows' keys are read from its columns */
	for (n = 0; n < nchanges; n++)
	{
		const CtasSyncAlter *c = &changes[n];

		if (c->kind != CTAS_SYNC_REKEY)
			continue;
		t->nkeys = c->nkeys;
		t->keys = palloc(sizeof(char *) * c->nkeys);
		t->key_types = palloc(sizeof(Oid) * c->nkeys);
		for (i = 0; i < c->nkeys; i++)
		{
			t->keys[i] = pstrdup(c->keys[i]);
			t->key_types[i] = c->key_types[i];
		}
		st->keypos = palloc0(sizeof(int) * c->nkeys);
	}
	st->gone = palloc0(sizeof(bool) * Max(t->ncolumns, 1));
	st->cols = CtasChSyncEncoders(t, st, t->ncolumns, t->columns, t->types, st->gone);
	if (st->rebuilding != NULL)
	{
		char	   *qtable = st->qtable;

		st->qtable = resync_table(t, "new");
		st->insert_sql = CtasChSyncInsertSql(st, t->ncolumns, t->columns, st->gone);
		st->qtable = qtable;
	}
	else
		st->insert_sql = CtasChSyncInsertSql(st, t->ncolumns, t->columns, st->gone);
	for (i = 0; i < t->nkeys; i++)
	{
		int			j;

		for (j = 0; j < t->ncolumns; j++)
		{
			if (strcmp(t->columns[j], t->keys[i]) == 0)
				st->keypos[i] = j;
		}
	}
	MemoryContextSwitchTo(oldcxt);
	return NULL;
}

/* `db`._ctas_fed_resync_<what>_<table>: the tables of a resync */
static char *
resync_table(CtasSyncTarget *t, const char *what)
{
	return CtasChQname(t->schema, psprintf("_ctas_fed_resync_%s_%s", what,
										   t->table));
}

/*
 * cluster_rebuilt
 *		CtasChSyncRebuilt of a cluster catalog, after the copy committed at
 *		consistent point t->change_lsn: on every shard's local table, delete
 *		every key the copy did not write (the keys stay on their shards).
 *		Readers of the Distributed table may see the old rows beside the
 *		copy's until then (no RENAME across shards is atomic:
 *		docs/clickhouse-clusters.md).  Its own HTTP clients, freed with a
 *		memory context of its own.  ERROR on a failed request.
 */
static void
cluster_rebuilt(CtasSyncTarget *t)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "ctas_fed sync rebuilt",
											  ALLOCSET_SMALL_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	CtasChHttp   *http = CtasChHttpCreate(t->catalog, cxt);
	uint64		version = t->change_lsn - 2;
	StringInfoData keys;
	ChCluster  *c;
	ChShardKey	key;
	int			key_k;
	char	   *qtable;
	int			i;

	initStringInfo(&keys);
	for (i = 0; i < t->nkeys; i++)
	{
		CtasChAppendIdent(&keys, t->keys[i]);
		appendStringInfoString(&keys, ", ");
	}
	c = CtasChClusterOpen(t->catalog, cxt);
	qtable = CtasChQname(t->schema,
						 CtasChClusterSyncTable(c, http, t->schema, t->table,
												t->nkeys, t->keys, &key,
												&key_k));
	for (i = 0; i < c->nshards; i++)
		CtasChHttpQuery(c->http[i],
					  psprintf("INSERT INTO %s (%s_version, _deleted) "
							   "SELECT %stoUInt64(" UINT64_FORMAT "), 1 FROM %s FINAL "
							   "WHERE _deleted = 0 AND _version < " UINT64_FORMAT,
							   qtable, keys.data, keys.data, version, qtable,
							   version),
					  "delete the rows a resync did not copy");
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);
}

/*
 * CtasChSyncRebuild
 *		Before the rows of a resync (target.h): they go into a staging
 *		table made as the synced table is (CREATE TABLE ... AS: columns,
 *		engine, order), which readers do not read, with the versions of a
 *		first copy.  A staging table left by a failed resync is dropped
 *		first.
 */
void
CtasChSyncRebuild(CtasSyncTarget *t)
{
	ChSyncState *st = (ChSyncState *) t->private;
	char	   *stage = resync_table(t, "new");
	char	   *qtable = st->qtable;
	MemoryContext oldcxt;

	/* a cluster: the rows go into every shard's local table as they are */
	if (st->cluster != NULL)
		return;
	CtasChHttpQuery(st->http, psprintf("DROP TABLE IF EXISTS %s", stage),
				  "drop the staging table of a resync");
	CtasChHttpQuery(st->http, psprintf("CREATE TABLE %s AS %s", stage, qtable),
				  "create the staging table of a resync");
	oldcxt = MemoryContextSwitchTo(st->cxt);
	st->qtable = stage;
	st->insert_sql = CtasChSyncInsertSql(st, t->ncolumns, t->columns, st->gone);
	st->qtable = qtable;
	/* the copy's changes of columns go to it (CtasChSyncAlter) */
	st->rebuilding = psprintf("_ctas_fed_resync_new_%s", t->table);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * CtasChSyncRebuilt
 *		After the copy into the staging table committed (its rows sent, the
 *		progress stored): it takes the synced table's place (swap_in).  A
 *		reader sees the old table or the copy, never a mix.  Idempotent.
 */
void
CtasChSyncRebuilt(CtasSyncTarget *t)
{
	ChSyncState *st = (ChSyncState *) t->private;
	MemoryContext oldcxt;

	if (st->cluster != NULL)
	{
		cluster_rebuilt(t);
		return;
	}
	swap_in(st, resync_table(t, "new"), resync_table(t, "old"));
	st->rebuilding = NULL;
	oldcxt = MemoryContextSwitchTo(st->cxt);
	st->insert_sql = CtasChSyncInsertSql(st, t->ncolumns, t->columns, st->gone);
	MemoryContextSwitchTo(oldcxt);
}
