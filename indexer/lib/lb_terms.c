/*
 * lb_terms.c — the terms of a message: what gets indexed for it and what a brute-force
 * matcher compares against. It owns the namespaces' value rules (whole folded field values,
 * facility/severity as one byte, event time as a sortable second (lb_evtime_term), structured
 * data as "<sd-id>.<name>" 0x00 <value token>) and
 * the RFC 5424 STRUCTURED-DATA walk; the tokenizer owns what a token is and what its forms
 * are (the message text's terms are its tokens and their forms; SD values' only the tokens).
 */
#include <string.h>

#include "logbox.h"
#include "lb_format.h"

#define SD_NAME_MAX	64	/* an SD-ID or PARAM-NAME longer than this is cut (RFC: 32) */
#define TERM_MAX	(1 + SD_NAME_MAX + 1 + SD_NAME_MAX + 1 + LB_TOKEN_MAX)

/*
 * The terms of one tokenized value: a head, then each token, and for message text each
 * token's forms after it (lb_token_forms). The head is the namespace byte, and for structured
 * data "<id>.<name>" 0x00 after it.
 */
struct tokterm {
	uint8_t		 buf[TERM_MAX];
	size_t		 head;		/* bytes of ns [+ "<id>.<name>" 0x00] */
	int		 forms;		/* message text: the tokens' forms too */
	lb_msgterm2_fn	 fn;
	void		*arg;
};

static int
form_term(void *arg, const uint8_t *form, size_t len, size_t at, int flags)
{
	struct tokterm *t = arg;

	(void)at;
	memcpy(t->buf + t->head, form, len);
	return (t->fn(t->arg, t->buf, t->head + len, flags | LB_TERM_FORM));
}

static int
tok_term(void *arg, const uint8_t *tok, size_t len, uint32_t pos, size_t off)
{
	struct tokterm	*t = arg;
	int		 rc;

	(void)pos;
	(void)off;
	memcpy(t->buf + t->head, tok, len);
	if ((rc = t->fn(t->arg, t->buf, t->head + len, LB_FORM_START | LB_FORM_END)) != 0 ||
	    !t->forms)
		return (rc);
	return (lb_token_forms(tok, len, form_term, t));
}

static int
field(lb_msgterm2_fn fn, void *arg, uint8_t ns, struct lb_slice v)
{
	uint8_t	buf[1 + LB_TOKEN_MAX];
	size_t	n = v.len > LB_TOKEN_MAX ? LB_TOKEN_MAX : v.len;

	if (n == 0)
		return (0);
	buf[0] = ns;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = v.p[i];

		buf[1 + i] = (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
	}
	return (fn(arg, buf, n + 1, LB_FORM_START | LB_FORM_END));
}

/* Copies an SD name (up to a delimiter in stop) into t->buf at *at; returns its end in sd. */
static size_t
sd_name(const uint8_t *sd, size_t i, size_t len, const char *stop, struct tokterm *t,
    size_t *at)
{
	size_t n = 0;

	while (i < len && strchr(stop, sd[i]) == NULL) {
		if (n < SD_NAME_MAX)
			t->buf[(*at)++] = sd[i], n++;
		i++;
	}
	return (i);
}

/*
 * Walks "[id name="value" ...][id2 ...]". Values are unescaped (\" \\ \]) into a scratch buffer
 * and tokenized. Malformed text ends the walk quietly: the raw text is still stored.
 */
