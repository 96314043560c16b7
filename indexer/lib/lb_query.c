/*
 * lb_query.c — query text to a tree and back (QUERY.md §1), and the brute-force matcher
 * that defines what a query means. It owns the lexer, the grammar, the field names and value
 * rules, the glob form of term patterns, whether a term matches a pattern (lb_qpat_match, also
 * used by lb_spans.c for highlighting) and the canonical printing; it does not touch an index
 * (lb_eval.c does) and takes what a token is from lb_tokenize.c and the terms of a message
 * from lb_terms.c.
 *
 * The one idea: a query word is cut into tokens exactly as message text is, so a word that
 * holds delimiters becomes a phrase of adjacent terms, and every node prints itself back as
 * query text that parses to the same tree.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logbox.h"

/* ---------------------------------------------------------------- glob */

/*
 * Iterative matching with one backtrack point: the last '*' seen and where in s it started.
 * A later '*' replaces it (what the earlier one absorbed never needs to change), so the walk
 * is O(len(glob) * len(s)) at worst and never recurses.
 */
int
lb_glob_match(const uint8_t *glob, size_t globlen, const uint8_t *s, size_t slen)
{
	size_t	 gi = 0, si = 0, star_gi = SIZE_MAX, star_si = 0;

	while (si < slen) {
		if (gi < globlen) {
			uint8_t	 c = glob[gi];
			size_t	 step = 1;

			if (c == '*') {
				star_gi = ++gi;
				star_si = si;
				continue;
			}
			if (c == '?') {
				gi++;
				si++;
				continue;
			}
			if (c == '\\' && gi + 1 < globlen) {
				c = glob[gi + 1];
				step = 2;
			}
			if (c == s[si]) {
				gi += step;
				si++;
				continue;
			}
		}
		if (star_gi == SIZE_MAX)
			return (0);
		gi = star_gi;
		si = ++star_si;
	}
	while (gi < globlen && glob[gi] == '*')
		gi++;
	return (gi == globlen);
}

int
lb_qpat_match(const struct lb_qpat *pt, const uint8_t *s, size_t len)
{
	switch (pt->kind) {
	case LB_QP_EXACT:
		return (len == pt->litlen && memcmp(s, pt->lit, len) == 0);
	case LB_QP_PREFIX:
		return (len >= pt->litlen && memcmp(s, pt->lit, pt->litlen) == 0);
	default:
		if (len < pt->litlen || memcmp(s, pt->lit, pt->litlen) != 0)
			return (0);
		return (lb_glob_match(pt->glob, pt->globlen, s, len));
	}
}

/* ---------------------------------------------------------------- names */

static const char *const facilities[24] = {
	"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
	"authpriv", "ftp", "ntp", "security", "console", "solaris-cron", "local0", "local1",
	"local2", "local3", "local4", "local5", "local6", "local7"
};

static const char *const severities[8] = {
	"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"
};

const char *
lb_facility_name(unsigned v)
{
	return (v < 24 ? facilities[v] : NULL);
}

const char *
lb_severity_name(unsigned v)
{
	return (v < 8 ? severities[v] : NULL);
}

static const struct {
	const char	*name;
	uint8_t		 ns;
} fields[] = {
	{ "host", LB_NS_HOST }, { "program", LB_NS_PROGRAM }, { "pid", LB_NS_PID },
	{ "msgid", LB_NS_MSGID }, { "facility", LB_NS_FACILITY },
	{ "severity", LB_NS_SEVERITY }, { "message", LB_NS_TEXT }, { "peer", LB_NS_PEER },
};

static int
is_space(uint8_t c)
{
	return (c == ' ' || (c >= 0x09 && c <= 0x0d));
}

static uint8_t
fold(uint8_t c)
{
	return ((c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c);
}

/* 1 when p[0..len) equals the NUL-terminated lower-case s, ignoring ASCII case. */
static int
ci_equal(const char *p, size_t len, const char *s)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (s[i] == '\0' || fold((uint8_t)p[i]) != (uint8_t)s[i])
			return (0);
	return (s[i] == '\0');
}

int
lb_field_name(const void *name, size_t len, uint8_t *ns, const char **canon)
{
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (ci_equal(name, len, fields[i].name)) {
			*ns = fields[i].ns;
			*canon = fields[i].name;
			return (1);
		}
	return (0);
}

/* ---------------------------------------------------------------- tree */

static void
pat_clear(struct lb_qpat *pt)
{
	free(pt->glob);
	free(pt->lit);
}

void
lb_query_free(struct lb_qnode *q)
{
	if (q == NULL)
		return;
	for (size_t i = 0; i < q->npats; i++)
		pat_clear(&q->pats[i]);
	free(q->pats);
	for (size_t i = 0; i < q->nkids; i++)
		lb_query_free(q->kids[i]);
	free(q->kids);
	free(q->sdname);
	free(q);
}

/* Fills pt from a glob: copies it and derives kind and the literal prefix. */
static int
pat_init(struct lb_qpat *pt, const uint8_t *glob, size_t globlen)
{
	size_t	 i = 0, n = 0;
	int	 kind = LB_QP_EXACT;

	memset(pt, 0, sizeof(*pt));
	if ((pt->glob = malloc(globlen + 1)) == NULL ||
	    (pt->lit = malloc(globlen + 1)) == NULL) {
		pat_clear(pt);
		memset(pt, 0, sizeof(*pt));
		return (ENOMEM);
	}
	memcpy(pt->glob, glob, globlen);
	pt->glob[globlen] = '\0';
	pt->globlen = globlen;
	while (i < globlen) {
		if (glob[i] == '*' || glob[i] == '?') {
			kind = LB_QP_PREFIX;
			for (size_t k = i; k < globlen; k++)
				if (glob[k] != '*')
					kind = LB_QP_WILD;
			break;
		}
		if (glob[i] == '\\' && i + 1 < globlen)
			i++;
		pt->lit[n++] = glob[i++];
	}
	pt->lit[n] = '\0';
	pt->litlen = n;
	pt->kind = kind;
	return (0);
}

