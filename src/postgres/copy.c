/*-------------------------------------------------------------------------
 *
 * copy.c
 *		  The COPY ... FROM STDIN data of the PostgreSQL target, in one
 *		  place: the rows of a load (writer.c), of a sync's initial copy
 *		  and of a sync's batches (sync.c) are encoded here.
 *
 * Binary format when every column has, on the remote, the built-in type of
 * the local column (the caller decides: writer.c's use_binary, sync.c's
 * read_remote_table): the type's send function, whose output the remote's
 * receive function reads whatever either side's settings.  Else text: the
 * type's output function under the pinned settings of
 * CtasPgBeginTextOutput (DateStyle, IntervalStyle, extra_float_digits),
 * escaped for COPY's text format.
 *
 * A row is CtasPgCopyRowStart, one CtasPgCopyField per column in the order
 * of the COPY's column list, CtasPgCopyRowEnd; the data begins with
 * CtasPgCopyHeader and ends with CtasPgCopyTrailer.  Nothing here talks to
 * the remote.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/postgres/copy.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "libpq/pqformat.h"

#include "postgres_target.h"

/*
 * CtasPgCopyHeader
 *		Append what begins the COPY data: binary's signature, flags and
 *		header extension length; nothing in text.
 */
void
CtasPgCopyHeader(StringInfo buf, bool binary)
{
	if (!binary)
		return;
	appendBinaryStringInfo(buf, "PGCOPY\n\377\r\n\0", 11);
	pq_sendint32(buf, 0);
	pq_sendint32(buf, 0);
}

/*
 * CtasPgCopyTrailer
 *		Append what ends the COPY data: binary's -1 field count.
 */
void
CtasPgCopyTrailer(StringInfo buf, bool binary)
{
	if (binary)
		pq_sendint16(buf, -1);
}

/*
 * CtasPgCopyRowStart
 *		Begin a row of ncolumns fields.  Returns what to pass to
 *		CtasPgCopyRowEnd: text output pins its settings for the row.
 */
int
CtasPgCopyRowStart(StringInfo buf, bool binary, int ncolumns)
{
	if (binary)
	{
		pq_sendint16(buf, ncolumns);
		return -1;
	}
	return CtasPgBeginTextOutput();
}

/*
 * CtasPgCopyField
 *		Append field i (from 0) of a row: value, of the type whose send
 *		function (binary) or output function (text) is func, or NULL.
 *		Memory for the conversion is taken in the current context.
 */
void
CtasPgCopyField(StringInfo buf, bool binary, int i, FmgrInfo *func,
				Datum value, bool isnull)
{
	if (binary)
	{
		bytea	   *b;

		if (isnull)
		{
			pq_sendint32(buf, -1);
			return;
		}
		b = SendFunctionCall(func, value);
		pq_sendint32(buf, VARSIZE(b) - VARHDRSZ);
		appendBinaryStringInfo(buf, VARDATA(b), VARSIZE(b) - VARHDRSZ);
		return;
	}
	if (i > 0)
		appendStringInfoChar(buf, '\t');
	if (isnull)
		appendBinaryStringInfo(buf, "\\N", 2);
	else
		CtasPgAppendCopyText(buf, OutputFunctionCall(func, value));
}

/*
 * CtasPgCopyRowEnd
 *		End a row begun by CtasPgCopyRowStart, which returned nestlevel.
 */
void
CtasPgCopyRowEnd(StringInfo buf, bool binary, int nestlevel)
{
	if (binary)
		return;
	appendStringInfoChar(buf, '\n');
	CtasEndTextOutput(nestlevel);
}
