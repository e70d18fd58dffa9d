/*-------------------------------------------------------------------------
 *
 * record.c
 *		  The durable records of the ClickHouse target's transactions:
 *		  written before the first remote effect of each action, read by
 *		  the resolver after a crash (resolve.c).  The format and its
 *		  rules are in the section banner below.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/record.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/file.h>

#include "access/transam.h"
#include "access/xact.h"
#include "common/file_perm.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "utils/memutils.h"

#include "clickhouse.h"

/* ------------------------------------------------------------------------
 * Durable records
 *
 * Before the first remote effect of an action (its staging table, or for
 * DROP TABLE the rename at pre-commit) the participant writes the list of
 * its actions, oldest first, with every table name each one uses, to
 * pg_ctas_fed/ch_<full xid>_<server oid>_<user mapping oid> in the data
 * directory: a new file is written and fsync'd, then renamed over the old
 * one (durable_rename).  The file goes when the transaction is finished
 * (post_commit) or undone (abort); if that does not happen (a crash, an
 * unreachable server) the resolver reads it, decides from the local
 * transaction's status, and finishes or undoes the transaction as a whole.
 * The resolver acts on nothing else: a table that no record names is
 * never touched, whatever its name.
 *
 * The writing backend holds an exclusive flock() on the record from the
 * first write until the transaction is over (the kernel drops it if the
 * backend dies), so that a resolver never works on a transaction whose
 * own backend is still finishing it.
 *
 * Format: tab-separated lines, escaped as ClickHouse's TabSeparated (read
 * back with CtasChTsv).  The first line is
 *		ctas_fed clickhouse	1	<full xid>	<database oid>	<server oid>
 *		<user mapping oid>	<gid>
 * and each action is
 *		<kind>	<database>	<table>	<stage>	<old>	<marker>	<shard>
 * with \N for a name the action does not have; shard is 0 for the
 * catalog's url, else the shard (from 1) of a cluster catalog
 * (shard_urls) the action is on.  Version 1 records, written before
 * clusters, have no shard field.  The last line is
 *		crc32c	<CRC-32C of every byte before this line, 8 hex digits>
 * A record that does not end so, or whose lines do not have these fields,
 * is damaged (a disk, a copy or a hand went wrong): the resolver does not
 * act on a part of a transaction, nor on names it cannot trust, and keeps
 * the file, with a WARNING, for someone to look at.
 * ------------------------------------------------------------------------
 */

/* by ChActionKind */
const char *const CtasChActionNames[CH_DROP + 1] = {
	"create", "replace", "append", "drop"
};

/* Append one TabSeparated field (NULL as \N), then a tab or a newline */
static void
ch_record_field(StringInfo buf, const char *s, bool last)
{
	if (s == NULL)
		appendStringInfoString(buf, "\\N");
	else
	{
		for (; *s; s++)
		{
			switch (*s)
			{
				case '\\':
					appendStringInfoString(buf, "\\\\");
					break;
				case '\t':
					appendStringInfoString(buf, "\\t");
					break;
				case '\n':
					appendStringInfoString(buf, "\\n");
					break;
				case '\r':
					appendStringInfoString(buf, "\\r");
					break;
				default:
					appendStringInfoChar(buf, *s);
					break;
			}
		}
	}
	appendStringInfoChar(buf, last ? '\n' : '\t');
}

/* The CRC-32C of a record's lines, which its last line repeats */
pg_crc32c
CtasChRecordCrc(const char *data, size_t len)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, len);
	FIN_CRC32C(crc);
	return crc;
}

/*
 * CtasChRecordGid
 *		What ctas_fed.jobs and the resolver call this participant's remote
 *		work: db.name of the first action's marker, old or staging table.
 *		NULL without actions.  Palloc'd.
 */
char *
CtasChRecordGid(ChXact *xs)
{
	ChAction   *first;

	if (xs->actions == NIL)
		return NULL;
	first = linitial(xs->actions);
	return CtasChDisplay(first->db,
					  first->marker ? first->marker :
					  first->old ? first->old : first->stage);
}

