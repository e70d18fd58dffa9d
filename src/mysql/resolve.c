/*-------------------------------------------------------------------------
 *
 * resolve.c
 *		  Recovery of the MySQL target: finish or undo what a crash or an
 *		  unreachable server left in doubt.
 *
 * Recovery reads only the durable records (xact.c) and acts on whole
 * transactions, decided by the local transaction's status in the commit
 * log: an XA branch is committed or rolled back only when a record names
 * its gid (or, for the workers of a parallel append, the prefix of their
 * gids and their number) and XA RECOVER lists it (a worker's gid that is
 * not prepared is taken, so that none can be later: CtasMySettleBranches);
 * a table is touched only when a record
 * names it, whatever it is called.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/mysql/resolve.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/file.h>
#include <sys/stat.h>

#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/syscache.h"

#include "gid.h"
#include "mysql_target.h"
#include "xrecord.h"

static bool
my_all_digits(const char *s)
{
	return s != NULL && *s != '\0' && strspn(s, "0123456789") == strlen(s);
}

/*
 * CtasMyRecordParse
 *		The content of a record, checked: a List of char ** rows, the header
 *		(seven fields) first, then the actions (eight fields; six in a
 *		record of version 1, given two NULL ones).  NIL with *why
 *		for anything that is not an intact record of ours.  data is
 *		modified.
 */
List *
CtasMyRecordParse(char *data, size_t len, const char **why)
{
	List	   *lines = CtasRecordParse(data, len, why);
	List	   *rows = NIL;
	ListCell   *lc;
	char	  **h;
	int			nfields = 8;

	if (lines == NIL)
		return NIL;
	h = ((CtasRecordLine *) linitial(lines))->fields;
	if (((CtasRecordLine *) linitial(lines))->nfields >= 2 && h[1] &&
		strcmp(h[1], "1") == 0)
		nfields = 6;			/* written before parallel appends */
	foreach(lc, lines)
	{
		CtasRecordLine *l = lfirst(lc);

		if (l->nfields != (rows == NIL ? 7 : nfields))
		{
			*why = "a line has the wrong number of fields";
			return NIL;
		}
		if (rows != NIL && nfields == 6)
		{
			/* no branches */
			char	  **f = palloc0(sizeof(char *) * 8);

			memcpy(f, l->fields, sizeof(char *) * 6);
			l->fields = f;
		}
		rows = lappend(rows, l->fields);
	}
	h = linitial(rows);
	if (h[0] == NULL || h[1] == NULL ||
		strcmp(h[0], MY_RECORD_MAGIC) != 0 ||
		(strcmp(h[1], MY_RECORD_VERSION) != 0 && strcmp(h[1], "1") != 0) ||
		!my_all_digits(h[2]) || !my_all_digits(h[3]) ||
		!my_all_digits(h[4]) || !my_all_digits(h[5]))
	{
		*why = "its header is not that of a record of this version";
		return NIL;
	}
	return rows;
}

/* the action of one record line, or NULL when malformed */
static MyAction *
my_record_action(char **f)
{
	MyAction   *a = palloc0(sizeof(MyAction));
	int			k;

	if (f[0] == NULL || f[1] == NULL || f[2] == NULL)
		return NULL;
	for (k = 0; k < lengthof(CtasMyActionNames); k++)
		if (strcmp(f[0], CtasMyActionNames[k]) == 0)
			break;
	if (k == lengthof(CtasMyActionNames))
		return NULL;
	a->kind = (MyActionKind) k;
	a->base.db = f[1];
	a->base.table = f[2];
	a->base.stage = f[3];
	a->base.marker = f[4];
	a->base.old = f[5];
	a->branches = f[6];
	if (f[6] != NULL)
	{
		char	   *end;

		if (a->kind != MY_APPEND || f[7] == NULL || !my_all_digits(f[7]) ||
			strlen(f[7]) > 5)
			return NULL;
		a->nbranches = (int) strtol(f[7], &end, 10);
	}
	if (a->kind != MY_APPEND && a->base.old == NULL)
		return NULL;
	if ((a->kind == MY_CREATE || a->kind == MY_REPLACE) && a->base.stage == NULL)
		return NULL;
	if (a->kind == MY_CREATE && a->base.marker == NULL)
		return NULL;
	return a;
}

/*
 * my_resolve_xa
 *		Commit or roll back the branch gid if XA RECOVER lists it.  false
 *		(WARNING) when the server cannot be asked or refuses.
 */
