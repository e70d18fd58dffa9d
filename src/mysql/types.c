/*-------------------------------------------------------------------------
 *
 * types.c
 *		  The type map PostgreSQL -> MariaDB / MySQL, column_types overrides,
 *		  and the encoder of the text that LOAD DATA parses.
 *
 * Every value arrives exactly or the statement fails with an error that
 * names the column and the value:
 *
 *	int2/4/8		SMALLINT / INT / BIGINT
 *	float4/8		FLOAT / DOUBLE, shortest exact digits (not extra_float_
 *					digits); NaN and infinity are errors
 *	numeric(p,s)	DECIMAL(p,s) for p <= 65, s <= 30; unconstrained numeric
 *					DECIMAL(65,30), a value with more digits is an error
 *	bool			TINYINT(1)
 *	text			LONGTEXT; varchar(n) VARCHAR(n); char(n) CHAR(n);
 *					key columns VARCHAR(768) (InnoDB's key limit)
 *	bytea			LONGBLOB (sent in hex, UNHEX on the server)
 *	date			DATE; timestamp DATETIME(6); timestamptz DATETIME(6) in
 *					UTC; time TIME(6): formatted here, whatever DateStyle,
 *					years 1000..9999 only (MySQL's range)
 *	uuid			CHAR(36); enum VARCHAR(63)
 *	json/jsonb		JSON; arrays JSON (array_to_json)
 *
 * Tables are utf8mb4 with the binary collation, so that keys and
 * comparisons distinguish what PostgreSQL distinguishes.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/mysql/types.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

#include "mysql_target.h"

#define MY_MAX_DECIMAL_PRECISION	65
#define MY_MAX_DECIMAL_SCALE		30
#define MY_KEY_VARCHAR				768

/* ------------------------------------------------------------------------
 * The type map
 * ------------------------------------------------------------------------
 */

/* What the local type is for the encoder; false when it has no mapping */
static bool
my_source(Oid typid, MySrc *src)
{
	switch (typid)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
			*src = MYS_INT;
			return true;
		case FLOAT4OID:
			*src = MYS_FLOAT4;
			return true;
		case FLOAT8OID:
			*src = MYS_FLOAT8;
			return true;
		case NUMERICOID:
			*src = MYS_NUMERIC;
			return true;
		case BOOLOID:
			*src = MYS_BOOL;
			return true;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
		case UUIDOID:
			*src = MYS_TEXT;
			return true;
		case BYTEAOID:
			*src = MYS_BYTEA;
			return true;
		case DATEOID:
			*src = MYS_DATE;
			return true;
		case TIMESTAMPOID:
			*src = MYS_TIMESTAMP;
			return true;
		case TIMESTAMPTZOID:
			*src = MYS_TIMESTAMPTZ;
			return true;
		case TIMEOID:
			*src = MYS_TIME;
			return true;
		case JSONOID:
		case JSONBOID:
			*src = MYS_JSON;
			return true;
		default:
			break;
	}
	if (type_is_enum(typid))
	{
		*src = MYS_TEXT;
		return true;
	}
	if (OidIsValid(get_element_type(typid)))
	{
		*src = MYS_ARRAY;
		return true;
	}
	return false;
}

/*
 * CtasMyMapColumn
 *		map_column of the writer: the MySQL type of a column from its local
 *		type, or an ERROR naming the column.
 */
