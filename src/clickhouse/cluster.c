/*-------------------------------------------------------------------------
 *
 * cluster.c
 *		  Cluster catalogs: a CTAS that lands on every shard of a ClickHouse
 *		  cluster, with a Distributed table over them.
 *
 * A ClickHouse catalog with the server options cluster (a cluster of the
 * servers' remote_servers) and shard_urls (the HTTP endpoint of each shard,
 * in shard_num order) is a cluster catalog.  A load into table t of it:
 *
 *	begin_load	the cluster is checked against system.clusters once per
 *				transaction (ChCluster.checked): as many shards as URLs, one
 *				replica each, and each URL's server is the shard it is
 *				listed as (is_local); the weights give the slots of the
 *				routing.  t exists when t or its local table does on any
 *				shard.
 *	create_table
 *				on every shard, one action for the local table
 *				(<table>_local, or the pattern local_table) with its staging
 *				table and its INSERT, and (create, replace) one for the
 *				Distributed table t, staged as a Distributed table over the
 *				final local name; append adds to each shard's local table
 *				and leaves t as it is.
 *	put_row		each row goes to the INSERT of the shard the Distributed
 *				table would send it to: the sharding expression is computed
 *				here, from the RowBinary encoding of its column (the value
 *				exactly as ClickHouse stores it), and shard = slot_shard[
 *				value % total weight], as the Distributed engine's block
 *				selector does.
 *	end_load	every shard's staging table must hold exactly the rows sent
 *				to it.
 *
 * Commit, abort and recovery are those of xact.c and resolve.c: every
 * action names its shard, the durable record lists the actions of every
 * shard, and the set is published at pre-commit, undone on abort and
 * decided as a whole by the resolver from the local transaction's outcome.
 *
 * The sharding keys, parsed and computed: shardkey.c.
 *
 * Parallel loads (parallel = N, parallel.c): the leader creates every
 * shard's staging table; CtasChClusterExport hands the workers the routing
 * and the staging tables, CtasChClusterAttach opens one INSERT of each
 * worker into every shard's staging table; the leader counts the staging
 * tables at end_load.  Continuous sync routes its changes with
 * CtasChShardOf (sync.c), the key read back by CtasChClusterSyncTable.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/cluster.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/explain.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "clickhouse.h"
#include "gid.h"
#include "hosts.h"
#include "jobs.h"
#include "jobshards.h"

#define CH_DEFAULT_LOCAL	"{table}_local"

/* ------------------------------------------------------------------------
 * The cluster (CtasChClusterOpen, in client.c, makes its clients)
 * ------------------------------------------------------------------------
 */

/*
 * CtasChClusterCheck
 *		Check the cluster against system.clusters of the catalog's url
 *		(http) and of each shard, once: as many shards as shard_urls, one
 *		replica each (replicas would need ReplicatedMergeTree), a positive
 *		total weight, and the server of each URL is the shard it is listed
 *		as.  Fills the slots of the routing.  ERROR otherwise.
 */
