/*-------------------------------------------------------------------------
 *
 * cityhash.c
 *		  ClickHouse's cityHash64 and intHash64, computed here so that a load
 *		  into a cluster routes each row to the shard its Distributed table
 *		  would send it to (cluster.c).
 *
 * ClickHouse's SQL function cityHash64 is CityHash64 of Google's CityHash
 * version 1.0.2 (ClickHouse keeps that version frozen, namespace
 * CityHash_v1_0_2, because later versions hash differently), applied:
 *
 *	String		to the bytes of the value (no terminator);
 *	integers	not at all: to "plain old data" ClickHouse applies
 *				intHash64 of the value's bytes read as a UInt64 (zero-
 *				extended), so cityHash64(toInt8(-1)) = intHash64(255);
 *	several arguments
 *				combined left to right as Hash128to64(h, next).
 *
 * intHash64(x) is the Murmur3 finalizer of x (converted to UInt64, signed
 * values sign-extended) XORed with a constant.
 *
 * This is a reimplementation from the published algorithm, little-endian
 * loads, 64-bit arithmetic modulo 2^64.  test/t/213 checks it against the
 * servers: rows inserted again through the Distributed table land on the
 * shard this file chose, for many random strings (empty, every length
 * class up to several 64-byte blocks, non-ASCII).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/clickhouse/cityhash.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "clickhouse.h"

/* the constants of CityHash 1.0.2 */
#define K0	UINT64CONST(0xc3a5c85c97cb3127)
#define K1	UINT64CONST(0xb492b66fbe98f273)
#define K2	UINT64CONST(0x9ae16a3b2f90404f)
#define K3	UINT64CONST(0xc949d7c7509e6557)
#define KMUL UINT64CONST(0x9ddfea08eb382d69)