void
CtasMyMapColumn(CtasLoad *load, CtasColumn *col)
{
	Oid			t = col->basetypid;
	int32		mod = col->basetypmod;
	char	   *type = NULL;
	MySrc		src;

	if (!my_source(t, &src))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of type %s cannot be mapped to a MySQL type",
						col->name, format_type_be(col->typid)),
				 errhint("Cast the column to text in the query, or choose the remote type with WITH (column_types = '%s ...').",
						 quote_identifier(col->name))));
	switch (t)
	{
		case INT2OID:
			type = "SMALLINT";
			break;
		case INT4OID:
			type = "INT";
			break;
		case INT8OID:
			type = "BIGINT";
			break;
		case FLOAT4OID:
			type = "FLOAT";
			break;
		case FLOAT8OID:
			type = "DOUBLE";
			break;
		case NUMERICOID:
			if (mod < (int32) VARHDRSZ)
				type = psprintf("DECIMAL(%d,%d)", MY_MAX_DECIMAL_PRECISION,
								MY_MAX_DECIMAL_SCALE);
			else
			{
				int			p = ((mod - VARHDRSZ) >> 16) & 0xffff;
				int			s = (((mod - VARHDRSZ) & 0x7ff) ^ 1024) - 1024;

				if (p > MY_MAX_DECIMAL_PRECISION || s > MY_MAX_DECIMAL_SCALE ||
					s < 0)
					ereport(ERROR,
							(errcode(ERRCODE_DATATYPE_MISMATCH),
							 errmsg("column \"%s\" of type %s cannot be mapped to a MySQL DECIMAL",
									col->name, format_type_with_typemod(col->typid, col->typmod)),
							 errdetail("MySQL's DECIMAL holds at most %d digits, %d of them after the point, and no negative scale.",
									   MY_MAX_DECIMAL_PRECISION, MY_MAX_DECIMAL_SCALE),
							 errhint("Choose the remote type with WITH (column_types = '%s DOUBLE'), or cast the column.",
									 quote_identifier(col->name))));
				type = psprintf("DECIMAL(%d,%d)", p, s);
			}
			break;
		case BOOLOID:
			type = "TINYINT(1)";
			break;
		case TEXTOID:
			type = "LONGTEXT";
			break;
		case VARCHAROID:
			if (mod >= (int32) VARHDRSZ && mod - VARHDRSZ <= 16383)
				type = psprintf("VARCHAR(%d)", mod - VARHDRSZ);
			else
				type = "LONGTEXT";
			break;
		case BPCHAROID:
			if (mod >= (int32) VARHDRSZ && mod - VARHDRSZ <= 255)
				type = psprintf("CHAR(%d)", mod - VARHDRSZ);
			else if (mod >= (int32) VARHDRSZ && mod - VARHDRSZ <= 16383)
				type = psprintf("VARCHAR(%d)", mod - VARHDRSZ);
			else
				type = "LONGTEXT";
			break;
		case NAMEOID:
			type = "VARCHAR(64)";
			break;
		case UUIDOID:
			type = "CHAR(36)";
			break;
		case BYTEAOID:
			type = "LONGBLOB";
			break;
		case DATEOID:
			type = "DATE";
			break;
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			type = "DATETIME(6)";
			break;
		case TIMEOID:
			type = "TIME(6)";
			break;
		case JSONOID:
		case JSONBOID:
			type = "JSON";
			break;
		default:
			type = src == MYS_ARRAY ? "JSON" : "VARCHAR(63)";	/* enum */
			break;
	}
	/* InnoDB keys need a bounded length */
	if (col->is_key && (strcmp(type, "LONGTEXT") == 0 || strcmp(type, "JSON") == 0))
		type = psprintf("VARCHAR(%d)", MY_KEY_VARCHAR);
	if (col->is_key && strcmp(type, "LONGBLOB") == 0)
		type = psprintf("VARBINARY(%d)", MY_KEY_VARCHAR * 4);
	col->remote_type = pstrdup(type);
	col->binary_ok = false;
}

/*
 * CtasMyColumnType
 *		The DDL type of a column: the map's, or the column_types override
 *		parsed and rebuilt (a name, optional (n[,m]), optional UNSIGNED).
 *		ERROR naming the column for anything else.  Palloc'd.
 */