/* ---------------------------------------------------------------- lexer */

enum {
	T_END = 1,
	T_LPAREN,
	T_RPAREN,
	T_WORD,		/* raw bytes [start, end), escapes not yet resolved */
	T_QUOTE,	/* content [start + 1, end - 1) */
	T_AND,
	T_OR,
	T_NOT
};

struct tok {
	int		 type;
	size_t		 start;
	size_t		 end;
};

struct parser {
	const struct lb_tokconf	*tc;
	const uint8_t		*text;
	size_t			 len;
	size_t			 at;		/* lexer position */
	struct tok		 peeked;
	int			 have;		/* peeked is valid */
	size_t			 nodes;
	int			 depth;
	struct lb_qerr		*err;
};

static int
qerr(struct parser *p, int rc, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
qerr(struct parser *p, int rc, size_t pos, const char *fmt, ...)
{
	va_list ap;

	if (p->err != NULL) {
		p->err->pos = pos;
		va_start(ap, fmt);
		vsnprintf(p->err->msg, sizeof(p->err->msg), fmt, ap);
		va_end(ap);
	}
	return (rc);
}

static int
lex(struct parser *p, struct tok *t)
{
	const uint8_t	*s = p->text;
	size_t		 i = p->at, n = p->len;

	while (i < n && is_space(s[i]))
		i++;
	t->start = i;
	if (i == n) {
		t->type = T_END;
		t->end = i;
	} else if (s[i] == '(' || s[i] == ')') {
		t->type = s[i] == '(' ? T_LPAREN : T_RPAREN;
		t->end = i + 1;
	} else if (s[i] == '"') {
		for (i++; i < n && s[i] != '"'; i++)
			if (s[i] == '\\') {
				if (i + 1 == n)
					return (qerr(p, LB_EQUERY, i,
					    "'\\' at the end of the query"));
				i++;
			}
		if (i == n)
			return (qerr(p, LB_EQUERY, t->start, "unterminated quote"));
		t->type = T_QUOTE;
		t->end = i + 1;
	} else {
		for (; i < n && !is_space(s[i]) && s[i] != '(' && s[i] != ')' && s[i] != '"';
		    i++)
			if (s[i] == '\\') {
				if (i + 1 == n)
					return (qerr(p, LB_EQUERY, i,
					    "'\\' at the end of the query"));
				i++;
			}
		t->end = i;
		t->type = T_WORD;
		if (i - t->start == 3 && memcmp(s + t->start, "AND", 3) == 0)
			t->type = T_AND;
		else if (i - t->start == 2 && memcmp(s + t->start, "OR", 2) == 0)
			t->type = T_OR;
		else if (i - t->start == 3 && memcmp(s + t->start, "NOT", 3) == 0)
			t->type = T_NOT;
	}
	p->at = t->end;
	return (0);
}

static int
peek(struct parser *p, struct tok *t)
{
	int rc;

	if (!p->have) {
		if ((rc = lex(p, &p->peeked)) != 0)
			return (rc);
		p->have = 1;
	}
	*t = p->peeked;
	return (0);
}

static void
take(struct parser *p)
{
	p->have = 0;
}

static const char *
tok_name(int type)
{
	switch (type) {
	case T_AND: return ("AND");
	case T_OR: return ("OR");
	case T_NOT: return ("NOT");
	case T_LPAREN: return ("(");
	default: return (")");
	}
}

/* ---------------------------------------------------------------- terms */

static int
node_new(struct parser *p, int kind, size_t pos, struct lb_qnode **out)
{
	struct lb_qnode *q;

	if (++p->nodes > LB_QUERY_NODES)
		return (qerr(p, LB_ETOOBIG, pos, "more than %d terms and operators",
		    LB_QUERY_NODES));
	if ((q = calloc(1, sizeof(*q))) == NULL)
		return (ENOMEM);
	q->kind = kind;
	q->pos = pos;
	*out = q;
	return (0);
}

static int
node_addpat(struct lb_qnode *q, const uint8_t *glob, size_t globlen)
{
	struct lb_qpat	*np;
	int		 rc;

	if ((q->npats & (q->npats - 1)) == 0) {	/* 0, 1, 2, 4, ...: grow */
		size_t cap = q->npats == 0 ? 1 : q->npats * 2;

		if ((np = realloc(q->pats, cap * sizeof(*np))) == NULL)
			return (ENOMEM);
		q->pats = np;
	}
	if ((rc = pat_init(&q->pats[q->npats], glob, globlen)) != 0)
		return (rc);
	q->npats++;
	return (0);
}

/* One decoded byte of a raw word: the byte, and whether it was written with a '\'. */
static size_t
unit(const uint8_t *raw, size_t i, uint8_t *c, int *esc)
{
	if (raw[i] == '\\') {
		*c = raw[i + 1];	/* the lexer made sure a byte follows */
		*esc = 1;
		return (i + 2);
	}
	*c = raw[i];
	*esc = 0;
	return (i + 1);
}

/* Appends one unit to a glob being built: wildcards bare, literal bytes folded. */
static size_t
glob_put(uint8_t *g, size_t n, uint8_t c, int esc)
{
	if (!esc && (c == '*' || c == '?')) {
		g[n++] = c;
		return (n);
	}
	c = fold(c);
	if (c == '*' || c == '?' || c == '\\')
		g[n++] = '\\';
	g[n++] = c;
	return (n);
}

/*
 * Splits raw[0..len) into token patterns as the tokenizer splits text (unescaped wildcards
 * and escaped bytes never split) and appends them to q. A token is cut at LB_TOKEN_MAX bytes,
 * wildcards counted, and the rest of its run skipped.
 */
static int
split_text(struct parser *p, struct lb_qnode *q, const uint8_t *raw, size_t len)
{
	uint8_t	 g[2 * LB_TOKEN_MAX];
	size_t	 i = 0, gl = 0, units = 0;
	uint8_t	 c;
	int	 esc, rc;

	while (i <= len) {
		int end = i == len;

		if (!end) {
			i = unit(raw, i, &c, &esc);
			if (esc || c == '*' || c == '?' || !p->tc->delim[c]) {
				if (units < LB_TOKEN_MAX) {
					gl = glob_put(g, gl, c, esc);
					units++;
				}
				continue;
			}
		}
		if (units > 0 && (rc = node_addpat(q, g, gl)) != 0)
			return (rc);
		gl = units = 0;
		if (end)
			break;
	}
	return (0);
}

/* A whole field value (host, program, pid, msgid, peer) as one pattern, cut at LB_TOKEN_MAX. */
static int
whole_value(struct lb_qnode *q, const uint8_t *raw, size_t len)
{
	uint8_t	 g[2 * LB_TOKEN_MAX];
	size_t	 i = 0, gl = 0, units = 0;
	uint8_t	 c;
	int	 esc;

	while (i < len && units < LB_TOKEN_MAX) {
		i = unit(raw, i, &c, &esc);
		gl = glob_put(g, gl, c, esc);
		units++;
	}
	return (node_addpat(q, g, gl));
}

/* Decodes raw[0..len) (escapes resolved, folded) into buf; 0 when it does not fit. */
static size_t
decode(const uint8_t *raw, size_t len, char *buf, size_t bufsize)
{
	size_t	 i = 0, n = 0;
	uint8_t	 c;
	int	 esc;

	while (i < len) {
		i = unit(raw, i, &c, &esc);
		if (n + 1 >= bufsize)
			return (0);
		buf[n++] = (char)fold(c);
	}
	buf[n] = '\0';
	return (n);
}

/* The value of a facility or severity: a name of names[0..n) or a number below n; -1 if not. */
static int
name_value(const uint8_t *raw, size_t len, const char *const *names, int n,
    const char *const *aliases, const int *aliasv, int naliases)
{
	char	 v[24];
	size_t	 vl;
	int	 num = 0;

	if ((vl = decode(raw, len, v, sizeof(v))) == 0 || strlen(v) != vl)
		return (-1);
	for (int i = 0; i < n; i++)
		if (strcmp(v, names[i]) == 0)
			return (i);
	for (int i = 0; i < naliases; i++)
		if (strcmp(v, aliases[i]) == 0)
			return (aliasv[i]);
	for (size_t i = 0; i < vl; i++) {
		if (v[i] < '0' || v[i] > '9' || vl > 3)
			return (-1);
		num = num * 10 + (v[i] - '0');
	}
	return (num < n ? num : -1);
}

static int
severity_value(const uint8_t *raw, size_t len)
{
	static const char *const aliases[] = { "panic", "error", "warn" };
	static const int aliasv[] = { 0, 3, 4 };

	return (name_value(raw, len, severities, 8, aliases, aliasv, 3));
}

int
lb_sdname_ok(const void *name, size_t len)
{
	const uint8_t	*s = name, *dot;
	size_t		 idlen;

	if ((dot = memchr(s, '.', len)) == NULL)
		return (0);
	idlen = (size_t)(dot - s);
	if (idlen == 0 || idlen + 1 == len)
		return (0);
	if (memchr(s, '@', idlen) != NULL)
		return (1);
	return ((idlen == 11 && memcmp(s, "timeQuality", 11) == 0) ||
	    (idlen == 6 && memcmp(s, "origin", 6) == 0) ||
	    (idlen == 4 && memcmp(s, "meta", 4) == 0));
}

/* lb_sdname_ok() in a query: printable, and none of = ] " \\ : (they end or escape a field). */
static int
is_sdname(const uint8_t *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] < 0x21 || s[i] > 0x7e || s[i] == '=' || s[i] == ']' ||
		    s[i] == '"' || s[i] == '\\' || s[i] == ':')
			return (0);
	return (lb_sdname_ok(s, len));
}