void
CtasChClusterCheck(ChCluster *c, CtasChHttp *http)
{
	MemoryContext old;
	char	   *body;
	List	   *rows;
	int			nf;
	ListCell   *lc;
	int			i;
	int		   *weights;
	int			nslots = 0;

	if (c->checked)
		return;
	body = CtasChHttpQuery(http,
						 psprintf("SELECT shard_num, any(shard_weight), count() FROM system.clusters WHERE cluster = %s GROUP BY shard_num ORDER BY shard_num",
								  CtasChLit(c->name)),
						 "read the cluster");
	rows = CtasChTsv(body, &nf);
	if (rows == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("cluster \"%s\" of ClickHouse catalog \"%s\" is not in system.clusters",
						c->name, CtasChHttpCatalogName(http)),
				 errhint("Name a cluster of the servers' remote_servers configuration.")));
	if (list_length(rows) != c->nshards || nf != 3)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("cluster \"%s\" has %d shards, but ClickHouse catalog \"%s\" lists %d in shard_urls",
						c->name, nf == 3 ? list_length(rows) : 0,
						CtasChHttpCatalogName(http), c->nshards),
				 errhint("List the HTTP URL of every shard, in shard_num order.")));
	weights = palloc0(sizeof(int) * c->nshards);
	i = 0;
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		if (f[0] == NULL || atoi(f[0]) != i + 1)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("cluster \"%s\" has no shard %d", c->name, i + 1)));
		if (f[2] == NULL || strcmp(f[2], "1") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("shard %d of cluster \"%s\" has %s replicas",
							i + 1, c->name, f[2] ? f[2] : "?"),
					 errdetail("ctas_fed writes MergeTree tables on one server per shard; replicas need ReplicatedMergeTree, which it does not create yet.")));
		weights[i] = f[1] ? atoi(f[1]) : 0;
		if (weights[i] < 0 || weights[i] > 1000)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("shard %d of cluster \"%s\" has weight %d",
							i + 1, c->name, weights[i]),
					 errdetail("Weights from 0 to 1000 are supported.")));
		nslots += weights[i];
		i++;
	}
	if (nslots == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("every shard of cluster \"%s\" has weight 0", c->name)));

	/* each URL is the shard it is listed as */
	for (i = 0; i < c->nshards; i++)
	{
		char	   *me;

		CtasChCheckVersion(c->http[i]);
		me = CtasChHttpQuery(c->http[i],
						   psprintf("SELECT arrayStringConcat(groupArray(toString(shard_num)), ',') FROM system.clusters WHERE cluster = %s AND is_local",
									CtasChLit(c->name)),
						   "find the shard of the server");
		if (atoi(me) != i + 1 || strspn(me, "0123456789") != strcspn(me, "\n"))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("entry %d of shard_urls of ClickHouse catalog \"%s\" is not shard %d of cluster \"%s\"",
							i + 1, CtasChHttpCatalogName(http), i + 1, c->name),
					 errdetail("The server at that URL is shard \"%s\" of the cluster (system.clusters, is_local).",
							   pnstrdup(me, strcspn(me, "\n"))),
					 errhint("List the HTTP URL of every shard, in shard_num order.")));
	}

	/* slot -> shard, as the Distributed engine's slot_to_shard */
	old = MemoryContextSwitchTo(GetMemoryChunkContext(c));
	c->slot_shard = palloc(sizeof(int) * nslots);
	c->nslots = 0;
	for (i = 0; i < c->nshards; i++)
	{
		int			w;

		for (w = 0; w < weights[i]; w++)
			c->slot_shard[c->nslots++] = i + 1;
	}
	MemoryContextSwitchTo(old);
	c->checked = true;
}


/*
 * ch_resolve_key
 *		The sharding key of a load whose columns have the ClickHouse types
 *		types: the option sharding_key, else intHash64 of a one-column
 *		primary key, else rand().  Returns the index of the key's column
 *		(-1 for rand()).  ERROR when the column is not one of the load's or
 *		not of a non-Nullable integer type, or when the primary key cannot
 *		be hashed here.
 */
static int
ch_resolve_key(CtasLoad *load, char **types, ChShardKey *key)
{
	const ChOptions *o = CtasChOptions(load);
	int			i;

	if (o->sharding_key)
		CtasChParseShardKey(o->sharding_key, key);
	else if (load->opts.primary_key == NIL)
	{
		key->func = CH_SHARD_RAND;
		key->column = NULL;
	}
	else
	{
		key->func = CH_SHARD_INTHASH64;
		key->column = strVal(linitial(load->opts.primary_key));
		for (i = 0; i < load->ncolumns; i++)
		{
			/* a text key: cityHash64 */
			if (strcmp(load->columns[i].name, key->column) == 0 &&
				CtasChKeyTypeOk(CH_SHARD_CITYHASH64, types[i]) &&
				!CtasChKeyTypeOk(CH_SHARD_INTHASH64, types[i]))
				key->func = CH_SHARD_CITYHASH64;
		}
		if (list_length(load->opts.primary_key) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot shard table \"%s\" by its primary key of %d columns",
							load->table, list_length(load->opts.primary_key)),
					 errhint("Give the option sharding_key: an integer column, intHash64(column), cityHash64(column) or rand().")));
	}
	if (key->func == CH_SHARD_RAND)
		return -1;
	for (i = 0; i < load->ncolumns; i++)
	{
		if (strcmp(load->columns[i].name, key->column) == 0)
			break;
	}
	if (i == load->ncolumns)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("sharding key column \"%s\" is not a column of the query", key->column)));
	if (!CtasChKeyTypeOk(key->func, types[i]))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot shard by column \"%s\" of type %s", key->column, types[i]),
				 errdetail("ctas_fed computes the shard of each row itself: from a non-Nullable integer column, or cityHash64 of a String column."),
				 errhint("Give the option sharding_key: an integer column, intHash64(column), cityHash64(column) or rand().")));
	return i;
}

