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

/* One text token: its folded bytes (in toks.bytes) and its place in the text. */
struct tok {
	size_t		 at;		/* first byte in toks.bytes */
	size_t		 len;		/* folded (cut) length */
	struct lb_span	 span;		/* the whole run in the text */
};

/* The message's text tokens, in order. */
struct toks {
	const struct lb_tokconf	*tc;
	const uint8_t		*text;
	size_t			 len;
	uint8_t			*bytes;		/* folded tokens, back to back */
	size_t			 nbytes;
	struct tok		*tok;
	uint8_t			*mark;
	size_t			 n;
	size_t			 cap;
};

static int
tok_add(void *arg, const uint8_t *tok, size_t len, uint32_t pos, size_t off)
{
	struct toks	*t = arg;
	struct tok	*tk;
	size_t		 end = off;

	(void)pos;
	if (t->n == t->cap) {
		size_t c = t->cap ? 2 * t->cap : 64;

		if ((tk = realloc(t->tok, c * sizeof(*tk))) == NULL)
			return (ENOMEM);
		t->tok = tk;
		t->cap = c;
	}
	while (end < t->len && !t->tc->delim[t->text[end]])
		end++;
	/* Folded tokens never take more bytes than the text holds: bytes is len long. */
	memcpy(t->bytes + t->nbytes, tok, len);
	tk = &t->tok[t->n++];
	tk->at = t->nbytes;
	tk->len = len;
	tk->span.off = off;
	tk->span.len = end - off;
	t->nbytes += len;
	return (0);
}

static int
tok_match(const struct toks *t, size_t i, const struct lb_qpat *pt)
{
	return (lb_qpat_match(pt, t->bytes + t->tok[i].at, t->tok[i].len));
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
				sp[n++] = t.tok[i].span;
	}
	*out = sp;
	*nout = n;
	rc = 0;
 done:
	free(t.bytes);
	free(t.tok);
	free(t.mark);
	return (rc);
}