/* Text (no field, message:, or an SD value): TERM, PHRASE, or ALL for a lone run of '*'. */
static int
text_term(struct parser *p, size_t pos, uint8_t ns, const uint8_t *raw, size_t len,
    size_t errpos, struct lb_qnode **out)
{
	struct lb_qnode	*q = NULL;
	int		 rc;

	if ((rc = node_new(p, LB_Q_TERM, pos, &q)) != 0)
		return (rc);
	q->ns = ns;
	if ((rc = split_text(p, q, raw, len)) != 0)
		goto fail;
	if (q->npats == 0) {
		rc = qerr(p, LB_EQUERY, errpos, "nothing to search for");
		goto fail;
	}
	if (q->npats >= 2)
		q->kind = LB_Q_PHRASE;
	else if (ns == LB_NS_TEXT && strspn((char *)q->pats[0].glob, "*") ==
	    q->pats[0].globlen) {
		pat_clear(&q->pats[0]);
		free(q->pats);
		q->pats = NULL;
		q->npats = 0;
		q->ns = 0;
		q->kind = LB_Q_ALL;
	}
	*out = q;
	return (0);
 fail:
	lb_query_free(q);
	return (rc);
}

/*
 * The value of a field word whose value starts at raw offset v: the rest of the word or, when
 * that is empty, a quoted string right after it. Sets *vs and *ve to the raw value.
 */
