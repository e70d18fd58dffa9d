/*-------------------------------------------------------------------------
 *
 * xrecord.c
 *		  Durable records of a participant's staged publication: what a
 *		  target that cannot prepare (it stages tables and publishes them
 *		  at pre-commit) writes before each remote effect, so that its
 *		  resolver can finish or undo the transaction after a crash.
 *
 * A record is the file pg_ctas_fed/<prefix><full xid>_<server oid>_<user
 * mapping oid> in the data directory, one per participant.  Each write
 * makes a new file, locks it (flock, exclusive), writes and fsyncs it,
 * then renames it over the old one (durable_rename); the writing backend
 * keeps the descriptor, and so the lock, until the transaction is over
 * (the kernel drops it if the backend dies), so that a resolver that can
 * take the lock knows the backend is gone.  The record goes when the
 * transaction is finished or undone (CtasRecordRemove).
 *
 * Format: tab-separated lines, fields escaped with \\ \t \n \r and \N for
 * NULL.  The first line is the header
 *		<magic>	<version>	<full xid>	<database oid>	<server oid>
 *		<user mapping oid>	<gid>
 * then the target's lines, and last
 *		crc32c	<CRC-32C of every byte before this line, 8 hex digits>
 * CtasRecordParse checks the trailer and splits the lines; what the
 * fields mean is the target's.
 *
 * Calls nothing of ours (L0).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/xrecord.c
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

#include "xrecord.h"

/*
 * CtasRecordField
 *		Append one field (NULL as \N), escaped, then a tab or, when last, a
 *		newline.
 */
void
CtasRecordField(StringInfo buf, const char *s, bool last)
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

/*
 * CtasRecordHeader
 *		Append the header line of a record of the current top-level
 *		transaction for the participant (serverid, umid).
 */
void
CtasRecordHeader(StringInfo buf, const char *magic, const char *version,
				 Oid serverid, Oid umid, const char *gid)
{
	CtasRecordField(buf, magic, false);
	CtasRecordField(buf, version, false);
	appendStringInfo(buf, UINT64_FORMAT "\t%u\t%u\t%u\t",
					 U64FromFullTransactionId(GetTopFullTransactionId()),
					 MyDatabaseId, serverid, umid);
	CtasRecordField(buf, gid, true);
}

/* The CRC-32C of a record's lines, which its last line repeats */
pg_crc32c
CtasRecordCrc(const char *data, size_t len)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, len);
	FIN_CRC32C(crc);
	return crc;
}

/*
 * CtasRecordClose
 *		Close the record's descriptor *fd (which drops its lock) and set it
 *		to -1; nothing when it is -1.  Never fails.
 */
void
CtasRecordClose(int *fd)
{
	if (*fd >= 0)
	{
		close(*fd);
		ReleaseExternalFD();
	}
	*fd = -1;
}

/*
 * CtasRecordWrite
 *		Write lines (the header and the target's lines, which get the
 *		trailer appended here) as the record of the participant (serverid,
 *		umid) of the current top-level transaction: at path (MAXPGPATH
 *		bytes, made from prefix at the first write, "" before), its
 *		descriptor, locked, left in *fd.  ERROR on an I/O failure, before
 *		the remote effect it is written for.
 */