/*
 * ch_local_name
 *		The local tables' name: the pattern local_table (default
 *		"{table}_local") with {table} replaced.  ERROR for a name that is
 *		empty, reserved, the target's own, or holds a control character.
 *		Palloc'd.
 */
static char *
ch_local_name(CtasLoad *load)
{
	const ChOptions *o = CtasChOptions(load);
	const char *pat = o->local_table ? o->local_table : CH_DEFAULT_LOCAL;
	StringInfoData buf;
	const char *p;

	initStringInfo(&buf);
	for (p = pat; *p; p++)
	{
		if (strncmp(p, "{table}", 7) == 0)
		{
			appendStringInfoString(&buf, load->table);
			p += 6;
		}
		else
			appendStringInfoChar(&buf, *p);
	}
	for (p = buf.data; *p; p++)
	{
		if ((unsigned char) *p < ' ' || *p == 0x7f)
			break;
	}
	if (buf.len == 0 || *p != '\0' || strcmp(buf.data, load->table) == 0 ||
		CtasIsScratchName(buf.data))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid local table name \"%s\" for table \"%s\"",
						buf.data, load->table),
				 errdetail("The shards' local tables need a name of their own, without control characters and not beginning with \"%s\".",
						   CTAS_SCRATCH_PREFIX)));
	return buf.data;
}

/*
 * CtasChClusterCheckOptions
 *		The statement options of a load, as far as clusters go (called by
 *		CtasChCheckOptions): sharding_key and local_table only for a
 *		cluster catalog; a cluster catalog takes atomic loads only (and
 *		continuous syncs, atomic at creation).  ERROR otherwise.
 */
void
CtasChClusterCheckOptions(CtasLoad *load)
{
	const ChOptions *o = CtasChOptions(load);
	ChShardKey	key;
	const char *what = NULL;

	if (CtasCatalogOption(load->catalog, "cluster") == NULL)
	{
		if (o->sharding_key || o->local_table)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"%s\" is valid only for a cluster catalog",
							o->sharding_key ? "sharding_key" : "local_table"),
					 errhint("Set the server options cluster and shard_urls of catalog \"%s\".",
							 load->catalog->name)));
		return;
	}
	if (o->sharding_key)
		CtasChParseShardKey(o->sharding_key, &key);
	if (o->local_table)
		(void) ch_local_name(load);
	if (!load->opts.atomic && !load->opts.sync)
		what = "atomic = false";
	if (what)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s is not supported into cluster catalog \"%s\"",
						what, load->catalog->name),
				 errdetail("A load into a ClickHouse cluster is atomic: every shard's table is published at commit.")));
}

/* ------------------------------------------------------------------------
 * The load
 * ------------------------------------------------------------------------
 */

/*
 * CtasChClusterBeginLoad
 *		begin_load for a cluster catalog: check the cluster, and say whether
 *		the target or its local table exists on any shard, as this
 *		transaction sees it (cl->shard_exists[] for each shard).
 */
bool
CtasChClusterBeginLoad(ChLoad *cl)
{
	CtasLoad   *load = cl->load;
	ChCluster  *c = cl->cluster;
	bool		any = false;
	int			i;

	CtasChClusterCheck(c, cl->http);
	cl->local = ch_local_name(load);
	cl->shard_exists = palloc0(sizeof(bool) * c->nshards);
	for (i = 0; i < c->nshards; i++)
	{
		char	   *phys;

		cl->shard_exists[i] =
			CtasChLogicalExists(c->http[i], cl->xs, i + 1, cl->db,
								load->table, &phys) ||
			CtasChLogicalExists(c->http[i], cl->xs, i + 1, cl->db,
								cl->local, &phys);
		any = any || cl->shard_exists[i];
	}
	return any;
}

/*
 * ch_read_dist
 *		The definition of Distributed table db.name on the server http
 *		talks to, from its engine_full: Distributed('cluster', 'db',
 *		'local', key).  Returns the local table's name and, unless key is
 *		NULL, parses the key into *key (ERROR if we cannot compute it);
 *		NULL when the table is
 *		not a Distributed table of this cluster and database with a
 *		sharding key.  Palloc'd.
 */
