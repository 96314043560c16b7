/*
 * lb_spans.c — which bytes of a message's text a query matched, for highlighting
 * (PROTOCOL.md "highlight"). It owns the choice of what is marked: the text tokens that a
 * positive text term matches (a word, a wildcard, message:), and the runs of tokens where a
 * positive text phrase matches, in place. It takes what a token is and what its forms are
 * (the stripped token, the parts of a compound token) from lb_tokenize.c and whether a term
 * matches a pattern from lb_query.c (lb_qpat_match), the rules the evaluator uses, so a span
 * is always a token or the bytes of a form the query matched; terms under an odd number of
 * NOTs and terms of other fields (host:, SD values, ...) mark nothing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "logbox.h"

/*
 * One text term of the message: a token or one of its forms (lb_token_forms), its folded bytes
 * (in toks.bytes) and its place in the text.
 */
struct tok {
	size_t		 at;		/* first byte in toks.bytes */
	size_t		 len;		/* folded (cut) length */
	int		 flags;		/* LB_FORM_*, LB_TERM_FORM for a form */
	struct lb_span	 span;		/* the whole run in the text; a form's own bytes */
};

/* The message's text terms, in order: each token, then its forms. */
struct toks {
	const struct lb_tokconf	*tc;
	const uint8_t		*text;
	size_t			 len;
	uint8_t			*bytes;		/* folded tokens, back to back */
	size_t			 nbytes;
	size_t			 tokat;		/* the current token's first byte in bytes */
	size_t			 tokoff;	/* its offset in the text */
	struct tok		*tok;
	uint8_t			*mark;
	size_t			 n;
	size_t			 cap;
};

static struct tok *
tok_new(struct toks *t)
{
	struct tok *tk;

	if (t->n == t->cap) {
		size_t c = t->cap ? 2 * t->cap : 64;

		if ((tk = realloc(t->tok, c * sizeof(*tk))) == NULL)
			return (NULL);
		t->tok = tk;
		t->cap = c;
	}
	return (&t->tok[t->n++]);
}

static int
form_add(void *arg, const uint8_t *form, size_t len, size_t at, int flags)
{
	struct toks	*t = arg;
	struct tok	*tk;

	(void)form;
	if ((tk = tok_new(t)) == NULL)
		return (ENOMEM);
	/* A form is bytes of its token: folded bytes map one to one onto the text's. */
	tk->at = t->tokat + at;
	tk->len = len;
	tk->flags = flags | LB_TERM_FORM;
	tk->span.off = t->tokoff + at;
	tk->span.len = len;
	return (0);
}

static int
tok_add(void *arg, const uint8_t *tok, size_t len, uint32_t pos, size_t off)
{
	struct toks	*t = arg;
	struct tok	*tk;
	size_t		 end = off;

	(void)pos;
	if ((tk = tok_new(t)) == NULL)
		return (ENOMEM);
	while (end < t->len && !t->tc->delim[t->text[end]])
		end++;
	/* Folded tokens never take more bytes than the text holds: bytes is len long. */
	memcpy(t->bytes + t->nbytes, tok, len);
	tk->at = t->nbytes;
	tk->len = len;
	tk->flags = LB_FORM_START | LB_FORM_END;
	tk->span.off = off;
	tk->span.len = end - off;
	t->tokat = t->nbytes;
	t->tokoff = off;
	t->nbytes += len;
	return (lb_token_forms(t->bytes + t->tokat, len, form_add, t));
}

static int
tok_match(const struct toks *t, size_t i, const struct lb_qpat *pt)
{
	return (lb_qpat_match(pt, t->bytes + t->tok[i].at, t->tok[i].len));
}

/* The next token's term after term i (t->n when none). */
static size_t
next_tok(const struct toks *t, size_t i)
{
	for (i++; i < t->n && (t->tok[i].flags & LB_TERM_FORM); i++)
		;
	return (i);
}

/*
 * 1 when the phrase q matches from the token whose term is i (lb_query.c's phrase_at: pattern
 * k matches the token k tokens later or a form of it; the first pattern may be the token's
 * end, the last its start); with mark, marks the terms it matched.
 */
static int
phrase_at(struct toks *t, size_t i, const struct lb_qnode *q, int mark)
{
	size_t n = q->npats, j;

	for (size_t k = 0; k < n; k++) {
		int need = n == 1 ? 0 : (k > 0 ? LB_FORM_START : 0) | (k + 1 < n ? LB_FORM_END : 0);

		if (i >= t->n)
			return (0);
		for (j = i; ; ) {
			if ((t->tok[j].flags & need) == need && tok_match(t, j, &q->pats[k]))
				break;
			if (++j >= t->n || !(t->tok[j].flags & LB_TERM_FORM))
				return (0);
		}
		if (mark)
			t->mark[j] = 1;
		i = next_tok(t, i);
	}
	return (1);
}

/* Marks what q (negated when neg) matched in the tokens. */
static void
walk(const struct lb_qnode *q, int neg, struct toks *t)
{
	size_t i;

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
		for (i = 0; i < t->n; i = next_tok(t, i))
			if (phrase_at(t, i, q, 0))
				(void)phrase_at(t, i, q, 1);
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

static int
span_cmp(const void *a, const void *b)
{
	const struct lb_span *x = a, *y = b;

	if (x->off != y->off)
		return (x->off < y->off ? -1 : 1);
	return (x->len < y->len ? 1 : x->len > y->len ? -1 : 0);
}

int
lb_query_spans(const struct lb_qnode *q, const struct lb_tokconf *tc, const uint8_t *text,
    size_t len, struct lb_span **out, size_t *nout)
{
	struct toks	 t;
	struct lb_span	*sp = NULL;
	size_t		 n = 0, m;
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
		/* A token and its forms overlap: one span for each run of marked bytes. */
		qsort(sp, n, sizeof(*sp), span_cmp);
		m = 0;
		for (size_t i = 1; i < n; i++) {
			size_t end = sp[m].off + sp[m].len;

			if (sp[i].off < end) {
				if (sp[i].off + sp[i].len > end)
					sp[m].len = sp[i].off + sp[i].len - sp[m].off;
			} else
				sp[++m] = sp[i];
		}
		n = m + 1;
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
