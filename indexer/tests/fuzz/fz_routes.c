/*
 * fz_routes.c — arbitrary bytes as indexd's --routes rule file (indexd/routes.c): routes_parse()
 * either refuses them with "NAME:LINE: why" (LINE within the file) and leaves *out alone, or
 * gives rules whose description fits any buffer and whose pick, for the same bytes parsed as a
 * syslog message and each listener, is "main" or one of the rule names (files of at most 8
 * rules). The first byte picks the JIT or the interpreter.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "indexd.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const lsn[] = { "tcp", "octet", "tls", "udp", "other", "" };

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct routes	*r = (struct routes *)&r;
	struct lb_msg	 m;
	char		 err[600], line[4096], small[16];
	int		 flags = size > 0 && (data[0] & 1) ? ROUTES_NOJIT : 0;
	int		 rc, lines = 1;

	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	err[0] = '\0';
	rc = routes_parse("f", data, size, flags, &r, err, sizeof(err));
	if (rc != 0) {
		int n = 0;

		assert(r == (struct routes *)&r);
		assert(strlen(err) < sizeof(err));
		if (size <= 1024 * 1024) {
			assert(sscanf(err, "f:%d: ", &n) == 1);
			assert(n >= 1 && n <= lines);
		}
		return (0);
	}
	assert(r != NULL && r != (struct routes *)&r);
	routes_describe(r, line, sizeof(line));
	assert(strlen(line) < sizeof(line));
	routes_describe(r, small, sizeof(small));
	assert(strlen(small) < sizeof(small));
	lb_syslog_parse(data, size, 1, &m);
	/*
	 * Each pattern may run up to PCRE2's match limit (10^6 steps) per pick: with many rules
	 * of runaway patterns one input could pass -timeout. A few rules cover the matcher.
	 */
	for (size_t i = 0; routes_count(r) <= 8 && i < sizeof(lsn) / sizeof(lsn[0]); i++) {
		const char	*ls = routes_pick(r, &m, lsn[i]);
		const char	*why;

		assert(ls != NULL);
		assert(strcmp(ls, "main") == 0 || lb_logspace_name_ok((const uint8_t *)ls, strlen(ls), &why));
	}
	assert(routes_count(r) <= 1024);
	routes_free(r);
	return (0);
}