static char *
ch_read_dist(ChCluster *c, CtasChHttp *http, const char *db, const char *name,
			 ChShardKey *key)
{
	char	   *body;
	List	   *rows;
	int			nf;
	const char *p;
	char	   *args[3];
	char	   *expr;
	int			depth = 0;
	int			i;

	body = CtasChHttpQuery(http,
						 psprintf("SELECT engine_full FROM system.tables WHERE database = %s AND name = %s",
								  CtasChLit(db), CtasChLit(name)),
						 "read the Distributed table");
	rows = CtasChTsv(body, &nf);
	if (rows == NIL || nf != 1 || ((char **) linitial(rows))[0] == NULL)
		return NULL;
	p = ((char **) linitial(rows))[0];
	if (strncmp(p, "Distributed(", 12) != 0)
		return NULL;
	p += 12;
	for (i = 0; i < 3; i++)
	{
		CtasChSkipWs(&p);
		args[i] = CtasChParseString(&p);
		CtasChSkipWs(&p);
		if (args[i] == NULL || *p++ != ',')
			return NULL;
	}
	if (strcmp(args[0], c->name) != 0 || strcmp(args[1], db) != 0)
		return NULL;
	/* the key: what follows, up to the engine's closing bracket */
	expr = pstrdup(p);
	for (i = 0; expr[i]; i++)
	{
		if (expr[i] == '(')
			depth++;
		else if (expr[i] == ')' && depth-- == 0)
			break;
	}
	if (expr[i] != ')')
		return NULL;
	expr[i] = '\0';
	if (key)
		CtasChParseShardKey(expr, key);
	return args[2];
}

/*
 * ch_append_key
 *		Append: the rows must go where the existing Distributed table dist
 *		(on shard 1) sends them, into the local tables it reads.  Its
 *		cluster and database must be ours, its key one we can compute; it
 *		gives cl->local and cl->key (a sharding_key or local_table of the
 *		statement must agree).  ERROR otherwise.
 */
static void
ch_append_key(ChLoad *cl, const char *dist)
{
	CtasLoad   *load = cl->load;
	const ChOptions *o = CtasChOptions(load);
	ChShardKey	given;
	char	   *local;

	local = ch_read_dist(cl->cluster, cl->cluster->http[0], cl->db, dist,
						 &cl->key);
	if (local == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot append to table \"%s\" of cluster catalog \"%s\"",
						CtasChDisplay(cl->db, load->table), load->catalog->name),
				 errdetail("It is not a Distributed table of cluster \"%s\" over a table of database \"%s\" with a sharding key.",
						   cl->cluster->name, cl->db)));
	if (o->local_table && strcmp(local, cl->local) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("local table \"%s\" differs from \"%s\", that of table \"%s\"",
						cl->local, local, CtasChDisplay(cl->db, load->table))));
	cl->local = local;
	if (o->sharding_key)
	{
		CtasChParseShardKey(o->sharding_key, &given);
		if (strcmp(CtasChShardKeySql(&given), CtasChShardKeySql(&cl->key)) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("sharding key %s differs from %s, that of table \"%s\"",
							CtasChShardKeySql(&given), CtasChShardKeySql(&cl->key),
							CtasChDisplay(cl->db, load->table))));
	}
}

/*
 * CtasChClusterCreateTable
 *		create_table for a cluster catalog: on every shard, the local
 *		table's action with its staging table and INSERT, and for create
 *		and replace the Distributed table's action (see the file header).
 *		ERROR when appending to a cluster table that is not whole, or
 *		whose shards disagree on the column types.
 */
