/*
 * lb_spans.c — which bytes of a message's text a query matched, for highlighting
 * (PROTOCOL.md "highlight"). It owns the choice of what is marked: the text tokens that a
 * positive text term matches (a word, a wildcard, message:), and the runs of tokens where a
 * positive text phrase matches, in place. It takes what a token is from lb_tokenize.c and
 * whether a token matches a pattern from lb_query.c (lb_qpat_match), the rules the evaluator
 * uses, so a span is always a token the query matched; terms under an odd number of NOTs and
 * terms of other fields (host:, SD values, ...) mark nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "logbox.h"

/* The message's text tokens: folded bytes back to back, and each one's place in the text. */
struct toks {
	const struct lb_tokconf	*tc;
	const uint8_t		*text;
	size_t			 len;
	uint8_t			*bytes;		/* folded tokens, back to back */
	size_t			 nbytes;
	size_t			*at;		/* at[i]: token i's first byte in bytes */
	size_t			*tlen;		/* folded (cut) length */
	struct lb_span		*span;		/* span[i]: token i's bytes in the text */
	uint8_t			*mark;
	size_t			 n;
	size_t			 cap;
};

static int
tok_add(void *arg, const uint8_t *tok, size_t len, uint32_t pos, size_t off)
{
	struct toks	*t = arg;
	size_t		 end = off;

	(void)pos;
	if (t->n == t->cap) {
		size_t	 c = t->cap ? 2 * t->cap : 64;
		size_t	*at, *tl;
		void	*sp;

		if ((at = realloc(t->at, c * sizeof(*at))) == NULL)
			return (ENOMEM);
		t->at = at;
		if ((tl = realloc(t->tlen, c * sizeof(*tl))) == NULL)
			return (ENOMEM);
		t->tlen = tl;
		if ((sp = realloc(t->span, c * sizeof(*t->span))) == NULL)
			return (ENOMEM);
		t->span = sp;
		t->cap = c;
	}
	/* Folded tokens never take more bytes than the text holds: bytes is len long. */
	memcpy(t->bytes + t->nbytes, tok, len);
	t->at[t->n] = t->nbytes;
	t->tlen[t->n] = len;
	t->nbytes += len;
	while (end < t->len && !t->tc->delim[t->text[end]])
		end++;
	t->span[t->n].off = off;
	t->span[t->n].len = end - off;
	t->n++;
	return (0);
}

static int
tok_match(const struct toks *t, size_t i, const struct lb_qpat *pt)
{
	return (lb_qpat_match(pt, t->bytes + t->at[i], t->tlen[i]));
}

/* Marks what q (negated when neg) matched in the tokens. */
static void
walk(const struct lb_qnode *q, int neg, struct toks *t)
{
	size_t i, k;

	switch (q->kind) {
	case LB_Q_TERM:
		if (neg || q->ns != LB_NS_TEXT)
			return;
		for (i = 0; i < t->n; i++)
			if (tok_match(t, i, &q->pats[0]))
				t->mark[i] = 1;
		return;
	case LB_Q_PHRASE:
		if (neg || q->ns != LB_NS_TEXT)
			return;
		for (i = 0; i + q->npats <= t->n; i++) {
			for (k = 0; k < q->npats; k++)
				if (!tok_match(t, i + k, &q->pats[k]))
					break;
			if (k == q->npats)
				memset(t->mark + i, 1, q->npats);
		}
		return;
	case LB_Q_AND:
	case LB_Q_OR:
		for (i = 0; i < q->nkids; i++)
			walk(q->kids[i], neg, t);
		return;
	case LB_Q_NOT:
		walk(q->kids[0], !neg, t);
		return;
	default:
		return;
	}
}

int
lb_query_spans(const struct lb_qnode *q, const struct lb_tokconf *tc, const uint8_t *text,
    size_t len, struct lb_span **out, size_t *nout)
{
	struct toks	 t;
	struct lb_span	*sp = NULL;
	size_t		 n = 0;
	int		 rc;

	*out = NULL;
	*nout = 0;
	memset(&t, 0, sizeof(t));
	t.tc = tc;
	t.text = text;
	t.len = len;
	if (len == 0)
		return (0);
	if ((t.bytes = malloc(len)) == NULL)
		return (ENOMEM);
	if ((rc = lb_tokenize(tc, text, len, tok_add, &t)) != 0)
		goto done;
	rc = ENOMEM;
	if (t.n == 0) {
		rc = 0;
		goto done;
	}
	if ((t.mark = calloc(t.n, 1)) == NULL)
		goto done;
	walk(q, 0, &t);
	for (size_t i = 0; i < t.n; i++)
		n += t.mark[i];
	if (n > 0) {
		if ((sp = malloc(n * sizeof(*sp))) == NULL)
			goto done;
		n = 0;
		for (size_t i = 0; i < t.n; i++)
			if (t.mark[i])
				sp[n++] = t.span[i];
	}
	*out = sp;
	*nout = n;
	rc = 0;
 done:
	free(t.bytes);
	free(t.at);
	free(t.tlen);
	free(t.span);
	free(t.mark);
	return (rc);
}