char *
CtasMyColumnType(CtasLoad *load, CtasColumn *col)
{
	const char *p = col->remote_type;
	StringInfoData buf;
	int			nargs = 0;

	if (!col->overridden)
		return pstrdup(col->remote_type);
	initStringInfo(&buf);
	while (isspace((unsigned char) *p))
		p++;
	if (!isalpha((unsigned char) *p))
		goto bad;
	while (isalnum((unsigned char) *p) || *p == '_')
		appendStringInfoChar(&buf, pg_ascii_toupper((unsigned char) *p++));
	while (isspace((unsigned char) *p))
		p++;
	if (*p == '(')
	{
		appendStringInfoChar(&buf, '(');
		p++;
		for (;;)
		{
			long		n;
			char	   *end;

			while (isspace((unsigned char) *p))
				p++;
			if (!isdigit((unsigned char) *p))
				goto bad;
			errno = 0;
			n = strtol(p, &end, 10);
			if (errno != 0 || n > 1000000000L || ++nargs > 2)
				goto bad;
			appendStringInfo(&buf, "%s%ld", nargs > 1 ? "," : "", n);
			p = end;
			while (isspace((unsigned char) *p))
				p++;
			if (*p == ',')
			{
				p++;
				continue;
			}
			if (*p != ')')
				goto bad;
			p++;
			break;
		}
		appendStringInfoChar(&buf, ')');
	}
	while (isspace((unsigned char) *p))
		p++;
	if (pg_strncasecmp(p, "unsigned", 8) == 0)
	{
		appendStringInfoString(&buf, " UNSIGNED");
		p += 8;
		while (isspace((unsigned char) *p))
			p++;
	}
	if (*p != '\0')
		goto bad;
	return buf.data;

bad:
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid MySQL type \"%s\" for column \"%s\" in option \"column_types\"",
					col->remote_type, col->name),
			 errdetail("A type is a name with an optional (length) or (precision, scale) and an optional UNSIGNED.")));
	return NULL;				/* keep compiler quiet */
}

/*
 * CtasMyCreateSql
 *		CREATE TABLE db.table with the load's columns, its primary key,
 *		InnoDB, utf8mb4 with the binary collation.  Palloc'd.
 */
char *
CtasMyCreateSql(CtasLoad *load, const char *db, const char *table)
{
	StringInfoData sql;
	ListCell   *lc;
	int			i;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE %s (", CtasMyQname(db, table));
	for (i = 0; i < load->ncolumns; i++)
	{
		CtasColumn *col = &load->columns[i];

		appendStringInfo(&sql, "%s%s %s%s", i > 0 ? ", " : "",
						 CtasMyQuoteIdent(col->name),
						 CtasMyColumnType(load, col),
						 col->is_key ? " NOT NULL" : "");
	}
	if (load->opts.primary_key != NIL)
	{
		appendStringInfoString(&sql, ", PRIMARY KEY (");
		foreach(lc, load->opts.primary_key)
			appendStringInfo(&sql, "%s%s", lc == list_head(load->opts.primary_key) ? "" : ", ",
							 CtasMyQuoteIdent(strVal(lfirst(lc))));
		appendStringInfoChar(&sql, ')');
	}
	appendStringInfoString(&sql, ") ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin");
	return sql.data;
}

/* ------------------------------------------------------------------------
 * The encoder
 * ------------------------------------------------------------------------
 */

/*
 * CtasMySetupColumns
 *		The encoder's view of the load's columns.  ERROR for a column with
 *		no mapping.  In the current memory context.
 */
MyColumn *
CtasMySetupColumns(CtasLoad *load)
{
	MyColumn   *cols = palloc0(sizeof(MyColumn) * load->ncolumns);
	int			i;

	for (i = 0; i < load->ncolumns; i++)
	{
		CtasColumn *col = &load->columns[i];
		MyColumn   *c = &cols[i];

		c->name = col->name;
		c->out = &col->out_func;
		c->numeric_int = -1;
		if (!my_source(col->basetypid, &c->src))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of type %s cannot be written to a MySQL catalog",
							col->name, format_type_be(col->typid)),
					 errhint("Cast the column to text in the query.")));
		if (c->src == MYS_NUMERIC && col->basetypmod < (int32) VARHDRSZ)
		{
			c->numeric_int = MY_MAX_DECIMAL_PRECISION - MY_MAX_DECIMAL_SCALE;
			c->numeric_scale = MY_MAX_DECIMAL_SCALE;
		}
	}
	return cols;
}

