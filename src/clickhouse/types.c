/*-------------------------------------------------------------------------
 *
 * types.c
 *		  ClickHouse types: the parser of ClickHouse type names and the type
 *		  map PostgreSQL -> ClickHouse.
 *
 * A type name read from the server (system.columns, DESCRIBE) or written
 * in a statement is parsed into a ChType, refused past CH_MAX_TYPE_DEPTH
 * nested constructors; a local column gets the ClickHouse type that holds
 * every one of its values, Nullable unless it is a key of the table.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/types.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "clickhouse.h"

/* ------------------------------------------------------------------------
 * ClickHouse types
 * ------------------------------------------------------------------------
 */

static const struct
{
	const char *name;
	ChKind		kind;
}			ch_simple_types[] = {
	{"Int8", CHK_INT8},
	{"Int16", CHK_INT16},
	{"Int32", CHK_INT32},
	{"Int64", CHK_INT64},
	{"UInt8", CHK_UINT8},
	{"UInt16", CHK_UINT16},
	{"UInt32", CHK_UINT32},
	{"UInt64", CHK_UINT64},
	{"Float32", CHK_FLOAT32},
	{"Float64", CHK_FLOAT64},
	{"String", CHK_STRING},
	{"Date", CHK_DATE},
	{"DateTime", CHK_DATETIME},
	{"UUID", CHK_UUID},
	{NULL}
};

void
CtasChSkipWs(const char **p)
{
	while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r')
		(*p)++;
}

/*
 * CtasChParseString
 *		A quoted ClickHouse string literal at *p, unescaped, and *p moved
 *		past it; NULL if malformed.  Palloc'd.
 */
char *
CtasChParseString(const char **p)
{
	StringInfoData buf;
	const char *s = *p;

	if (*s != '\'')
		return NULL;
	initStringInfo(&buf);
	for (s++; *s && *s != '\''; s++)
	{
		if (*s == '\\' && s[1])
			s++;
		appendStringInfoChar(&buf, *s);
	}
	if (*s != '\'')
		return NULL;
	*p = s + 1;
	return buf.data;
}

static bool
ch_parse_int(const char **p, int *out)
{
	const char *s = *p;
	bool		neg = false;
	long		v = 0;

	CtasChSkipWs(&s);
	if (*s == '-')
	{
		neg = true;
		s++;
	}
	if (*s < '0' || *s > '9')
		return false;
	while (*s >= '0' && *s <= '9' && v < 100000000)
		v = v * 10 + (*s++ - '0');
	CtasChSkipWs(&s);
	*out = (int) (neg ? -v : v);
	*p = s;
	return true;
}

static bool
ch_expect(const char **p, char c)
{
	CtasChSkipWs(p);
	if (**p != c)
		return false;
	(*p)++;
	return true;
}

/*
 * ch_parse_type_at
 *		Parse a ClickHouse type at *p, nested depth levels deep.  NULL when
 *		it is malformed or not one we can write; then *too_deep says
 *		whether it was refused for nesting deeper than CH_MAX_TYPE_DEPTH.
 *		Palloc'd.
 */