static bool
my_resolve_xa(MyConn *conn, const char *gid, bool commit)
{
	List	   *rows;
	ListCell   *lc;
	char	   *detail;
	bool		found = false;

	if (!CtasMyTryQuery(conn, "XA RECOVER", "list XA transactions",
						MY_Q_CLEANUP, &rows, &detail, NULL))
	{
		CtasStagedCleanupFailed = true;
		ereport(WARNING,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not list the XA transactions of MySQL catalog \"%s\"",
						CtasMyCatalogName(conn)),
				 errdetail_internal("%s", detail ? detail : "")));
		return false;
	}
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		/* formatID, gtrid_length, bqual_length, data */
		if (f[2] && strcmp(f[2], "0") == 0 && f[3] && strcmp(f[3], gid) == 0)
			found = true;
	}
	if (!found)
		return true;
	return CtasMyCleanup(conn,
						 psprintf("XA %s %s", commit ? "COMMIT" : "ROLLBACK",
								  CtasMyLiteral(gid)),
						 commit ? "commit XA transaction" : "roll back XA transaction",
						 gid);
}

/*
 * my_resolve_record
 *		Resolve the transaction of the record at path if it is one of this
 *		database, catalog and user mapping: finish it (committed) or undo it
 *		(aborted), then remove the record.
 */
static void
my_resolve_record(CtasCatalog *catalog, MyConn **conn, const char *path,
				  void (*emit) (void *arg, const char *object,
								const char *action),
				  void *arg)
{
	int			fd;
	struct stat st;
	struct stat st_path;
	char	   *data;
	List	   *rows;
	char	  **h;
	const char *damage;
	uint64		fxid;
	Oid			umid;
	const char *object;
	const char *gid;
	List	   *actions = NIL;
	ListCell   *lc;
	CtasXactStatus status;
	int			i;

	fd = OpenTransientFile(path, O_RDWR | PG_BINARY);
	if (fd < 0)
	{
		if (errno == ENOENT)
			return;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", path)));
	}
	if (fstat(fd, &st) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not stat file \"%s\": %m", path)));
	if (st.st_size > MY_RECORD_MAX_SIZE)
		st.st_size = 0;
	data = palloc(st.st_size + 1);
	if (pg_pread(fd, data, st.st_size, 0) != st.st_size)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read file \"%s\": %m", path)));
	data[st.st_size] = '\0';
	rows = CtasMyRecordParse(data, st.st_size, &damage);
	if (rows == NIL)
	{
		CloseTransientFile(fd);
		ereport(WARNING,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("MySQL transaction record \"%s\" is damaged", path),
				 errdetail("The file cannot be read as a record: %s.", damage),
				 errhint("The resolver does not act on it. Compare the tables it names with MySQL, then remove the file.")));
		return;
	}
	h = linitial(rows);
	fxid = strtou64(h[2], NULL, 10);
	umid = (Oid) strtoul(h[5], NULL, 10);
	gid = h[6];
	if ((Oid) strtoul(h[3], NULL, 10) != MyDatabaseId ||
		(Oid) strtoul(h[4], NULL, 10) != catalog->serverid ||
		(umid != catalog->umid &&
		 (!superuser() ||
		  SearchSysCacheExists1(USERMAPPINGOID, ObjectIdGetDatum(umid)))))
	{
		CloseTransientFile(fd);
		return;
	}
	for_each_from(lc, rows, 1)
	{
		MyAction   *a = my_record_action(lfirst(lc));

		if (a == NULL)
		{
			CloseTransientFile(fd);
			emit(arg, path, "left: its record is malformed");
			return;
		}
		actions = lappend(actions, a);
	}
	object = gid ? gid : actions ? ((MyAction *) linitial(actions))->base.old : path;
	if (object == NULL)
		object = path;

	/* its own backend may still be finishing it */
	if (CtasLocalXactStatus(fxid) == CTAS_XACT_IN_PROGRESS ||
		flock(fd, LOCK_EX | LOCK_NB) != 0)
	{
		emit(arg, object, "left: its transaction is in progress");
		CloseTransientFile(fd);
		return;
	}
	if (stat(path, &st_path) != 0 || st.st_ino != st_path.st_ino ||
		st.st_dev != st_path.st_dev)
	{
		CloseTransientFile(fd);
		return;
	}
	status = CtasLocalXactStatus(fxid);
	if (status == CTAS_XACT_IN_PROGRESS || status == CTAS_XACT_UNKNOWN)
	{
		emit(arg, object, status == CTAS_XACT_UNKNOWN ?
			 "left: local transaction status unknown" :
			 "left: its transaction is in progress");
		CloseTransientFile(fd);
		return;
	}
	if (*conn == NULL)
		*conn = CtasMyConnect(catalog, CurrentMemoryContext, true);
	if (*conn == NULL)
	{
		emit(arg, object, "left: the catalog cannot be reached");
		CloseTransientFile(fd);
		return;
	}
	CtasStagedCleanupFailed = false;
	if (gid && !my_resolve_xa(*conn, gid, status == CTAS_XACT_COMMITTED))
	{
		emit(arg, object, "left: could not finish its XA transaction");
		CloseTransientFile(fd);
		return;
	}
	foreach(lc, actions)
	{
		MyAction   *a = lfirst(lc);
		char	   *why;

		if (a->branches &&
			!CtasMySettleBranches(*conn, a->branches, a->nbranches,
								  status == CTAS_XACT_COMMITTED, &why))
		{
			ereport(WARNING,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("could not settle the XA branches \"%s*\" on MySQL catalog \"%s\"",
							a->branches, catalog->name),
					 errdetail_internal("%s", why ? why : "")));
			emit(arg, object, "left: could not finish the XA branches of its parallel workers");
			CloseTransientFile(fd);
			return;
		}
	}
	if (status == CTAS_XACT_COMMITTED)
	{
		foreach(lc, actions)
		{
			MyAction   *a = lfirst(lc);

			if (a->base.old &&
				!CtasMyCleanup(*conn,
							   psprintf("DROP TABLE IF EXISTS %s", CtasMyQname(a->base.db, a->base.old)),
							   "drop the old table", CtasMyDisplay(a->base.db, a->base.old)))
			{
				emit(arg, object, "left: could not drop what the transaction replaced");
				CloseTransientFile(fd);
				return;
			}
		}
	}
	else
	{
		for (i = list_length(actions) - 1; i >= 0; i--)
		{
			char	   *why = NULL;

			if (!CtasMyUndoChecked(*conn, list_nth(actions, i), &why))
			{
				emit(arg, object, psprintf("left: %s", why ? why : "could not undo"));
				CloseTransientFile(fd);
				return;
			}
		}
	}
	(void) durable_unlink(path, WARNING);
	CloseTransientFile(fd);
	emit(arg, object, status == CTAS_XACT_COMMITTED ? "committed" : "rolled back");
}

