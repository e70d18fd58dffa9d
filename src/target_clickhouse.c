/*-------------------------------------------------------------------------
 *
 * target_clickhouse.c
 *		  The ClickHouse writer: CREATE TABLE AS into a ClickHouse catalog
 *		  through its HTTP interface (http.c).
 *
 * ClickHouse has no transactions, so an atomic load is built from objects
 * that only this transaction knows about, published at the very end:
 *
 *	begin_load	the target name is checked first (in ClickHouse and among
 *				what this transaction already did to it), then a staging
 *				table _ctas_fed_stage_<sysid>_<xid>_<n>_<random> is created
 *				with the mapped columns and the table options of the
 *				statement, and one streamed INSERT ... FORMAT RowBinary is
 *				opened on it.
 *	put_row		each row is encoded into the stream's buffer; the buffer
 *				goes to the socket whenever it holds 1 MB (bounded memory,
 *				back-pressure from the server).
 *	end_load	the stream is closed and the staging table must hold
 *				exactly the rows sent (a dropped connection makes ClickHouse
 *				keep what it got, so the count is the proof).
 *	pre_commit	after every two-phase participant has prepared (commit
 *				order 1, "last resource"): a marker
 *				_ctas_fed_new_..._<target> is created, then RENAME TABLE
 *				stage TO target.  if_exists 'replace': target
 *				is renamed to _ctas_fed_old_..._<target> first; 'append':
 *				the staged parts are attached to the target (or inserted,
 *				for engines without partitions); DROP TABLE renames the
 *				table to _ctas_fed_drop_..._<target>.
 *	post_commit	the renamed-away tables, markers and appended stages are
 *				dropped.
 *	abort		everything is undone in reverse order: a running INSERT is
 *				killed, renames are reverted, staging tables dropped.  Once
 *				publication has begun, what to revert is read from
 *				system.tables, not assumed (a reply may have been lost).
 *				Failures are WARNINGs; resolve (ctas_fed.resolve_in_doubt)
 *				finishes the job later from the durable record.
 *
 * Durable records: before the first remote effect of each action, the
 * participant's actions and every table name they use are written to a
 * file in the data directory (see "Durable records"), removed when the
 * transaction is finished or undone.  Recovery reads only these records
 * and acts on whole transactions; a table that no record names is never
 * touched, whatever it is called.
 *
 * At most once: every request that changes something is sent once (http.c
 * never lets libcurl resend it); after a failure whose outcome is unknown
 * the server is asked what happened (system.tables, row counts).
 *
 * Each action of the transaction (create, replace, append, drop) is one
 * ChAction in the participant's list, in the order of the statements; the
 * list is also this transaction's view of which tables exist, so that a
 * table created earlier in the same transaction counts as existing.  An
 * action remembers the subtransaction nesting level that created it:
 * ROLLBACK TO SAVEPOINT undoes the actions of that level and deeper, and
 * a released savepoint hands its actions to the parent.
 *
 * Streaming mode (atomic = false) creates the target directly and sends
 * one INSERT per commit_every rows; what is committed stays.
 *
 * Rows travel as RowBinary, encoded here from the datums, so that every
 * value either arrives exactly or fails with an error naming the column and
 * the value; the one documented loss (fractional seconds of a timestamp in
 * DateTime) is reported with a NOTICE once per column.
 *
 * Every remote identifier is backquoted with escapes, every literal
 * single-quoted with escapes; the table options engine, order_by,
 * partition_by and settings are ClickHouse expressions and pass through,
 * after a check that they cannot end the statement or comment out the
 * rest of it.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/target_clickhouse.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "common/file_perm.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"
#include "utils/xid8.h"

#include "http.h"
#include "target.h"

/* ClickHouse types we can write */
typedef enum ChKind
{
	CHK_INT8,
	CHK_INT16,
	CHK_INT32,
	CHK_INT64,
	CHK_UINT8,
	CHK_UINT16,
	CHK_UINT32,
	CHK_UINT64,
	CHK_FLOAT32,
	CHK_FLOAT64,
	CHK_DECIMAL,
	CHK_STRING,
	CHK_FIXEDSTRING,
	CHK_DATE,
	CHK_DATETIME,
	CHK_UUID,
	CHK_ENUM8,
	CHK_ENUM16,
	CHK_ARRAY
} ChKind;

/* A parsed ClickHouse type */
typedef struct ChType
{
	ChKind		kind;
	bool		nullable;		/* Nullable(...) */
	bool		lowcard;		/* LowCardinality(...): same wire format */
	int			precision;		/* Decimal */
	int			scale;			/* Decimal */
	int			length;			/* FixedString */
	char	   *tz;				/* DateTime('tz'), or NULL */
	int			nenum;			/* Enum8/16 */
	char	  **enum_names;
	int		   *enum_values;
	struct ChType *elem;		/* Array */
} ChType;

/* What a local value is, for the encoders */
typedef enum ChSrc
{
	SRC_INT2,
	SRC_INT4,
	SRC_INT8,
	SRC_FLOAT4,
	SRC_FLOAT8,
	SRC_NUMERIC,
	SRC_BOOL,
	SRC_TEXT,					/* text, varchar, bpchar */
	SRC_NAME,
	SRC_BYTEA,
	SRC_DATE,
	SRC_TIMESTAMP,				/* timestamp and timestamptz */
	SRC_UUID,
	SRC_ARRAY,
	SRC_OTHER					/* anything else: its text output */
} ChSrc;

struct ChColumn;

/* How one value (a column, or an array element) is encoded */
typedef struct ChEnc
{
	ChType	   *type;
	ChSrc		src;
	Oid			typid;			/* local type (domains stripped) */
	FmgrInfo	out;			/* its output function */
	bool		via_text;		/* convert through text first */
	FmgrInfo	in;				/* input function of the canonical type */
	Oid			in_ioparam;
	ChSrc		in_src;
	struct ChEnc *elem;			/* Array */
	int16		elmlen;
	bool		elmbyval;
	char		elmalign;
	struct ChColumn *col;
} ChEnc;

typedef struct ChColumn
{
	const char *name;
	bool		key;			/* sorting, partition or primary key */
	bool		frac_notice;	/* NOTICE about fractional seconds given */
	bool		time_notice;	/* NOTICE about a dropped time of day given */
	ChEnc		enc;
} ChColumn;

/* What one statement did to the catalog in this transaction */
typedef enum ChActionKind
{
	CH_CREATE,					/* stage renamed to target at commit */
	CH_REPLACE,					/* target renamed away, stage renamed in */
	CH_APPEND,					/* stage's rows moved into target */
	CH_DROP						/* target renamed away, dropped after */
} ChActionKind;

typedef struct ChAction
{
	ChActionKind kind;
	char	   *db;
	char	   *table;			/* the target */
	char	   *stage;			/* staging table, or NULL (CH_DROP) */
	char	   *old;			/* replace/drop: where the target goes */
	char	   *marker;			/* create: commit marker, see ch_pre_commit */
	char	   *source;			/* append: table the stage copies */
	int			level;			/* subtransaction nesting level */
	bool		loaded;			/* end_load checked the stage */
	uint64		rows;
	/* progress of pre_commit, for undo */
	bool		old_moved;
	bool		stage_moved;
	bool		appended;
	bool		marker_made;
	bool		publishing;		/* pre_commit sent a request for it */
} ChAction;

/* Per transaction and user mapping: part->private */
typedef struct ChXact
{
	CtasHttp   *http;			/* in part->cxt */
	List	   *actions;		/* ChAction *, oldest first */
	CtasHttpStream *stream;		/* open INSERT, watched; or NULL */
	char	   *stream_qid;		/* its query_id until it is closed */
	int			stream_level;
	char		record_path[MAXPGPATH]; /* durable record, or "" */
	int			record_fd;		/* open on it, flock'd; or -1 */
} ChXact;

/* Per statement: load->private */
typedef struct ChLoad
{
	CtasHttp   *http;
	ChXact	   *xs;				/* NULL in streaming mode */
	ChAction   *action;			/* atomic mode */
	bool		streaming;
	char	   *db;
	char	   *insert_table;	/* where the rows go */
	char	   *insert_sql;
	char	   *engine;			/* engine name of insert_table */
	int			ncols;
	ChColumn   *cols;
	CtasHttpStream *stream;
	MemoryContext stream_cxt;	/* owns stream; deleted when it is done */
	uint64		rows;			/* rows encoded */
	uint64		block_rows;		/* streaming: rows in the open INSERT */
	uint64		count_before;	/* streaming append: rows already there */
	CtasLoad   *load;
} ChLoad;

/* Date and DateTime range of ClickHouse 18.16 (its date tables end 2105) */
#define CH_MAX_DATE_YEAR	2105

/* Deepest nesting of type constructors (Array, Nullable...) we parse */
#define CH_MAX_TYPE_DEPTH	32

/*
 * Deepest nesting of brackets in a table option: ClickHouse 18.16 parses
 * recursively without a depth limit, and a few hundred levels crash the
 * server (a stack overflow, every query of every user lost).
 */
#define CH_MAX_EXPR_DEPTH	32

static int128 ch_pow10[39];
static bool ch_pow10_ready = false;

/* writer interface */
static void ch_map_column(CtasLoad *load, CtasColumn *col);
static void ch_check_options(CtasLoad *load);
static void ch_explain(CtasLoad *load, ExplainState *es);
static void ch_begin_load(CtasLoad *load);
static void ch_put_row(CtasLoad *load, TupleTableSlot *slot);
static void ch_end_load(CtasLoad *load);
static void ch_drop_table(CtasLoad *load, bool missing_ok);
static void ch_pre_commit(CtasParticipant *part);
static void ch_post_commit(CtasParticipant *part);
static void ch_abort(CtasParticipant *part);
static void ch_subxact(CtasParticipant *part, SubXactEvent event, int level);
static void ch_list_tables(CtasCatalog *catalog, const char *schema,
						   void (*emit) (void *arg, const char *name,
										 const char *kind),
						   void *arg);
static void ch_list_columns(CtasCatalog *catalog, const char *schema,
							const char *table,
							void (*emit) (void *arg, const char *name,
										  const char *type, bool nullable),
							void *arg);
static void ch_resolve(CtasCatalog *catalog,
					   void (*emit) (void *arg, const char *object,
									 const char *action),
					   void *arg);

const CtasTargetRoutine CtasClickHouseTarget = {
	.type_name = "clickhouse",
	.commit_order = 1,
	.map_column = ch_map_column,
	.check_options = ch_check_options,
	.explain = ch_explain,
	.begin_load = ch_begin_load,
	.put_row = ch_put_row,
	.end_load = ch_end_load,
	.drop_table = ch_drop_table,
	.pre_commit = ch_pre_commit,
	.post_commit = ch_post_commit,
	.abort = ch_abort,
	.subxact = ch_subxact,
	.list_tables = ch_list_tables,
	.list_columns = ch_list_columns,
	.resolve = ch_resolve,
};


