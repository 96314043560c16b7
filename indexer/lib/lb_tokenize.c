/*
 * lb_tokenize.c — message bytes → tokens, the contract indexing and query parsing share
 * (DESIGN.md "Tokens", FORMAT.md §6). It owns the delimiter table and the walk; it does not
 * know about terms, namespaces or fields. The one idea: a token is a maximal run of
 * non-delimiter bytes, ASCII-folded, cut (not split) at LB_TOKEN_MAX bytes. It also owns the
 * forms of a token (lb_token_forms): its stripped form and the parts of a compound token, which
 * the index holds beside the token so that a word finds them.
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

/* ASCII punctuation: 21-2f, 3a-40, 5b-60, 7b-7e. */
const uint8_t lb_form_punct[256] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* 00 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* 10 */
	0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,	/* 20 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1,	/* 30 */
	1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* 40 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1,	/* 50 */
	1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* 60 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0,	/* 70 */
};

static inline int
is_sep(uint8_t c)
{
	return (c == '.' || c == '-' || c == '_' || c == '@' || c == '/' || c == '+');
}

int
lb_token_forms(const uint8_t *tok, size_t len, lb_form_fn fn, void *arg)
{
	size_t	 a = 0, b = len, s, e, ps, pe, i;
	int	 rc, flags;

	while (a < b && lb_form_punct[tok[a]])
		a++;
	while (b > a && lb_form_punct[tok[b - 1]])
		b--;
	if (a == b)
		return (0);
	if (b - a != len &&
	    (rc = fn(arg, tok + a, b - a, a, LB_FORM_START | LB_FORM_END)) != 0)
		return (rc);
	for (i = a; i < b && !is_sep(tok[i]); i++)
		;
	if (i == b)
		return (0);	/* one part: the stripped form itself */
	for (s = a; s <= b; s = e + 1) {
		int digits = 1;

		for (e = s; e < b && !is_sep(tok[e]); e++)
			;
		ps = s;
		pe = e;
		while (ps < pe && lb_form_punct[tok[ps]])
			ps++;
		while (pe > ps && lb_form_punct[tok[pe - 1]])
			pe--;
		for (i = ps; i < pe && digits; i++)
			digits = tok[i] >= '0' && tok[i] <= '9';
		if (ps == pe || digits)
			continue;
		flags = (s == a ? LB_FORM_START : 0) | (e == b ? LB_FORM_END : 0);
		if ((rc = fn(arg, tok + ps, pe - ps, ps, flags)) != 0)
			return (rc);
	}
	return (0);
}

/* Byte classes of a template: 0 other, T_WS ASCII white space, T_LETTER, T_DIGIT. */
#define T_WS		1
#define T_LETTER	2
#define T_DIGIT		3
static const uint8_t tcls[256] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0,	/* 00 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* 10 */
	1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* 20 */
	3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 0, 0, 0, 0, 0, 0,	/* 30 */
	0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,	/* 40 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0,	/* 50 */
	0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,	/* 60 */
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0,	/* 70 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* 80 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* 90 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* a0 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* b0 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* c0 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* d0 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* e0 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,	/* f0 */
};

int
lb_text_template(const uint8_t *text, size_t len, uint8_t *out, size_t cap, size_t *outlen)
{
	size_t	 o = 0, run = 0, i = 0;

	if (cap > len)
		cap = len;	/* a template is never longer than its text */
	while (i < len) {
		uint8_t	 c = text[i], k = tcls[c];
		size_t	 at = o, from = i;

		if (k < T_LETTER) {
			if (k == T_WS)
				run = 0;
			else if (++run > LB_TOKEN_MAX)
				return (0);	/* a token that may be cut: its forms may differ */
			if (o == cap)
				return (0);
			out[o++] = c;
			i++;
			continue;
		}
		/* A run of letters and digits: copied folded until a digit makes it one "0". */
		while (k == T_LETTER) {
			if (o == cap)
				return (0);
			out[o++] = c | 32;
			if (++i == len)
				break;
			c = text[i];
			k = tcls[c];
		}
		if (i < len && k == T_DIGIT) {
			while (i < len && tcls[text[i]] >= T_LETTER)
				i++;
			if (at == cap)
				return (0);
			out[at] = '0';
			o = at + 1;
		}
		if ((run += i - from) > LB_TOKEN_MAX)
			return (0);
	}
	*outlen = o;
	return (1);
}
