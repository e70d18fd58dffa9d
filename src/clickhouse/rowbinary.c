/*-------------------------------------------------------------------------
 *
 * rowbinary.c
 *		  The RowBinary encoder of the ClickHouse target.
 *
 * Rows travel as RowBinary, encoded here from the datums, so that every
 * value either arrives exactly or fails with an error naming the column and
 * the value; the one documented loss (fractional seconds of a timestamp in
 * DateTime) is reported with a NOTICE once per column.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/rowbinary.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "clickhouse.h"

static int128 ch_pow10[39];
static bool ch_pow10_ready = false;

/* ------------------------------------------------------------------------
 * Encoders
 * ------------------------------------------------------------------------
 */

static ChSrc
ch_src_of(Oid typid)
{
	switch (typid)
	{
		case INT2OID:
			return SRC_INT2;
		case INT4OID:
			return SRC_INT4;
		case INT8OID:
			return SRC_INT8;
		case FLOAT4OID:
			return SRC_FLOAT4;
		case FLOAT8OID:
			return SRC_FLOAT8;
		case NUMERICOID:
			return SRC_NUMERIC;
		case BOOLOID:
			return SRC_BOOL;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
			return SRC_TEXT;
		case NAMEOID:
			return SRC_NAME;
		case BYTEAOID:
			return SRC_BYTEA;
		case DATEOID:
			return SRC_DATE;
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return SRC_TIMESTAMP;
		case UUIDOID:
			return SRC_UUID;
		default:
			return OidIsValid(get_element_type(typid)) ? SRC_ARRAY : SRC_OTHER;
	}
}

static bool
ch_kind_is_int(ChKind k)
{
	return k >= CHK_INT8 && k <= CHK_UINT64;
}

/* Can kind be written straight from src (no text round trip)? */
static bool
ch_direct(ChKind k, ChSrc s)
{
	bool		intsrc = s == SRC_INT2 || s == SRC_INT4 || s == SRC_INT8;

	if (ch_kind_is_int(k))
		return intsrc || s == SRC_BOOL || s == SRC_NUMERIC ||
			s == SRC_FLOAT4 || s == SRC_FLOAT8;
	switch (k)
	{
		case CHK_FLOAT32:
		case CHK_FLOAT64:
			return intsrc || s == SRC_FLOAT4 || s == SRC_FLOAT8 ||
				s == SRC_NUMERIC;
		case CHK_DECIMAL:
			return intsrc || s == SRC_NUMERIC;
		case CHK_STRING:
		case CHK_FIXEDSTRING:
		case CHK_ENUM8:
		case CHK_ENUM16:
			return true;
		case CHK_DATE:
		case CHK_DATETIME:
			return s == SRC_DATE || s == SRC_TIMESTAMP;
		case CHK_UUID:
			return s == SRC_UUID;
		case CHK_ARRAY:
			return s == SRC_ARRAY;
		default:
			return false;
	}
}

/*
 * ch_setup_enc
 *		Prepare the encoder of a value of local type typid (domains
 *		stripped) into ClickHouse type t.  ERROR naming the column when the
 *		pair cannot work.
 */