/*
 * CtasMySyncColumns
 *		The encoder's view of the n columns of a sync (names, local types),
 *		with their output functions.  ERROR for a column with no mapping.
 *		In the current memory context.
 */
MyColumn *
CtasMySyncColumns(int n, char **names, Oid *types)
{
	MyColumn   *cols = palloc0(sizeof(MyColumn) * Max(n, 1));
	int			i;

	for (i = 0; i < n; i++)
	{
		MyColumn   *c = &cols[i];
		Oid			base = getBaseType(types[i]);
		Oid			func;
		bool		isvarlena;

		c->name = names[i];
		c->numeric_int = -1;
		c->out = palloc0(sizeof(FmgrInfo));
		getTypeOutputInfo(types[i], &func, &isvarlena);
		fmgr_info(func, c->out);
		if (!my_source(base, &c->src))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of type %s cannot be written to a MySQL catalog",
							names[i], format_type_be(types[i])),
					 errhint("Cast the column to text in the query.")));
	}
	return cols;
}

/*
 * CtasMyLoadSql
 *		The LOAD DATA clauses after the file name: into the table qualified
 *		(quoted), the n columns of the encoder's text (bytea through
 *		UNHEX of a variable), then extra, the names of more fields of each
 *		line (already quoted), or NULL.  Palloc'd.
 *
 *		own_table: the table is one that ctas_fed created with
 *		CtasMyCreateSql, so every text column is utf8mb4 (the table's
 *		default; column_types names no character set).  The stream is then
 *		read as CHARACTER SET binary: the server still checks that each
 *		value is well-formed for its column (an invalid sequence is a
 *		warning, counted as for utf8mb4), but its field reader no longer
 *		looks for multibyte characters byte by byte, about 5% less work per
 *		row for the bench table (docs/performance.md).  Into a table of the
 *		user's (an append, a sync) the stream stays utf8mb4, which the
 *		server converts to the charset of each column: binary would store
 *		UTF-8 bytes unconverted in, say, a latin1 column.
 */
char *
CtasMyLoadSql(const char *qualified, MyColumn *cols, int n,
			  const char *extra, bool own_table)
{
	StringInfoData sql;
	StringInfoData set;
	int			i;

	initStringInfo(&sql);
	initStringInfo(&set);
	appendStringInfo(&sql, "INTO TABLE %s CHARACTER SET %s "
					 "FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' "
					 "LINES TERMINATED BY '\\n' (", qualified,
					 own_table ? "binary" : "utf8mb4");
	for (i = 0; i < n; i++)
	{
		const char *name = CtasMyQuoteIdent(cols[i].name);

		if (i > 0)
			appendStringInfoString(&sql, ", ");
		if (cols[i].src == MYS_BYTEA)
		{
			appendStringInfo(&sql, "@v%d", i);
			appendStringInfo(&set, "%s%s = UNHEX(@v%d)",
							 set.len > 0 ? ", " : " SET ", name, i);
		}
		else
			appendStringInfoString(&sql, name);
	}
	if (extra)
		appendStringInfo(&sql, ", %s", extra);
	appendStringInfoChar(&sql, ')');
	appendStringInfoString(&sql, set.data);
	pfree(set.data);
	return sql.data;
}