void
CtasChClusterCreateTable(ChLoad *cl, bool exists)
{
	CtasLoad   *load = cl->load;
	ChCluster  *c = cl->cluster;
	bool		append = exists && load->opts.if_exists == CTAS_IF_EXISTS_APPEND;
	char	  **types = NULL;
	int			i;

	cl->shards = palloc0(sizeof(ChLoad *) * c->nshards);
	for (i = 0; i < c->nshards; i++)
	{
		ChLoad	   *sub = palloc0(sizeof(ChLoad));
		char	   *dist = NULL;
		const char *missing = NULL;

		sub->load = load;
		sub->xs = cl->xs;
		sub->http = c->http[i];
		sub->shard = i + 1;
		sub->cluster = c;
		sub->db = cl->db;
		sub->local = cl->local;
		sub->key_col = -1;
		sub->job_shard = CtasJobShardStart(load->job, load->catalog->name,
										   i + 1);
		cl->shards[i] = sub;
		if (!append)
			continue;

		/* append: the whole cluster table must be there */
		if (!CtasChLogicalExists(sub->http, cl->xs, i + 1, cl->db,
								 load->table, &dist))
			missing = load->table;
		else if (i == 0)
		{
			/* its local tables and key, from shard 1's Distributed table */
			ch_append_key(cl, dist);
			sub->local = cl->local;
		}
		if (missing == NULL &&
			!CtasChLogicalExists(sub->http, cl->xs, i + 1, cl->db,
								 cl->local, &sub->phys))
			missing = cl->local;
		if (missing)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("cannot append to table \"%s\" of cluster catalog \"%s\": shard %d has no table \"%s\"",
							CtasChDisplay(cl->db, load->table),
							load->catalog->name, i + 1,
							CtasChDisplay(cl->db, missing))));
		sub->types = CtasChTargetTypes(sub, CH_APPEND);
		if (i == 0)
			types = sub->types;
		else
		{
			int			j;

			for (j = 0; j < load->ncolumns; j++)
			{
				if (strcmp(types[j], sub->types[j]) != 0)
					ereport(ERROR,
							(errcode(ERRCODE_FDW_ERROR),
							 errmsg("column \"%s\" of \"%s\" is %s on shard 1 but %s on shard %d",
									load->columns[j].name,
									CtasChDisplay(cl->db, cl->local),
									types[j], sub->types[j], i + 1)));
			}
		}
	}

	/* the columns, and the key among them */
	if (types == NULL)
		types = CtasChTargetTypes(cl, CH_CREATE);
	cl->ncols = load->ncolumns;
	cl->types = types;
	cl->cols = CtasChSetupColumns(load, types);
	if (append)
	{
		for (i = 0; i < load->ncolumns && cl->key.column; i++)
		{
			if (strcmp(load->columns[i].name, cl->key.column) == 0)
				break;
		}
		if (cl->key.func != CH_SHARD_RAND &&
			(i == load->ncolumns || !CtasChKeyTypeOk(cl->key.func, types[i])))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot route rows by %s, the sharding key of table \"%s\"",
							CtasChShardKeySql(&cl->key),
							CtasChDisplay(cl->db, load->table)),
					 errdetail("ctas_fed computes the shard of each row itself, from a non-Nullable integer column the query gives, or cityHash64 of a String column.")));
		cl->key_col = cl->key.func == CH_SHARD_RAND ? -1 : i;
	}
	else
		cl->key_col = ch_resolve_key(load, types, &cl->key);
	initStringInfo(&cl->key_buf);
	if (load->sync != NULL)
	{
		ListCell   *lc;
		bool		in_key = false;

		foreach(lc, load->opts.primary_key)
		{
			if (cl->key.column && strcmp(strVal(lfirst(lc)), cl->key.column) == 0)
				in_key = true;
		}
		if (!in_key)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot sync into cluster catalog \"%s\" with sharding key %s",
							load->catalog->name, CtasChShardKeySql(&cl->key)),
					 errdetail("Every version of a key must reach the same shard: the sharding key must be computed from a column of the primary key."),
					 errhint("Give the option sharding_key: a column of the primary key, intHash64 or cityHash64 of one.")));
	}

	/* every shard: local table, its INSERT, the Distributed table */
	for (i = 0; i < c->nshards; i++)
	{
		ChLoad	   *sub = cl->shards[i];
		ChActionKind kind;
		ChAction   *a;
		char	   *phys;
		bool		dist_exists;

		sub->ncols = cl->ncols;
		sub->types = cl->types;
		sub->cols = cl->cols;
		sub->local = cl->local;
		if (append)
			kind = CH_APPEND;
		else
			kind = CtasChLogicalExists(sub->http, cl->xs, i + 1, cl->db,
									   cl->local, &phys) ?
				CH_REPLACE : CH_CREATE;
		CtasChStage(sub, kind);
		CtasChInsertSql(sub);
		if (!load->skip_data)
			CtasChStreamOpen(sub);
		if (append)
			continue;

		dist_exists = CtasChLogicalExists(sub->http, cl->xs, i + 1, cl->db,
										  load->table, &phys);
		a = CtasChNewAction(load->part, cl->xs,
							dist_exists ? CH_REPLACE : CH_CREATE, i + 1,
							cl->db, load->table);
		CtasChHttpQuery(sub->http,
					  psprintf("CREATE TABLE %s AS %s ENGINE = Distributed(%s, %s, %s, %s)",
							   CtasChQname(cl->db, a->base.stage),
							   CtasChQname(cl->db, sub->insert_table),
							   CtasChLit(c->name), CtasChLit(cl->db),
							   CtasChLit(cl->local), CtasChShardKeySql(&cl->key)),
					  "create the Distributed table");
		a->base.state = CTAS_STAGED_LOADED;
	}
}