static int
field_value(struct parser *p, const struct tok *w, size_t v, const char *what, size_t whatlen,
    size_t *vs, size_t *ve)
{
	struct tok	 t;
	int		 rc;

	*vs = v;
	*ve = w->end;
	if (v == w->end && w->end < p->len && p->text[w->end] == '"') {
		if ((rc = peek(p, &t)) != 0)
			return (rc);
		take(p);
		*vs = t.start + 1;
		*ve = t.end - 1;
	}
	if (*vs == *ve)
		return (qerr(p, LB_EQUERY, w->start, "expected a value after '%.*s'",
		    (int)(whatlen > 64 ? 64 : whatlen), what));
	return (0);
}

static int
set_node(struct parser *p, size_t pos, uint8_t ns, uint32_t mask, struct lb_qnode **out)
{
	int rc;

	if ((rc = node_new(p, LB_Q_SET, pos, out)) != 0)
		return (rc);
	(*out)->ns = ns;
	(*out)->mask = mask;
	return (0);
}

/* "severity<=x", "severity<x", "severity>=x", "severity>x". */
static int
severity_range(struct parser *p, const struct tok *w, struct lb_qnode **out)
{
	const uint8_t	*s = p->text;
	size_t		 op = w->start + 8, v = op + 1, vs, ve, oplen;
	uint32_t	 mask = 0;
	int		 lt = s[op] == '<', eq = 0, val, rc, lo, hi;

	if (v < w->end && s[v] == '=') {
		eq = 1;
		v++;
	}
	oplen = v - w->start;
	if ((rc = field_value(p, w, v, (const char *)s + w->start, oplen, &vs, &ve)) != 0)
		return (rc);
	if ((val = severity_value(s + vs, ve - vs)) < 0)
		return (qerr(p, LB_EQUERY, w->start, "unknown severity '%.*s'",
		    (int)(ve - vs > 64 ? 64 : ve - vs), (const char *)s + vs));
	if (lt) {
		lo = 0;
		hi = eq ? val : val - 1;
	} else {
		lo = eq ? val : val + 1;
		hi = 7;
	}
	if (lo > hi)
		return (qerr(p, LB_EQUERY, w->start, "no severity is %.*s",
		    (int)(w->end - op > 64 ? 64 : w->end - op), (const char *)s + op));
	for (int i = lo; i <= hi; i++)
		mask |= 1u << i;
	return (set_node(p, w->start, LB_NS_SEVERITY, mask, out));
}

/* A bare word: a field filter, a severity range, or text. */
static int
word_term(struct parser *p, const struct tok *w, struct lb_qnode **out)
{
	const uint8_t	*s = p->text, *colon = NULL;
	const char	*fname;
	size_t		 i, vs, ve, flen;
	uint8_t		 ns = 0;
	int		 rc, val, known;

	if (w->end - w->start > 8 && ci_equal((const char *)s + w->start, 8, "severity") &&
	    (s[w->start + 8] == '<' || s[w->start + 8] == '>'))
		return (severity_range(p, w, out));
	for (i = w->start; i < w->end; i++) {
		if (s[i] == '\\')
			i++;
		else if (s[i] == ':') {
			colon = s + i;
			break;
		}
	}
	if (colon == NULL || memchr(s + w->start, '\\', (size_t)(colon - s) - w->start) != NULL)
		return (text_term(p, w->start, LB_NS_TEXT, s + w->start, w->end - w->start,
		    w->start, out));
	flen = (size_t)(colon - s) - w->start;
	known = lb_field_name(s + w->start, flen, &ns, &fname);
	if (!known && !is_sdname(s + w->start, flen))
		return (text_term(p, w->start, LB_NS_TEXT, s + w->start, w->end - w->start,
		    w->start, out));
	if ((rc = field_value(p, w, flen + 1 + w->start, (const char *)s + w->start, flen + 1,
	    &vs, &ve)) != 0)
		return (rc);
	if (!known) {
		struct lb_qnode *q = NULL;

		if ((rc = text_term(p, w->start, LB_NS_SD, s + vs, ve - vs, w->start, &q)) != 0)
			return (rc);
		if ((q->sdname = malloc(flen + 1)) == NULL) {
			lb_query_free(q);
			return (ENOMEM);
		}
		memcpy(q->sdname, s + w->start, flen);
		q->sdname[flen] = '\0';
		*out = q;
		return (0);
	}
	switch (ns) {
	case LB_NS_TEXT:
		return (text_term(p, w->start, LB_NS_TEXT, s + vs, ve - vs, w->start, out));
	case LB_NS_FACILITY:
		if ((val = name_value(s + vs, ve - vs, facilities, 24, NULL, NULL, 0)) < 0)
			return (qerr(p, LB_EQUERY, w->start, "unknown facility '%.*s'",
			    (int)(ve - vs > 64 ? 64 : ve - vs), (const char *)s + vs));
		return (set_node(p, w->start, ns, 1u << val, out));
	case LB_NS_SEVERITY:
		if ((val = severity_value(s + vs, ve - vs)) < 0)
			return (qerr(p, LB_EQUERY, w->start, "unknown severity '%.*s'",
			    (int)(ve - vs > 64 ? 64 : ve - vs), (const char *)s + vs));
		return (set_node(p, w->start, ns, 1u << val, out));
	default: {
		struct lb_qnode *q = NULL;

		if ((rc = node_new(p, LB_Q_TERM, w->start, &q)) != 0)
			return (rc);
		q->ns = ns;
		if ((rc = whole_value(q, s + vs, ve - vs)) != 0) {
			lb_query_free(q);
			return (rc);
		}
		*out = q;
		return (0);
	}
	}
}

