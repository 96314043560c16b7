/*
 * lb_tokenize.c — message bytes → tokens, the contract indexing and query parsing share
 * (DESIGN.md "Tokens", FORMAT.md §6). It owns the delimiter table and the walk; it does not
 * know about terms, namespaces or fields. The one idea: a token is a maximal run of
 * non-delimiter bytes, ASCII-folded, cut (not split) at LB_TOKEN_MAX bytes.
 */
#include <errno.h>
#include <string.h>

#include "logbox.h"

void
lb_tokconf_default(struct lb_tokconf *tc)
{
	(void)lb_tokconf_set(tc, LB_DEFAULT_DELIMS, strlen(LB_DEFAULT_DELIMS));
}

int
lb_tokconf_set(struct lb_tokconf *tc, const char *delims, size_t delims_len)
{
	struct lb_tokconf	 t;
	static const char	 ws[] = " \t\n\v\f\r";

	memset(&t, 0, sizeof(t));
	for (size_t i = 0; i < sizeof(ws) - 1; i++)
		t.delim[(uint8_t)ws[i]] = 1;
	for (size_t i = 0; i < delims_len; i++) {
		uint8_t c = (uint8_t)delims[i];

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
			return (LB_EBADCONF);
		t.delim[c] = 1;
	}
	*tc = t;
	return (0);
}

int
lb_tokenize(const struct lb_tokconf *tc, const uint8_t *buf, size_t len, lb_token_fn fn,
    void *arg)
{
	uint8_t		 tok[LB_TOKEN_MAX];
	size_t		 i = 0, start, n;
	uint32_t	 pos = 0;
	int		 rc;

	while (i < len) {
		while (i < len && tc->delim[buf[i]])
			i++;
		if (i == len)
			break;
		start = i;
		n = 0;
		while (i < len && !tc->delim[buf[i]]) {
			if (n < LB_TOKEN_MAX) {
				uint8_t c = buf[i];

				tok[n++] = (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
			}
			i++;
		}
		if ((rc = fn(arg, tok, n, pos++, start)) != 0)
			return (rc);
	}
	return (0);
}