void
CtasRecordWrite(char *path, int *fd, const char *prefix, Oid serverid,
				Oid umid, StringInfo lines)
{
	char		tmp[MAXPGPATH];
	int			nfd;

	if (path[0] == '\0')
	{
		if (MakePGDirectory(CTAS_RECORD_DIR) == 0)
		{
			fsync_fname(CTAS_RECORD_DIR, true);
			fsync_fname(".", true);
		}
		else if (errno != EEXIST)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not create directory \"%s\": %m",
							CTAS_RECORD_DIR)));
		snprintf(path, MAXPGPATH, CTAS_RECORD_DIR "/%s" UINT64_FORMAT "_%u_%u",
				 prefix, U64FromFullTransactionId(GetTopFullTransactionId()),
				 serverid, umid);
	}
	appendStringInfo(lines, "crc32c\t%08X\n",
					 CtasRecordCrc(lines->data, lines->len));

	/* the new file is locked before it takes the record's name */
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	ReserveExternalFD();
	nfd = BasicOpenFilePerm(tmp, O_RDWR | O_CREAT | O_TRUNC | PG_BINARY,
							pg_file_create_mode);
	if (nfd < 0)
	{
		ReleaseExternalFD();
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", tmp)));
	}
	errno = 0;
	if (flock(nfd, LOCK_EX) != 0 ||
		write(nfd, lines->data, lines->len) != lines->len ||
		pg_fsync(nfd) != 0 ||
		durable_rename(tmp, path, LOG) != 0)
	{
		int			save_errno = errno ? errno : ENOSPC;

		close(nfd);
		ReleaseExternalFD();
		(void) unlink(tmp);
		errno = save_errno;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", path)));
	}
	CtasRecordClose(fd);
	*fd = nfd;
}

/*
 * CtasRecordRemove
 *		The transaction is finished or undone: remove its record and drop
 *		the lock.  A failure is a WARNING (the resolver then finds nothing
 *		left to do).
 */
void
CtasRecordRemove(char *path, int *fd)
{
	if (path[0] != '\0')
		(void) durable_unlink(path, WARNING);
	path[0] = '\0';
	CtasRecordClose(fd);
}

/* split one line of a record into fields (unescaped; \N is NULL) */
static CtasRecordLine *
record_split(char *line)
{
	CtasRecordLine *l = palloc(sizeof(CtasRecordLine));
	List	   *fields = NIL;
	char	   *p = line;
	int			i = 0;
	ListCell   *lc;

	for (;;)
	{
		StringInfoData buf;
		bool		null = false;

		initStringInfo(&buf);
		if (p[0] == '\\' && p[1] == 'N' && (p[2] == '\t' || p[2] == '\0'))
		{
			null = true;
			p += 2;
		}
		while (!null && *p && *p != '\t')
		{
			if (*p == '\\' && p[1])
			{
				p++;
				appendStringInfoChar(&buf, *p == 't' ? '\t' : *p == 'n' ? '\n' :
									 *p == 'r' ? '\r' : *p);
			}
			else
				appendStringInfoChar(&buf, *p);
			p++;
		}
		fields = lappend(fields, null ? NULL : buf.data);
		if (*p != '\t')
			break;
		p++;
	}
	l->nfields = list_length(fields);
	l->fields = palloc(sizeof(char *) * l->nfields);
	foreach(lc, fields)
		l->fields[i++] = lfirst(lc);
	return l;
}

/*
 * CtasRecordParse
 *		The lines of a record (CtasRecordLine *, the header first), its
 *		trailer checked; NIL with *why for anything that is not an intact
 *		record.  What the fields hold is for the caller to check.  data is
 *		modified.
 */
List *
CtasRecordParse(char *data, size_t len, const char **why)
{
	char	   *trailer;
	unsigned int crc;
	List	   *lines = NIL;
	char	   *line;
	char	   *next;

	*why = NULL;
	if (len == 0 || strlen(data) != len || data[len - 1] != '\n')
	{
		*why = "it is empty, incomplete or contains a zero byte";
		return NIL;
	}
	data[len - 1] = '\0';
	trailer = strrchr(data, '\n');
	trailer = trailer ? trailer + 1 : data;
	if (strncmp(trailer, "crc32c\t", 7) != 0 || strlen(trailer) != 15 ||
		strspn(trailer + 7, "0123456789ABCDEF") != 8 ||
		sscanf(trailer + 7, "%8X", &crc) != 1 ||
		CtasRecordCrc(data, trailer - data) != (pg_crc32c) crc)
	{
		*why = "its checksum is missing or does not match";
		return NIL;
	}
	*trailer = '\0';
	for (line = data; *line; line = next)
	{
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		else
			next = line + strlen(line);
		lines = lappend(lines, record_split(line));
	}
	if (lines == NIL)
		*why = "it has no header";
	return lines;
}