static int
sd_terms(const struct lb_tokconf *tc, struct lb_slice sd, lb_msgterm2_fn fn, void *arg)
{
	struct tokterm	 t;
	uint8_t		 val[LB_SD_MAX];
	const uint8_t	*p = sd.p;
	size_t		 len = sd.len, i = 0, idlen, at, vn;
	int		 rc;

	t.fn = fn;
	t.arg = arg;
	t.forms = 0;
	t.buf[0] = LB_NS_SD;
	while (i < len && p[i] == '[') {
		at = 1;
		i = sd_name(p, i + 1, len, " ]", &t, &at);
		idlen = at;
		while (i < len && p[i] == ' ') {
			at = idlen;
			t.buf[at++] = '.';
			i = sd_name(p, i + 1, len, "= ]", &t, &at);
			if (i + 1 >= len || p[i] != '=' || p[i + 1] != '"')
				return (0);
			t.buf[at++] = 0x00;
			t.head = at;
			i += 2;
			vn = 0;
			while (i < len && p[i] != '"') {
				if (p[i] == '\\' && i + 1 < len &&
				    (p[i + 1] == '"' || p[i + 1] == '\\' || p[i + 1] == ']'))
					i++;
				if (vn < sizeof(val))
					val[vn++] = p[i];
				i++;
			}
			if (i >= len)
				return (0);
			i++;	/* the closing quote */
			if ((rc = lb_tokenize(tc, val, vn, tok_term, &t)) != 0)
				return (rc);
		}
		if (i >= len || p[i] != ']')
			return (0);
		i++;
	}
	return (0);
}

int
lb_msg_terms2(const struct lb_tokconf *tc, const struct lb_msg *m, lb_msgterm2_fn fn, void *arg)
{
	struct tokterm	 t;
	uint8_t		 b[2], ev[LB_EVTIME_TERM_LEN];
	int		 rc;

	t.buf[0] = LB_NS_TEXT;
	t.head = 1;
	t.forms = 1;
	t.fn = fn;
	t.arg = arg;
	if ((rc = lb_tokenize(tc, m->message.p, m->message.len, tok_term, &t)) != 0)
		return (rc);
	if ((rc = field(fn, arg, LB_NS_HOST, m->host)) != 0 ||
	    (rc = field(fn, arg, LB_NS_PROGRAM, m->program)) != 0 ||
	    (rc = field(fn, arg, LB_NS_PID, m->pid)) != 0 ||
	    (rc = field(fn, arg, LB_NS_MSGID, m->msgid)) != 0 ||
	    (rc = field(fn, arg, LB_NS_PEER, m->peer)) != 0)
		return (rc);
	if (m->facility != LB_NOVALUE) {
		b[0] = LB_NS_FACILITY;
		b[1] = m->facility;
		if ((rc = fn(arg, b, 2, LB_FORM_START | LB_FORM_END)) != 0)
			return (rc);
	}
	if (m->severity != LB_NOVALUE) {
		b[0] = LB_NS_SEVERITY;
		b[1] = m->severity;
		if ((rc = fn(arg, b, 2, LB_FORM_START | LB_FORM_END)) != 0)
			return (rc);
	}
	if (m->timestamp != LB_NOTIME) {
		lb_evtime_term(lb_evtime_of(m->timestamp), ev);
		if ((rc = fn(arg, ev, sizeof(ev), LB_FORM_START | LB_FORM_END)) != 0)
			return (rc);
	}
	return (sd_terms(tc, m->sd, fn, arg));
}

int64_t
lb_evtime_of(int64_t ts)
{
	int64_t s = ts / 1000000;

	return (ts % 1000000 < 0 ? s - 1 : s);
}

void
lb_evtime_term(int64_t sec, uint8_t out[LB_EVTIME_TERM_LEN])
{
	uint64_t u = (uint64_t)sec ^ (1ULL << 63);

	out[0] = LB_NS_EVTIME;
	for (int i = 0; i < 8; i++)
		out[1 + i] = (uint8_t)(u >> (56 - 8 * i));
}

int64_t
lb_evtime_sec(const uint8_t *term)
{
	uint64_t u = 0;

	for (int i = 0; i < 8; i++)
		u = u << 8 | term[1 + i];
	return ((int64_t)(u ^ (1ULL << 63)));
}

struct plain {
	lb_msgterm_fn	 fn;
	void		*arg;
};

static int
plain_term(void *arg, const uint8_t *term, size_t len, int flags)
{
	struct plain *p = arg;

	(void)flags;
	return (p->fn(p->arg, term, len));
}

int
lb_msg_terms(const struct lb_tokconf *tc, const struct lb_msg *m, lb_msgterm_fn fn, void *arg)
{
	struct plain p = { fn, arg };

	return (lb_msg_terms2(tc, m, plain_term, &p));
}
