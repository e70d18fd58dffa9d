
# Copyright (c) 2026, ctas_fed developers

# The PostgreSQL target against a remote PostgreSQL 13: the cases of
# CtasFed::RemoteMatrix (test/lib/CtasFed/RemoteMatrix.pm), on binaries
# that test/pgversions.sh fetched ("make deps").

# ctas-tap: parallel

use strict;
use warnings;

use Test::More;

use CtasFed::RemoteMatrix;

run_remote_matrix(13);
done_testing();