/*
 * CtasChRecordRelease
 *		Close the record's descriptor, which drops its lock.  A reset
 *		callback of the participant's context as well; never fails.
 */
void
CtasChRecordRelease(void *arg)
{
	ChXact	   *xs = (ChXact *) arg;

	if (xs->record_fd >= 0)
	{
		close(xs->record_fd);
		ReleaseExternalFD();
	}
	xs->record_fd = -1;
}

/*
 * CtasChRecordWrite
 *		Write the durable record of part (see above) with the actions of
 *		xs as they are now.  ERROR on an I/O failure, before any remote
 *		effect of the newest action.
 */
void
CtasChRecordWrite(CtasParticipant *part, ChXact *xs)
{
	StringInfoData buf;
	char		tmp[MAXPGPATH];
	char	   *gid = CtasChRecordGid(xs);
	ListCell   *lc;
	int			fd;

	if (xs->record_path[0] == '\0')
	{
		if (MakePGDirectory(CH_RECORD_DIR) == 0)
		{
			fsync_fname(CH_RECORD_DIR, true);
			fsync_fname(".", true);
		}
		else if (errno != EEXIST)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create directory \"%s\": %m",
							CH_RECORD_DIR)));
		snprintf(xs->record_path, MAXPGPATH,
				 CH_RECORD_DIR "/ch_" UINT64_FORMAT "_%u_%u",
				 U64FromFullTransactionId(GetTopFullTransactionId()),
				 part->serverid, part->umid);
	}

	initStringInfo(&buf);
	ch_record_field(&buf, CH_RECORD_MAGIC, false);
	ch_record_field(&buf, CH_RECORD_VERSION, false);
	appendStringInfo(&buf, UINT64_FORMAT "\t%u\t%u\t%u\t",
					 U64FromFullTransactionId(GetTopFullTransactionId()),
					 MyDatabaseId, part->serverid, part->umid);
	ch_record_field(&buf, gid, true);
	foreach(lc, xs->actions)
	{
		ChAction   *a = lfirst(lc);

		ch_record_field(&buf, CtasChActionNames[a->kind], false);
		ch_record_field(&buf, a->db, false);
		ch_record_field(&buf, a->table, false);
		ch_record_field(&buf, a->stage, false);
		ch_record_field(&buf, a->old, false);
		ch_record_field(&buf, a->marker, false);
		appendStringInfo(&buf, "%d\n", a->shard);
	}
	appendStringInfo(&buf, "crc32c\t%08X\n", CtasChRecordCrc(buf.data, buf.len));

	/* the new file is locked before it takes the record's name */
	snprintf(tmp, sizeof(tmp), "%s.tmp", xs->record_path);
	ReserveExternalFD();
	fd = BasicOpenFilePerm(tmp, O_RDWR | O_CREAT | O_TRUNC | PG_BINARY,
						   pg_file_create_mode);
	if (fd < 0)
	{
		ReleaseExternalFD();
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", tmp)));
	}
	errno = 0;
	if (flock(fd, LOCK_EX) != 0 ||
		write(fd, buf.data, buf.len) != buf.len ||
		pg_fsync(fd) != 0 ||
		durable_rename(tmp, xs->record_path, LOG) != 0)
	{
		int			save_errno = errno ? errno : ENOSPC;

		close(fd);
		ReleaseExternalFD();
		(void) unlink(tmp);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", xs->record_path)));
	}
	CtasChRecordRelease(xs);
	xs->record_fd = fd;
	pfree(buf.data);
}

/*
 * CtasChRecordRemove
 *		The transaction is finished or undone: remove its record.  A
 *		failure is a WARNING (the resolver then finds nothing left to do).
 */
void
CtasChRecordRemove(ChXact *xs)
{
	if (xs->record_path[0] != '\0')
		(void) durable_unlink(xs->record_path, WARNING);
	xs->record_path[0] = '\0';
	CtasChRecordRelease(xs);
}