/* the escapes of LOAD DATA ... FIELDS ESCAPED BY '\\' */
static void
my_append_escaped(StringInfo buf, const char *s, size_t len)
{
	const char *end = s + len;

	enlargeStringInfo(buf, len);
	while (s < end)
	{
		size_t		n = 0;

		while (s + n < end && s[n] != '\\' && s[n] != '\t' && s[n] != '\n' &&
			   s[n] != '\r' && s[n] != '\0')
			n++;
		appendBinaryStringInfo(buf, s, n);
		s += n;
		if (s >= end)
			break;
		switch (*s)
		{
			case '\\':
				appendBinaryStringInfo(buf, "\\\\", 2);
				break;
			case '\t':
				appendBinaryStringInfo(buf, "\\t", 2);
				break;
			case '\n':
				appendBinaryStringInfo(buf, "\\n", 2);
				break;
			case '\r':
				appendBinaryStringInfo(buf, "\\r", 2);
				break;
			default:
				appendBinaryStringInfo(buf, "\\0", 2);
				break;
		}
		s++;
	}
}

/* text in the server encoding, escaped, as UTF-8 */
static void
my_append_text(StringInfo buf, const char *s, size_t len)
{
	if (GetDatabaseEncoding() != PG_UTF8 && GetDatabaseEncoding() != PG_SQL_ASCII)
	{
		char	   *u = pg_server_to_any(s, (int) len, PG_UTF8);

		my_append_escaped(buf, u, strlen(u));
		return;
	}
	my_append_escaped(buf, s, len);
}

static void
my_value_error(MyColumn *c, const char *value, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
			 errmsg("value \"%s\" of column \"%s\" cannot be written to MySQL",
					value, c->name),
			 errdetail("%s", why)));
}

static void
my_check_year(MyColumn *c, int year, Datum v, Oid typid)
{
	if (year < 1000 || year > 9999)
		my_value_error(c, OidOutputFunctionCall(c->out->fn_oid, v),
					   "MySQL dates and times hold years 1000 to 9999 only.");
}

/*
 * my_append_fraction
 *		The microseconds of a time as PostgreSQL prints them: none for 0,
 *		else a point and the digits without trailing zeros.  What the
 *		server does not have to read it does not parse: a whole second is
 *		"12:00:00", not "12:00:00.000000" (DATETIME(6) reads both alike).
 */
static void
my_append_fraction(StringInfo buf, int us)
{
	char		d[8];
	int			n = 6;
	int			i;

	if (us == 0)
		return;
	d[0] = '.';
	for (i = 6; i >= 1; i--)
	{
		d[i] = '0' + us % 10;
		us /= 10;
	}
	while (d[n] == '0')
		n--;
	appendBinaryStringInfo(buf, d, n + 1);
}

/*
 * CtasMyPutValue
 *		Append the LOAD DATA text of one value (no separator) to buf:
 *		\N for NULL.  ERROR naming the column for a value MySQL cannot
 *		hold.
 */