static ChType *
ch_parse_type_at(const char **p, int depth, bool *too_deep)
{
	const char *s = *p;
	const char *start;
	char	   *name;
	ChType	   *t;
	int			i;

	check_stack_depth();
	if (depth >= CH_MAX_TYPE_DEPTH)
	{
		*too_deep = true;
		return NULL;
	}
	CtasChSkipWs(&s);
	start = s;
	while ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		   (*s >= '0' && *s <= '9') || *s == '_')
		s++;
	if (s == start)
		return NULL;
	name = pnstrdup(start, s - start);
	CtasChSkipWs(&s);

	if (strcmp(name, "Nullable") == 0 || strcmp(name, "LowCardinality") == 0)
	{
		ChType	   *inner;

		if (!ch_expect(&s, '('))
			return NULL;
		inner = ch_parse_type_at(&s, depth + 1, too_deep);
		if (inner == NULL || !ch_expect(&s, ')'))
			return NULL;
		if (name[0] == 'N')
		{
			if (inner->nullable || inner->kind == CHK_ARRAY)
				return NULL;
			inner->nullable = true;
		}
		else
			inner->lowcard = true;
		*p = s;
		return inner;
	}

	t = palloc0(sizeof(ChType));
	if (strcmp(name, "Array") == 0)
	{
		t->kind = CHK_ARRAY;
		if (!ch_expect(&s, '('))
			return NULL;
		t->elem = ch_parse_type_at(&s, depth + 1, too_deep);
		if (t->elem == NULL || !ch_expect(&s, ')'))
			return NULL;
	}
	else if (strcmp(name, "Decimal") == 0)
	{
		t->kind = CHK_DECIMAL;
		if (!ch_expect(&s, '(') || !ch_parse_int(&s, &t->precision) ||
			!ch_expect(&s, ',') || !ch_parse_int(&s, &t->scale) ||
			!ch_expect(&s, ')'))
			return NULL;
	}
	else if (strcmp(name, "Decimal32") == 0 || strcmp(name, "Decimal64") == 0 ||
			 strcmp(name, "Decimal128") == 0)
	{
		t->kind = CHK_DECIMAL;
		t->precision = name[7] == '3' ? 9 : name[7] == '6' ? 18 : 38;
		if (!ch_expect(&s, '(') || !ch_parse_int(&s, &t->scale) ||
			!ch_expect(&s, ')'))
			return NULL;
	}
	else if (strcmp(name, "FixedString") == 0)
	{
		t->kind = CHK_FIXEDSTRING;
		if (!ch_expect(&s, '(') || !ch_parse_int(&s, &t->length) ||
			!ch_expect(&s, ')') || t->length <= 0)
			return NULL;
	}
	else if (strcmp(name, "Enum8") == 0 || strcmp(name, "Enum16") == 0)
	{
		int			cap = 8;

		t->kind = name[4] == '8' ? CHK_ENUM8 : CHK_ENUM16;
		t->enum_names = palloc(sizeof(char *) * cap);
		t->enum_values = palloc(sizeof(int) * cap);
		if (!ch_expect(&s, '('))
			return NULL;
		for (;;)
		{
			char	   *ename;
			int			v;

			CtasChSkipWs(&s);
			ename = CtasChParseString(&s);
			if (ename == NULL || !ch_expect(&s, '=') || !ch_parse_int(&s, &v))
				return NULL;
			if (t->nenum == cap)
			{
				cap *= 2;
				t->enum_names = repalloc(t->enum_names, sizeof(char *) * cap);
				t->enum_values = repalloc(t->enum_values, sizeof(int) * cap);
			}
			t->enum_names[t->nenum] = ename;
			t->enum_values[t->nenum++] = v;
			if (ch_expect(&s, ')'))
				break;
			if (!ch_expect(&s, ','))
				return NULL;
		}
	}
	else
	{
		for (i = 0; ch_simple_types[i].name; i++)
		{
			if (strcmp(name, ch_simple_types[i].name) == 0)
				break;
		}
		if (ch_simple_types[i].name == NULL)
			return NULL;
		t->kind = ch_simple_types[i].kind;
		if (t->kind == CHK_DATETIME && *s == '(')
		{
			s++;
			CtasChSkipWs(&s);
			t->tz = CtasChParseString(&s);
			if (t->tz == NULL || !ch_expect(&s, ')'))
				return NULL;
		}
	}

	if (t->kind == CHK_DECIMAL &&
		(t->precision < 1 || t->precision > 38 || t->scale < 0 ||
		 t->scale > t->precision))
		return NULL;
	*p = s;
	return t;
}

/* The whole of text as a type, or NULL (see ch_parse_type_at) */
ChType *
CtasChParseType(const char *text, bool *too_deep)
{
	const char *p = text;
	ChType	   *t;

	*too_deep = false;
	t = ch_parse_type_at(&p, 0, too_deep);

	if (t == NULL)
		return NULL;
	CtasChSkipWs(&p);
	return *p == '\0' ? t : NULL;
}