/* the shard of the row in slot */
static int
ch_route(ChLoad *cl, TupleTableSlot *slot)
{
	int			k = cl->key_col;

	if (k < 0)
		return CtasChShardOf(cl->cluster, &cl->key, NULL, &cl->key_buf,
							 (Datum) 0, true);
	return CtasChShardOf(cl->cluster, &cl->key, &cl->cols[k], &cl->key_buf,
						 slot->tts_values[k], slot->tts_isnull[k]);
}

/*
 * ch_shard_progress
 *		Publish the rows and bytes sent to shard sub in ctas_fed.job_shards:
 *		a parallel worker adds what it sent since its last report to the
 *		leader's entry, the leader (or a serial load) writes its own.
 */
static void
ch_shard_progress(ChLoad *cl, ChLoad *sub)
{
	if (cl->worker)
	{
		CtasJobShardAdd(cl->job_id, sub->job_shard,
						sub->rows - sub->rows_reported,
						sub->bytes - sub->bytes_reported);
		sub->rows_reported = sub->rows;
		sub->bytes_reported = sub->bytes;
	}
	else
		CtasJobShardProgress(cl->load->job, sub->job_shard, sub->rows,
							 sub->bytes);
}

/*
 * CtasChClusterPutRow
 *		put_row for a cluster catalog: encode the row into the INSERT of
 *		its shard; that buffer goes to the socket whenever it holds 1 MB.
 */
void
CtasChClusterPutRow(ChLoad *cl, TupleTableSlot *slot)
{
	ChLoad	   *sub = cl->shards[ch_route(cl, slot) - 1];
	StringInfo	buf = CtasChHttpStreamBuffer(sub->stream);
	int			before = buf->len;
	int			i;

	for (i = 0; i < cl->ncols; i++)
		CtasChPutValue(&cl->cols[i].enc, buf, slot->tts_values[i],
					   slot->tts_isnull[i]);
	cl->load->bytes += buf->len - before;
	sub->bytes += buf->len - before;
	cl->rows++;
	sub->rows++;
	if (buf->len >= CTAS_HTTP_STREAM_CHUNK)
	{
		CtasChStreamStep(sub, false);
		ch_shard_progress(cl, sub);
	}
}

/*
 * CtasChClusterEndLoad
 *		end_load for a cluster catalog: finish every shard's INSERT, then
 *		(not in a parallel worker) check every shard's staging table
 *		against the rows sent to it.  A parallel load's leader does not
 *		know how the workers' rows split: each shard's staging table is
 *		counted, and the counts must add up to the rows the workers sent
 *		(load->rows).
 */
void
CtasChClusterEndLoad(ChLoad *cl)
{
	uint64		sum = 0;
	int			i;

	if (cl->shards == NULL)
		return;
	for (i = 0; i < cl->cluster->nshards; i++)
	{
		if (cl->shards[i]->stream)
			CtasChStreamStep(cl->shards[i], true);
	}
	if (cl->worker)
	{
		for (i = 0; i < cl->cluster->nshards; i++)
			ch_shard_progress(cl, cl->shards[i]);
		return;
	}
	for (i = 0; i < cl->cluster->nshards && cl->exported; i++)
	{
		ChLoad	   *sub = cl->shards[i];

		sub->rows = CtasChParseCount(sub->http,
									 CtasChHttpQuery(sub->http,
												   psprintf("SELECT count() FROM %s",
															CtasChQname(sub->db, sub->insert_table)),
												   "count the rows of the staging table"),
									 "SELECT count()");
		sum += sub->rows;
	}
	if (cl->exported && sum != cl->load->rows)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("staging tables of \"%s\" in catalog \"%s\" hold " UINT64_FORMAT " rows on all shards, but " UINT64_FORMAT " were sent",
						CtasChDisplay(cl->db, cl->load->table),
						cl->load->catalog->name, sum, cl->load->rows)));
	for (i = 0; i < cl->cluster->nshards; i++)
	{
		CtasChStageCheck(cl->shards[i]);
		CtasJobShardProgress(cl->load->job, cl->shards[i]->job_shard,
							 cl->shards[i]->rows, cl->shards[i]->bytes);
		ereport(DEBUG1,
				(errmsg_internal("ctas_fed: shard %d of \"%s\" gets " UINT64_FORMAT " rows",
								 i + 1, cl->load->table, cl->shards[i]->rows)));
	}
}