/* ---------------------------------------------------------------- grammar */

static int	parse_or(struct parser *, const char *, struct lb_qnode **);

/*
 * Reports that a term was expected at t; after names the token before it (NULL at the start
 * of the query or of a parenthesis).
 */
static int
expected(struct parser *p, const struct tok *t, const char *after)
{
	if (t->type == T_END && after == NULL)
		return (qerr(p, LB_EQUERY, 0, "empty query"));
	if (t->type == T_RPAREN && after == NULL)
		return (qerr(p, LB_EQUERY, t->start, "unexpected ')'"));
	if ((t->type == T_AND || t->type == T_OR) &&
	    (after == NULL || strcmp(after, "(") == 0))
		return (qerr(p, LB_EQUERY, t->start, "expected a term before '%s'",
		    tok_name(t->type)));
	return (qerr(p, LB_EQUERY, t->start, "expected a term after '%s'", after));
}

static int
enter(struct parser *p, size_t pos)
{
	if (++p->depth > LB_QUERY_DEPTH)
		return (qerr(p, LB_ETOOBIG, pos, "nested deeper than %d levels",
		    LB_QUERY_DEPTH));
	return (0);
}

static int
parse_unary(struct parser *p, const char *after, struct lb_qnode **out)
{
	struct lb_qnode	*q = NULL, *kid = NULL;
	struct tok	 t, c;
	int		 rc;

	if ((rc = peek(p, &t)) != 0)
		return (rc);
	switch (t.type) {
	case T_NOT:
		take(p);
		if ((rc = enter(p, t.start)) != 0)
			return (rc);
		if ((rc = parse_unary(p, "NOT", &kid)) != 0)
			return (rc);
		p->depth--;
		if ((rc = node_new(p, LB_Q_NOT, t.start, &q)) != 0 ||
		    (q->kids = malloc(sizeof(*q->kids))) == NULL) {
			rc = rc != 0 ? rc : ENOMEM;
			lb_query_free(q);
			lb_query_free(kid);
			return (rc);
		}
		q->kids[0] = kid;
		q->nkids = 1;
		*out = q;
		return (0);
	case T_LPAREN:
		take(p);
		if ((rc = enter(p, t.start)) != 0)
			return (rc);
		if ((rc = parse_or(p, "(", &q)) != 0)
			return (rc);
		if ((rc = peek(p, &c)) != 0) {
			lb_query_free(q);
			return (rc);
		}
		if (c.type != T_RPAREN) {
			lb_query_free(q);
			return (qerr(p, LB_EQUERY, c.start, "expected ')' to close '(' at %zu",
			    t.start));
		}
		take(p);
		p->depth--;
		*out = q;
		return (0);
	case T_WORD:
		take(p);
		return (word_term(p, &t, out));
	case T_QUOTE:
		take(p);
		return (text_term(p, t.start, LB_NS_TEXT, p->text + t.start + 1,
		    t.end - t.start - 2, t.start, out));
	default:
		return (expected(p, &t, after));
	}
}

/* Appends kid to the AND/OR node q's kids, splicing in kid's own kids when it is the same kind. */
static int
add_kid(struct lb_qnode *q, struct lb_qnode *kid, size_t *cap)
{
	size_t		  need = q->nkids + (kid->kind == q->kind ? kid->nkids : 1);
	struct lb_qnode	**nk;

	if (need > *cap) {
		size_t c = *cap == 0 ? 4 : *cap;

		while (c < need)
			c *= 2;
		if ((nk = realloc(q->kids, c * sizeof(*nk))) == NULL)
			return (ENOMEM);
		q->kids = nk;
		*cap = c;
	}
	if (kid->kind == q->kind) {
		memcpy(q->kids + q->nkids, kid->kids, kid->nkids * sizeof(*nk));
		q->nkids += kid->nkids;
		kid->nkids = 0;
		lb_query_free(kid);
	} else
		q->kids[q->nkids++] = kid;
	return (0);
}

/* Takes first and the rest of an AND or OR; a node with one child is that child. */
static int
parse_list(struct parser *p, int kind, const char *after, struct lb_qnode **out)
{
	struct lb_qnode	*q = NULL, *kid = NULL;
	struct tok	 t;
	size_t		 cap = 0;
	int		 rc;
	const char	*prev;

	if (kind == LB_Q_OR)
		rc = parse_list(p, LB_Q_AND, after, &kid);
	else
		rc = parse_unary(p, after, &kid);
	if (rc != 0)
		return (rc);
	for (;;) {
		if ((rc = peek(p, &t)) != 0)
			goto fail;
		if (t.type == T_END || t.type == T_RPAREN ||
		    (kind == LB_Q_AND && t.type == T_OR))
			break;
		if (t.type == T_AND && kind == LB_Q_AND) {
			take(p);
			prev = "AND";
		} else if (t.type == T_OR) {
			take(p);
			prev = "OR";
		} else
			prev = after;	/* juxtaposition: an implicit AND */
		if (q == NULL) {
			if ((rc = node_new(p, kind, kid->pos, &q)) != 0)
				goto fail;
			if ((rc = add_kid(q, kid, &cap)) != 0)
				goto fail;
			kid = NULL;
		}
		if (kind == LB_Q_OR)
			rc = parse_list(p, LB_Q_AND, prev, &kid);
		else
			rc = parse_unary(p, prev, &kid);
		if (rc != 0)
			goto fail;
		if ((rc = add_kid(q, kid, &cap)) != 0)
			goto fail;
		kid = NULL;
	}
	*out = q != NULL ? q : kid;
	return (0);
 fail:
	lb_query_free(kid);
	lb_query_free(q);
	return (rc);
}