void
CtasMyPutValue(MyColumn *c, StringInfo buf, Datum v, bool isnull)
{
	char		tmp[64];

	if (isnull)
	{
		appendBinaryStringInfo(buf, "\\N", 2);
		return;
	}
	switch (c->src)
	{
		case MYS_INT:
			{
				char	   *s = OutputFunctionCall(c->out, v);

				appendStringInfoString(buf, s);
				break;
			}
		case MYS_FLOAT4:
			{
				float4		f = DatumGetFloat4(v);

				if (isnan(f) || isinf(f))
					my_value_error(c, OutputFunctionCall(c->out, v),
								   "MySQL's FLOAT holds no NaN or infinity.");
				float_to_shortest_decimal_buf(f, tmp);
				appendStringInfoString(buf, tmp);
				break;
			}
		case MYS_FLOAT8:
			{
				float8		f = DatumGetFloat8(v);

				if (isnan(f) || isinf(f))
					my_value_error(c, OutputFunctionCall(c->out, v),
								   "MySQL's DOUBLE holds no NaN or infinity.");
				double_to_shortest_decimal_buf(f, tmp);
				appendStringInfoString(buf, tmp);
				break;
			}
		case MYS_NUMERIC:
			{
				char	   *s = OutputFunctionCall(c->out, v);

				if (!isdigit((unsigned char) s[s[0] == '-' ? 1 : 0]))
					my_value_error(c, s, "MySQL's DECIMAL holds no NaN or infinity.");
				if (c->numeric_int >= 0)
				{
					const char *d = s[0] == '-' ? s + 1 : s;
					const char *dot = strchr(d, '.');
					int			ints = dot ? dot - d : strlen(d);
					int			fracs = dot ? strlen(dot + 1) : 0;

					if (ints > c->numeric_int || fracs > c->numeric_scale)
						my_value_error(c, s,
									   psprintf("An unconstrained numeric is written as DECIMAL(65,30): at most %d digits before the point and %d after it.",
												c->numeric_int, c->numeric_scale));
				}
				appendStringInfoString(buf, s);
				break;
			}
		case MYS_BOOL:
			appendStringInfoChar(buf, DatumGetBool(v) ? '1' : '0');
			break;
		case MYS_TEXT:
		case MYS_JSON:
			{
				char	   *s = OutputFunctionCall(c->out, v);

				my_append_text(buf, s, strlen(s));
				break;
			}
		case MYS_ARRAY:
			{
				text	   *t = DatumGetTextPP(DirectFunctionCall1(array_to_json, v));

				my_append_text(buf, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
				break;
			}
		case MYS_BYTEA:
			{
				bytea	   *b = DatumGetByteaPP(v);
				size_t		len = VARSIZE_ANY_EXHDR(b);

				/* hex: the column is loaded through UNHEX(@var) */
				enlargeStringInfo(buf, len * 2 + 1);
				buf->len += hex_encode(VARDATA_ANY(b), len, buf->data + buf->len);
				buf->data[buf->len] = '\0';
				break;
			}
		case MYS_DATE:
			{
				DateADT		d = DatumGetDateADT(v);
				int			y,
							m,
							dd;

				if (DATE_NOT_FINITE(d))
					my_value_error(c, OutputFunctionCall(c->out, v),
								   "MySQL dates are finite.");
				j2date(d + POSTGRES_EPOCH_JDATE, &y, &m, &dd);
				my_check_year(c, y, v, DATEOID);
				appendStringInfo(buf, "%04d-%02d-%02d", y, m, dd);
				break;
			}
		case MYS_TIMESTAMP:
		case MYS_TIMESTAMPTZ:
			{
				Timestamp	ts = DatumGetTimestamp(v);
				struct pg_tm tm;
				fsec_t		fsec;

				if (TIMESTAMP_NOT_FINITE(ts))
					my_value_error(c, OutputFunctionCall(c->out, v),
								   "MySQL times are finite.");
				/* no time zone: a timestamptz in UTC */
				if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0)
					my_value_error(c, OutputFunctionCall(c->out, v),
								   "The timestamp is out of range.");
				my_check_year(c, tm.tm_year, v, TIMESTAMPOID);
				appendStringInfo(buf, "%04d-%02d-%02d %02d:%02d:%02d",
								 tm.tm_year, tm.tm_mon, tm.tm_mday,
								 tm.tm_hour, tm.tm_min, tm.tm_sec);
				my_append_fraction(buf, (int) fsec);
				break;
			}
		case MYS_TIME:
			{
				TimeADT		t = DatumGetTimeADT(v);
				int64		us = t % USECS_PER_SEC;
				int64		s = t / USECS_PER_SEC;

				appendStringInfo(buf, "%02d:%02d:%02d",
								 (int) (s / 3600), (int) ((s / 60) % 60),
								 (int) (s % 60));
				my_append_fraction(buf, (int) us);
				break;
			}
	}
}