/* ------------------------------------------------------------------------
 * Quoting and small results
 * ------------------------------------------------------------------------
 */

/* Append a backquoted identifier: `a\`b` */
static void
ch_append_ident(StringInfo buf, const char *s)
{
	appendStringInfoChar(buf, '`');
	for (; *s; s++)
	{
		if (*s == '`' || *s == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *s);
	}
	appendStringInfoChar(buf, '`');
}

/* Append a single-quoted literal: 'it\'s' */
static void
ch_append_literal(StringInfo buf, const char *s)
{
	appendStringInfoChar(buf, '\'');
	for (; *s; s++)
	{
		if (*s == '\'' || *s == '\\')
			appendStringInfoChar(buf, '\\');
		appendStringInfoChar(buf, *s);
	}
	appendStringInfoChar(buf, '\'');
}

/* `db`.`table`, palloc'd */
static char *
ch_qname(const char *db, const char *table)
{
	StringInfoData buf;

	initStringInfo(&buf);
	ch_append_ident(&buf, db);
	appendStringInfoChar(&buf, '.');
	ch_append_ident(&buf, table);
	return buf.data;
}

/* 'literal', palloc'd */
static char *
ch_lit(const char *s)
{
	StringInfoData buf;

	initStringInfo(&buf);
	ch_append_literal(&buf, s);
	return buf.data;
}

/* db.table for messages, palloc'd */
static char *
ch_display(const char *db, const char *table)
{
	return psprintf("%s.%s", db, table);
}

/*
 * ch_tsv
 *		Split a TabSeparated result into a List (rows) of char ** (fields,
 *		unescaped; \N becomes NULL).  *nfields gets the field count of the
 *		rows, or -1 when they do not all have the same count (then no row
 *		may be read beyond its first field).  Palloc'd.
 */
static List *
ch_tsv(const char *body, int *nfields)
{
	List	   *rows = NIL;
	const char *p = body;

	*nfields = 0;
	while (*p)
	{
		List	   *fields = NIL;
		char	  **arr;
		int			n;
		int			i;
		ListCell   *lc;

		for (;;)
		{
			StringInfoData f;
			bool		isnull = false;

			initStringInfo(&f);
			if (p[0] == '\\' && p[1] == 'N' && (p[2] == '\t' || p[2] == '\n' || p[2] == '\0'))
			{
				isnull = true;
				p += 2;
			}
			while (*p && *p != '\t' && *p != '\n')
			{
				if (*p == '\\' && p[1])
				{
					p++;
					switch (*p)
					{
						case 'n':
							appendStringInfoChar(&f, '\n');
							break;
						case 't':
							appendStringInfoChar(&f, '\t');
							break;
						case 'r':
							appendStringInfoChar(&f, '\r');
							break;
						case 'b':
							appendStringInfoChar(&f, '\b');
							break;
						case 'f':
							appendStringInfoChar(&f, '\f');
							break;
						case '0':
							appendStringInfoChar(&f, '?');	/* NUL: never ours */
							break;
						default:
							appendStringInfoChar(&f, *p);
							break;
					}
					p++;
				}
				else
					appendStringInfoChar(&f, *p++);
			}
			fields = lappend(fields, isnull ? NULL : f.data);
			if (*p == '\t')
			{
				p++;
				continue;
			}
			if (*p == '\n')
				p++;
			break;
		}
		n = list_length(fields);
		arr = palloc(sizeof(char *) * n);
		i = 0;
		foreach(lc, fields)
			arr[i++] = lfirst(lc);
		if (rows == NIL)
			*nfields = n;
		else if (n != *nfields)
			*nfields = -1;
		rows = lappend(rows, arr);
	}
	return rows;
}

/* The single number a query like SELECT count() returns */
static uint64
ch_parse_count(CtasHttp *http, const char *body, const char *what)
{
	char	   *end;
	uint64		v;

	errno = 0;
	v = strtou64(body, &end, 10);
	if (errno != 0 || end == body || (*end != '\n' && *end != '\0'))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("unexpected answer from ClickHouse catalog \"%s\" to %s",
						CtasHttpCatalogName(http), what),
				 errdetail_internal("The answer was \"%.100s\".", body)));
	return v;
}

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

static void
ch_skip_ws(const char **p)
{
	while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r')
		(*p)++;
}

/* a quoted ClickHouse string literal at *p, unescaped; NULL if malformed */
static char *
ch_parse_string(const char **p)
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

	ch_skip_ws(&s);
	if (*s == '-')
	{
		neg = true;
		s++;
	}
	if (*s < '0' || *s > '9')
		return false;
	while (*s >= '0' && *s <= '9' && v < 100000000)
		v = v * 10 + (*s++ - '0');
	ch_skip_ws(&s);
	*out = (int) (neg ? -v : v);
	*p = s;
	return true;
}

static bool
ch_expect(const char **p, char c)
{
	ch_skip_ws(p);
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
	ch_skip_ws(&s);
	start = s;
	while ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		   (*s >= '0' && *s <= '9') || *s == '_')
		s++;
	if (s == start)
		return NULL;
	name = pnstrdup(start, s - start);
	ch_skip_ws(&s);

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

			ch_skip_ws(&s);
			ename = ch_parse_string(&s);
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
			ch_skip_ws(&s);
			t->tz = ch_parse_string(&s);
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
static ChType *
ch_parse_type(const char *text, bool *too_deep)
{
	const char *p = text;
	ChType	   *t;

	*too_deep = false;
	t = ch_parse_type_at(&p, 0, too_deep);

	if (t == NULL)
		return NULL;
	ch_skip_ws(&p);
	return *p == '\0' ? t : NULL;
}

/* Append the canonical DDL text of t */
static void
ch_append_type(StringInfo buf, const ChType *t)
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
			ch_append_type(buf, t->elem);
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
				ch_append_literal(buf, t->tz);
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
				ch_append_literal(buf, t->enum_names[i]);
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

static char *
ch_type_text(const ChType *t)
{
	StringInfoData buf;

	initStringInfo(&buf);
	ch_append_type(&buf, t);
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

static bool
ch_is_key(CtasLoad *load, const CtasColumn *col)
{
	return col->is_key ||
		ch_expr_mentions(load->opts.order_by, col->name) ||
		ch_expr_mentions(load->opts.partition_by, col->name);
}

/*
 * ch_map_column
 *		map_column of the writer: the type map of the README, with
 *		Nullable(T) for every column that is not a key column (ClickHouse
 *		does not allow Nullable keys; a NULL there is an error at load) and
 *		not an array (ClickHouse has no Nullable arrays).
 */
static void
ch_map_column(CtasLoad *load, CtasColumn *col)
{
	char	   *type = ch_map_base(col->basetypid, col->basetypmod, col->name);

	if (type == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of type %s cannot be mapped to a ClickHouse type",
						col->name, format_type_be(col->typid)),
				 errhint("Choose the remote type with WITH (column_types = '%s String').",
						 quote_identifier(col->name))));

	if (!ch_is_key(load, col) && strncmp(type, "Array(", 6) != 0)
		type = psprintf("Nullable(%s)", type);
	col->remote_type = pstrdup(type);
	col->binary_ok = false;
}

/* ------------------------------------------------------------------------
 * Options and DDL
 * ------------------------------------------------------------------------
 */

/*
 * ch_expr_reaches_out
 *		Does the expression expr (balanced, see ch_check_expr) read anything
 *		but the row: a subquery (SELECT, which also brings table functions:
 *		url(), file(), remote()...), an IN operator (x IN db.table reads a
 *		table), or a function that reads a dictionary or another table?
 *		ClickHouse evaluates a partition key at each INSERT and shows the
 *		values it cannot convert in its error, so any of these would let a
 *		user of a shared mapping read, in an error message, what the
 *		mapping's ClickHouse user may read, or reach hosts from the
 *		ClickHouse server.  Returns what was found, for an errdetail, or
 *		NULL.
 */
static const char *const ch_reaching_functions[] = {
	"in", "notin", "nullin", "notnullin", "globalin", "globalnotin",
	"globalnullin", "globalnotnullin", "hascolumnintable",
	NULL
};

static const char *
ch_expr_reaches_out(const char *expr)
{
	const char *p = expr;

	while (*p)
	{
		char		word[NAMEDATALEN];
		bool		quoted = false;
		int			len = 0;
		const char *after;

		if (*p == '\'')
		{
			for (p++; *p && *p != '\''; p++)
			{
				if (*p == '\\' && p[1])
					p++;
			}
			if (*p)
				p++;
			continue;
		}
		if (*p == '`' || *p == '"')
		{
			char		q = *p;

			quoted = true;
			for (p++; *p && *p != q; p++)
			{
				if (*p == '\\' && p[1])
					p++;
				if (len < NAMEDATALEN - 1)
					word[len++] = pg_ascii_tolower((unsigned char) *p);
			}
			if (*p)
				p++;
		}
		else if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
				 *p == '_')
		{
			while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
				   (*p >= '0' && *p <= '9') || *p == '_')
			{
				if (len < NAMEDATALEN - 1)
					word[len++] = pg_ascii_tolower((unsigned char) *p);
				p++;
			}
		}
		else
		{
			/* a number's letters (1e5, 0x1F) are no word */
			if (*p >= '0' && *p <= '9')
			{
				while ((*p >= '0' && *p <= '9') || *p == '.' ||
					   (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))
					p++;
			}
			else
				p++;
			continue;
		}
		word[len] = '\0';

		if (!quoted && strcmp(word, "select") == 0)
			return "a subquery";
		if (!quoted && (strcmp(word, "in") == 0 || strcmp(word, "global") == 0))
			return "an IN operator, which can read another table";
		after = p + strspn(p, " \t\r\n");
		if (*after == '(')
		{
			const char *const *f;

			for (f = ch_reaching_functions; *f; f++)
			{
				if (strcmp(word, *f) == 0)
					break;
			}
			if (*f || strncmp(word, "dict", 4) == 0 ||
				strncmp(word, "join", 4) == 0)
				return psprintf("a call of function \"%s\", which can read another table or dictionary",
								word);
		}
	}
	return NULL;
}

/*
 * ch_check_expr
 *		A table option is a ClickHouse expression that goes into our DDL as
 *		written.  Refuse what could end the statement or hide the rest of
 *		it: a semicolon, a comment, an unbalanced bracket or quote; what
 *		could crash the server: brackets nested deeper than
 *		CH_MAX_EXPR_DEPTH; and what reads beyond the row
 *		(ch_expr_reaches_out).
 */
