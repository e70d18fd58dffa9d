/*-------------------------------------------------------------------------
 *
 * resolve.c
 *		  Recovery of the ClickHouse target: finish or undo what a crash or
 *		  an unreachable server left in doubt.
 *
 * Recovery reads only the durable records (record.c) and acts on whole
 * transactions, decided by the local transaction's status in the commit
 * log; a table that no record names is never touched, whatever it is
 * called.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/resolve.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/file.h>
#include <sys/stat.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/syscache.h"

#include "clickhouse.h"
#include "gid.h"
#include "xrecord.h"

/* ------------------------------------------------------------------------
 * Recovery
 * ------------------------------------------------------------------------
 */

/*
 * ch_all_digits
 *		Is s a non-empty string of decimal digits (a number a record holds)?
 */
static bool
ch_all_digits(const char *s)
{
	return s != NULL && *s != '\0' && strspn(s, "0123456789") == strlen(s);
}

/*
 * ch_record_read
 *		The content of the record at fd, checked and parsed: a List of
 *		char ** rows (see "Durable records"), the header first (seven
 *		fields), then the actions (seven fields each; six in a record of
 *		version 1, whose actions are all on the catalog's url).  NIL, with *why set,
 *		for a file that is not a whole, intact record of ours.  ERROR when
 *		the file cannot be read.  Palloc'd.
 */
static List *
ch_record_read(int fd, const char *path, const char **why)
{
	struct stat st;
	char	   *data;
	ssize_t		got;
	char	   *trailer;
	char	   *body_end;
	unsigned int crc;
	List	   *rows;
	List	   *actions = NIL;
	int			nf;
	char	  **h;

	*why = NULL;
	if (fstat(fd, &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	if (st.st_size <= 0 || st.st_size > CH_RECORD_MAX_SIZE)
	{
		*why = st.st_size <= 0 ? "it is empty" : "it is too large";
		return NIL;
	}
	data = palloc(st.st_size + 1);
	got = pg_pread(fd, data, st.st_size, 0);
	if (got != st.st_size)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": %m", path)));
	data[got] = '\0';
	if (strlen(data) != (size_t) got)
	{
		*why = "it contains a zero byte";
		return NIL;
	}

	/* the last line is the checksum of everything before it */
	if (data[got - 1] != '\n')
	{
		*why = "its last line is incomplete";
		return NIL;
	}
	data[got - 1] = '\0';
	trailer = strrchr(data, '\n');
	trailer = trailer ? trailer + 1 : data;
	if (strncmp(trailer, "crc32c\t", 7) != 0 || strlen(trailer) != 7 + 8 ||
		strspn(trailer + 7, "0123456789ABCDEF") != 8 ||
		sscanf(trailer + 7, "%8X", &crc) != 1)
	{
		*why = "it does not end with its checksum";
		return NIL;
	}
	if (CtasRecordCrc(data, trailer - data) != (pg_crc32c) crc)
	{
		*why = "its checksum does not match its content";
		return NIL;
	}
	*trailer = '\0';

	/* the header line, then the action lines */
	body_end = strchr(data, '\n');
	if (body_end == NULL)
	{
		*why = "it has no header";
		return NIL;
	}
	*body_end = '\0';
	rows = CtasChTsv(data, &nf);
	if (list_length(rows) != 1 || nf != 7)
	{
		*why = "its header does not have seven fields";
		return NIL;
	}
	h = linitial(rows);
	if (h[0] == NULL || h[1] == NULL ||
		strcmp(h[0], CH_RECORD_MAGIC) != 0 ||
		(strcmp(h[1], CH_RECORD_VERSION) != 0 && strcmp(h[1], "1") != 0) ||
		!ch_all_digits(h[2]) || !ch_all_digits(h[3]) ||
		!ch_all_digits(h[4]) || !ch_all_digits(h[5]))
	{
		*why = "its header is not that of a record of this version";
		return NIL;
	}
	if (body_end[1] != '\0')
	{
		int			want = strcmp(h[1], "1") == 0 ? 6 : 7;

		actions = CtasChTsv(body_end + 1, &nf);
		if (nf != want)
		{
			*why = want == 6 ? "an action line does not have six fields" :
				"an action line does not have seven fields";
			return NIL;
		}
	}
	return list_concat(rows, actions);
}

