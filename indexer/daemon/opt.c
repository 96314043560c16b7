/*
 * opt.c — the daemons' command-line and settings numbers: a decimal integer in a range, all
 * of the string or nothing (no sign, no space, no suffix, no overflow). parse_num() returns an
 * error for a settings file, which reports its own file and line; opt_num() is for options at
 * start-up and is fatal, naming the option. opt_usage() is the usage error both share, and
 * opt_other() the options they take alike (--version, --help).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "logbox.h"
#include "log.h"
#include "opt.h"

int
parse_num(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char			*end;
	unsigned long long	 v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*s < '0' || *s > '9' || *end != '\0' || errno != 0 || v < lo || v > hi)
		return (EINVAL);
	*out = v;
	return (0);
}

uint64_t
opt_num(const char *name, const char *s, uint64_t lo, uint64_t hi)
{
	uint64_t v;

	if (parse_num(s, lo, hi, &v) != 0)
		fatalx("--%s: expected an integer %llu..%llu, got '%s'", name,
		    (unsigned long long)lo, (unsigned long long)hi, s);
	return (v);
}

void
opt_usage(const char *text)
{
	fputs(text, stderr);
	exit(2);
}

void
opt_other(int ch, const char *program, const char *usage)
{
	switch (ch) {
	case 'V':
		printf("%s %s\n", program, LB_VERSION);
		exit(0);
	case 'h':
		fputs(usage, stdout);
		exit(0);
	default:
		opt_usage(usage);
	}
}