/* little-endian loads, whatever the host */
static inline uint64
ld64(const unsigned char *p)
{
	uint64		v = 0;
	int			i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static inline uint64
ld32(const unsigned char *p)
{
	return (uint64) p[0] | ((uint64) p[1] << 8) | ((uint64) p[2] << 16) |
		((uint64) p[3] << 24);
}

/* right rotation by 0 to 63 bits */
static inline uint64
rot(uint64 v, int n)
{
	return n == 0 ? v : (v >> n) | (v << (64 - n));
}

static inline uint64
shift_mix(uint64 v)
{
	return v ^ (v >> 47);
}

/*
 * CtasChHash128to64
 *		Hash128to64 of CityHash: a 128-bit value (low, high) to 64 bits;
 *		also how ClickHouse combines the hashes of several arguments.
 */
uint64
CtasChHash128to64(uint64 low, uint64 high)
{
	uint64		a = (low ^ high) * KMUL;
	uint64		b;

	a ^= a >> 47;
	b = (high ^ a) * KMUL;
	b ^= b >> 47;
	return b * KMUL;
}

static uint64
len_0_to_16(const unsigned char *s, size_t len)
{
	if (len > 8)
	{
		uint64		a = ld64(s);
		uint64		b = ld64(s + len - 8);

		return CtasChHash128to64(a, rot(b + len, (int) len)) ^ b;
	}
	if (len >= 4)
	{
		uint64		a = ld32(s);

		return CtasChHash128to64(len + (a << 3), ld32(s + len - 4));
	}
	if (len > 0)
	{
		uint32		y = (uint32) s[0] + ((uint32) s[len >> 1] << 8);
		uint32		z = (uint32) len + ((uint32) s[len - 1] << 2);

		return shift_mix((uint64) y * K2 ^ (uint64) z * K3) * K2;
	}
	return K2;
}

static uint64
len_17_to_32(const unsigned char *s, size_t len)
{
	uint64		a = ld64(s) * K1;
	uint64		b = ld64(s + 8);
	uint64		c = ld64(s + len - 8) * K2;
	uint64		d = ld64(s + len - 16) * K0;

	return CtasChHash128to64(rot(a - b, 43) + rot(c, 30) + d,
							 a + rot(b ^ K3, 20) - c + len);
}

static uint64
len_33_to_64(const unsigned char *s, size_t len)
{
	uint64		z = ld64(s + 24);
	uint64		a = ld64(s) + (len + ld64(s + len - 16)) * K0;
	uint64		b = rot(a + z, 52);
	uint64		c = rot(a, 37);
	uint64		vf;
	uint64		vs;
	uint64		wf;
	uint64		ws;
	uint64		r;

	a += ld64(s + 8);
	c += rot(a, 7);
	a += ld64(s + 16);
	vf = a + z;
	vs = b + rot(a, 31) + c;
	a = ld64(s + 16) + ld64(s + len - 32);
	z = ld64(s + len - 8);
	b = rot(a + z, 52);
	c = rot(a, 37);
	a += ld64(s + len - 24);
	c += rot(a, 7);
	a += ld64(s + len - 16);
	wf = a + z;
	ws = b + rot(a, 31) + c;
	r = shift_mix((vf + ws) * K2 + (wf + vs) * K0);
	return shift_mix(r * K0 + vs) * K2;
}

/* the 16-byte state (first, second) of 32 bytes and two seeds */
static inline void
weak_32(const unsigned char *s, uint64 a, uint64 b, uint64 *first,
		uint64 *second)
{
	uint64		w = ld64(s);
	uint64		x = ld64(s + 8);
	uint64		y = ld64(s + 16);
	uint64		z = ld64(s + 24);
	uint64		c;

	a += w;
	b = rot(b + a + z, 21);
	c = a;
	a += x;
	a += y;
	b += rot(a, 44);
	*first = a + z;
	*second = b + c;
}

/*
 * CtasChCityHash64
 *		CityHash64 (version 1.0.2) of len bytes at data: ClickHouse's
 *		cityHash64 of a String.
 */
uint64
CtasChCityHash64(const char *data, size_t len)
{
	const unsigned char *s = (const unsigned char *) data;
	uint64		x;
	uint64		y;
	uint64		z;
	uint64		v1;
	uint64		v2;
	uint64		w1;
	uint64		w2;

	if (len <= 16)
		return len_0_to_16(s, len);
	if (len <= 32)
		return len_17_to_32(s, len);
	if (len <= 64)
		return len_33_to_64(s, len);

	/* the end first, then 64-byte chunks from the start */
	x = ld64(s);
	y = ld64(s + len - 16) ^ K1;
	z = ld64(s + len - 56) ^ K0;
	weak_32(s + len - 64, len, y, &v1, &v2);
	weak_32(s + len - 32, len * K1, K0, &w1, &w2);
	z += shift_mix(v2) * K1;
	x = rot(z + x, 39) * K1;
	y = rot(y, 33) * K1;

	len = (len - 1) & ~(size_t) 63;
	do
	{
		uint64		t;

		x = rot(x + y + v1 + ld64(s + 16), 37) * K1;
		y = rot(y + v2 + ld64(s + 48), 42) * K1;
		x ^= w2;
		y ^= v1;
		z = rot(z ^ w1, 33);
		weak_32(s, v2 * K1, x + w1, &v1, &v2);
		weak_32(s + 32, z + w2, y, &w1, &w2);
		t = z;
		z = x;
		x = t;
		s += 64;
		len -= 64;
	} while (len != 0);
	return CtasChHash128to64(CtasChHash128to64(v1, w1) + shift_mix(y) * K1 + z,
							 CtasChHash128to64(v2, w2) + x);
}

/*
 * CtasChIntHash64
 *		ClickHouse's intHash64 of x (IntHash64Impl: the Murmur finalizer of
 *		x XORed with a constant).
 */
uint64
CtasChIntHash64(uint64 x)
{
	x ^= UINT64CONST(0x4CF2D2BAAE6DA887);
	x ^= x >> 33;
	x *= UINT64CONST(0xff51afd7ed558ccd);
	x ^= x >> 33;
	x *= UINT64CONST(0xc4ceb9fe1a85ec53);
	x ^= x >> 33;
	return x;
}
