/*-------------------------------------------------------------------------
 *
 * shardkey.c
 *		  The sharding keys of a cluster catalog (cluster.c): the option
 *		  sharding_key parsed and rebuilt, and the shard of a row computed
 *		  as the Distributed engine computes it.
 *
 * The sharding expressions computed here (with cityhash.c) are rand(), an
 * integer column, intHash64(column) of an integer column, and
 * cityHash64(column) of an integer column (which ClickHouse hashes with
 * intHash64 of the value's bytes, zero-extended) or of a String column
 * (CityHash64 1.0.2 of its bytes).  Anything else (other hash functions,
 * several arguments, Nullable columns) is refused: a row must never land
 * on a shard the Distributed table would not send it to.  The value of the
 * expression, taken modulo the sum of the shards' weights, is a slot; each
 * shard owns weight consecutive slots in shard_num order
 * (ChCluster.slot_shard, from system.clusters).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/shardkey.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/pg_prng.h"

#include "clickhouse.h"

/* Parse an identifier, bare or backquoted, at *p; NULL if none.  Palloc'd */
static char *
ch_parse_ident(const char **p)
{
	const char *s = *p;
	StringInfoData buf;

	initStringInfo(&buf);
	if (*s == '`')
	{
		for (s++; *s && *s != '`'; s++)
		{
			if (*s == '\\' && s[1])
				s++;
			if ((unsigned char) *s < ' ')
				return NULL;
			appendStringInfoChar(&buf, *s);
		}
		if (*s != '`' || buf.len == 0)
			return NULL;
		s++;
	}
	else
	{
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
			return NULL;
		while ((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
			   (*s >= '0' && *s <= '9') || *s == '_')
			appendStringInfoChar(&buf, *s++);
	}
	*p = s;
	return buf.data;
}

/*
 * ch_parse_shard_key
 *		Parse the option sharding_key: rand(), a column, or intHash64 or
 *		cityHash64 of a column.  ERROR otherwise.
 */
void
CtasChParseShardKey(const char *text, ChShardKey *key)
{
	const char *p = text;
	char	   *word;

	memset(key, 0, sizeof(*key));
	CtasChSkipWs(&p);
	word = ch_parse_ident(&p);
	CtasChSkipWs(&p);
	if (word != NULL && *p == '(' && text[strspn(text, " \t\r\n")] != '`')
	{
		p++;
		CtasChSkipWs(&p);
		if (strcmp(word, "rand") == 0 && *p == ')')
			key->func = CH_SHARD_RAND;
		else
		{
			if (strcmp(word, "intHash64") == 0)
				key->func = CH_SHARD_INTHASH64;
			else if (strcmp(word, "cityHash64") == 0)
				key->func = CH_SHARD_CITYHASH64;
			else
				word = NULL;
			key->column = word ? ch_parse_ident(&p) : NULL;
			CtasChSkipWs(&p);
			if (key->column == NULL || *p != ')')
				word = NULL;
		}
		if (word)
		{
			p++;
			CtasChSkipWs(&p);
		}
	}
	else if (word != NULL)
	{
		key->func = CH_SHARD_VALUE;
		key->column = word;
	}
	if (word == NULL || *p != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for option \"sharding_key\": \"%s\"", text),
				 errdetail("ctas_fed routes rows itself and computes these sharding keys: rand(), an integer column, intHash64(column) of an integer column, and cityHash64(column) of an integer or String column.")));
}

/* The sharding key as ClickHouse SQL, rebuilt from the parse.  Palloc'd */
char *
CtasChShardKeySql(const ChShardKey *key)
{
	StringInfoData buf;

	initStringInfo(&buf);
	switch (key->func)
	{
		case CH_SHARD_RAND:
			appendStringInfoString(&buf, "rand()");
			return buf.data;
		case CH_SHARD_VALUE:
			break;
		case CH_SHARD_INTHASH64:
			appendStringInfoString(&buf, "intHash64(");
			break;
		case CH_SHARD_CITYHASH64:
			appendStringInfoString(&buf, "cityHash64(");
			break;
	}
	CtasChAppendIdent(&buf, key->column);
	if (key->func != CH_SHARD_VALUE)
		appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * Can we compute sharding function func of a column of ClickHouse type
 * text?  A non-Nullable integer type for all of them, and String too for
 * cityHash64.
 */
bool
CtasChKeyTypeOk(ChShardFunc func, const char *text)
{
	bool		too_deep = false;
	ChType	   *t = text ? CtasChParseType(text, &too_deep) : NULL;

	if (t == NULL || t->nullable)
		return false;
	if (t->kind == CHK_STRING)
		return func == CH_SHARD_CITYHASH64;
	return t->kind >= CHK_INT8 && t->kind <= CHK_UINT64;
}

/*
 * CtasChShardOf
 *		The shard (from 1) the Distributed table of cluster c with sharding
 *		key key sends a row to whose key column (encoder col) holds v: the
 *		sharding expression, computed from the RowBinary bytes of the value
 *		(little-endian, the value as ClickHouse stores it; kb is a scratch
 *		buffer), taken modulo the total weight as an unsigned number of the
 *		expression's type, mapped through the slots.  col is unused for
 *		rand().
 */
int
CtasChShardOf(ChCluster *c, const ChShardKey *key, ChColumn *col,
			  StringInfo kb, Datum v, bool isnull)
{
	uint64		u = 0;
	uint64		h;
	int			i;
	ChKind		kind;

	if (key->func == CH_SHARD_RAND)
		return c->slot_shard[pg_prng_uint64(&pg_global_prng_state) % c->nslots];

	resetStringInfo(kb);
	CtasChPutValue(&col->enc, kb, v, isnull);
	kind = col->enc.type->kind;
	if (kind == CHK_STRING)
	{
		/* cityHash64 of the bytes after RowBinary's varint length */
		uint64		len = 0;
		int			shift = 0;

		for (i = 0; i < kb->len && i < 10; i++)
		{
			len |= (uint64) (kb->data[i] & 0x7f) << shift;
			shift += 7;
			if (((unsigned char) kb->data[i] & 0x80) == 0)
				break;
		}
		if (i >= kb->len || len != (uint64) (kb->len - i - 1))
			elog(ERROR, "sharding key string encoded in %d bytes", kb->len);
		h = CtasChCityHash64(kb->data + i + 1, (size_t) len);
		return c->slot_shard[h % (uint64) c->nslots];
	}
	if (kb->len < 1 || kb->len > 8)
		elog(ERROR, "sharding key encoded in %d bytes", kb->len);
	for (i = kb->len - 1; i >= 0; i--)
		u = (u << 8) | (unsigned char) kb->data[i];

	switch (key->func)
	{
		case CH_SHARD_VALUE:
			h = u;				/* the value as its unsigned type */
			break;
		case CH_SHARD_INTHASH64:
			/* the argument converted to UInt64: signed ones sign-extended */
			if (kind <= CHK_INT64 && kb->len < 8 &&
				(u >> (kb->len * 8 - 1)) & 1)
				u |= ~UINT64CONST(0) << (kb->len * 8);
			h = CtasChIntHash64(u);
			break;
		case CH_SHARD_CITYHASH64:
			/* integers: intHash64 of the value's bytes, zero-extended */
			h = CtasChIntHash64(u);
			break;
		default:
			elog(ERROR, "unexpected sharding function %d", (int) key->func);
			h = 0;				/* keep compiler quiet */
	}
	return c->slot_shard[h % (uint64) c->nslots];
}