static int
my_cmp_names(const ListCell *a, const ListCell *b)
{
	return strcmp(lfirst(a), lfirst(b));
}

/*
 * CtasMyResolve
 *		resolve of the writer: every durable record of this database,
 *		catalog and user mapping is decided by its local transaction's
 *		outcome: committed, the XA branch is committed and the old tables
 *		dropped; aborted, the branch is rolled back and every action undone
 *		from what the server shows.  Transactions in progress or of unknown
 *		outcome are left.  Emits "committed", "rolled back" or "left: why".
 */
void
CtasMyResolve(CtasCatalog *catalog,
			  void (*emit) (void *arg, const char *object, const char *action),
			  void *arg)
{
	DIR		   *dir;
	struct dirent *de;
	List	   *paths = NIL;
	ListCell   *lc;
	MyConn	   *conn = NULL;
	size_t		plen = strlen(MY_RECORD_PREFIX);

	dir = AllocateDir(MY_RECORD_DIR);
	if (dir == NULL && errno == ENOENT)
		return;
	while ((de = ReadDir(dir, MY_RECORD_DIR)) != NULL)
	{
		size_t		len = strlen(de->d_name);

		if (strncmp(de->d_name, MY_RECORD_PREFIX, plen) != 0)
			continue;
		if (len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0)
		{
			uint64		fxid = strtou64(de->d_name + plen, NULL, 10);

			if (CtasLocalXactStatus(fxid) != CTAS_XACT_IN_PROGRESS)
				(void) unlink(psprintf(MY_RECORD_DIR "/%s", de->d_name));
			continue;
		}
		paths = lappend(paths, psprintf(MY_RECORD_DIR "/%s", de->d_name));
	}
	FreeDir(dir);
	list_sort(paths, my_cmp_names);
	foreach(lc, paths)
		my_resolve_record(catalog, &conn, lfirst(lc), emit, arg);
	CtasMyClose(conn);
}