static void
ch_check_expr(const char *option, const char *value)
{
	const char *p;
	int			depth = 0;
	const char *why = NULL;

	if (value == NULL)
		return;
	for (p = value; *p && why == NULL; p++)
	{
		switch (*p)
		{
			case '\'':
			case '"':
			case '`':
				{
					char		q = *p;

					for (p++; *p && *p != q; p++)
					{
						if (*p == '\\' && p[1])
							p++;
					}
					if (*p == '\0')
					{
						why = "an unterminated quote";
						p--;
					}
					break;
				}
			case '(':
			case '[':
				if (++depth > CH_MAX_EXPR_DEPTH)
					why = psprintf("brackets nested more than %d deep",
								   CH_MAX_EXPR_DEPTH);
				break;
			case ')':
			case ']':
				if (--depth < 0)
					why = "an unbalanced bracket";
				break;
			case ';':
				why = "a semicolon";
				break;
			case '-':
				if (p[1] == '-')
					why = "a comment";
				break;
			case '/':
				if (p[1] == '*')
					why = "a comment";
				break;
			case '#':
				why = "a comment";
				break;
			default:
				break;
		}
	}
	if (why == NULL && depth != 0)
		why = "an unbalanced bracket";
	if (why == NULL && value[strspn(value, " \t\r\n")] == '\0')
		why = "nothing";
	if (why == NULL)
		why = ch_expr_reaches_out(value);
	if (why)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
				 errdetail("The value contains %s.", why)));
}

/*
 * Engines a CTAS may create: tables that keep their own rows.  An engine
 * that writes elsewhere or reads other tables (Buffer, Distributed, Merge,
 * File, URL, Replicated*, ...) would let a user of a shared user mapping
 * reach other data, and would break the staging protocol.
 */
static const char *const ch_allowed_engines[] = {
	"MergeTree", "ReplacingMergeTree", "SummingMergeTree",
	"AggregatingMergeTree", "CollapsingMergeTree",
	"VersionedCollapsingMergeTree", "Memory", "Log", "TinyLog", "StripeLog",
	NULL
};

/*
 * ch_check_engine
 *		engine must be an allowed engine name, optionally with arguments
 *		made of column names, numbers, commas and brackets only (the old
 *		MergeTree(date, key, 8192) syntax, ReplacingMergeTree(ver), ...).
 */
static void
ch_check_engine(const char *engine)
{
	const char *const *e;
	const char *p = engine;
	size_t		len;

	while (*p == ' ')
		p++;
	len = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
	for (e = ch_allowed_engines; *e; e++)
	{
		if (strlen(*e) == len && strncmp(*e, p, len) == 0)
			break;
	}
	if (*e == NULL ||
		p[len + strspn(p + len,
					   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_,() ")] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for option \"engine\": \"%s\"", engine),
				 errdetail("A table created by ctas_fed must use one of the engines MergeTree, ReplacingMergeTree, SummingMergeTree, AggregatingMergeTree, CollapsingMergeTree, VersionedCollapsingMergeTree, Memory, Log, TinyLog or StripeLog, with column names and numbers as arguments.")));
}

/*
 * ch_check_settings
 *		settings must be "name = number" or "name = 'literal'" pairs.
 */
static void
ch_check_settings(const char *settings)
{
	const char *p = settings;

	for (;;)
	{
		size_t		n;
		const char *name;
		size_t		namelen;

		p += strspn(p, " ");
		n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
		if (n == 0)
			break;
		name = p;
		namelen = n;
		p += n;
		p += strspn(p, " ");
		if (*p++ != '=')
			break;
		p += strspn(p, " ");
		if (*p == '\'')
		{
			for (p++; *p && *p != '\''; p++)
			{
				if (*p == '\\' && p[1])
					p++;
			}
			if (*p++ != '\'')
				break;
		}
		else
		{
			n = strspn(p, "0123456789.");
			if (n == 0)
				break;

			/*
			 * ClickHouse 18.16 loops for ever inserting into a table whose
			 * index_granularity is 0 (or wraps around to 0): the INSERT
			 * never ends, and the table cannot be dropped.
			 */
			if (namelen == strlen("index_granularity") &&
				strncmp(name, "index_granularity", namelen) == 0 &&
				(strspn(p, "0123456789") != n || n > 8 ||
				 strtol(p, NULL, 10) < 1 || strtol(p, NULL, 10) > 16777216))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("invalid value for option \"settings\": \"%s\"", settings),
						 errdetail("index_granularity must be an integer from 1 to 16777216.")));
			p += n;
		}
		p += strspn(p, " ");
		if (*p == '\0')
			return;
		if (*p++ != ',')
			break;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for option \"settings\": \"%s\"", settings),
			 errdetail("Write table settings as name = number or name = 'text' pairs separated by commas.")));
}

static void
ch_check_options(CtasLoad *load)
{
	CtasOptions *o = &load->opts;

	ch_check_expr("engine", o->engine);
	ch_check_expr("order_by", o->order_by);
	ch_check_expr("partition_by", o->partition_by);
	ch_check_expr("settings", o->settings);
	if (o->engine)
		ch_check_engine(o->engine);
	if (o->settings)
		ch_check_settings(o->settings);

	if (!o->atomic && o->if_exists == CTAS_IF_EXISTS_REPLACE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option if_exists = 'replace' needs atomic = true"),
				 errdetail("A streaming load cannot replace a table: the old one would be gone before the new one is complete.")));
}

/* The engine name of an ENGINE expression: "ReplacingMergeTree(ver)" */
static char *
ch_engine_name(const char *engine)
{
	const char *p = engine;
	const char *start;

	ch_skip_ws(&p);
	start = p;
	while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		   (*p >= '0' && *p <= '9') || *p == '_')
		p++;
	return pnstrdup(start, p - start);
}

static bool
ch_is_mergetree(const char *engine_name)
{
	size_t		len = strlen(engine_name);

	return len >= 9 && strcmp(engine_name + len - 9, "MergeTree") == 0;
}

/*
 * ch_create_sql
 *		CREATE TABLE db.name (...) ENGINE = ... for the statement's columns
 *		and table options.  MergeTree engines get ORDER BY tuple() unless
 *		order_by or primary_key says otherwise.  Palloc'd.
 */
static char *
ch_create_sql(CtasLoad *load, ChColumn *cols, const char *db,
			  const char *name)
{
	CtasOptions *o = &load->opts;
	StringInfoData buf;
	const char *engine = o->engine ? o->engine : "MergeTree";
	bool		mergetree = ch_is_mergetree(ch_engine_name(engine));
	StringInfoData pk;
	ListCell   *lc;
	int			i;

	initStringInfo(&pk);
	foreach(lc, o->primary_key)
	{
		if (pk.len > 0)
			appendStringInfoString(&pk, ", ");
		ch_append_ident(&pk, strVal(lfirst(lc)));
	}

	initStringInfo(&buf);
	appendStringInfo(&buf, "CREATE TABLE %s (", ch_qname(db, name));
	for (i = 0; i < load->ncolumns; i++)
	{
		if (i > 0)
			appendStringInfoString(&buf, ", ");
		ch_append_ident(&buf, load->columns[i].name);
		appendStringInfoChar(&buf, ' ');
		ch_append_type(&buf, cols[i].enc.type);
	}
	appendStringInfo(&buf, ") ENGINE = %s", engine);
	if (o->partition_by)
		appendStringInfo(&buf, " PARTITION BY %s", o->partition_by);
	if (o->order_by)
		appendStringInfo(&buf, " ORDER BY %s", o->order_by);
	else if (mergetree && pk.len > 0)
		appendStringInfo(&buf, " ORDER BY (%s)", pk.data);
	else if (mergetree)
		appendStringInfoString(&buf, " ORDER BY tuple()");
	if (pk.len > 0)
		appendStringInfo(&buf, " PRIMARY KEY (%s)", pk.data);
	if (o->settings)
		appendStringInfo(&buf, " SETTINGS %s", o->settings);
	return buf.data;
}

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
							ch_type_text(col->enc.type)),
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
						col->name, format_type_be(typid), ch_type_text(t)),
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
 * ch_setup_columns
 *		The encoders of the statement's columns into the ClickHouse types
 *		types[i] (parsed), in load->cxt.  ERROR naming the column when a
 *		type is not one we can write.
 */
static ChColumn *
ch_setup_columns(CtasLoad *load, char **types)
{
	ChColumn   *cols = MemoryContextAllocZero(load->cxt,
											  sizeof(ChColumn) * load->ncolumns);
	MemoryContext old = MemoryContextSwitchTo(load->cxt);
	int			i;

	for (i = 0; i < load->ncolumns; i++)
	{
		CtasColumn *c = &load->columns[i];
		bool		too_deep;
		ChType	   *t = ch_parse_type(types[i], &too_deep);

		cols[i].name = c->name;
		cols[i].key = ch_is_key(load, c);
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
					ch_value_text(e, v), e->col->name, ch_type_text(e->type)),
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
								ch_type_text(t), t->precision, t->scale));
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
								e->col->name, ch_type_text(e->type))));
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
							e->col->name, ch_type_text(e->type))));
		}
	}
	if (secs < 0 || secs > max_secs)
		ch_range_error(e, orig, ERRCODE_DATETIME_VALUE_OUT_OF_RANGE,
					   "ClickHouse DateTime holds 1970-01-01 00:00:00 to 2105-12-31 23:59:59 UTC.");
	ch_put_le(buf, (uint64) secs, 4);
}

static void ch_put_value(ChEnc *e, StringInfo buf, Datum v, bool isnull);

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
		ch_put_value(e->elem, buf, elems[i], nulls[i]);
}

/*
 * ch_put_value
 *		Append the RowBinary encoding of one value.  ERROR naming the column
 *		(and the value) when it cannot arrive exactly.
 */
static void
ch_put_value(ChEnc *e, StringInfo buf, Datum v, bool isnull)
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
						e->col->name, ch_type_text(t)),
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

/* ------------------------------------------------------------------------
 * Transaction state and remote steps
 * ------------------------------------------------------------------------
 */

/*
 * ch_check_version
 *		Read the server version (once per client) and choose features from
 *		it.  Servers older than the oldest we know to work are refused:
 *		18.14 has the RowBinary, Decimal, KILL QUERY ... SYNC and ATTACH
 *		PARTITION ... FROM we rely on.  Before 19.1, LowCardinality columns
 *		need allow_experimental_low_cardinality_type (later servers reject
 *		that setting as unknown).
 *
 * XXX: 18.16 has neither EXCHANGE TABLES nor DateTime64 nor Atomic
 * databases; a newer server could get an atomic swap for 'replace' and
 * exact timestamps, chosen here, once tests run against one.
 */
static void
ch_check_version(CtasHttp *http)
{
	const CtasHttpVersion *v;
	bool		known = CtasHttpServerVersionKnown(http);

	v = CtasHttpServerVersion(http);
	if (known)
		return;
	if (!CtasHttpVersionAtLeast(http, 18, 14))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("ClickHouse catalog \"%s\" runs version %s, but ctas_fed needs 18.14 or later",
						CtasHttpCatalogName(http), v->text)));
	if (!CtasHttpVersionAtLeast(http, 19, 1))
		CtasHttpAddSetting(http, "allow_experimental_low_cardinality_type", "1");
}

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
 * back with ch_tsv).  The first line is
 *		ctas_fed clickhouse	1	<full xid>	<database oid>	<server oid>
 *		<user mapping oid>	<gid>
 * and each action is
 *		<kind>	<database>	<table>	<stage>	<old>	<marker>
 * with \N for a name the action does not have.  The last line is
 *		crc32c	<CRC-32C of every byte before this line, 8 hex digits>
 * A record that does not end so, or whose lines do not have these fields,
 * is damaged (a disk, a copy or a hand went wrong): the resolver does not
 * act on a part of a transaction, nor on names it cannot trust, and keeps
 * the file, with a WARNING, for someone to look at.
 * ------------------------------------------------------------------------
 */

