/*-------------------------------------------------------------------------
 *
 * targets.c
 *		  The one table that names the targets.
 *
 * A target is one folder behind target.h; its routine carries everything
 * specific to it (options, type map, writer, resolve).  Adding a target is
 * its folder, one entry here and its objects in the Makefile; generic code
 * finds it by the server option "type" through CtasTargetByName.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "target.h"
#include "postgres/postgres_target.h"
#include "clickhouse/clickhouse.h"

/*
 * Every target, NULL-terminated.  The first entry's options are listed
 * first in hints that name the options of every type.
 */
const CtasTargetRoutine *const CtasTargets[] = {
	&CtasPostgresTarget,
	&CtasClickHouseTarget,
	NULL
};

/*
 * CtasTargetByName
 *		The target whose type name is name, or NULL.  Never ERRORs.
 */
const CtasTargetRoutine *
CtasTargetByName(const char *name)
{
	const CtasTargetRoutine *const *t;

	for (t = CtasTargets; *t; t++)
	{
		if (strcmp((*t)->type_name, name) == 0)
			return *t;
	}
	return NULL;
}