/*
 * ch_record_action
 *		The action of one line of a record (nf fields), or NULL when the
 *		line is malformed.  Palloc'd.
 */
static ChAction *
ch_record_action(char **f, int nf)
{
	ChAction   *a = palloc0(sizeof(ChAction));
	int			k;

	if (f[0] == NULL || f[1] == NULL || f[2] == NULL)
		return NULL;
	for (k = 0; k < lengthof(CtasChActionNames); k++)
	{
		if (strcmp(f[0], CtasChActionNames[k]) == 0)
			break;
	}
	if (k == lengthof(CtasChActionNames))
		return NULL;
	a->kind = (ChActionKind) k;
	a->base.db = f[1];
	a->base.table = f[2];
	a->base.stage = f[3];
	a->base.old = f[4];
	a->base.marker = f[5];
	if (nf == 7)
	{
		if (!ch_all_digits(f[6]) || strlen(f[6]) > 3 ||
			atoi(f[6]) > CH_MAX_SHARDS)
			return NULL;
		a->shard = atoi(f[6]);
	}
	if ((a->kind != CH_DROP && a->base.stage == NULL) ||
		((a->kind == CH_REPLACE || a->kind == CH_DROP) && a->base.old == NULL) ||
		(a->kind == CH_CREATE && a->base.marker == NULL))
		return NULL;
	return a;
}

/*
 * ch_finish_recorded
 *		Finish action a of a committed transaction: drop what post_commit
 *		would have dropped.  Publication was complete (the local commit
 *		follows it), so no rename is left to do.  false with a WARNING when
 *		something is left.
 */
static bool
ch_finish_recorded(CtasChHttp *http, ChAction *a)
{
	bool		ok = true;

	if (a->base.marker)
		ok = CtasChCleanupDrop(http, a->base.db, a->base.marker, "drop the commit marker") && ok;
	if (a->base.old)
		ok = CtasChCleanupDrop(http, a->base.db, a->base.old, "drop the old table") && ok;
	if (a->base.stage)
		ok = CtasChCleanupDrop(http, a->base.db, a->base.stage, "drop the staging table") && ok;
	return ok;
}

/*
 * ch_resolve_record
 *		Resolve the transaction of the record at path, if it is one of
 *		this database and catalog: finish it (committed) or undo it as a
 *		whole in reverse order (aborted), then remove the record.  Emits one
 *		action for it, on the object its jobs know it by (the gid).  xs
 *		holds the clients (url, and shards of a cluster), nothing else.
 */
