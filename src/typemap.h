/*-------------------------------------------------------------------------
 *
 * typemap.h
 *		  The parser of type names shared by the targets' type maps
 *		  (typemap.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/typemap.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_TYPEMAP_H
#define CTAS_TYPEMAP_H

#include "nodes/pg_list.h"

extern List *CtasParseColumnTypes(const char *spec);

#endif							/* CTAS_TYPEMAP_H */