#define CH_RECORD_DIR		"pg_ctas_fed"
#define CH_RECORD_MAGIC		"ctas_fed clickhouse"
#define CH_RECORD_VERSION	"1"
#define CH_RECORD_MAX_SIZE	(64 * 1024 * 1024)

/* by ChActionKind */
static const char *const ch_action_names[] = {
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
static pg_crc32c
ch_record_crc(const char *data, size_t len)
{
	pg_crc32c	crc;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, len);
	FIN_CRC32C(crc);
	return crc;
}

/*
 * ch_gid
 *		What ctas_fed.jobs and the resolver call this participant's remote
 *		work: db.name of the first action's marker, old or staging table.
 *		NULL without actions.  Palloc'd.
 */
static char *
ch_gid(ChXact *xs)
{
	ChAction   *first;

	if (xs->actions == NIL)
		return NULL;
	first = linitial(xs->actions);
	return ch_display(first->db,
					  first->marker ? first->marker :
					  first->old ? first->old : first->stage);
}

/*
 * ch_record_release
 *		Close the record's descriptor, which drops its lock.  A reset
 *		callback of the participant's context as well; never fails.
 */
static void
ch_record_release(void *arg)
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
 * ch_record_write
 *		Write the durable record of part (see above) with the actions of
 *		xs as they are now.  ERROR on an I/O failure, before any remote
 *		effect of the newest action.
 */
static void
ch_record_write(CtasParticipant *part, ChXact *xs)
{
	StringInfoData buf;
	char		tmp[MAXPGPATH];
	char	   *gid = ch_gid(xs);
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

		ch_record_field(&buf, ch_action_names[a->kind], false);
		ch_record_field(&buf, a->db, false);
		ch_record_field(&buf, a->table, false);
		ch_record_field(&buf, a->stage, false);
		ch_record_field(&buf, a->old, false);
		ch_record_field(&buf, a->marker, true);
	}
	appendStringInfo(&buf, "crc32c\t%08X\n", ch_record_crc(buf.data, buf.len));

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
	ch_record_release(xs);
	xs->record_fd = fd;
	pfree(buf.data);
}

/*
 * ch_record_remove
 *		The transaction is finished or undone: remove its record.  A
 *		failure is a WARNING (the resolver then finds nothing left to do).
 */
static void
ch_record_remove(ChXact *xs)
{
	if (xs->record_path[0] != '\0')
		(void) durable_unlink(xs->record_path, WARNING);
	xs->record_path[0] = '\0';
	ch_record_release(xs);
}

/* The transaction state of part, created on first use */
static ChXact *
ch_xact(CtasParticipant *part)
{
	ChXact	   *xs = (ChXact *) part->private;

	if (xs == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(part->cxt);

		MemoryContextCallback *cb;

		xs = palloc0(sizeof(ChXact));
		xs->http = CtasHttpCreate(part->catalog, part->cxt);
		xs->record_fd = -1;
		cb = palloc(sizeof(MemoryContextCallback));
		cb->func = ch_record_release;
		cb->arg = xs;
		MemoryContextRegisterResetCallback(part->cxt, cb);
		part->private = xs;
		MemoryContextSwitchTo(old);
	}
	ch_check_version(xs->http);
	return xs;
}

/*
 * ch_remote_exists
 *		Does db.table exist on the server?  ERROR when the database does not
 *		exist.  One round trip.
 */
static bool
ch_remote_exists(CtasHttp *http, const char *db, const char *table)
{
	char	   *sql;
	char	   *body;
	List	   *rows;
	int			nf;
	char	  **f;

	sql = psprintf("SELECT (SELECT count() FROM system.databases WHERE name = %s), "
				   "(SELECT count() FROM system.tables WHERE database = %s AND name = %s)",
				   ch_lit(db), ch_lit(db), ch_lit(table));
	body = CtasHttpQuery(http, sql, "check the target table");
	rows = ch_tsv(body, &nf);
	if (list_length(rows) != 1 || nf != 2)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("unexpected answer from ClickHouse catalog \"%s\" to a table check",
						CtasHttpCatalogName(http))));
	f = linitial(rows);
	if (strcmp(f[0], "0") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_SCHEMA_NAME),
				 errmsg("database \"%s\" does not exist in ClickHouse catalog \"%s\"",
						db, CtasHttpCatalogName(http))));
	return strcmp(f[1], "0") != 0;
}

/*
 * ch_logical_exists
 *		Does db.table exist as this transaction sees it: the latest action
 *		of this transaction on it decides, else the server.  *phys is the
 *		table that holds its current definition (a staging table when the
 *		table was created in this transaction).
 */
static bool
ch_logical_exists(CtasHttp *http, ChXact *xs, const char *db,
				  const char *table, char **phys)
{
	ListCell   *lc;
	ChAction   *last = NULL;

	*phys = pstrdup(table);
	if (xs)
	{
		foreach(lc, xs->actions)
		{
			ChAction   *a = lfirst(lc);

			if (strcmp(a->db, db) == 0 && strcmp(a->table, table) == 0)
				last = a;
		}
	}
	if (last == NULL)
		return ch_remote_exists(http, db, table);
	switch (last->kind)
	{
		case CH_CREATE:
		case CH_REPLACE:
			*phys = pstrdup(last->stage);
			return true;
		case CH_APPEND:
			*phys = pstrdup(last->source);
			return true;
		case CH_DROP:
			return false;
	}
	return false;
}

/*
 * ch_token
 *		Eight random hex digits, for the names of our scratch tables.  The
 *		rest of such a name (system identifier, xid, counter) can be
 *		guessed, and anyone who may create tables in the target database
 *		could create it first: our CREATE or RENAME would then fail, and
 *		undo would take the planted table for ours.  Palloc'd.
 */