static void
ch_setup_enc(ChEnc *e, ChColumn *col, Oid typid, ChType *t,
			 MemoryContext cxt)
{
	Oid			func;
	bool		isvarlena;

	check_stack_depth();
	e->col = col;
	e->type = t;
	e->typid = typid;
	e->src = ch_src_of(typid);
	getTypeOutputInfo(typid, &func, &isvarlena);
	fmgr_info_cxt(func, &e->out, cxt);

	if (t->kind == CHK_ARRAY)
	{
		Oid			elem;
		int32		dummy = -1;

		if (e->src != SRC_ARRAY)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of type %s cannot be written as ClickHouse type %s",
							col->name, format_type_be(col->enc.typid),
							CtasChTypeText(col->enc.type)),
					 errhint("Only PostgreSQL arrays can be written to ClickHouse arrays.")));
		elem = get_element_type(typid);
		get_typlenbyvalalign(elem, &e->elmlen, &e->elmbyval, &e->elmalign);
		e->elem = MemoryContextAllocZero(cxt, sizeof(ChEnc));
		ch_setup_enc(e->elem, col, getBaseTypeAndTypmod(elem, &dummy),
					 t->elem, cxt);
		return;
	}

	if (ch_direct(t->kind, e->src))
		return;

	if (e->src == SRC_ARRAY)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of type %s cannot be written as ClickHouse type %s",
						col->name, format_type_be(typid), CtasChTypeText(t)),
				 errhint("Use a ClickHouse Array or String type for it in column_types.")));

	/* through text: the local value's output, the canonical type's input */
	{
		Oid			canon;

		if (ch_kind_is_int(t->kind) || t->kind == CHK_DECIMAL)
			canon = NUMERICOID;
		else if (t->kind == CHK_FLOAT32 || t->kind == CHK_FLOAT64)
			canon = FLOAT8OID;
		else if (t->kind == CHK_DATE)
			canon = DATEOID;
		else if (t->kind == CHK_DATETIME)
			canon = TIMESTAMPTZOID;
		else
			canon = UUIDOID;
		getTypeInputInfo(canon, &func, &e->in_ioparam);
		fmgr_info_cxt(func, &e->in, cxt);
		e->in_src = ch_src_of(canon);
		e->via_text = true;
	}
}

/*
 * CtasChSetupColumns
 *		The encoders of the statement's columns into the ClickHouse types
 *		types[i] (parsed), in load->cxt.  ERROR naming the column when a
 *		type is not one we can write.
 */
ChColumn *
CtasChSetupColumns(CtasLoad *load, char **types)
{
	ChColumn   *cols = MemoryContextAllocZero(load->cxt,
											  sizeof(ChColumn) * load->ncolumns);
	MemoryContext old = MemoryContextSwitchTo(load->cxt);
	int			i;

	for (i = 0; i < load->ncolumns; i++)
	{
		CtasColumn *c = &load->columns[i];
		bool		too_deep;
		ChType	   *t = CtasChParseType(types[i], &too_deep);

		cols[i].name = c->name;
		cols[i].key = CtasChIsKey(load, c);
		if (too_deep)
			ereport(ERROR,
					(errcode(ERRCODE_STATEMENT_TOO_COMPLEX),
					 errmsg("ClickHouse type of column \"%s\" is nested too deeply",
							c->name),
					 errdetail("At most %d levels of Array, Nullable and LowCardinality are supported.",
							   CH_MAX_TYPE_DEPTH)));
		if (t == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("ClickHouse type \"%s\" of column \"%s\" is not supported",
							types[i], c->name),
					 errhint("Supported are (U)Int8-64, Float32/64, Decimal, String, FixedString, Date, DateTime, UUID, Enum8/16, and Nullable, LowCardinality and Array of them.")));
		ch_setup_enc(&cols[i].enc, &cols[i], c->basetypid, t, load->cxt);
	}
	MemoryContextSwitchTo(old);
	return cols;
}

/* ---- value writers ---- */

static inline void
ch_put_le(StringInfo buf, uint64 v, int nbytes)
{
	char		b[8];
	int			i;

	for (i = 0; i < nbytes; i++)
	{
		b[i] = (char) (v & 0xff);
		v >>= 8;
	}
	appendBinaryStringInfoNT(buf, b, nbytes);
}

static inline void
ch_put_varint(StringInfo buf, uint64 v)
{
	char		b[10];
	int			n = 0;

	while (v >= 0x80)
	{
		b[n++] = (char) ((v & 0x7f) | 0x80);
		v >>= 7;
	}
	b[n++] = (char) v;
	appendBinaryStringInfoNT(buf, b, n);
}

static void
ch_init_pow10(void)
{
	int			i;

	if (ch_pow10_ready)
		return;
	ch_pow10[0] = 1;
	for (i = 1; i <= 38; i++)
		ch_pow10[i] = ch_pow10[i - 1] * 10;
	ch_pow10_ready = true;
}

/* The text of the local value, for error messages */
static char *
ch_value_text(ChEnc *e, Datum v)
{
	return OutputFunctionCall(&e->out, v);
}

static void
ch_range_error(ChEnc *e, Datum v, int sqlstate, const char *detail)
		pg_attribute_noreturn();

