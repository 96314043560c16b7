/*
 * fz_query.c — arbitrary bytes as query text through lb_query_parse() with the default and a
 * custom tokenizer setting. A parsed query must print (lb_query_fmt) as text that parses to an
 * equal tree and prints again to the same text; a refused one must say where and why. The
 * tree is matched against a small message, its spans (lb_query_spans) in the input must be
 * tokens or forms of tokens, and the input split in two is run through lb_glob_match() as a glob and a
 * subject, checked against a plain recursive matcher. The input's text template
 * (lb_text_template) is no longer than it, its own template, and decides a phrase of plain
 * words (whole literals without digits) as the input does.
 */
#include <stdlib.h>
#include <string.h>

#include "logbox.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)	do { if (!(x)) abort(); } while (0)

/*
 * The spans of q in text are tokens of it or forms of tokens (their bytes begin and end at a
 * delimiter, the text's ends or ASCII punctuation), in order, apart.
 */
static void
spans(const struct lb_tokconf *tc, const struct lb_qnode *q, const uint8_t *text, size_t len)
{
	struct lb_span	*sp;
	size_t		 n, at = 0;

	CHECK(lb_query_spans(q, tc, text, len, &sp, &n) == 0);
	CHECK((n == 0) == (sp == NULL));
	for (size_t i = 0; i < n; i++) {
		size_t a = sp[i].off, b = sp[i].off + sp[i].len;

		CHECK(a >= at && b > a && b <= len);
		CHECK(a == 0 || tc->delim[text[a - 1]] || lb_form_punct[text[a - 1]]);
		CHECK(b == len || tc->delim[text[b]] || lb_form_punct[text[b]]);
		for (size_t k = a; k < b; k++)
			CHECK(!tc->delim[text[k]]);
		at = b + 1;
	}
	free(sp);
}

/* 1 for a text phrase of whole literals without digits (lb_eval.c's tpl_phrase). */
static int
plain_phrase(const struct lb_qnode *q)
{
	if (q->kind != LB_Q_PHRASE || q->ns != LB_NS_TEXT)
		return (0);
	for (size_t i = 0; i < q->npats; i++) {
		if (q->pats[i].kind != LB_QP_EXACT || q->pats[i].litlen == 0)
			return (0);
		for (size_t j = 0; j < q->pats[i].litlen; j++)
			if (q->pats[i].lit[j] >= '0' && q->pats[i].lit[j] <= '9')
				return (0);
	}
	return (1);
}

/* The template of m's text: idempotent, no longer, and a plain phrase's verdict kept. */
static void
templates(const struct lb_tokconf *tc, const struct lb_qnode *q, const struct lb_msg *m, int r)
{
	struct lb_msg	 t = *m;
	uint8_t		*a, *b;
	size_t		 n, n2;

	if ((a = malloc(m->message.len + 1)) == NULL || (b = malloc(m->message.len + 1)) == NULL)
		abort();
	if (lb_text_template(m->message.p, m->message.len, a, m->message.len + 1, &n)) {
		CHECK(n <= m->message.len);
		CHECK(lb_text_template(a, n, b, m->message.len + 1, &n2) == 1);
		CHECK(n2 == n && memcmp(a, b, n) == 0);
		t.message.p = a;
		t.message.len = n;
		if (plain_phrase(q))
			CHECK(lb_query_match(q, tc, &t) == r);
	}
	free(a);
	free(b);
}

static void
roundtrip(const struct lb_tokconf *tc, const uint8_t *data, size_t size)
{
	struct lb_qnode	*q = NULL, *q2 = NULL;
	struct lb_qerr	 e;
	struct lb_msg	 m;
	char		*f = NULL, *f2 = NULL;
	size_t		 fl, fl2;
	int		 rc, r;

	memset(&e, 0, sizeof(e));
	rc = lb_query_parse(tc, (const char *)data, size, &q, &e);
	if (rc != 0) {
		CHECK(rc == LB_EQUERY || rc == LB_ETOOBIG);
		CHECK(e.pos <= size && e.msg[0] != '\0');
		return;
	}
	CHECK(lb_query_fmt(tc, q, &f, &fl) == 0);
	CHECK(strlen(f) <= fl && f[fl] == '\0');
	rc = lb_query_parse(tc, f, fl, &q2, &e);
	CHECK(rc == 0);
	CHECK(lb_query_equal(q, q2) && lb_query_equal(q2, q));
	CHECK(lb_query_fmt(tc, q2, &f2, &fl2) == 0);
	CHECK(fl == fl2 && memcmp(f, f2, fl) == 0);

	memset(&m, 0, sizeof(m));
	m.timestamp = LB_NOTIME;
	m.facility = 4;
	m.severity = 3;
	m.message.p = data;
	m.message.len = size;
	m.host.p = (const uint8_t *)"web-01";
	m.host.len = 6;
	m.peer.p = (const uint8_t *)"10.0.0.7";
	m.peer.len = 8;
	m.sd.p = (const uint8_t *)"[x@1 a=\"b c\"][meta seq=\"1\"]";
	m.sd.len = strlen((const char *)m.sd.p);
	r = lb_query_match(q, tc, &m);
	CHECK(r == 0 || r == 1);
	CHECK(lb_query_match(q2, tc, &m) == r);
	templates(tc, q, &m, r);
	spans(tc, q, data, size);
	free(f);
	free(f2);
	lb_query_free(q);
	lb_query_free(q2);
}

/* The definition of a glob, the slow way (short inputs only). */
static int
slow_glob(const uint8_t *g, size_t gl, const uint8_t *s, size_t sl)
{
	if (gl == 0)
		return (sl == 0);
	if (g[0] == '*') {
		for (size_t k = 0; k <= sl; k++)
			if (slow_glob(g + 1, gl - 1, s + k, sl - k))
				return (1);
		return (0);
	}
	if (sl == 0)
		return (0);
	if (g[0] == '?')
		return (slow_glob(g + 1, gl - 1, s + 1, sl - 1));
	if (g[0] == '\\' && gl >= 2)
		return (g[1] == s[0] && slow_glob(g + 2, gl - 2, s + 1, sl - 1));
	return (g[0] == s[0] && slow_glob(g + 1, gl - 1, s + 1, sl - 1));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lb_tokconf	 tc, tc2;
	size_t			 split;
	int			 r;

	lb_tokconf_default(&tc);
	(void)lb_tokconf_set(&tc2, ".@-", 3);
	roundtrip(&tc, data, size);
	if (size < 4096)
		roundtrip(&tc2, data, size);
	if (size > 0) {
		split = data[0] % size;
		r = lb_glob_match(data, split, data + split, size - split);
		CHECK(r == 0 || r == 1);
		if (size <= 16)
			CHECK(r == slow_glob(data, split, data + split, size - split));
	}
	return (0);
}