static char *
ch_token(void)
{
	uint32		r;

	if (!pg_strong_random(&r, sizeof(r)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random name for a ClickHouse scratch table")));
	return psprintf("%08x", r);
}

/*
 * ch_new_action
 *		A new action, in part->cxt, at the current nesting level, with
 *		the names of its scratch tables: _ctas_fed_stage_<sysid>_<xid>_<n>_
 *		<token>, and _ctas_fed_{old,new,drop}_<sysid>_<xid>_<n>_<token>_
 *		<target> with a token of their own (the staging table can be seen
 *		in system.tables during the load; the others cannot be guessed
 *		from it).  Written to the durable record before it returns.
 */
static ChAction *
ch_new_action(CtasParticipant *part, ChXact *xs, ChActionKind kind,
			  const char *db, const char *table)
{
	MemoryContext old = MemoryContextSwitchTo(part->cxt);
	ChAction   *a = palloc0(sizeof(ChAction));
	char	   *base = NULL;

	a->kind = kind;
	a->db = pstrdup(db);
	a->table = pstrdup(table);
	a->level = GetCurrentTransactionNestLevel();
	if (kind != CH_DROP)
	{
		base = CtasScratchName("stage");
		a->stage = psprintf("%s_%s", base, ch_token());
		base += strlen("_ctas_fed_stage_");
	}
	/* names of the same action share its <sysid>_<xid>_<n> */
	if (kind == CH_REPLACE)
		a->old = psprintf("_ctas_fed_old_%s_%s_%s", base, ch_token(), table);
	else if (kind == CH_CREATE)
		a->marker = psprintf("_ctas_fed_new_%s_%s_%s", base, ch_token(), table);
	else if (kind == CH_DROP)
		a->old = psprintf("%s_%s_%s", CtasScratchName("drop"), ch_token(), table);
	xs->actions = lappend(xs->actions, a);
	MemoryContextSwitchTo(old);

	/* durable before the action's first remote effect */
	ch_record_write(part, xs);
	return a;
}

/* engine name of db.table on the server */
static char *
ch_remote_engine(CtasHttp *http, const char *db, const char *table)
{
	char	   *body;
	List	   *rows;
	int			nf;

	body = CtasHttpQuery(http,
						 psprintf("SELECT engine FROM system.tables WHERE database = %s AND name = %s",
								  ch_lit(db), ch_lit(table)),
						 "read the table engine");
	rows = ch_tsv(body, &nf);
	if (rows == NIL || nf != 1)
		return pstrdup("");
	return ((char **) linitial(rows))[0];
}

/*
 * ch_count_check_mode
 *		Can the rows of a table of this engine be counted right after the
 *		load?  1: yes; 2: yes, while merges are stopped (engines whose
 *		merges fold rows: Replacing, Summing, Collapsing...); 0: no (Null,
 *		Buffer, Distributed, ...).
 */
static int
ch_count_check_mode(const char *engine)
{
	if (strcmp(engine, "MergeTree") == 0 || strcmp(engine, "Log") == 0 ||
		strcmp(engine, "TinyLog") == 0 || strcmp(engine, "StripeLog") == 0 ||
		strcmp(engine, "Memory") == 0)
		return 1;
	if (ch_is_mergetree(engine) && strncmp(engine, "Replicated", 10) != 0)
		return 2;
	return 0;
}

static void ch_streaming_count(void *arg);

static void
ch_stream_open(ChLoad *cl)
{
	CtasLoad   *load = cl->load;

	/*
	 * Each stream (one per block in streaming mode) lives in a context of
	 * its own, deleted when it is done: its 1 MB buffer and curl handles
	 * do not pile up over the blocks of a long load.
	 */
	cl->stream_cxt = AllocSetContextCreate(load->cxt, "ctas_fed ClickHouse stream",
										   ALLOCSET_DEFAULT_SIZES);
	cl->stream = CtasHttpStreamOpen(cl->http, cl->insert_sql, "insert rows",
									cl->stream_cxt);
	cl->block_rows = 0;
	if (cl->streaming)
		CtasHttpStreamOnFailure(cl->stream, ch_streaming_count, cl);
	if (cl->xs)
	{
		ChXact	   *xs = cl->xs;

		CtasHttpStreamWatch(cl->stream, &xs->stream);
		xs->stream_qid = MemoryContextStrdup(GetMemoryChunkContext(xs),
											 CtasHttpStreamQueryId(cl->stream));
		xs->stream_level = GetCurrentTransactionNestLevel();
	}
}

static void
ch_stream_done(ChLoad *cl)
{
	CtasHttpStreamFinish(cl->stream);
	cl->stream = NULL;
	if (cl->xs)
	{
		cl->xs->stream = NULL;
		if (cl->xs->stream_qid)
			pfree(cl->xs->stream_qid);
		cl->xs->stream_qid = NULL;
	}
	MemoryContextDelete(cl->stream_cxt);
	cl->stream_cxt = NULL;
}

/*
 * ch_begin_load
 *		begin_load of the writer: check the name, create the staging table
 *		(atomic) or the target (streaming), open the INSERT.
 */
static void
ch_begin_load(CtasLoad *load)
{
	ChLoad	   *cl = palloc0(sizeof(ChLoad));
	const char *db = load->schema;
	const char *table = load->table;
	char	   *phys;
	bool		exists;
	ChActionKind kind = CH_CREATE;
	char	  **types;
	StringInfoData sql;
	int			i;

	load->private = cl;
	load->format = "RowBinary";
	cl->load = load;
	cl->db = pstrdup(db);
	cl->streaming = !load->opts.atomic;

	if (load->part)
	{
		cl->xs = ch_xact(load->part);
		cl->http = cl->xs->http;
	}
	else
	{
		cl->http = CtasHttpCreate(load->catalog, load->cxt);
		ch_check_version(cl->http);
	}

	/* 1. the name, before anything moves */
	if (strncmp(table, "_ctas_fed_", strlen("_ctas_fed_")) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_RESERVED_NAME),
				 errmsg("table name \"%s\" is reserved", table),
				 errdetail("Names beginning with \"_ctas_fed_\" are kept for the scratch tables of ctas_fed.")));
	exists = ch_logical_exists(cl->http, cl->xs, db, table, &phys);
	if (exists)
	{
		switch (load->opts.if_exists)
		{
			case CTAS_IF_EXISTS_ERROR:
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_TABLE),
						 errmsg("table \"%s\" already exists in catalog \"%s\"",
								ch_display(db, table), load->catalog->name),
						 errhint("Use WITH (if_exists = 'replace') or WITH (if_exists = 'append'), or CREATE TABLE IF NOT EXISTS.")));
				break;
			case CTAS_IF_EXISTS_SKIP:
				ereport(NOTICE,
						(errcode(ERRCODE_DUPLICATE_TABLE),
						 errmsg("table \"%s\" already exists in catalog \"%s\", skipping",
								ch_display(db, table), load->catalog->name)));
				load->skipped = true;
				return;
			case CTAS_IF_EXISTS_REPLACE:
				kind = CH_REPLACE;
				break;
			case CTAS_IF_EXISTS_APPEND:
				kind = CH_APPEND;
				break;
		}
	}

	/* 2. the remote types: the target's when appending, else ours */
	types = palloc(sizeof(char *) * load->ncolumns);
	if (kind == CH_APPEND)
	{
		char	   *body;
		List	   *rows;
		int			nf;
		ListCell   *lc;

		body = CtasHttpQuery(cl->http,
							 psprintf("SELECT name, type FROM system.columns WHERE database = %s AND table = %s",
									  ch_lit(db), ch_lit(phys)),
							 "read the columns of the target table");
		rows = ch_tsv(body, &nf);
		for (i = 0; i < load->ncolumns; i++)
		{
			types[i] = NULL;
			foreach(lc, rows)
			{
				char	  **f = lfirst(lc);

				if (nf == 2 && f[0] && strcmp(f[0], load->columns[i].name) == 0)
					types[i] = f[1];
			}
			if (types[i] == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("column \"%s\" does not exist in table \"%s\" of catalog \"%s\"",
								load->columns[i].name, ch_display(db, table),
								load->catalog->name),
						 errdetail("Rows are appended by column name.")));
		}
	}
	else
	{
		for (i = 0; i < load->ncolumns; i++)
			types[i] = load->columns[i].remote_type;
	}
	cl->ncols = load->ncolumns;
	cl->cols = ch_setup_columns(load, types);

	/* 3. the table the rows go into */
	if (cl->streaming)
	{
		cl->insert_table = pstrdup(table);
		if (kind == CH_CREATE)
		{
			CtasHttpQuery(cl->http, ch_create_sql(load, cl->cols, db, table),
						  "create the table");
			cl->engine = ch_engine_name(load->opts.engine ? load->opts.engine : "MergeTree");
		}
		else
		{
			cl->count_before = ch_parse_count(cl->http,
											  CtasHttpQuery(cl->http,
															psprintf("SELECT count() FROM %s", ch_qname(db, table)),
															"count the rows of the target table"),
											  "SELECT count()");
		}
	}
	else
	{
		ChAction   *a = ch_new_action(load->part, cl->xs, kind, db, table);

		cl->action = a;
		cl->insert_table = pstrdup(a->stage);
		/* the action is recorded first: abort drops the stage if needed */
		if (kind == CH_APPEND)
		{
			char	   *engine = ch_remote_engine(cl->http, db, phys);
			char	   *create;

			a->source = MemoryContextStrdup(load->part->cxt, phys);

			/*
			 * A copy of a Buffer, Distributed, Merge, View ... table would
			 * write to (and read from) the underlying data at once: no
			 * staging possible.
			 */
			if (ch_count_check_mode(engine) == 0 &&
				!(strncmp(engine, "Replicated", 10) == 0 &&
				  ch_is_mergetree(engine)))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot append atomically to %s, a table of engine %s",
								ch_display(db, table), engine),
						 errhint("Append to the table that holds the rows, or use atomic = false.")));
			if (strncmp(engine, "Replicated", 10) == 0)
			{
				/* a copy would share the replica path: stage as MergeTree */
				create = psprintf("CREATE TABLE %s AS %s ENGINE = MergeTree ORDER BY tuple()",
								  ch_qname(db, a->stage), ch_qname(db, phys));
				cl->engine = pstrdup("MergeTree");
			}
			else
			{
				create = psprintf("CREATE TABLE %s AS %s",
								  ch_qname(db, a->stage), ch_qname(db, phys));
				cl->engine = engine;
			}
			CtasHttpQuery(cl->http, create, "create the staging table");
		}
		else
		{
			CtasHttpQuery(cl->http, ch_create_sql(load, cl->cols, db, a->stage),
						  "create the staging table");
			cl->engine = ch_engine_name(load->opts.engine ? load->opts.engine : "MergeTree");
		}
		if (ch_count_check_mode(cl->engine) == 2)
			CtasHttpQuery(cl->http,
						  psprintf("SYSTEM STOP MERGES %s", ch_qname(db, a->stage)),
						  "stop merges on the staging table");
	}

	/* 4. the row stream */
	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (", ch_qname(db, cl->insert_table));
	for (i = 0; i < load->ncolumns; i++)
	{
		if (i > 0)
			appendStringInfoString(&sql, ", ");
		ch_append_ident(&sql, load->columns[i].name);
	}
	appendStringInfoString(&sql, ") FORMAT RowBinary");
	cl->insert_sql = sql.data;

	if (!load->skip_data)
		ch_stream_open(cl);
}

/*
 * ch_streaming_count
 *		Streaming mode, after a failed INSERT: ask the server how many rows
 *		the table holds now (a dropped connection keeps what arrived), so
 *		that the error says what stays.  Never raises an ERROR.
 */
static void
ch_streaming_count(void *arg)
{
	ChLoad	   *cl = (ChLoad *) arg;
	char	   *body;

	if (CtasHttpTryQuery(cl->http,
						 psprintf("SELECT count() FROM %s",
								  ch_qname(cl->db, cl->insert_table)),
						 "count the rows of the table", CTAS_HTTP_CLEANUP,
						 &body, NULL) && body != NULL)
	{
		uint64		n = strtou64(body, NULL, 10);

		cl->load->rows_committed = n >= cl->count_before ? n - cl->count_before : 0;
	}
}

/* Flush or finish the stream; in streaming mode, keep rows_committed true */
static void
ch_stream_step(ChLoad *cl, bool finish)
{
	if (finish)
		ch_stream_done(cl);
	else
		CtasHttpStreamFlush(cl->stream);
	if (cl->streaming)
		cl->load->rows_committed = cl->rows;
}

/*
 * ch_put_row
 *		put_row of the writer: encode one row into the stream's buffer.
 */
static void
ch_put_row(CtasLoad *load, TupleTableSlot *slot)
{
	ChLoad	   *cl = (ChLoad *) load->private;
	StringInfo	buf = CtasHttpStreamBuffer(cl->stream);
	int			before = buf->len;
	int			i;

	slot_getallattrs(slot);
	for (i = 0; i < cl->ncols; i++)
		ch_put_value(&cl->cols[i].enc, buf, slot->tts_values[i],
					 slot->tts_isnull[i]);
	load->bytes += buf->len - before;
	cl->rows++;
	cl->block_rows++;

	if (cl->streaming && cl->block_rows >= (uint64) load->opts.commit_every)
	{
		ch_stream_step(cl, true);
		ch_stream_open(cl);
	}
	else if (buf->len >= CTAS_HTTP_STREAM_CHUNK)
	{
		/* what the socket took is kept when the connection drops */
		ch_stream_step(cl, false);
	}
}

/*
 * ch_end_load
 *		end_load of the writer: finish the INSERT and, in atomic mode,
 *		check that the staging table holds exactly the rows sent.
 */
static void
ch_end_load(CtasLoad *load)
{
	ChLoad	   *cl = (ChLoad *) load->private;
	uint64		n;

	if (cl == NULL || load->skipped)
		return;
	if (cl->stream)
		ch_stream_step(cl, true);
	if (cl->streaming)
		return;

	if (ch_count_check_mode(cl->engine) != 0)
	{
		n = ch_parse_count(cl->http,
						   CtasHttpQuery(cl->http,
										 psprintf("SELECT count() FROM %s",
												  ch_qname(cl->db, cl->insert_table)),
										 "count the rows of the staging table"),
						   "SELECT count()");
		if (n != cl->rows)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_ERROR),
					 errmsg("staging table of \"%s\" in catalog \"%s\" holds " UINT64_FORMAT " rows, but " UINT64_FORMAT " were sent",
							ch_display(cl->db, load->table), load->catalog->name,
							n, cl->rows)));
	}
	if (ch_count_check_mode(cl->engine) == 2)
		CtasHttpQuery(cl->http,
					  psprintf("SYSTEM START MERGES %s",
							   ch_qname(cl->db, cl->insert_table)),
					  "start merges on the staging table");
	cl->action->loaded = true;
	cl->action->rows = cl->rows;
}

/*
 * ch_drop_table
 *		drop_table of the writer: the table is renamed away at pre-commit
 *		and dropped after the local commit, so that an abort can put it
 *		back.
 */
static void
ch_drop_table(CtasLoad *load, bool missing_ok)
{
	ChXact	   *xs;
	char	   *phys;
	ChAction   *a;

	if (load->part == NULL)
		load->part = CtasJoinTransaction(load->catalog);
	xs = ch_xact(load->part);

	if (!ch_logical_exists(xs->http, xs, load->schema, load->table, &phys))
	{
		if (missing_ok)
		{
			ereport(NOTICE,
					(errmsg("table \"%s\" does not exist in catalog \"%s\", skipping",
							ch_display(load->schema, load->table),
							load->catalog->name)));
			return;
		}
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table \"%s\" does not exist in catalog \"%s\"",
						ch_display(load->schema, load->table),
						load->catalog->name)));
	}
	a = ch_new_action(load->part, xs, CH_DROP, load->schema, load->table);
	a->loaded = true;
}