/* Append the canonical DDL text of t */
void
CtasChAppendType(StringInfo buf, const ChType *t)
{
	int			i;

	check_stack_depth();
	if (t->lowcard)
		appendStringInfoString(buf, "LowCardinality(");
	if (t->nullable)
		appendStringInfoString(buf, "Nullable(");
	switch (t->kind)
	{
		case CHK_ARRAY:
			appendStringInfoString(buf, "Array(");
			CtasChAppendType(buf, t->elem);
			appendStringInfoChar(buf, ')');
			break;
		case CHK_DECIMAL:
			appendStringInfo(buf, "Decimal(%d, %d)", t->precision, t->scale);
			break;
		case CHK_FIXEDSTRING:
			appendStringInfo(buf, "FixedString(%d)", t->length);
			break;
		case CHK_DATETIME:
			appendStringInfoString(buf, "DateTime");
			if (t->tz)
			{
				appendStringInfoChar(buf, '(');
				CtasChAppendLiteral(buf, t->tz);
				appendStringInfoChar(buf, ')');
			}
			break;
		case CHK_ENUM8:
		case CHK_ENUM16:
			appendStringInfoString(buf, t->kind == CHK_ENUM8 ? "Enum8(" : "Enum16(");
			for (i = 0; i < t->nenum; i++)
			{
				if (i > 0)
					appendStringInfoString(buf, ", ");
				CtasChAppendLiteral(buf, t->enum_names[i]);
				appendStringInfo(buf, " = %d", t->enum_values[i]);
			}
			appendStringInfoChar(buf, ')');
			break;
		default:
			for (i = 0; ch_simple_types[i].name; i++)
			{
				if (ch_simple_types[i].kind == t->kind)
				{
					appendStringInfoString(buf, ch_simple_types[i].name);
					break;
				}
			}
			break;
	}
	if (t->nullable)
		appendStringInfoChar(buf, ')');
	if (t->lowcard)
		appendStringInfoChar(buf, ')');
}

char *
CtasChTypeText(const ChType *t)
{
	StringInfoData buf;

	initStringInfo(&buf);
	CtasChAppendType(&buf, t);
	return buf.data;
}

/* ------------------------------------------------------------------------
 * Type map PostgreSQL -> ClickHouse
 * ------------------------------------------------------------------------
 */

/*
 * ch_map_base
 *		The ClickHouse type (without Nullable) for a local base type, or
 *		NULL when there is none.
 */
static char *
ch_map_base(Oid typid, int32 typmod, const char *colname)
{
	Oid			elem;

	switch (typid)
	{
		case INT2OID:
			return "Int16";
		case INT4OID:
			return "Int32";
		case INT8OID:
			return "Int64";
		case FLOAT4OID:
			return "Float32";
		case FLOAT8OID:
			return "Float64";
		case BOOLOID:
			return "UInt8";
		case NUMERICOID:
			{
				int			p;
				int			s;

				if (typmod < (int32) VARHDRSZ)
					return "Decimal(38, 18)";	/* documented choice */
				p = ((typmod - VARHDRSZ) >> 16) & 0xffff;
				s = (((typmod - VARHDRSZ) & 0x7ff) ^ 1024) - 1024;
				if (s < 0)
				{
					p -= s;
					s = 0;
				}
				else if (s > p)
					p = s;
				if (p > 38)
					ereport(ERROR,
							(errcode(ERRCODE_DATATYPE_MISMATCH),
							 errmsg("column \"%s\" of type %s cannot be mapped to a ClickHouse type",
									colname, format_type_with_typemod(typid, typmod)),
							 errdetail("ClickHouse decimals have at most 38 digits."),
							 errhint("Choose the remote type with WITH (column_types = '%s String') or a Decimal of at most 38 digits.",
									 quote_identifier(colname))));
				return psprintf("Decimal(%d, %d)", p, s);
			}
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
		case NAMEOID:
		case CHAROID:
		case BYTEAOID:
		case JSONOID:
		case JSONBOID:
			return "String";
		case DATEOID:
			return "Date";
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return "DateTime('UTC')";
		case UUIDOID:
			return "UUID";
		default:
			break;
	}

	elem = get_element_type(typid);
	if (OidIsValid(elem))
	{
		int32		etypmod = typmod;
		Oid			ebase = getBaseTypeAndTypmod(elem, &etypmod);
		char	   *inner;

		if (OidIsValid(get_element_type(ebase)))
			return NULL;
		inner = ch_map_base(ebase, typmod, colname);
		if (inner == NULL)
			return NULL;
		return psprintf("Array(Nullable(%s))", inner);
	}

	switch (get_typtype(typid))
	{
		case TYPTYPE_COMPOSITE:
		case TYPTYPE_PSEUDO:
			return NULL;
		default:
			return "String";	/* enums, json, inet, interval, ranges... */
	}
}