static int
parse_or(struct parser *p, const char *after, struct lb_qnode **out)
{
	return (parse_list(p, LB_Q_OR, after, out));
}

int
lb_query_parse(const struct lb_tokconf *tc, const char *text, size_t len,
    struct lb_qnode **out, struct lb_qerr *err)
{
	struct parser	 p;
	struct lb_qnode	*q = NULL;
	struct tok	 t;
	int		 rc;

	memset(&p, 0, sizeof(p));
	p.tc = tc;
	p.text = (const uint8_t *)(text != NULL ? text : "");
	p.len = text != NULL ? len : 0;
	p.err = err;
	if (p.len > LB_QUERY_MAX)
		return (qerr(&p, LB_ETOOBIG, LB_QUERY_MAX, "query longer than %d bytes",
		    LB_QUERY_MAX));
	if ((rc = parse_or(&p, NULL, &q)) != 0)
		return (rc);
	if ((rc = peek(&p, &t)) != 0) {
		lb_query_free(q);
		return (rc);
	}
	if (t.type != T_END) {	/* only ')' stops the top level early */
		lb_query_free(q);
		return (qerr(&p, LB_EQUERY, t.start, "unexpected ')'"));
	}
	*out = q;
	return (0);
}

/* ---------------------------------------------------------------- canonical text */

struct buf {
	char	*p;
	size_t	 len;
	size_t	 cap;
	int	 rc;
};