/* ---- commit and abort ---- */

/* Did a ch_cleanup_query fail since the flag was last cleared? */
static bool ch_cleanup_failed = false;

/*
 * ch_cleanup_query
 *		Run sql on a commit/abort/resolve path; WARNING, ch_cleanup_failed
 *		and false on failure.  The answer goes to *result if result is not
 *		NULL.
 */
static bool
ch_cleanup_query_result(CtasHttp *http, const char *sql, const char *what,
						const char *object, char **result)
{
	char	   *answer;
	char	   *detail;

	if (CtasHttpTryQuery(http, sql, what, CTAS_HTTP_CLEANUP, &answer, &detail))
	{
		if (result)
			*result = answer;
		return true;
	}
	ch_cleanup_failed = true;
	ereport(WARNING,
			(errcode(ERRCODE_FDW_ERROR),
			 errmsg("could not %s \"%s\" on ClickHouse catalog \"%s\"",
					what, object, CtasHttpCatalogName(http)),
			 errdetail_internal("%s", detail ? detail : ""),
			 errhint("ctas_fed.resolve_in_doubt() cleans up what this leaves behind.")));
	return false;
}

static bool
ch_cleanup_query(CtasHttp *http, const char *sql, const char *what,
				 const char *object)
{
	return ch_cleanup_query_result(http, sql, what, object, NULL);
}

static bool
ch_cleanup_drop(CtasHttp *http, const char *db, const char *table,
				const char *what)
{
	return ch_cleanup_query(http,
							psprintf("DROP TABLE IF EXISTS %s", ch_qname(db, table)),
							what, ch_display(db, table));
}

/*
 * ch_tables_exist
 *		Which of the tables names[0..n-1] (NULL entries skipped) of db exist
 *		on the server now: exists[i].  One round trip; false (with a
 *		WARNING) when the server cannot be asked.
 */
static bool
ch_tables_exist(CtasHttp *http, const char *db, const char **names, int n,
				bool *exists)
{
	StringInfoData sql;
	char	   *body;
	List	   *rows;
	int			nf;
	ListCell   *lc;
	int			i;
	bool		any = false;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT name FROM system.tables WHERE database = %s AND name IN (",
					 ch_lit(db));
	for (i = 0; i < n; i++)
	{
		exists[i] = false;
		if (names[i] == NULL)
			continue;
		if (any)
			appendStringInfoString(&sql, ", ");
		ch_append_literal(&sql, names[i]);
		any = true;
	}
	appendStringInfoChar(&sql, ')');
	if (!any)
		return true;
	if (!ch_cleanup_query_result(http, sql.data,
								 "check the tables of the transaction in database",
								 db, &body))
		return false;
	rows = ch_tsv(body, &nf);
	if (rows != NIL && nf != 1)
	{
		ch_cleanup_failed = true;
		ereport(WARNING,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("unexpected answer from ClickHouse catalog \"%s\" to a list of tables",
						CtasHttpCatalogName(http))));
		return false;
	}
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		for (i = 0; i < n; i++)
		{
			if (f[0] && names[i] && strcmp(f[0], names[i]) == 0)
				exists[i] = true;
		}
	}
	return true;
}

static char *ch_rename_sql(const char *db, const char *from,
						   const char *to);

/*
 * ch_undo_checked
 *		Undo action a (CREATE, REPLACE or DROP) of an aborted transaction
 *		from what the server shows, not from what we believe we did: after
 *		a lost reply, or in the resolver after a crash, a rename may or may
 *		not have happened.  The names are the transaction's own (no one
 *		else makes tables called so), and each one's presence tells how
 *		far publication got:
 *
 *		- the marker (CREATE) or the old table (REPLACE) exists and the
 *		  staging table does not: the staging table was renamed to the
 *		  target, which is taken back;
 *		- the old table exists and the target does not: it is put back;
 *		- then the marker and the staging table are dropped.
 *
 *		Every step can be repeated after a failure or a crash.  Returns
 *		false, with a WARNING and *why set, when something is left.
 */
static bool
ch_undo_checked(CtasHttp *http, ChAction *a, char **why)
{
	const char *names[4];
	bool		ex[4];
	bool		target_ex,
				stage_ex,
				old_ex,
				marker_ex;

	*why = NULL;
	names[0] = a->table;
	names[1] = a->kind == CH_DROP ? NULL : a->stage;
	names[2] = a->old;
	names[3] = a->marker;
	if (!ch_tables_exist(http, a->db, names, 4, ex))
	{
		*why = psprintf("could not check the tables of \"%s\"",
						ch_display(a->db, a->table));
		return false;
	}
	target_ex = ex[0];
	stage_ex = ex[1];
	old_ex = ex[2];
	marker_ex = ex[3];

	/* take back the published table */
	if (a->kind != CH_DROP && (marker_ex || old_ex) && !stage_ex && target_ex)
	{
		if (!ch_cleanup_query(http, ch_rename_sql(a->db, a->table, a->stage),
							  "take back the published table",
							  ch_display(a->db, a->table)))
		{
			*why = psprintf("could not take back table \"%s\"",
							ch_display(a->db, a->table));
			return false;
		}
		target_ex = false;
		stage_ex = true;
	}
	/* put back the replaced or dropped table */
	if (old_ex)
	{
		if (target_ex)
		{
			*why = psprintf("table \"%s\" exists again; \"%s\" was left",
							ch_display(a->db, a->table),
							ch_display(a->db, a->old));
			ereport(WARNING,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("could not restore table \"%s\" of ClickHouse catalog \"%s\"",
							ch_display(a->db, a->table), CtasHttpCatalogName(http)),
					 errdetail("A table of that name exists again; the original is kept as \"%s\".",
							   ch_display(a->db, a->old))));
			return false;
		}
		if (!ch_cleanup_query(http, ch_rename_sql(a->db, a->old, a->table),
							  "restore the replaced table",
							  ch_display(a->db, a->old)))
		{
			*why = psprintf("could not restore table \"%s\"",
							ch_display(a->db, a->table));
			return false;
		}
	}
	/* the marker before the staging table: see the resolver */
	if (marker_ex &&
		!ch_cleanup_drop(http, a->db, a->marker, "drop the commit marker"))
	{
		*why = pstrdup("could not drop the commit marker");
		return false;
	}
	if (stage_ex &&
		!ch_cleanup_drop(http, a->db, a->stage, "drop the staging table"))
	{
		*why = pstrdup("could not drop the staging table");
		return false;
	}
	return true;
}

static char *
ch_rename_sql(const char *db, const char *from, const char *to)
{
	return psprintf("RENAME TABLE %s TO %s", ch_qname(db, from),
					ch_qname(db, to));
}

/*
 * ch_append_step
 *		Run one step of moving the staged rows into the target (an ATTACH
 *		PARTITION or an INSERT ... SELECT) that adds rows rows to it.  The
 *		statement is sent once.  When it fails, the server may still have
 *		run it (a reply lost after the work): with *count >= 0, the row
 *		count the target must have before the step, the target is counted
 *		again to find out.  If the rows arrived, that is success; if not,
 *		or if the count says neither, ERROR.  *count is advanced by rows.
 */
static void
ch_append_step(CtasHttp *http, ChAction *a, const char *sql, const char *what,
			   uint64 rows, int64 *count, int64 before)
{
	char	   *result;
	char	   *detail;
	char	   *body;
	uint64		now = 0;
	bool		counted = false;

	a->appended = true;
	if (CtasHttpTryQuery(http, sql, what, 0, &result, &detail))
	{
		if (*count >= 0)
			*count += rows;
		return;
	}
	if (*count >= 0 &&
		CtasHttpTryQuery(http,
						 psprintf("SELECT count() FROM %s", ch_qname(a->db, a->table)),
						 "count the rows of the target table", 0, &body, NULL))
	{
		now = ch_parse_count(http, body, "SELECT count()");
		counted = true;
		if (now == (uint64) *count + rows)
		{
			ereport(LOG,
					(errmsg("ctas_fed: the answer to a ClickHouse request was lost, but the rows arrived in table \"%s\" of catalog \"%s\"",
							ch_display(a->db, a->table), CtasHttpCatalogName(http)),
					 errdetail_internal("%s", detail ? detail : "")));
			*count += rows;
			return;
		}
		if (now == (uint64) *count && *count == before)
			a->appended = false;	/* nothing of ours arrived */
	}
	ereport(ERROR,
			(errcode(ERRCODE_FDW_ERROR),
			 errmsg("could not %s on ClickHouse catalog \"%s\"",
					what, CtasHttpCatalogName(http)),
			 errdetail_internal("%s", detail ? detail : ""),
			 counted && now != (uint64) *count ?
			 errhint("Table \"%s\" holds " UINT64_FORMAT " rows; " INT64_FORMAT " were expected without the step and " UINT64_FORMAT " with it.",
					 ch_display(a->db, a->table), now, *count,
					 (uint64) *count + rows) : 0));
}

/*
 * ch_append_move
 *		Move the staged rows into the target: the stage's parts are
 *		attached partition by partition (MergeTree engines: each attach is
 *		atomic, and no row is copied), else INSERT ... SELECT.  Each
 *		statement is sent once (ch_append_step); for targets whose rows
 *		can be counted exactly, a lost reply is settled from the target's
 *		row count, which assumes that no one else writes to the target
 *		during the commit.
 */
static void
ch_append_move(CtasHttp *http, ChAction *a)
{
	char	   *engine = ch_remote_engine(http, a->db, a->stage);
	char	   *target_engine = ch_remote_engine(http, a->db, a->table);
	int64		count = -1;
	int64		before;

	if (ch_count_check_mode(target_engine) == 1)
		count = (int64) ch_parse_count(http,
									   CtasHttpQuery(http,
													 psprintf("SELECT count() FROM %s",
															  ch_qname(a->db, a->table)),
													 "count the rows of the target table"),
									   "SELECT count()");
	before = count;

	if (ch_is_mergetree(engine) && strcmp(engine, target_engine) == 0 &&
		strncmp(engine, "Replicated", 10) != 0)
	{
		char	   *body;
		List	   *rows;
		int			nf;
		ListCell   *lc;

		body = CtasHttpQuery(http,
							 psprintf("SELECT partition_id, sum(rows) FROM system.parts WHERE database = %s AND table = %s AND active GROUP BY partition_id ORDER BY partition_id",
									  ch_lit(a->db), ch_lit(a->stage)),
							 "list the partitions of the staging table");
		rows = ch_tsv(body, &nf);
		foreach(lc, rows)
		{
			char	  **f = lfirst(lc);

			if (nf != 2 || f[0] == NULL || f[1] == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_ERROR),
						 errmsg("unexpected answer from ClickHouse catalog \"%s\" to a list of partitions",
								CtasHttpCatalogName(http))));
			ch_append_step(http, a,
						   psprintf("ALTER TABLE %s ATTACH PARTITION ID %s FROM %s",
									ch_qname(a->db, a->table), ch_lit(f[0]),
									ch_qname(a->db, a->stage)),
						   "attach the staged rows to the target table",
						   ch_parse_count(http, f[1], "a list of partitions"),
						   &count, before);
		}
	}
	else
		ch_append_step(http, a,
					   psprintf("INSERT INTO %s SELECT * FROM %s",
								ch_qname(a->db, a->table),
								ch_qname(a->db, a->stage)),
					   "insert the staged rows into the target table",
					   a->rows, &count, before);
}