/*
 * CtasChClusterSyncTable
 *		For the sync worker: the local tables and the sharding key of the
 *		synced table db.name of cluster c, from its Distributed table on
 *		shard 1 (the cluster checked through http first).  The key must be
 *		computed from key column keys[*key_k] of the sync's key (the rows
 *		of one key must all meet on one shard): ERROR otherwise.  Returns
 *		the local tables' name, palloc'd.
 */
char *
CtasChClusterSyncTable(ChCluster *c, CtasChHttp *http, const char *db,
					   const char *name, int nkeys, char **keys,
					   ChShardKey *key, int *key_k)
{
	char	   *local;
	int			i;

	CtasChClusterCheck(c, http);
	local = ch_read_dist(c, c->http[0], db, name, key);
	if (local == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("synced table \"%s\" is not a Distributed table of cluster \"%s\" with a sharding key",
						CtasChDisplay(db, name), c->name)));
	*key_k = -1;
	for (i = 0; i < nkeys && key->func != CH_SHARD_RAND; i++)
	{
		if (strcmp(keys[i], key->column) == 0)
			*key_k = i;
	}
	if (*key_k < 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot sync into table \"%s\" sharded by %s",
						CtasChDisplay(db, name), CtasChShardKeySql(key)),
				 errdetail("Every version of a key must reach the same shard: the sharding key must be computed from a column of the primary key.")));
	return local;
}

/*
 * CtasChClusterExport
 *		parallel_export for a cluster catalog, after the database and the
 *		column types (writer.c): the routing (key function, key column,
 *		slot -> shard) and each shard's staging table, appended to state;
 *		every shard's INSERT of the leader is finished empty.
 */
List *
CtasChClusterExport(ChLoad *cl, List *state)
{
	ChCluster  *c = cl->cluster;
	List	   *slots = NIL;
	List	   *stages = NIL;
	List	   *progress;
	int			i;

	/* the job and each shard's entry in ctas_fed.job_shards */
	progress = list_make1(makeString(psprintf(INT64_FORMAT, cl->load->job.id)));
	for (i = 0; i < c->nshards; i++)
		progress = lappend(progress, makeInteger(cl->shards[i]->job_shard));
	for (i = 0; i < c->nslots; i++)
		slots = lappend(slots, makeInteger(c->slot_shard[i]));
	for (i = 0; i < c->nshards; i++)
	{
		ChLoad	   *sub = cl->shards[i];

		stages = lappend(stages, makeString(sub->insert_table));
		if (sub->stream)
			CtasChStreamStep(sub, true);
	}
	state = lappend(state, list_make3(makeInteger((int) cl->key.func),
									  makeInteger(cl->key_col),
									  makeString(cl->key.column ? cl->key.column : "")));
	state = lappend(state, slots);
	state = lappend(state, stages);
	state = lappend(state, progress);
	cl->exported = true;
	return state;
}

/*
 * CtasChClusterAttach
 *		parallel_attach for a cluster catalog, in a parallel worker whose cl
 *		has the columns set up (writer.c): the cluster's clients, the
 *		routing of the leader, and one INSERT of this worker into each
 *		shard's staging table.  l holds what CtasChClusterExport appended,
 *		from its first element.  ERROR when a shard cannot be reached.
 */
void
CtasChClusterAttach(ChLoad *cl, List *l)
{
	CtasLoad   *load = cl->load;
	ChCluster  *c = CtasChClusterOpen(load->catalog, load->cxt);
	List	   *key = linitial(l);
	List	   *slots = lsecond(l);
	List	   *stages = lthird(l);
	List	   *progress = lfourth(l);
	ListCell   *lc;
	int			i;

	if (c == NULL || list_length(stages) != c->nshards)
		elog(ERROR, "parallel cluster load has %d shards, the catalog %d",
			 list_length(stages), c ? c->nshards : 0);
	cl->cluster = c;
	cl->worker = true;
	cl->job_id = pg_strtoint64(strVal(linitial(progress)));
	cl->key.func = (ChShardFunc) intVal(linitial(key));
	cl->key_col = intVal(lsecond(key));
	cl->key.column = strVal(lthird(key));
	initStringInfo(&cl->key_buf);
	c->nslots = list_length(slots);
	c->slot_shard = palloc(sizeof(int) * c->nslots);
	i = 0;
	foreach(lc, slots)
		c->slot_shard[i++] = intVal(lfirst(lc));
	c->checked = true;
	cl->shards = palloc0(sizeof(ChLoad *) * c->nshards);
	for (i = 0; i < c->nshards; i++)
	{
		ChLoad	   *sub = palloc0(sizeof(ChLoad));

		sub->load = load;
		sub->worker = true;
		sub->http = c->http[i];
		sub->shard = i + 1;
		sub->cluster = c;
		sub->db = cl->db;
		sub->insert_table = strVal(list_nth(stages, i));
		sub->ncols = cl->ncols;
		sub->types = cl->types;
		sub->cols = cl->cols;
		sub->key_col = -1;
		sub->job_shard = intVal(list_nth(progress, i + 1));
		cl->shards[i] = sub;
		CtasChCheckVersion(sub->http);
		CtasChInsertSql(sub);
		CtasChStreamOpen(sub);
	}
}