static void
ch_range_error(ChEnc *e, Datum v, int sqlstate, const char *detail)
{
	ereport(ERROR,
			(errcode(sqlstate),
			 errmsg("value \"%s\" of column \"%s\" does not fit ClickHouse type %s",
					ch_value_text(e, v), e->col->name, CtasChTypeText(e->type)),
			 detail ? errdetail("%s", detail) : 0));
}

/*
 * ch_decimal_from_text
 *		Parse the text of a numeric ("-12.50", "NaN") into an integer scaled
 *		by 10^scale.  false when it is not finite, has non-zero digits
 *		beyond scale, or 38 digits or more.
 */
static bool
ch_decimal_from_text(const char *s, int scale, int128 *out)
{
	bool		neg = false;
	int128		v = 0;
	int			digits = 0;
	int			frac = 0;
	bool		seen_point = false;

	if (*s == '-')
	{
		neg = true;
		s++;
	}
	else if (*s == '+')
		s++;
	if (*s < '0' || *s > '9')
		return false;			/* NaN, Infinity */
	for (; *s; s++)
	{
		if (*s == '.')
		{
			if (seen_point)
				return false;
			seen_point = true;
			continue;
		}
		if (*s < '0' || *s > '9')
			return false;
		if (seen_point)
		{
			if (frac >= scale)
			{
				if (*s != '0')
					return false;	/* would be rounded: not exact */
				continue;
			}
			frac++;
		}
		if (v == 0 && *s == '0')
		{
			/* leading zeros do not count */
		}
		else
			digits++;
		if (digits > 38)
			return false;
		v = v * 10 + (*s - '0');
	}
	for (; frac < scale; frac++)
	{
		if (v != 0 && ++digits > 38)
			return false;
		v *= 10;
	}
	*out = neg ? -v : v;
	return true;
}

/* An integer value of the source as int128, or false */
static bool
ch_src_integer(ChSrc src, Datum v, int128 *out)
{
	switch (src)
	{
		case SRC_INT2:
			*out = DatumGetInt16(v);
			return true;
		case SRC_INT4:
			*out = DatumGetInt32(v);
			return true;
		case SRC_INT8:
			*out = DatumGetInt64(v);
			return true;
		case SRC_BOOL:
			*out = DatumGetBool(v) ? 1 : 0;
			return true;
		case SRC_FLOAT4:
		case SRC_FLOAT8:
			{
				double		d = src == SRC_FLOAT4 ? DatumGetFloat4(v) : DatumGetFloat8(v);

				if (!isfinite(d) || floor(d) != d || fabs(d) >= 1.9e19)
					return false;
				*out = (int128) d;
				return true;
			}
		case SRC_NUMERIC:
			return ch_decimal_from_text(DatumGetCString(DirectFunctionCall1(numeric_out, v)),
										0, out);
		default:
			return false;
	}
}

static void
ch_put_int(ChEnc *e, StringInfo buf, ChSrc src, Datum v, Datum orig)
{
	int128		x;
	int128		lo;
	int128		hi;
	int			nbytes;

	switch (e->type->kind)
	{
		case CHK_INT8:
			lo = PG_INT8_MIN;
			hi = PG_INT8_MAX;
			nbytes = 1;
			break;
		case CHK_INT16:
			lo = PG_INT16_MIN;
			hi = PG_INT16_MAX;
			nbytes = 2;
			break;
		case CHK_INT32:
			lo = PG_INT32_MIN;
			hi = PG_INT32_MAX;
			nbytes = 4;
			break;
		case CHK_INT64:
			lo = PG_INT64_MIN;
			hi = PG_INT64_MAX;
			nbytes = 8;
			break;
		case CHK_UINT8:
			lo = 0;
			hi = PG_UINT8_MAX;
			nbytes = 1;
			break;
		case CHK_UINT16:
			lo = 0;
			hi = PG_UINT16_MAX;
			nbytes = 2;
			break;
		case CHK_UINT32:
			lo = 0;
			hi = PG_UINT32_MAX;
			nbytes = 4;
			break;
		default:
			lo = 0;
			hi = PG_UINT64_MAX;
			nbytes = 8;
			break;
	}
	if (!ch_src_integer(src, v, &x) || x < lo || x > hi)
		ch_range_error(e, orig, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, NULL);
	ch_put_le(buf, (uint64) x, nbytes);
}

