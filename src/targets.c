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
#include "mysql/mysql_target.h"
#include "targets.h"

/*
 * Every target, NULL-terminated.  The first entry's options are listed
 * first in hints that name the options of every type.
 */
const CtasTargetRoutine *const CtasTargets[] = {
	&CtasPostgresTarget,
	&CtasClickHouseTarget,
	&CtasMysqlTarget,
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

/*
 * CtasCatalogRoutine
 *		The target of catalog's type.  ereport(ERROR) when the type names
 *		no target (the validator refuses such a server, so only a server
 *		changed behind its back, or a target removed from this table, has
 *		one).
 */
const CtasTargetRoutine *
CtasCatalogRoutine(const CtasCatalog *catalog)
{
	const CtasTargetRoutine *routine = CtasTargetByName(catalog->type_name);

	if (routine == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("catalog \"%s\" has no valid type", catalog->name),
				 errdetail("Its type \"%s\" names no kind of catalog this version of ctas_fed knows.",
						   catalog->type_name)));
	return routine;
}