/*
 * ch_pre_commit
 *		pre_commit of the writer: publish every action, in statement order.
 *		Runs after all two-phase participants have prepared.  An ERROR here
 *		aborts the local transaction, and ch_abort undoes what was done.
 *
 * XXX: appends are published in statement order, interleaved with the
 * renames; moving them after every rename (and every other participant)
 * would narrow the window in which a later failure leaves appended rows.
 */
static void
ch_pre_commit(CtasParticipant *part)
{
	ChXact	   *xs = (ChXact *) part->private;
	ListCell   *lc;

	if (xs == NULL)
		return;
	if (xs->stream)
		elog(ERROR, "ClickHouse INSERT still open at commit");

	/*
	 * Every action is in the durable record already (ch_new_action), and
	 * resolve decides it by this transaction's outcome; xact.c made the
	 * xid durable when the transaction joined (CtasJoinTransaction).
	 */
	/* for ctas_fed.jobs: the object resolve reports on, and no 2PC */
	if (xs->actions != NIL)
	{
		part->gid = MemoryContextStrdup(part->cxt, ch_gid(xs));
		part->one_phase = true;
	}

	foreach(lc, xs->actions)
	{
		ChAction   *a = lfirst(lc);

		if (!a->loaded)
			elog(ERROR, "ClickHouse staging table \"%s\" was never completed",
				 a->stage);

		/*
		 * From the first request on, the outcome may be unknown (a lost
		 * reply): undo then asks the server what happened.
		 */
		a->publishing = true;
		switch (a->kind)
		{
			case CH_CREATE:
				/*
				 * The marker outlives a crash between the rename and the
				 * local commit record: resolve then finds it and, the local
				 * transaction having aborted, drops the published table.
				 */
				a->marker_made = true;
				CtasHttpQuery(xs->http,
							  psprintf("CREATE TABLE %s (x UInt8) ENGINE = TinyLog",
									   ch_qname(a->db, a->marker)),
							  "record the publication");
				CtasHttpQuery(xs->http, ch_rename_sql(a->db, a->stage, a->table),
							  "publish the new table");
				a->stage_moved = true;
				break;
			case CH_REPLACE:
				CtasHttpQuery(xs->http, ch_rename_sql(a->db, a->table, a->old),
							  "move the replaced table away");
				a->old_moved = true;
				CtasHttpQuery(xs->http, ch_rename_sql(a->db, a->stage, a->table),
							  "publish the new table");
				a->stage_moved = true;
				break;
			case CH_APPEND:
				ch_append_move(xs->http, a);
				break;
			case CH_DROP:
				CtasHttpQuery(xs->http, ch_rename_sql(a->db, a->table, a->old),
							  "drop the table");
				a->old_moved = true;
				break;
		}
	}
}

/*
 * ch_post_commit
 *		post_commit of the writer: drop what was moved away.  Never an
 *		ERROR: failures are WARNINGs, and the durable record then stays,
 *		from which resolve drops the leftovers.  The record goes once
 *		everything is dropped.
 */
static void
ch_post_commit(CtasParticipant *part)
{
	ChXact	   *xs = (ChXact *) part->private;
	MemoryContext cxt;
	MemoryContext old;
	ListCell   *lc;

	if (xs == NULL || in_error_recursion_trouble())
		return;
	cxt = AllocSetContextCreate(part->cxt, "ctas_fed clickhouse commit",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	ch_cleanup_failed = false;
	foreach(lc, xs->actions)
	{
		ChAction   *a = lfirst(lc);

		if ((a->kind == CH_REPLACE || a->kind == CH_DROP) && a->old_moved)
			ch_cleanup_query(xs->http,
							 psprintf("DROP TABLE IF EXISTS %s", ch_qname(a->db, a->old)),
							 "drop the old table", ch_display(a->db, a->old));
		else if (a->kind == CH_CREATE && a->marker_made)
			ch_cleanup_query(xs->http,
							 psprintf("DROP TABLE IF EXISTS %s", ch_qname(a->db, a->marker)),
							 "drop the commit marker", ch_display(a->db, a->marker));
		else if (a->kind == CH_APPEND)
			ch_cleanup_query(xs->http,
							 psprintf("DROP TABLE IF EXISTS %s", ch_qname(a->db, a->stage)),
							 "drop the staging table", ch_display(a->db, a->stage));
	}
	/* what failed stays in the record, for the resolver */
	if (!ch_cleanup_failed)
		ch_record_remove(xs);
	ch_record_release(xs);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/*
 * ch_undo
 *		Undo one action, whatever stage it reached.  Before publication
 *		the flags say what exists; from the first request of publication on
 *		the server is asked (ch_undo_checked).  WARNINGs only; what is left
 *		stays in the durable record.
 */
static void
ch_undo(CtasParticipant *part, ChXact *xs, ChAction *a)
{
	CtasHttp   *http = xs->http;

	if (a->publishing && a->kind != CH_APPEND)
	{
		char	   *why;

		if (ch_undo_checked(http, a, &why))
			a->stage_moved = a->old_moved = a->marker_made = false;
		else
			part->in_doubt = true;
		return;
	}

	switch (a->kind)
	{
		case CH_CREATE:
		case CH_REPLACE:
			if (a->stage_moved &&
				ch_cleanup_query(http, ch_rename_sql(a->db, a->table, a->stage),
								 "take back the published table",
								 ch_display(a->db, a->table)))
				a->stage_moved = false;
			if (a->old_moved && !a->stage_moved &&
				ch_cleanup_query(http, ch_rename_sql(a->db, a->old, a->table),
								 "restore the replaced table",
								 ch_display(a->db, a->old)))
				a->old_moved = false;
			if (!a->stage_moved)
				ch_cleanup_query(http,
								 psprintf("DROP TABLE IF EXISTS %s", ch_qname(a->db, a->stage)),
								 "drop the staging table", ch_display(a->db, a->stage));
			/* the marker goes last: resolve needs it while anything is left */
			if (a->marker_made && !a->stage_moved &&
				ch_cleanup_query(http,
								 psprintf("DROP TABLE IF EXISTS %s", ch_qname(a->db, a->marker)),
								 "drop the commit marker", ch_display(a->db, a->marker)))
				a->marker_made = false;
			if (a->stage_moved || a->old_moved)
				part->in_doubt = true;	/* published, and not taken back */
			break;
		case CH_APPEND:
			if (a->appended)
				ereport(WARNING,
						(errcode(ERRCODE_FDW_ERROR),
						 errmsg("rows appended to table \"%s\" of ClickHouse catalog \"%s\" stay there",
								ch_display(a->db, a->table), CtasHttpCatalogName(http)),
						 errdetail("The transaction failed after the rows were moved into the table; ClickHouse cannot take them back.")));
			ch_cleanup_query(http,
							 psprintf("DROP TABLE IF EXISTS %s", ch_qname(a->db, a->stage)),
							 "drop the staging table", ch_display(a->db, a->stage));
			break;
		case CH_DROP:
			if (a->old_moved &&
				ch_cleanup_query(http, ch_rename_sql(a->db, a->old, a->table),
								 "restore the dropped table",
								 ch_display(a->db, a->old)))
				a->old_moved = false;
			if (a->old_moved)
				part->in_doubt = true;
			break;
	}
}

/* Stop the open INSERT, if any (abort paths) */
static void
ch_kill_stream(ChXact *xs)
{
	if (xs->stream)
		CtasHttpStreamClose(xs->stream);	/* kills, clears xs->stream */
	else if (xs->stream_qid)
		CtasHttpKillQuery(xs->http, xs->stream_qid);
	xs->stream = NULL;
	xs->stream_qid = NULL;
}

/*
 * ch_abort
 *		abort of the writer: stop a running INSERT, then undo every action
 *		in reverse order.  Never an ERROR.
 */
static void
ch_abort(CtasParticipant *part)
{
	ChXact	   *xs = (ChXact *) part->private;
	MemoryContext cxt;
	MemoryContext old;
	int			i;

	if (xs == NULL)
		return;
	if (in_error_recursion_trouble())
	{
		/* the stream must not touch xs, which goes away now */
		if (xs->stream)
			CtasHttpStreamUnwatch(xs->stream);
		xs->stream = NULL;
		return;					/* resolve will clean up */
	}
	cxt = AllocSetContextCreate(part->cxt, "ctas_fed clickhouse abort",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	ch_cleanup_failed = false;
	ch_kill_stream(xs);
	for (i = list_length(xs->actions) - 1; i >= 0; i--)
		ch_undo(part, xs, list_nth(xs->actions, i));
	xs->actions = NIL;
	/* what could not be undone stays in the record, for the resolver */
	if (!ch_cleanup_failed && !part->in_doubt)
		ch_record_remove(xs);
	ch_record_release(xs);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
}

/*
 * ch_subxact
 *		subxact of the writer.  Commit of a subtransaction hands its actions
 *		to the parent level; abort (ROLLBACK TO SAVEPOINT, or an error in a
 *		subtransaction) undoes the actions of that level and deeper, which
 *		are never published yet.  Never an ERROR.
 */
static void
ch_subxact(CtasParticipant *part, SubXactEvent event, int level)
{
	ChXact	   *xs = (ChXact *) part->private;
	ListCell   *lc;

	if (xs == NULL)
		return;

	if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
	{
		foreach(lc, xs->actions)
		{
			ChAction   *a = lfirst(lc);

			if (a->level >= level)
				a->level = level - 1;
		}
		if (xs->stream_qid && xs->stream_level >= level)
			xs->stream_level = level - 1;
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		MemoryContext cxt;
		MemoryContext old;
		List	   *keep = NIL;
		int			i;

		if (in_error_recursion_trouble())
		{
			if (xs->stream && xs->stream_level >= level)
			{
				CtasHttpStreamUnwatch(xs->stream);
				xs->stream = NULL;
			}
			return;
		}
		cxt = AllocSetContextCreate(part->cxt, "ctas_fed clickhouse rollback",
									ALLOCSET_SMALL_SIZES);
		old = MemoryContextSwitchTo(cxt);
		if (xs->stream_qid && xs->stream_level >= level)
			ch_kill_stream(xs);
		for (i = list_length(xs->actions) - 1; i >= 0; i--)
		{
			ChAction   *a = list_nth(xs->actions, i);

			if (a->level >= level)
				ch_undo(part, xs, a);
		}
		/*
		 * The durable record goes on naming the undone actions until its
		 * next version: they are its newest ones, their tables are gone,
		 * and neither undo nor finish finds anything of theirs to act on.
		 */
		MemoryContextSwitchTo(part->cxt);
		foreach(lc, xs->actions)
		{
			ChAction   *a = lfirst(lc);

			if (a->level < level)
				keep = lappend(keep, a);
		}
		xs->actions = keep;
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
	}
}

/* ------------------------------------------------------------------------
 * EXPLAIN and metadata
 * ------------------------------------------------------------------------
 */

/*
 * ch_explain
 *		explain of the writer: target, mode, format and the DDL, with no
 *		remote work.
 */
static void
ch_explain(CtasLoad *load, ExplainState *es)
{
	char	  **types = palloc(sizeof(char *) * load->ncolumns);
	ChColumn   *cols;
	int			i;
	const char *mode;

	for (i = 0; i < load->ncolumns; i++)
		types[i] = load->columns[i].remote_type;
	cols = ch_setup_columns(load, types);

	ExplainPropertyText("Catalog", load->catalog->name, es);
	ExplainPropertyText("Catalog Type", "clickhouse", es);
	ExplainPropertyText("Target", ch_qname(load->schema, load->table), es);
	if (load->opts.atomic)
		mode = "atomic: staging table, RENAME TABLE to the target at commit";
	else
		mode = psprintf("streaming: table created first, one INSERT every " INT64_FORMAT " rows",
						load->opts.commit_every);
	ExplainPropertyText("Mode", mode, es);
	ExplainPropertyText("If Exists",
						load->opts.if_exists == CTAS_IF_EXISTS_REPLACE ? "replace" :
						load->opts.if_exists == CTAS_IF_EXISTS_APPEND ? "append" :
						load->opts.if_exists == CTAS_IF_EXISTS_SKIP ? "skip" : "error",
						es);
	ExplainPropertyText("Format", "RowBinary", es);
	ExplainPropertyText("Remote DDL",
						ch_create_sql(load, cols, load->schema, load->table), es);
}

static void
ch_list_tables(CtasCatalog *catalog, const char *schema,
			   void (*emit) (void *arg, const char *name, const char *kind),
			   void *arg)
{
	CtasHttp   *http = CtasHttpCreate(catalog, CurrentMemoryContext);
	const char *db = schema ? schema : CtasCatalogOption(catalog, "database");
	char	   *body;
	List	   *rows;
	int			nf;
	ListCell   *lc;

	if (db == NULL)
		db = "default";
	(void) ch_remote_exists(http, db, "");	/* ERROR for a missing database */
	body = CtasHttpQuery(http,
						 psprintf("SELECT name, engine FROM system.tables WHERE database = %s ORDER BY name",
								  ch_lit(db)),
						 "list tables");
	rows = ch_tsv(body, &nf);
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		if (nf == 2 && f[0] && f[1])
			emit(arg, f[0], f[1]);
	}
}

static void
ch_list_columns(CtasCatalog *catalog, const char *schema, const char *table,
				void (*emit) (void *arg, const char *name, const char *type,
							  bool nullable),
				void *arg)
{
	CtasHttp   *http = CtasHttpCreate(catalog, CurrentMemoryContext);
	const char *db = schema ? schema : CtasCatalogOption(catalog, "database");
	char	   *body;
	List	   *rows;
	int			nf;
	ListCell   *lc;

	if (db == NULL)
		db = "default";
	if (!ch_remote_exists(http, db, table))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table \"%s\" does not exist in catalog \"%s\"",
						ch_display(db, table), catalog->name)));
	body = CtasHttpQuery(http,
						 psprintf("SELECT name, type FROM system.columns WHERE database = %s AND table = %s",
								  ch_lit(db), ch_lit(table)),
						 "list columns");
	rows = ch_tsv(body, &nf);
	foreach(lc, rows)
	{
		char	  **f = lfirst(lc);

		if (nf == 2 && f[0] && f[1])
			emit(arg, f[0], f[1], strncmp(f[1], "Nullable(", 9) == 0);
	}
}