/*
 * ch_put_float
 *		Float32/Float64 from a number.  A value that the ClickHouse type
 *		cannot hold exactly (a column_types override to Float32 for a
 *		float8, to Float64 for a large int8 or a long numeric) is an error
 *		naming the column and the value, never a silent rounding.  NaN and
 *		the infinities pass.
 */
static void
ch_put_float(ChEnc *e, StringInfo buf, ChSrc src, Datum v)
{
	double		d;
	bool		exact = true;

	if (src == SRC_FLOAT4 && e->type->kind == CHK_FLOAT32)
	{
		float4		f = DatumGetFloat4(v);

		appendBinaryStringInfoNT(buf, (char *) &f, 4);
		return;
	}
	switch (src)
	{
		case SRC_INT2:
			d = DatumGetInt16(v);
			break;
		case SRC_INT4:
			d = DatumGetInt32(v);
			break;
		case SRC_INT8:
			{
				int64		x = DatumGetInt64(v);

				d = (double) x;
				exact = d < 9223372036854775808.0 && (int64) d == x;
				break;
			}
		case SRC_FLOAT4:
			d = DatumGetFloat4(v);
			break;
		case SRC_FLOAT8:
			d = DatumGetFloat8(v);
			break;
		default:
			d = DatumGetFloat8(DirectFunctionCall1(numeric_float8, v));
			exact = DatumGetInt32(DirectFunctionCall2(numeric_cmp, v,
													  DirectFunctionCall1(float8_numeric,
																		  Float8GetDatum(d)))) == 0;
			break;
	}
	if (e->type->kind == CHK_FLOAT32)
	{
		float4		f = (float4) d;

		if (!isnan(d) && (double) f != d)
			exact = false;
		if (!exact)
			ch_range_error(e, v, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
						   "The value cannot be represented exactly in Float32.");
		appendBinaryStringInfoNT(buf, (char *) &f, 4);
	}
	else
	{
		if (!exact)
			ch_range_error(e, v, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
						   "The value cannot be represented exactly in Float64.");
		appendBinaryStringInfoNT(buf, (char *) &d, 8);
	}
}

static void
ch_put_decimal(ChEnc *e, StringInfo buf, ChSrc src, Datum v, Datum orig)
{
	ChType	   *t = e->type;
	int128		x;
	bool		ok;

	ch_init_pow10();
	if (src == SRC_NUMERIC)
		ok = ch_decimal_from_text(DatumGetCString(DirectFunctionCall1(numeric_out, v)),
								  t->scale, &x);
	else
	{
		ok = ch_src_integer(src, v, &x);
		if (ok && t->scale > 0)
		{
			if (x >= ch_pow10[38 - t->scale] || x <= -ch_pow10[38 - t->scale])
				ok = false;
			else
				x *= ch_pow10[t->scale];
		}
	}
	if (!ok || x >= ch_pow10[t->precision] || x <= -ch_pow10[t->precision])
		ch_range_error(e, orig, ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
					   psprintf("ClickHouse type %s holds values of at most %d digits, %d of them after the decimal point, without rounding.",
								CtasChTypeText(t), t->precision, t->scale));
	if (t->precision <= 9)
		ch_put_le(buf, (uint64) (int64) x, 4);
	else if (t->precision <= 18)
		ch_put_le(buf, (uint64) (int64) x, 8);
	else
	{
		ch_put_le(buf, (uint64) x, 8);
		ch_put_le(buf, (uint64) (x >> 64), 8);
	}
}

/* bytes of a string-ish source, for String, FixedString and Enum */
static void
ch_src_bytes(ChEnc *e, ChSrc src, Datum v, const char **data, size_t *len)
{
	if (src == SRC_TEXT || src == SRC_BYTEA)
	{
		struct varlena *t = PG_DETOAST_DATUM_PACKED(v);

		*data = VARDATA_ANY(t);
		*len = VARSIZE_ANY_EXHDR(t);
	}
	else if (src == SRC_NAME)
	{
		*data = NameStr(*DatumGetName(v));
		*len = strlen(*data);
	}
	else
	{
		*data = OutputFunctionCall(&e->out, v);
		*len = strlen(*data);
	}
}