static void
ch_resolve_record(CtasCatalog *catalog, ChXact *xs, const char *path,
				  void (*emit) (void *arg, const char *object,
								const char *action),
				  void *arg)
{
	int			fd;
	List	   *rows;
	char	  **h;
	uint64		fxid;
	Oid			dbid;
	Oid			serverid;
	Oid			umid;
	const char *object;
	struct stat st_fd;
	struct stat st_path;
	CtasXactStatus status;
	List	   *actions = NIL;
	ListCell   *lc;
	const char *damage;
	int			i;

	fd = OpenTransientFile(path, O_RDWR | PG_BINARY);
	if (fd < 0)
	{
		if (errno == ENOENT)
			return;				/* finished meanwhile */
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", path)));
	}
	rows = ch_record_read(fd, path, &damage);
	if (rows == NIL)
	{
		CloseTransientFile(fd);
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("ClickHouse transaction record \"%s\" is damaged", path),
				 errdetail("The file cannot be read as a record: %s.", damage),
				 errhint("The resolver does not act on it. Compare the tables it names with ClickHouse, then remove the file.")));
		return;
	}
	h = linitial(rows);
	fxid = strtou64(h[2], NULL, 10);
	dbid = (Oid) strtoul(h[3], NULL, 10);
	serverid = (Oid) strtoul(h[4], NULL, 10);
	object = h[6] ? h[6] : path;
	if (dbid != MyDatabaseId || serverid != catalog->serverid)
	{
		CloseTransientFile(fd);
		return;					/* another database's or catalog's */
	}

	/*
	 * A transaction is finished with the credentials it ran with: the
	 * user mapping of the record.  Another user's resolve_in_doubt() must
	 * neither act with its own ClickHouse user on tables of someone else's
	 * transaction nor learn their names.  Only when that mapping is gone
	 * may a superuser finish it with another.
	 */
	umid = (Oid) strtoul(h[5], NULL, 10);
	if (umid != catalog->umid &&
		(!superuser() ||
		 SearchSysCacheExists1(USERMAPPINGOID, ObjectIdGetDatum(umid))))
	{
		CloseTransientFile(fd);
		return;
	}
	for_each_from(lc, rows, 1)
	{
		ChAction   *a = ch_record_action(lfirst(lc),
										 strcmp(h[1], "1") == 0 ? 6 : 7);

		if (a == NULL)
		{
			emit(arg, object, "left: its record is malformed");
			CloseTransientFile(fd);
			return;
		}
		if (a->shard > 0 &&
			(xs->cluster == NULL || a->shard > xs->cluster->nshards))
		{
			emit(arg, object,
				 psprintf("left: it names shard %d, which the catalog's shard_urls do not list",
						  a->shard));
			CloseTransientFile(fd);
			return;
		}
		actions = lappend(actions, a);
	}

	if (CtasLocalXactStatus(fxid) == CTAS_XACT_IN_PROGRESS)
	{
		emit(arg, object, "left: its transaction is in progress");
		CloseTransientFile(fd);
		return;
	}

	/* the backend that owns it may still be finishing it */
	if (flock(fd, LOCK_EX | LOCK_NB) != 0)
	{
		if (errno != EWOULDBLOCK)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not lock file \"%s\": %m", path)));
		emit(arg, object, "left: its transaction is being finished");
		CloseTransientFile(fd);
		return;
	}
	/* and may have finished it, or written a new version, before that */
	if (fstat(fd, &st_fd) != 0 || stat(path, &st_path) != 0 ||
		st_fd.st_ino != st_path.st_ino || st_fd.st_dev != st_path.st_dev)
	{
		CloseTransientFile(fd);
		return;
	}

	/* the commit log decides; see CtasChResolve */
	status = CtasLocalXactStatus(fxid);
	CtasStagedCleanupFailed = false;
	switch (status)
	{
		case CTAS_XACT_IN_PROGRESS:
			/* everything stays: its backend may still publish or undo it */
			emit(arg, object, "left: its transaction is in progress");
			CloseTransientFile(fd);
			return;
		case CTAS_XACT_UNKNOWN:
			/* no evidence either way: everything stays, for a human */
			emit(arg, object, "left: local transaction status unknown");
			CloseTransientFile(fd);
			return;
		case CTAS_XACT_COMMITTED:

			/*
			 * Published: left are the commit markers, the replaced and
			 * dropped tables under their scratch names, and the staging
			 * tables of appends.
			 */
			foreach(lc, actions)
			{
				if (!ch_finish_recorded(CtasChActionHttp(xs, lfirst(lc)),
										lfirst(lc)))
				{
					emit(arg, object, "left: could not drop what the transaction replaced");
					CloseTransientFile(fd);
					return;
				}
			}
			break;
		case CTAS_XACT_ABORTED:

			/*
			 * Anything from a staging table to a complete publication may be
			 * left: as CtasChAbort, every action, newest first, undone from
			 * what the server shows.
			 */
			for (i = list_length(actions) - 1; i >= 0; i--)
			{
				ChAction   *a = list_nth(actions, i);
				CtasChHttp *http = CtasChActionHttp(xs, a);
				char	   *why = NULL;
				bool		ok;

				if (a->kind == CH_APPEND)
					ok = CtasChCleanupDrop(http, a->base.db, a->base.stage, "drop the staging table");
				else
					ok = CtasChUndoChecked(http, a, &why);
				if (!ok)
				{
					emit(arg, object,
						 psprintf("left: %s", why ? why : "could not drop the staging table"));
					CloseTransientFile(fd);
					return;
				}
			}
			break;
	}
	(void) durable_unlink(path, WARNING);
	CloseTransientFile(fd);
	emit(arg, object, status == CTAS_XACT_COMMITTED ? "committed" : "rolled back");
}

