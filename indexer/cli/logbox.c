/*
 * logbox.c — the logbox admin tool. Verbs are added as the library grows; this file owns
 * argument handling and output, never storage logic.
 */
#include <stdio.h>
#include <string.h>

#include "logbox.h"

static void
usage(FILE *f)
{
	fprintf(f, "usage: logbox --version\n");
}

int
main(int argc, char *argv[])
{
	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("logbox %s\n", LB_VERSION);
		return (0);
	}
	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		usage(stdout);
		return (0);
	}
	usage(stderr);
	return (2);
}
