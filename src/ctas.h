/*-------------------------------------------------------------------------
 *
 * ctas.h
 *		  The statement layer: running a federated CREATE TABLE AS, SELECT
 *		  INTO, EXPLAIN of one or DROP TABLE (ctas_prepare.c: before any
 *		  remote work; ctas.c: the run), reached from the utility and
 *		  EXPLAIN hooks.
 *
 * Portions Copyright (c) 2026, ctas_fed developers
 *
 * IDENTIFICATION
 *		  src/ctas.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef CTAS_CTAS_H
#define CTAS_CTAS_H

#include "commands/explain.h"
#include "nodes/params.h"
#include "nodes/parsenodes.h"
#include "parser/parse_node.h"
#include "tcop/cmdtag.h"

#include "target.h"

/* in ctas_prepare.c */
extern CtasLoad *CtasNewLoad(Oid serverid, RangeVar *rel, List *options);
extern CtasLoad *CtasPrepareLoad(Oid serverid, CreateTableAsStmt *stmt);

/* in ctas.c */
extern void CtasRunLoad(CtasLoad *load, ParseState *pstate, Query *query,
						ParamListInfo params, QueryEnvironment *queryEnv);
extern bool CtasBeginLoad(CtasLoad *load);
extern void CtasEndLoad(CtasLoad *load);
extern void CtasFailLoad(CtasLoad *load);
extern void CtasExecCreateTableAs(ParseState *pstate, CreateTableAsStmt *stmt,
								  Oid serverid, ParamListInfo params,
								  QueryEnvironment *queryEnv,
								  QueryCompletion *qc);
extern void CtasExplainLoad(CtasLoad *load, Query *query, ExplainState *es,
							const char *queryString, ParamListInfo params,
							QueryEnvironment *queryEnv);
extern void CtasStandardExplainOneQuery(Query *query, int cursorOptions,
										IntoClause *into, ExplainState *es,
										const char *queryString,
										ParamListInfo params,
										QueryEnvironment *queryEnv);
extern void CtasExecDrop(Oid serverid, List *names, bool missing_ok);

#endif							/* CTAS_CTAS_H */