/*
 * ch_expr_mentions
 *		Does the ClickHouse expression expr use column name as a bare or
 *		quoted identifier?  Used to find sorting, primary and partition key
 *		columns, which ClickHouse refuses to make Nullable.
 */
static bool
ch_expr_mentions(const char *expr, const char *name)
{
	const char *p = expr;

	if (expr == NULL)
		return false;
	while (*p)
	{
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_')
		{
			const char *start = p;

			while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
				   (*p >= '0' && *p <= '9') || *p == '_')
				p++;
			if ((size_t) (p - start) == strlen(name) &&
				strncmp(start, name, p - start) == 0)
				return true;
		}
		else if (*p == '`' || *p == '"')
		{
			char		q = *p++;
			StringInfoData id;

			initStringInfo(&id);
			while (*p && *p != q)
			{
				if (*p == '\\' && p[1])
					p++;
				appendStringInfoChar(&id, *p++);
			}
			if (*p)
				p++;
			if (strcmp(id.data, name) == 0)
				return true;
		}
		else if (*p == '\'')
		{
			for (p++; *p && *p != '\''; p++)
			{
				if (*p == '\\' && p[1])
					p++;
			}
			if (*p)
				p++;
		}
		else if (*p >= '0' && *p <= '9')
		{
			while ((*p >= '0' && *p <= '9') || *p == '.' ||
				   (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
				p++;
		}
		else
			p++;
	}
	return false;
}

bool
CtasChIsKey(CtasLoad *load, const CtasColumn *col)
{
	const ChOptions *o = CtasChOptions(load);

	return col->is_key ||
		ch_expr_mentions(o->order_by, col->name) ||
		ch_expr_mentions(o->partition_by, col->name) ||
		ch_expr_mentions(o->sharding_key, col->name);	/* a cluster's */
}

/*
 * CtasChMapColumn
 *		map_column of the writer: the type map of the README, with
 *		Nullable(T) for every column that is not a key column (ClickHouse
 *		does not allow Nullable keys; a NULL there is an error at load) and
 *		not an array (ClickHouse has no Nullable arrays).
 */
void
CtasChMapColumn(CtasLoad *load, CtasColumn *col)
{
	char	   *type = ch_map_base(col->basetypid, col->basetypmod, col->name);

	if (type == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of type %s cannot be mapped to a ClickHouse type",
						col->name, format_type_be(col->typid)),
				 errhint("Choose the remote type with WITH (column_types = '%s String').",
						 quote_identifier(col->name))));

	if (!CtasChIsKey(load, col) && strncmp(type, "Array(", 6) != 0)
		type = psprintf("Nullable(%s)", type);
	col->remote_type = pstrdup(type);
	col->binary_ok = false;
}

/*
 * CtasChSyncColumnType
 *		The ClickHouse type of a column that a whole-row sync adds or
 *		retypes (not a key): as CtasChMapColumn maps it, or NULL when the
 *		local type has none.
 */
char *
CtasChSyncColumnType(Oid typid, int32 typmod, const char *colname)
{
	int32		basemod = typmod;
	Oid			base = getBaseTypeAndTypmod(typid, &basemod);
	char	   *type = ch_map_base(base, basemod, colname);

	if (type == NULL)
		return NULL;
	if (strncmp(type, "Array(", 6) != 0)
		type = psprintf("Nullable(%s)", type);
	return type;
}
