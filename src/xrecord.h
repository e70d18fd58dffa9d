/*-------------------------------------------------------------------------
 *
 * xrecord.h
 *		  Durable records of a participant's staged publication (xrecord.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/xrecord.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_XRECORD_H
#define CTAS_XRECORD_H

#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "port/pg_crc32c.h"

/* the directory of the records, in the data directory */
#define CTAS_RECORD_DIR		"pg_ctas_fed"

/* one line of a record as read back: its fields, NULL for \N */
typedef struct CtasRecordLine
{
	int			nfields;
	char	  **fields;
} CtasRecordLine;

/* in xrecord.c */
extern void CtasRecordField(StringInfo buf, const char *s, bool last);
extern void CtasRecordHeader(StringInfo buf, const char *magic,
							 const char *version, Oid serverid, Oid umid,
							 const char *gid);
extern pg_crc32c CtasRecordCrc(const char *data, size_t len);
extern void CtasRecordWrite(char *path, int *fd, const char *prefix,
							Oid serverid, Oid umid, StringInfo lines);
extern void CtasRecordClose(int *fd);
extern void CtasRecordRemove(char *path, int *fd);
extern List *CtasRecordParse(char *data, size_t len, const char **why);

#endif							/* CTAS_XRECORD_H */
