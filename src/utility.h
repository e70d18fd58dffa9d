/*-------------------------------------------------------------------------
 *
 * utility.h
 *		  The ProcessUtility and EXPLAIN hooks (utility.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/utility.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_UTILITY_H
#define CTAS_UTILITY_H

extern void CtasUtilityInit(void);

#endif							/* CTAS_UTILITY_H */
