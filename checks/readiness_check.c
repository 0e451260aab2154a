/* readiness_check.c: readiness-check, drop-in for the PXC operator's readiness-check.sh (readiness.c). */
#include "readiness.h"

int main(int argc, char **argv)
{
	return probe_main(&readiness_kind, argc, argv);
}
