/*-------------------------------------------------------------------------
 *
 * metrics.h
 *		  The jobs view and the metrics text of the job registry
 *		  (metrics.c).
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/metrics.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_METRICS_H
#define CTAS_METRICS_H

#include "jobs.h"

extern char *CtasMetricsText(void);
extern char *CtasJobEventJson(const CtasJobEvent *ev);

#endif							/* CTAS_METRICS_H */