/* ------------------------------------------------------------------------
 * Recovery
 * ------------------------------------------------------------------------
 */

typedef enum ChXidStatus
{
	CH_XID_IN_PROGRESS,
	CH_XID_COMMITTED,
	CH_XID_ABORTED,
	CH_XID_UNKNOWN
} ChXidStatus;

/*
 * ch_xid_status
 *		Outcome of the local transaction with full id fxid, from the commit
 *		log (CtasLocalXactStatus): durable evidence, never a guess.  UNKNOWN
 *		for ids from the future or too old for the commit log.
 */
static ChXidStatus
ch_xid_status(uint64 fxid)
{
	const char *s = CtasLocalXactStatus(fxid);

	if (s == NULL)
		return CH_XID_UNKNOWN;
	if (strcmp(s, "in progress") == 0)
		return CH_XID_IN_PROGRESS;
	if (strcmp(s, "committed") == 0)
		return CH_XID_COMMITTED;
	return CH_XID_ABORTED;
}


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
 *		fields), then the actions (six fields each).  NIL, with *why set,
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
	if (ch_record_crc(data, trailer - data) != (pg_crc32c) crc)
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
	rows = ch_tsv(data, &nf);
	if (list_length(rows) != 1 || nf != 7)
	{
		*why = "its header does not have seven fields";
		return NIL;
	}
	h = linitial(rows);
	if (h[0] == NULL || h[1] == NULL ||
		strcmp(h[0], CH_RECORD_MAGIC) != 0 ||
		strcmp(h[1], CH_RECORD_VERSION) != 0 ||
		!ch_all_digits(h[2]) || !ch_all_digits(h[3]) ||
		!ch_all_digits(h[4]) || !ch_all_digits(h[5]))
	{
		*why = "its header is not that of a record of this version";
		return NIL;
	}
	if (body_end[1] != '\0')
	{
		actions = ch_tsv(body_end + 1, &nf);
		if (nf != 6)
		{
			*why = "an action line does not have six fields";
			return NIL;
		}
	}
	return list_concat(rows, actions);
}

/*
 * ch_record_action
 *		The action of one line of a record, or NULL when the line is
 *		malformed.  Palloc'd.
 */
static ChAction *
ch_record_action(char **f)
{
	ChAction   *a = palloc0(sizeof(ChAction));
	int			k;

	if (f[0] == NULL || f[1] == NULL || f[2] == NULL)
		return NULL;
	for (k = 0; k < lengthof(ch_action_names); k++)
	{
		if (strcmp(f[0], ch_action_names[k]) == 0)
			break;
	}
	if (k == lengthof(ch_action_names))
		return NULL;
	a->kind = (ChActionKind) k;
	a->db = f[1];
	a->table = f[2];
	a->stage = f[3];
	a->old = f[4];
	a->marker = f[5];
	if ((a->kind != CH_DROP && a->stage == NULL) ||
		((a->kind == CH_REPLACE || a->kind == CH_DROP) && a->old == NULL) ||
		(a->kind == CH_CREATE && a->marker == NULL))
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
ch_finish_recorded(CtasHttp *http, ChAction *a)
{
	bool		ok = true;

	if (a->marker)
		ok = ch_cleanup_drop(http, a->db, a->marker, "drop the commit marker") && ok;
	if (a->old)
		ok = ch_cleanup_drop(http, a->db, a->old, "drop the old table") && ok;
	if (a->stage)
		ok = ch_cleanup_drop(http, a->db, a->stage, "drop the staging table") && ok;
	return ok;
}

/*
 * ch_resolve_record
 *		Resolve the transaction of the record at path, if it is one of
 *		this database and catalog: finish it (committed) or undo it as a
 *		whole in reverse order (aborted), then remove the record.  Emits one
 *		action for it, on the object its jobs know it by (the gid).
 */
static void
ch_resolve_record(CtasCatalog *catalog, CtasHttp *http, const char *path,
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
	ChXidStatus status;
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
		ChAction   *a = ch_record_action(lfirst(lc));

		if (a == NULL)
		{
			emit(arg, object, "left: its record is malformed");
			CloseTransientFile(fd);
			return;
		}
		actions = lappend(actions, a);
	}

	if (ch_xid_status(fxid) == CH_XID_IN_PROGRESS)
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

	status = ch_xid_status(fxid);
	if (status == CH_XID_IN_PROGRESS)
	{
		emit(arg, object, "left: its transaction is in progress");
		CloseTransientFile(fd);
		return;
	}
	if (status == CH_XID_UNKNOWN)
	{
		emit(arg, object, "left: local transaction status unknown");
		CloseTransientFile(fd);
		return;
	}

	ch_cleanup_failed = false;
	if (status == CH_XID_COMMITTED)
	{
		foreach(lc, actions)
		{
			if (!ch_finish_recorded(http, lfirst(lc)))
			{
				emit(arg, object, "left: could not drop what the transaction replaced");
				CloseTransientFile(fd);
				return;
			}
		}
	}
	else
	{
		/* as ch_abort: every action, newest first */
		for (i = list_length(actions) - 1; i >= 0; i--)
		{
			ChAction   *a = list_nth(actions, i);
			char	   *why = NULL;
			bool		ok;

			if (a->kind == CH_APPEND)
				ok = ch_cleanup_drop(http, a->db, a->stage, "drop the staging table");
			else
				ok = ch_undo_checked(http, a, &why);
			if (!ok)
			{
				emit(arg, object,
					 psprintf("left: %s", why ? why : "could not drop the staging table"));
				CloseTransientFile(fd);
				return;
			}
		}
	}
	(void) durable_unlink(path, WARNING);
	CloseTransientFile(fd);
	emit(arg, object, status == CH_XID_COMMITTED ? "committed" : "rolled back");
}

static int
ch_cmp_names(const ListCell *a, const ListCell *b)
{
	return strcmp(lfirst(a), lfirst(b));
}

/*
 * ch_resolve
 *		resolve of the writer: every durable record of this database and
 *		catalog (see "Durable records") names one transaction's actions,
 *		and the local commit status of that transaction decides:
 *
 *		committed	what post-commit would have dropped is dropped: the
 *					commit markers, the replaced and dropped tables, the
 *					staging tables of appends;
 *		aborted		every action is undone, newest first, as ch_abort
 *					does, from what the server shows (ch_undo_checked):
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
static void
ch_resolve(CtasCatalog *catalog,
		   void (*emit) (void *arg, const char *object, const char *action),
		   void *arg)
{
	CtasHttp   *http;
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

			if (ch_xid_status(fxid) != CH_XID_IN_PROGRESS)
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

	http = CtasHttpCreate(catalog, CurrentMemoryContext);
	foreach(lc, paths)
		ch_resolve_record(catalog, http, lfirst(lc), emit, arg);
}
