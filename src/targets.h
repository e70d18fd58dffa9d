/*-------------------------------------------------------------------------
 *
 * targets.h
 *		  The one table of targets (targets.c) and how a catalog finds
 *		  its target's routine.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/targets.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_TARGETS_H
#define CTAS_TARGETS_H

#include "target.h"

extern const CtasTargetRoutine *const CtasTargets[];
extern const CtasTargetRoutine *CtasTargetByName(const char *name);
extern const CtasTargetRoutine *CtasCatalogRoutine(const CtasCatalog *catalog);

#endif							/* CTAS_TARGETS_H */