static void
put(struct buf *b, const void *s, size_t n)
{
	if (b->rc != 0)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t	 cap = b->cap == 0 ? 64 : b->cap;
		char	*np;

		while (cap < b->len + n + 1)
			cap *= 2;
		if ((np = realloc(b->p, cap)) == NULL) {
			b->rc = ENOMEM;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void
puts_(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/*
 * A glob as query text: wildcards bare, escapes kept, and every literal byte that would end
 * or split a word escaped. A text word that would read as a severity range gets its '<' or
 * '>' escaped too (they are not delimiters with every setting).
 */
static void
put_glob(struct buf *b, const struct lb_tokconf *tc, const struct lb_qpat *pt, int textword)
{
	const uint8_t	*g = pt->glob;
	size_t		 n = pt->globlen;

	for (size_t i = 0; i < n; i++) {
		uint8_t c = g[i];

		if (c == '*' || c == '?') {
			put(b, &c, 1);
		} else if (c == '\\') {
			put(b, "\\", 1);
			if (i + 1 < n)
				put(b, &g[++i], 1);
			else
				put(b, "\\", 1);
		} else {
			if (is_space(c) || c < 0x20 || c == 0x7f || c == '(' || c == ')' ||
			    c == '"' || c == ':' || tc->delim[c] ||
			    (textword && i == 8 && (c == '<' || c == '>') &&
			    ci_equal((const char *)g, 8, "severity")))
				put(b, "\\", 1);
			put(b, &c, 1);
		}
	}
}

static int	fmt_node(struct buf *, const struct lb_tokconf *, const struct lb_qnode *);

static int
fmt_set(struct buf *b, const struct lb_qnode *q)
{
	const char *const	*names = q->ns == LB_NS_FACILITY ? facilities : severities;
	int			 n = q->ns == LB_NS_FACILITY ? 24 : 8;
	int			 lo = -1, hi = -1, first = 1;
	uint32_t		 all = (1u << n) - 1, m = q->mask;

	if ((q->ns != LB_NS_FACILITY && q->ns != LB_NS_SEVERITY) || m == 0 || (m & ~all) != 0)
		return (EINVAL);
	for (int i = 0; i < n; i++)
		if (m & (1u << i)) {
			if (lo < 0)
				lo = i;
			hi = i;
		}
	if (lo == hi) {
		puts_(b, q->ns == LB_NS_FACILITY ? "facility:" : "severity:");
		puts_(b, names[lo]);
		return (0);
	}
	if (q->ns == LB_NS_SEVERITY && m == ((2u << hi) - 1)) {
		puts_(b, "severity<=");
		puts_(b, names[hi]);
		return (0);
	}
	if (q->ns == LB_NS_SEVERITY && m == (all & ~((1u << lo) - 1))) {
		puts_(b, "severity>=");
		puts_(b, names[lo]);
		return (0);
	}
	/* Not something the parser makes: the same set as an OR. */
	put(b, "(", 1);
	for (int i = 0; i < n; i++)
		if (m & (1u << i)) {
			if (!first)
				puts_(b, " OR ");
			first = 0;
			puts_(b, q->ns == LB_NS_FACILITY ? "facility:" : "severity:");
			puts_(b, names[i]);
		}
	put(b, ")", 1);
	return (0);
}

static const char *
ns_field(uint8_t ns)
{
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (fields[i].ns == ns && ns != LB_NS_TEXT)
			return (fields[i].name);
	return (NULL);
}

static int
fmt_kid(struct buf *b, const struct lb_tokconf *tc, const struct lb_qnode *kid, int paren)
{
	int rc;

	if (paren)
		put(b, "(", 1);
	rc = fmt_node(b, tc, kid);
	if (paren)
		put(b, ")", 1);
	return (rc);
}

static int
fmt_node(struct buf *b, const struct lb_tokconf *tc, const struct lb_qnode *q)
{
	const char	*f;
	int		 rc;

	switch (q->kind) {
	case LB_Q_ALL:
		put(b, "*", 1);
		return (0);
	case LB_Q_TERM:
	case LB_Q_PHRASE:
		if (q->npats == 0 || q->pats == NULL || (q->kind == LB_Q_TERM && q->npats != 1))
			return (EINVAL);
		for (size_t i = 0; i < q->npats; i++)
			if (q->pats[i].globlen == 0)
				return (EINVAL);
		if (q->ns == LB_NS_SD) {
			if (q->sdname == NULL)
				return (EINVAL);
			puts_(b, q->sdname);
			put(b, ":", 1);
		} else if (q->ns != LB_NS_TEXT) {
			if ((f = ns_field(q->ns)) == NULL || q->kind == LB_Q_PHRASE)
				return (EINVAL);
			puts_(b, f);
			put(b, ":", 1);
		}
		if (q->kind == LB_Q_TERM) {
			put_glob(b, tc, &q->pats[0], q->ns == LB_NS_TEXT);
			return (0);
		}
		put(b, "\"", 1);
		for (size_t i = 0; i < q->npats; i++) {
			if (i > 0)
				put(b, " ", 1);
			put_glob(b, tc, &q->pats[i], 0);
		}
		put(b, "\"", 1);
		return (0);
	case LB_Q_SET:
		return (fmt_set(b, q));
	case LB_Q_AND:
	case LB_Q_OR:
		if (q->nkids == 0)
			return (EINVAL);
		for (size_t i = 0; i < q->nkids; i++) {
			const struct lb_qnode *k = q->kids[i];

			if (i > 0)
				puts_(b, q->kind == LB_Q_AND ? " AND " : " OR ");
			if ((rc = fmt_kid(b, tc, k, k->kind == LB_Q_OR ||
			    k->kind == q->kind)) != 0)
				return (rc);
		}
		return (0);
	case LB_Q_NOT:
		if (q->nkids != 1)
			return (EINVAL);
		puts_(b, "NOT ");
		return (fmt_kid(b, tc, q->kids[0], q->kids[0]->kind == LB_Q_AND ||
		    q->kids[0]->kind == LB_Q_OR));
	default:
		return (EINVAL);
	}
}

int
lb_query_fmt(const struct lb_tokconf *tc, const struct lb_qnode *q, char **out,
    size_t *outlen)
{
	struct buf	 b;
	int		 rc;

	memset(&b, 0, sizeof(b));
	if (q == NULL)
		return (EINVAL);
	rc = fmt_node(&b, tc, q);
	if (rc == 0)
		rc = b.rc;
	if (rc == 0 && b.p == NULL)
		rc = EINVAL;
	if (rc != 0) {
		free(b.p);
		return (rc);
	}
	*out = b.p;
	*outlen = b.len;
	return (0);
}

int
lb_query_equal(const struct lb_qnode *a, const struct lb_qnode *b)
{
	if (a == NULL || b == NULL)
		return (a == b);
	if (a->kind != b->kind || a->npats != b->npats || a->nkids != b->nkids)
		return (0);
	switch (a->kind) {
	case LB_Q_TERM:
	case LB_Q_PHRASE:
		if (a->ns != b->ns)
			return (0);
		if (a->ns == LB_NS_SD && (a->sdname == NULL || b->sdname == NULL ?
		    a->sdname != b->sdname : strcmp(a->sdname, b->sdname) != 0))
			return (0);
		for (size_t i = 0; i < a->npats; i++) {
			const struct lb_qpat *x = &a->pats[i], *y = &b->pats[i];

			if (x->kind != y->kind || x->globlen != y->globlen ||
			    memcmp(x->glob, y->glob, x->globlen) != 0)
				return (0);
		}
		return (1);
	case LB_Q_SET:
		return (a->ns == b->ns && a->mask == b->mask);
	default:
		for (size_t i = 0; i < a->nkids; i++)
			if (!lb_query_equal(a->kids[i], b->kids[i]))
				return (0);
		return (1);
	}
}

/* ---------------------------------------------------------------- brute-force match */

/*
 * The message's terms, stored once per call: bytes back to back, off[i] the start of term i
 * and off[n] the end. Small messages fit the arrays on the stack; larger ones move to the heap.
 */
#define TERMS_BYTES	8192
#define TERMS_COUNT	512

struct terms {
	uint8_t		*bytes;
	size_t		 nbytes;
	size_t		 capbytes;
	uint32_t	*off;
	uint8_t		*fl;		/* each term's flags (lb_msg_terms2) */
	size_t		 n;
	size_t		 capn;
	size_t		 capfl;
	uint8_t		 sbytes[TERMS_BYTES];
	uint32_t	 soff[TERMS_COUNT + 1];
	uint8_t		 sfl[TERMS_COUNT + 1];
};

static int
grow(void **p, void *stack, size_t *cap, size_t need, size_t size)
{
	size_t	 c = *cap;
	void	*np;

	while (c < need)
		c *= 2;
	if (*p == stack) {
		if ((np = malloc(c * size)) == NULL)
			return (ENOMEM);
		memcpy(np, stack, *cap * size);
	} else if ((np = realloc(*p, c * size)) == NULL)
		return (ENOMEM);
	*p = np;
	*cap = c;
	return (0);
}

static int
collect(void *arg, const uint8_t *term, size_t len, int flags)
{
	struct terms	*t = arg;
	int		 rc;

	if (t->nbytes + len > t->capbytes && (rc = grow((void **)&t->bytes, t->sbytes,
	    &t->capbytes, t->nbytes + len, 1)) != 0)
		return (rc);
	if (t->n + 2 > t->capn && (rc = grow((void **)&t->off, t->soff, &t->capn, t->n + 2,
	    sizeof(uint32_t))) != 0)
		return (rc);
	if (t->n + 2 > t->capfl && (rc = grow((void **)&t->fl, t->sfl, &t->capfl, t->n + 2,
	    1)) != 0)
		return (rc);
	memcpy(t->bytes + t->nbytes, term, len);
	t->fl[t->n] = (uint8_t)flags;
	t->off[t->n++] = (uint32_t)t->nbytes;
	t->nbytes += len;
	t->off[t->n] = (uint32_t)t->nbytes;
	return (0);
}

/* 1 when term i is in q's namespace (and SD name) and matches pattern pt. */
static int
term_match(const struct terms *t, size_t i, const struct lb_qnode *q,
    const struct lb_qpat *pt)
{
	const uint8_t	*s = t->bytes + t->off[i];
	size_t		 len = t->off[i + 1] - t->off[i];

	if (len == 0 || s[0] != q->ns)
		return (0);
	s++;
	len--;
	if (q->ns == LB_NS_SD) {
		size_t nl = strlen(q->sdname);

		if (len < nl + 1 || memcmp(s, q->sdname, nl) != 0 || s[nl] != 0x00)
			return (0);
		s += nl + 1;
		len -= nl + 1;
	}
	return (lb_qpat_match(pt, s, len));
}

/*
 * The flags a form must have to stand for pattern k of an n-pattern phrase (QUERY.md §1): the
 * first word may be the end of a token (its stripped form or last part), the last word its
 * start (stripped form or first part), the words between whole tokens or stripped forms.
 */
static int
phrase_need(size_t k, size_t n)
{
	if (n == 1)
		return (0);
	return ((k > 0 ? LB_FORM_START : 0) | (k + 1 < n ? LB_FORM_END : 0));
}

/*
 * 1 when the phrase q matches at the token whose term is i: pattern k matches the token k
 * tokens later or one of its forms with the flags phrase_need() asks for.
 */
static int
phrase_at(const struct terms *t, size_t i, const struct lb_qnode *q)
{
	for (size_t k = 0; k < q->npats; k++) {
		int	need = phrase_need(k, q->npats), found = 0;
		size_t	j = i;

		if (i >= t->n)
			return (0);
		do {
			if ((t->fl[j] & need) == need && term_match(t, j, q, &q->pats[k]))
				found = 1;
			j++;
		} while (!found && j < t->n && (t->fl[j] & LB_TERM_FORM));
		if (!found)
			return (0);
		for (i++; i < t->n && (t->fl[i] & LB_TERM_FORM); i++)
			;
	}
	return (1);
}

static int
eval(const struct lb_qnode *q, const struct lb_msg *m, const struct terms *t)
{
	uint8_t v;

	switch (q->kind) {
	case LB_Q_ALL:
		return (1);
	case LB_Q_TERM:
		for (size_t i = 0; i < t->n; i++)
			if (term_match(t, i, q, &q->pats[0]))
				return (1);
		return (0);
	case LB_Q_PHRASE:
		for (size_t i = 0; i < t->n; i++)
			if (!(t->fl[i] & LB_TERM_FORM) && phrase_at(t, i, q))
				return (1);
		return (0);
	case LB_Q_SET:
		v = q->ns == LB_NS_FACILITY ? m->facility : m->severity;
		return (v < 32 && (q->mask & (1u << v)) != 0);
	case LB_Q_AND:
		for (size_t i = 0; i < q->nkids; i++)
			if (!eval(q->kids[i], m, t))
				return (0);
		return (1);
	case LB_Q_OR:
		for (size_t i = 0; i < q->nkids; i++)
			if (eval(q->kids[i], m, t))
				return (1);
		return (0);
	case LB_Q_NOT:
		return (!eval(q->kids[0], m, t));
	default:
		return (0);
	}
}

/* 1 when some node of q looks at terms (TERM, PHRASE); sets and ALL need none. */
static int
needs_terms(const struct lb_qnode *q)
{
	if (q->kind == LB_Q_TERM || q->kind == LB_Q_PHRASE)
		return (1);
	for (size_t i = 0; i < q->nkids; i++)
		if (needs_terms(q->kids[i]))
			return (1);
	return (0);
}

int
lb_query_match(const struct lb_qnode *q, const struct lb_tokconf *tc, const struct lb_msg *m)
{
	struct terms	 t;
	int		 rc;

	if (!needs_terms(q)) {
		t.n = 0;
		return (eval(q, m, &t));
	}
	t.bytes = t.sbytes;
	t.capbytes = TERMS_BYTES;
	t.nbytes = 0;
	t.off = t.soff;
	t.capn = TERMS_COUNT + 1;
	t.fl = t.sfl;
	t.capfl = TERMS_COUNT + 1;
	t.n = 0;
	t.off[0] = 0;
	if ((rc = lb_msg_terms2(tc, m, collect, &t)) == 0)
		rc = eval(q, m, &t);
	else
		rc = rc > 0 ? -rc : rc;
	if (t.bytes != t.sbytes)
		free(t.bytes);
	if (t.off != t.soff)
		free(t.off);
	if (t.fl != t.sfl)
		free(t.fl);
	return (rc);
}