/*
 * CtasChClusterDrop
 *		drop_table for a cluster catalog: on every shard, the Distributed
 *		table and the local table it reads (from its definition; else the
 *		default name) are dropped where they exist.  Returns false when no
 *		shard has either.
 */
bool
CtasChClusterDrop(CtasLoad *load)
{
	ChXact	   *xs = CtasChXact(load->part);
	ChCluster  *c = xs->cluster;
	char	   *names[2];
	bool		any = false;
	int			i;
	int			j;

	CtasChClusterCheck(c, xs->http);
	for (i = 0; i < c->nshards; i++)
	{
		char	   *phys;

		names[0] = load->table;
		names[1] = NULL;
		if (CtasChLogicalExists(c->http[i], xs, i + 1, load->schema,
								load->table, &phys))
			names[1] = ch_read_dist(c, c->http[i], load->schema, phys, NULL);
		if (names[1] == NULL)
			names[1] = ch_local_name(load);
		for (j = 0; j < 2; j++)
		{
			ChAction   *a;

			if (!CtasChLogicalExists(c->http[i], xs, i + 1, load->schema,
									 names[j], &phys))
				continue;
			a = CtasChNewAction(load->part, xs, CH_DROP, i + 1, load->schema,
								names[j]);
			a->base.state = CTAS_STAGED_LOADED;
			any = true;
		}
	}
	return any;
}

/*
 * CtasChClusterExplain
 *		EXPLAIN for a cluster catalog: the shards, the sharding key and how
 *		rows are routed, and the DDL run on every shard.  No remote work:
 *		the weights come from system.clusters when the load runs.
 */
void
CtasChClusterExplain(CtasLoad *load, ExplainState *es)
{
	char	  **types = palloc(sizeof(char *) * load->ncolumns);
	const char *urls = CtasCatalogOption(load->catalog, "shard_urls");
	const char *cluster = CtasCatalogOption(load->catalog, "cluster");
	List	   *list = urls ? CtasSplitUrlList(urls) : NIL;
	ChColumn   *cols;
	ChShardKey	key;
	char	   *local = ch_local_name(load);
	char	   *keysql;
	int			i;

	for (i = 0; i < load->ncolumns; i++)
		types[i] = load->columns[i].remote_type;
	cols = CtasChSetupColumns(load, types);
	(void) ch_resolve_key(load, types, &key);
	keysql = CtasChShardKeySql(&key);

	ExplainPropertyText("Cluster", cluster, es);
	ExplainPropertyInteger("Shards", NULL, list_length(list), es);
	ExplainPropertyText("Shard URLs", urls ? urls : "", es);
	ExplainPropertyText("Sharding Key", keysql, es);
	ExplainPropertyText("Routing",
						key.func == CH_SHARD_RAND ?
						"each row to a random shard, by weight; one INSERT per shard" :
						psprintf("each row to the shard of slot %s %% (sum of shard weights), computed locally as the Distributed engine does; one INSERT per shard",
								 keysql),
						es);
	ExplainPropertyText("Local Table", CtasChQname(load->schema, local), es);
	ExplainPropertyText("Remote DDL (every shard)",
						CtasChCreateSql(load, cols, load->schema, local), es);
	ExplainPropertyText("Distributed DDL (every shard)",
						psprintf("CREATE TABLE %s AS %s ENGINE = Distributed(%s, %s, %s, %s)",
								 CtasChQname(load->schema, load->table),
								 CtasChQname(load->schema, local),
								 CtasChLit(cluster), CtasChLit(load->schema),
								 CtasChLit(local), keysql),
						es);
}