/* seconds since 1970 of the last second of CH_MAX_DATE_YEAR, and its day */
static int64
ch_max_unix_day(void)
{
	return date2j(CH_MAX_DATE_YEAR, 12, 31) - UNIX_EPOCH_JDATE;
}

static void
ch_put_date(ChEnc *e, StringInfo buf, ChSrc src, Datum v, Datum orig)
{
	int64		day;

	if (src == SRC_DATE)
	{
		DateADT		d = DatumGetDateADT(v);

		if (DATE_NOT_FINITE(d))
			ch_range_error(e, orig, ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
						   "ClickHouse Date holds 1970-01-01 to 2105-12-31.");
		day = (int64) d + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE);
	}
	else
	{
		Timestamp	ts = DatumGetTimestamp(v);
		int64		us;

		if (TIMESTAMP_NOT_FINITE(ts))
			ch_range_error(e, orig, ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
						   "ClickHouse Date holds 1970-01-01 to 2105-12-31.");
		us = ts + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
		day = us / USECS_PER_DAY;
		if (us % USECS_PER_DAY != 0)
		{
			if (us < 0)
				day--;
			if (!e->col->time_notice)
			{
				e->col->time_notice = true;
				ereport(NOTICE,
						(errmsg("the time of day of column \"%s\" is dropped: ClickHouse type %s holds dates only",
								e->col->name, CtasChTypeText(e->type))));
			}
		}
	}
	if (day < 0 || day > ch_max_unix_day())
		ch_range_error(e, orig, ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
					   "ClickHouse Date holds 1970-01-01 to 2105-12-31.");
	ch_put_le(buf, (uint64) day, 2);
}

/*
 * XXX: timestamp values are written as UTC wall-clock time, exact for
 * DateTime('UTC') (the default map); an override to a DateTime of another
 * time zone shifts them.
 */
static void
ch_put_datetime(ChEnc *e, StringInfo buf, ChSrc src, Datum v, Datum orig)
{
	int64		secs;
	const int64 max_secs = (ch_max_unix_day() + 1) * SECS_PER_DAY - 1;

	if (src == SRC_DATE)
	{
		DateADT		d = DatumGetDateADT(v);

		if (DATE_NOT_FINITE(d))
			ch_range_error(e, orig, ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
						   "ClickHouse DateTime holds 1970-01-01 00:00:00 to 2105-12-31 23:59:59 UTC.");
		secs = ((int64) d + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE)) * SECS_PER_DAY;
	}
	else
	{
		Timestamp	ts = DatumGetTimestamp(v);
		int64		us;

		if (TIMESTAMP_NOT_FINITE(ts))
			ch_range_error(e, orig, ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
						   "ClickHouse DateTime holds 1970-01-01 00:00:00 to 2105-12-31 23:59:59 UTC.");
		us = ts + (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
		if (us < 0)
			ch_range_error(e, orig, ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
						   "ClickHouse DateTime holds 1970-01-01 00:00:00 to 2105-12-31 23:59:59 UTC.");
		secs = us / USECS_PER_SEC;
		if (us % USECS_PER_SEC != 0 && !e->col->frac_notice)
		{
			e->col->frac_notice = true;
			ereport(NOTICE,
					(errmsg("fractional seconds of column \"%s\" are dropped: ClickHouse type %s has a precision of one second",
							e->col->name, CtasChTypeText(e->type))));
		}
	}
	if (secs < 0 || secs > max_secs)
		ch_range_error(e, orig, ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
					   "ClickHouse DateTime holds 1970-01-01 00:00:00 to 2105-12-31 23:59:59 UTC.");
	ch_put_le(buf, (uint64) secs, 4);
}

static void
ch_put_array(ChEnc *e, StringInfo buf, Datum v, Datum orig)
{
	ArrayType  *a = DatumGetArrayTypeP(v);
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			i;

	check_stack_depth();
	if (ARR_NDIM(a) == 0)
	{
		ch_put_varint(buf, 0);
		return;
	}
	if (ARR_NDIM(a) > 1 || ARR_LBOUND(a)[0] != 1)
		ch_range_error(e, orig, ERRCODE_ARRAY_SUBSCRIPT_ERROR,
					   "Only one-dimensional arrays with a lower bound of 1 can be written to a ClickHouse Array.");
	deconstruct_array(a, ARR_ELEMTYPE(a), e->elmlen, e->elmbyval, e->elmalign,
					  &elems, &nulls, &n);
	ch_put_varint(buf, (uint64) n);
	for (i = 0; i < n; i++)
		CtasChPutValue(e->elem, buf, elems[i], nulls[i]);
}