static int
ch_cmp_names(const ListCell *a, const ListCell *b)
{
	return strcmp(lfirst(a), lfirst(b));
}

/*
 * CtasChResolve
 *		resolve of the writer: every durable record of this database and
 *		catalog (see "Durable records") names one transaction's actions,
 *		and the local commit status of that transaction decides:
 *
 *		committed	what post-commit would have dropped is dropped: the
 *					commit markers, the replaced and dropped tables, the
 *					staging tables of appends;
 *		aborted		every action is undone, newest first, as CtasChAbort
 *					does, from what the server shows (CtasChUndoChecked):
 *					published tables are taken back, replaced and dropped
 *					tables put back, staging tables and markers dropped.
 *
 * A transaction in progress, or whose status is no longer known, is left
 * alone.  Only tables that a record names are ever touched: a table that
 * merely looks like a scratch table (_ctas_fed_stage_..., created by
 * anyone) is not.  The object of each emitted action is the transaction's
 * gid as ctas_fed.jobs shows it; actions: "committed", "rolled back", or
 * "left: <why>", in which case the record stays for the next round.
 */
void
CtasChResolve(CtasCatalog *catalog,
		   void (*emit) (void *arg, const char *object, const char *action),
		   void *arg)
{
	ChXact		xs;
	DIR		   *dir;
	struct dirent *de;
	List	   *paths = NIL;
	ListCell   *lc;

	dir = AllocateDir(CH_RECORD_DIR);
	if (dir == NULL && errno == ENOENT)
		return;
	while ((de = ReadDir(dir, CH_RECORD_DIR)) != NULL)
	{
		size_t		len = strlen(de->d_name);

		if (strncmp(de->d_name, "ch_", 3) != 0)
			continue;
		if (len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0)
		{
			/* a new version that a crash kept from replacing its record */
			uint64		fxid = strtou64(de->d_name + 3, NULL, 10);

			if (CtasLocalXactStatus(fxid) != CTAS_XACT_IN_PROGRESS)
			{
				char	   *tmp = psprintf(CH_RECORD_DIR "/%s", de->d_name);

				if (unlink(tmp) != 0 && errno != ENOENT)
					ereport(WARNING,
							(errcode_for_file_access(),
							 errmsg("could not remove file \"%s\": %m", tmp)));
			}
			continue;
		}
		paths = lappend(paths, psprintf(CH_RECORD_DIR "/%s", de->d_name));
	}
	FreeDir(dir);
	if (paths == NIL)
		return;
	list_sort(paths, ch_cmp_names);

	/* only the clients of xs are used: of the url and of each shard */
	memset(&xs, 0, sizeof(xs));
	xs.http = CtasChHttpCreate(catalog, CurrentMemoryContext);
	xs.cluster = CtasChClusterOpen(catalog, CurrentMemoryContext);
	foreach(lc, paths)
		ch_resolve_record(catalog, &xs, lfirst(lc), emit, arg);
}