/*
 * CtasChPutValue
 *		Append the RowBinary encoding of one value.  ERROR naming the column
 *		(and the value) when it cannot arrive exactly.
 */
void
CtasChPutValue(ChEnc *e, StringInfo buf, Datum v, bool isnull)
{
	ChType	   *t = e->type;
	ChSrc		src = e->src;
	Datum		orig = v;

	if (t->nullable)
	{
		appendStringInfoCharMacro(buf, isnull ? 1 : 0);
		if (isnull)
			return;
	}
	else if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("null value in column \"%s\" cannot be written to ClickHouse type %s",
						e->col->name, CtasChTypeText(t)),
				 e->col->key ?
				 errdetail("The column is part of the table's sorting, primary or partition key, which ClickHouse does not allow to be Nullable.") :
				 t->kind == CHK_ARRAY ?
				 errdetail("ClickHouse arrays cannot be Nullable.") :
				 errhint("Use a Nullable type in column_types, or leave the column to the type map.")));

	if (e->via_text)
	{
		char	   *text = OutputFunctionCall(&e->out, v);

		v = InputFunctionCall(&e->in, text, e->in_ioparam, -1);
		src = e->in_src;
	}

	switch (t->kind)
	{
		case CHK_INT8:
		case CHK_INT16:
		case CHK_INT32:
		case CHK_INT64:
		case CHK_UINT8:
		case CHK_UINT16:
		case CHK_UINT32:
		case CHK_UINT64:
			ch_put_int(e, buf, src, v, orig);
			break;
		case CHK_FLOAT32:
		case CHK_FLOAT64:
			ch_put_float(e, buf, src, v);
			break;
		case CHK_DECIMAL:
			ch_put_decimal(e, buf, src, v, orig);
			break;
		case CHK_STRING:
			{
				const char *data;
				size_t		len;

				ch_src_bytes(e, src, v, &data, &len);
				ch_put_varint(buf, len);
				appendBinaryStringInfoNT(buf, data, len);
				break;
			}
		case CHK_FIXEDSTRING:
			{
				const char *data;
				size_t		len;

				ch_src_bytes(e, src, v, &data, &len);
				if (len > (size_t) t->length)
					ch_range_error(e, orig, ERRCODE_STRING_DATA_RIGHT_TRUNCATION,
								   psprintf("The value has %zu bytes.", len));
				appendBinaryStringInfoNT(buf, data, len);
				for (; len < (size_t) t->length; len++)
					appendStringInfoCharMacro(buf, '\0');
				break;
			}
		case CHK_ENUM8:
		case CHK_ENUM16:
			{
				const char *data;
				size_t		len;
				int			i;

				ch_src_bytes(e, src, v, &data, &len);
				for (i = 0; i < t->nenum; i++)
				{
					if (strlen(t->enum_names[i]) == len &&
						memcmp(t->enum_names[i], data, len) == 0)
						break;
				}
				if (i == t->nenum)
					ch_range_error(e, orig, ERRCODE_INVALID_TEXT_REPRESENTATION,
								   "The value is not one of the enum's names.");
				ch_put_le(buf, (uint64) (int64) t->enum_values[i],
						  t->kind == CHK_ENUM8 ? 1 : 2);
				break;
			}
		case CHK_DATE:
			ch_put_date(e, buf, src, v, orig);
			break;
		case CHK_DATETIME:
			ch_put_datetime(e, buf, src, v, orig);
			break;
		case CHK_UUID:
			{
				pg_uuid_t  *u = DatumGetUUIDP(v);
				char		b[16];
				int			i;

				/* two little-endian UInt64 halves */
				for (i = 0; i < 8; i++)
				{
					b[i] = (char) u->data[7 - i];
					b[8 + i] = (char) u->data[15 - i];
				}
				appendBinaryStringInfoNT(buf, b, 16);
				break;
			}
		case CHK_ARRAY:
			ch_put_array(e, buf, v, orig);
			break;
	}
}
