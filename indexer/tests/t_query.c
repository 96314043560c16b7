/*
 * t_query.c — the query language: glob matching, parse shapes of the documented examples,
 * every error with its position, canonical printing and the round trip, and the brute-force
 * matcher on hand-built messages.
 */
#include "t_helper.h"

static int
gm(const char *g, const char *s)
{
	return (lb_glob_match((const uint8_t *)g, strlen(g), (const uint8_t *)s, strlen(s)));
}

static void
t_glob(void **state)
{
	(void)state;
	assert_true(gm("", ""));
	assert_false(gm("", "a"));
	assert_true(gm("*", ""));
	assert_true(gm("*", "anything"));
	assert_true(gm("**", "x"));
	assert_true(gm("abc", "abc"));
	assert_false(gm("abc", "abd"));
	assert_false(gm("abc", "abcd"));
	assert_false(gm("abcd", "abc"));
	assert_true(gm("a?c", "abc"));
	assert_false(gm("a?c", "ac"));
	assert_true(gm("user?ame", "username"));
	assert_true(gm("system*", "systemd"));
	assert_true(gm("system*", "system"));
	assert_false(gm("system*", "syste"));
	assert_true(gm("*tool", "mytool"));
	assert_true(gm("*tool", "tool"));
	assert_false(gm("*tool", "tools"));
	assert_true(gm("*pp*", "apple"));
	assert_true(gm("a*b*c", "aXXbYYc"));
	assert_true(gm("a*b*c", "abcbc"));
	assert_false(gm("a*b*c", "aXXbYY"));
	assert_true(gm("*?*?*?", "abc"));
	assert_false(gm("*?*?*?", "ab"));
	assert_true(gm("\\*", "*"));
	assert_false(gm("\\*", "a"));
	assert_true(gm("\\?x", "?x"));
	assert_false(gm("\\?x", "ax"));
	assert_true(gm("a\\\\b", "a\\b"));
	assert_true(gm("*\\*", "abc*"));
	assert_false(gm("*\\*", "abc"));
	assert_true(gm("mis*is*ip*i", "mississippi"));
	assert_false(gm("mis*is*ip*x", "mississippi"));
	{
		const uint8_t g[] = { 'a', '?', 0x00, '*' }, s[] = { 'a', 0xff, 0x00, 'z' };

		assert_true(lb_glob_match(g, 4, s, 4));
	}
}

/* Long strings against many wildcards stay fast (no exponential backtracking). */
static void
t_glob_fast(void **state)
{
	size_t	 n = 1 << 20;
	uint8_t	*s = malloc(n);
	const char *g = "*a*a*a*a*a*a*a*a*a*a*a*a*b";

	(void)state;
	assert_non_null(s);
	memset(s, 'a', n);
	assert_false(lb_glob_match((const uint8_t *)g, strlen(g), s, 4096));
	assert_true(lb_glob_match((const uint8_t *)"*?*?*?", 6, s, n));
	s[n - 1] = 'b';
	assert_true(lb_glob_match((const uint8_t *)g, strlen(g), s, n));
	free(s);
}


/* ---------------------------------------------------------------- helpers */

static struct lb_tokconf tcd;

static void
dump_pat(char *b, size_t n, const struct lb_qpat *pt)
{
	const char *k = pt->kind == LB_QP_EXACT ? "E" : pt->kind == LB_QP_PREFIX ? "P" : "W";
	size_t l = strlen(b);

	snprintf(b + l, n - l, "%s:%.*s/%.*s", k, (int)pt->globlen, (char *)pt->glob,
	    (int)pt->litlen, (char *)pt->lit);
}

/* The tree as an S-expression: (AND ...), text:E:glob/lit, phrase[...], set7:0x1f, *. */
static void
dump(char *b, size_t n, const struct lb_qnode *q)
{
	static const char *ns[] = { "?", "text", "host", "program", "pid", "msgid", "fac",
	    "sev", "sd", "peer" };
	size_t l = strlen(b);

	switch (q->kind) {
	case LB_Q_ALL:
		snprintf(b + l, n - l, "*");
		break;
	case LB_Q_TERM:
	case LB_Q_PHRASE:
		snprintf(b + l, n - l, "%s%s%s%s%s", q->kind == LB_Q_PHRASE ? "phrase " : "",
		    ns[q->ns], q->sdname ? "(" : "", q->sdname ? q->sdname : "",
		    q->sdname ? ")" : "");
		for (size_t i = 0; i < q->npats; i++) {
			l = strlen(b);
			snprintf(b + l, n - l, i == 0 ? ":" : " ");
			dump_pat(b, n, &q->pats[i]);
		}
		break;
	case LB_Q_SET:
		snprintf(b + l, n - l, "%s:0x%x", ns[q->ns], q->mask);
		break;
	default:
		snprintf(b + l, n - l, "(%s", q->kind == LB_Q_AND ? "AND" :
		    q->kind == LB_Q_OR ? "OR" : "NOT");
		for (size_t i = 0; i < q->nkids; i++) {
			l = strlen(b);
			snprintf(b + l, n - l, " ");
			dump(b, n, q->kids[i]);
		}
		l = strlen(b);
		snprintf(b + l, n - l, ")");
	}
}

static struct lb_qnode *
parse_ok(const char *s)
{
	struct lb_qnode	*q = NULL;
	struct lb_qerr	 e;
	int		 rc = lb_query_parse(&tcd, s, strlen(s), &q, &e);

	if (rc != 0)
		print_error("'%s': %d at %zu: %s\n", s, rc, e.pos, e.msg);
	assert_int_equal(rc, 0);
	assert_non_null(q);
	return (q);
}

/* Parses s, checks its shape, and that it prints as canon (s itself when canon is NULL). */
static void
shape(const char *s, const char *want, const char *canon)
{
	struct lb_qnode	*q = parse_ok(s), *q2;
	char		 b[4096] = "", *f;
	size_t		 fl;

	dump(b, sizeof(b), q);
	if (strcmp(b, want) != 0)
		print_error("'%s' -> %s\n", s, b);
	assert_string_equal(b, want);
	assert_ok(lb_query_fmt(&tcd, q, &f, &fl));
	assert_int_equal(strlen(f), fl);
	if (strcmp(f, canon != NULL ? canon : s) != 0)
		print_error("'%s' printed as '%s'\n", s, f);
	assert_string_equal(f, canon != NULL ? canon : s);
	q2 = parse_ok(f);
	assert_true(lb_query_equal(q, q2));
	free(f);
	lb_query_free(q);
	lb_query_free(q2);
}

static void
perr(const char *s, size_t len, int want_rc, size_t want_pos, const char *want_msg)
{
	struct lb_qnode	*q = (struct lb_qnode *)0x1;
	struct lb_qerr	 e;
	int		 rc;

	memset(&e, 0, sizeof(e));
	rc = lb_query_parse(&tcd, s, len, &q, &e);
	if (rc != want_rc || e.pos != want_pos || strcmp(e.msg, want_msg) != 0)
		print_error("'%.*s': %d at %zu: %s\n", (int)(len > 80 ? 80 : len), s, rc, e.pos,
		    e.msg);
	assert_int_equal(rc, want_rc);
	assert_int_equal(e.pos, want_pos);
	assert_string_equal(e.msg, want_msg);
	assert_true(q == (struct lb_qnode *)0x1);
}

#define PERR(s, rc, pos, msg)	perr((s), strlen(s), (rc), (pos), (msg))

static int
setup(void **state)
{
	(void)state;
	lb_tokconf_default(&tcd);
	return (0);
}

/* ---------------------------------------------------------------- shapes */

static void
t_shapes_ssb(void **state)
{
	(void)state;
	shape("username", "text:E:username/username", NULL);
	shape("restart", "text:E:restart/restart", NULL);
	shape("user?ame", "text:W:user?ame/user", NULL);
	shape("system*", "text:P:system*/system", NULL);
	shape("*tool", "text:W:*tool/", NULL);
	shape("NOT user", "(NOT text:E:user/user)", NULL);
	shape("user AND NOT close*",
	    "(AND text:E:user/user (NOT text:P:close*/close))", NULL);
	shape("server1 OR server32 OR server50 OR server3",
	    "(OR text:E:server1/server1 text:E:server32/server32 text:E:server50/server50 "
	    "text:E:server3/server3)", NULL);
	shape("Connection Error", "(AND text:E:connection/connection text:E:error/error)",
	    "connection AND error");
	shape("Connection:Error", "phrase text:E:connection/connection E:error/error",
	    "\"connection error\"");
	shape("\"connection error\"", "phrase text:E:connection/connection E:error/error",
	    NULL);
	shape("/var/log/syslog", "phrase text:E:var/var E:log/log E:syslog/syslog",
	    "\"var log syslog\"");
	shape("*", "*", NULL);
	shape("***", "*", "*");
	shape("*?*?*?", "text:W:*?*?*?/", NULL);
	shape("10.0.0.1", "text:E:10.0.0.1/10.0.0.1", NULL);
	shape("bob@example.com", "text:E:bob@example.com/bob@example.com", NULL);
	shape("and or not", "(AND text:E:and/and text:E:or/or text:E:not/not)",
	    "and AND or AND not");
	shape("web-01*", "text:P:web-01*/web-01", NULL);
	shape("a**", "text:P:a**/a", NULL);
	shape("a*b", "text:W:a*b/a", NULL);
	shape("a?", "text:W:a?/a", NULL);
	shape("\"a* b?\"", "phrase text:P:a*/a W:b?/b", NULL);
	shape("\"*\"", "*", "*");
	shape("\"x\"", "text:E:x/x", "x");
}

static void
t_shapes_fields(void **state)
{
	(void)state;
	shape("severity<=warning", "sev:0x1f", NULL);
	shape("severity<warning", "sev:0xf", "severity<=err");
	shape("severity>=err", "sev:0xf8", NULL);
	shape("severity>err", "sev:0xf0", "severity>=warning");
	shape("severity<=emerg", "sev:0x1", "severity:emerg");
	shape("severity>=debug", "sev:0x80", "severity:debug");
	shape("SEVERITY<=7", "sev:0xff", "severity<=debug");
	shape("severity:err", "sev:0x8", NULL);
	shape("severity:ERROR", "sev:0x8", "severity:err");
	shape("severity:panic", "sev:0x1", "severity:emerg");
	shape("severity:warn", "sev:0x10", "severity:warning");
	shape("severity:6", "sev:0x40", "severity:info");
	shape("severity:\"notice\"", "sev:0x20", "severity:notice");
	shape("facility:local0", "fac:0x10000", NULL);
	shape("Facility:0", "fac:0x1", "facility:kern");
	shape("facility:23", "fac:0x800000", "facility:local7");
	shape("facility:solaris-cron", "fac:0x8000", NULL);
	shape("facility:authpriv", "fac:0x400", NULL);
	shape("host:web-01", "host:E:web-01/web-01", NULL);
	shape("HOST:Web-01", "host:E:web-01/web-01", "host:web-01");
	shape("host:*", "host:P:*/", NULL);
	shape("host:10.0.0.*", "host:P:10.0.0.*/10.0.0.", NULL);
	shape("host:\"a b\"", "host:E:a b/a b", "host:a\\ b");
	shape("host:a:b", "host:E:a:b/a:b", "host:a\\:b");
	shape("peer:10.0.0.7", "peer:E:10.0.0.7/10.0.0.7", NULL);
	shape("PEER:10.0.0.*", "peer:P:10.0.0.*/10.0.0.", "peer:10.0.0.*");
	shape("peer:2001:DB8::1", "peer:E:2001:db8::1/2001:db8::1", "peer:2001\\:db8\\:\\:1");
	shape("program:ssh*", "program:P:ssh*/ssh", NULL);
	shape("program:/usr/sbin/cron", "program:E:/usr/sbin/cron//usr/sbin/cron",
	    "program:\\/usr\\/sbin\\/cron");
	shape("pid:1234", "pid:E:1234/1234", NULL);
	shape("msgid:ID47", "msgid:E:id47/id47", "msgid:id47");
	shape("message:Connection:Error", "phrase text:E:connection/connection E:error/error",
	    "\"connection error\"");
	shape("message:foo", "text:E:foo/foo", "foo");
	shape("message:*", "*", "*");
	shape("exampleSDID@32473.iut:3", "sd(exampleSDID@32473.iut):E:3/3", NULL);
	shape("exampleSDID@32473.eventSource:\"Application Log\"",
	    "phrase sd(exampleSDID@32473.eventSource):E:application/application E:log/log",
	    "exampleSDID@32473.eventSource:\"application log\"");
	shape("meta.sequenceId:*", "sd(meta.sequenceId):P:*/", NULL);
	shape("origin.ip:10.0.0.1", "sd(origin.ip):E:10.0.0.1/10.0.0.1", NULL);
	shape("timeQuality.tzKnown:1", "sd(timeQuality.tzKnown):E:1/1", NULL);
	/* Not fields: text. */
	shape("timequality.tzKnown:1", "phrase text:E:timequality.tzknown/timequality.tzknown "
	    "E:1/1", "\"timequality.tzknown 1\"");
	shape("foo.bar:x", "phrase text:E:foo.bar/foo.bar E:x/x", "\"foo.bar x\"");
	shape("x@1.:y", "phrase text:E:x@1./x@1. E:y/y", "\"x@1. y\"");
	shape("\"host:x\"", "phrase text:E:host/host E:x/x", "\"host x\"");
	shape("ho\\st:x", "phrase text:E:host/host E:x/x", "\"host x\"");
	shape("host\\:x", "text:E:host:x/host:x", "host\\:x");
}

static void
t_shapes_grammar(void **state)
{
	(void)state;
	shape("a b c", "(AND text:E:a/a text:E:b/b text:E:c/c)", "a AND b AND c");
	shape("a AND (b AND c)", "(AND text:E:a/a text:E:b/b text:E:c/c)", "a AND b AND c");
	shape("(a OR b) OR (c OR d)", "(OR text:E:a/a text:E:b/b text:E:c/c text:E:d/d)",
	    "a OR b OR c OR d");
	shape("a OR b c", "(OR text:E:a/a (AND text:E:b/b text:E:c/c))", "a OR b AND c");
	shape("(a OR b) c", "(AND (OR text:E:a/a text:E:b/b) text:E:c/c)",
	    "(a OR b) AND c");
	shape("NOT (a b)", "(NOT (AND text:E:a/a text:E:b/b))", "NOT (a AND b)");
	shape("NOT (a OR b)", "(NOT (OR text:E:a/a text:E:b/b))", NULL);
	shape("NOT NOT a", "(NOT (NOT text:E:a/a))", NULL);
	shape("((((a))))", "text:E:a/a", "a");
	shape("NOT a OR b", "(OR (NOT text:E:a/a) text:E:b/b)", NULL);
	shape("a(b)c", "(AND text:E:a/a text:E:b/b text:E:c/c)", "a AND b AND c");
	shape("a\"b c\"d", "(AND text:E:a/a phrase text:E:b/b E:c/c text:E:d/d)",
	    "a AND \"b c\" AND d");
	shape("\tfoo\n", "text:E:foo/foo", "foo");
	shape("* AND foo", "(AND * text:E:foo/foo)", NULL);
	shape("NOT *", "(NOT *)", NULL);
}

static void
t_shapes_escapes(void **state)
{
	(void)state;
	shape("\\AND", "text:E:and/and", "and");
	shape("\\*", "text:E:\\*/*", NULL);
	shape("a\\*b", "text:E:a\\*b/a*b", NULL);
	shape("a\\?*", "text:P:a\\?*/a?", NULL);
	shape("a\\\\b", "text:E:a\\\\b/a\\b", NULL);
	shape("a\\ b", "text:E:a b/a b", NULL);
	shape("a\\:b", "text:E:a:b/a:b", NULL);
	shape("a\\(b\\)", "text:E:a(b)/a(b)", NULL);
	shape("\"a\\\"b\"", "text:E:a\"b/a\"b", "a\\\"b");
	shape("\"a\\ b\"", "text:E:a b/a b", "a\\ b");
	shape("C\\:\\\\Windows", "text:E:c:\\\\windows/c:\\windows", "c\\:\\\\windows");
	shape("\\x", "text:E:x/x", "x");
}

/* With delimiters that leave '<' alone, a text word that would read as a range stays text. */
static void
t_custom_delims(void **state)
{
	struct lb_tokconf	 saved = tcd;

	(void)state;
	assert_ok(lb_tokconf_set(&tcd, ":", 1));
	shape("severity\\<=warning", "text:E:severity<=warning/severity<=warning", NULL);
	shape("SEVERITY\\>x", "text:E:severity>x/severity>x", "severity\\>x");
	shape("a/b", "text:E:a/b/a/b", NULL);
	shape("a:b", "phrase text:E:a/a E:b/b", "\"a b\"");
	shape("a\\:b", "text:E:a:b/a:b", NULL);
	shape("(a)", "text:E:a/a", "a");
	shape("a\\(\\)", "text:E:a()/a()", NULL);
	tcd = saved;
}

/* A token longer than LB_TOKEN_MAX is cut there, as the tokenizer cuts message tokens. */
static void
t_long_token(void **state)
{
	char		 s[600], want[1200];
	struct lb_qnode	*q;

	(void)state;
	memset(s, 'A', 300);
	strcpy(s + 300, " b");
	q = parse_ok(s);
	assert_int_equal(q->kind, LB_Q_AND);
	assert_int_equal(q->kids[0]->pats[0].globlen, LB_TOKEN_MAX);
	assert_int_equal(q->kids[0]->pats[0].litlen, LB_TOKEN_MAX);
	lb_query_free(q);
	memset(s, 'x', 300);
	strcpy(s + 300, ":y");
	q = parse_ok(s);
	assert_int_equal(q->kind, LB_Q_PHRASE);
	assert_int_equal(q->npats, 2);
	assert_int_equal(q->pats[0].globlen, LB_TOKEN_MAX);
	lb_query_free(q);
	memset(s, 'h', 300);
	memcpy(s, "host:", 5);
	s[300] = '\0';
	q = parse_ok(s);
	assert_int_equal(q->ns, LB_NS_HOST);
	assert_int_equal(q->pats[0].globlen, LB_TOKEN_MAX);
	lb_query_free(q);
	(void)want;
}

/* ---------------------------------------------------------------- errors */

static void
t_errors(void **state)
{
	char	*big;

	(void)state;
	PERR("", LB_EQUERY, 0, "empty query");
	PERR("   \t\n", LB_EQUERY, 0, "empty query");
	perr(NULL, 0, LB_EQUERY, 0, "empty query");
	PERR("(a", LB_EQUERY, 2, "expected ')' to close '(' at 0");
	PERR("x (a OR (b)", LB_EQUERY, 11, "expected ')' to close '(' at 2");
	PERR("a)", LB_EQUERY, 1, "unexpected ')'");
	PERR(")", LB_EQUERY, 0, "unexpected ')'");
	PERR("(a))", LB_EQUERY, 3, "unexpected ')'");
	PERR("()", LB_EQUERY, 1, "expected a term after '('");
	PERR("(", LB_EQUERY, 1, "expected a term after '('");
	PERR("AND", LB_EQUERY, 0, "expected a term before 'AND'");
	PERR("OR a", LB_EQUERY, 0, "expected a term before 'OR'");
	PERR("(OR a)", LB_EQUERY, 1, "expected a term before 'OR'");
	PERR("a OR", LB_EQUERY, 4, "expected a term after 'OR'");
	PERR("a AND", LB_EQUERY, 5, "expected a term after 'AND'");
	PERR("a AND OR b", LB_EQUERY, 6, "expected a term after 'AND'");
	PERR("a OR OR b", LB_EQUERY, 5, "expected a term after 'OR'");
	PERR("a OR AND b", LB_EQUERY, 5, "expected a term after 'OR'");
	PERR("(a AND)", LB_EQUERY, 6, "expected a term after 'AND'");
	PERR("NOT", LB_EQUERY, 3, "expected a term after 'NOT'");
	PERR("a NOT", LB_EQUERY, 5, "expected a term after 'NOT'");
	PERR("NOT )", LB_EQUERY, 4, "expected a term after 'NOT'");
	PERR("a \"bc", LB_EQUERY, 2, "unterminated quote");
	PERR("host:\"bc", LB_EQUERY, 5, "unterminated quote");
	PERR("abc\\", LB_EQUERY, 3, "'\\' at the end of the query");
	PERR("\"abc\\", LB_EQUERY, 4, "'\\' at the end of the query");
	PERR("severity:foo", LB_EQUERY, 0, "unknown severity 'foo'");
	PERR("x severity<=foo", LB_EQUERY, 2, "unknown severity 'foo'");
	PERR("severity:8", LB_EQUERY, 0, "unknown severity '8'");
	PERR("severity:*", LB_EQUERY, 0, "unknown severity '*'");
	PERR("severity<emerg", LB_EQUERY, 0, "no severity is <emerg");
	PERR("severity>debug", LB_EQUERY, 0, "no severity is >debug");
	PERR("facility:local8", LB_EQUERY, 0, "unknown facility 'local8'");
	PERR("facility:24", LB_EQUERY, 0, "unknown facility '24'");
	PERR("host:", LB_EQUERY, 0, "expected a value after 'host:'");
	PERR("a Program:", LB_EQUERY, 2, "expected a value after 'Program:'");
	PERR("host:\"\"", LB_EQUERY, 0, "expected a value after 'host:'");
	PERR("severity<=", LB_EQUERY, 0, "expected a value after 'severity<='");
	PERR("x@1.a: b", LB_EQUERY, 0, "expected a value after 'x@1.a:'");
	PERR("a :::", LB_EQUERY, 2, "nothing to search for");
	PERR("\"\"", LB_EQUERY, 0, "nothing to search for");
	PERR("\"  \"", LB_EQUERY, 0, "nothing to search for");
	PERR("message:!!", LB_EQUERY, 0, "nothing to search for");
	PERR("x@1.a:!!", LB_EQUERY, 0, "nothing to search for");
	/* An error after a valid prefix frees what was built (ASan checks). */
	PERR("a b (c OR d) NOT (e f) g OR", LB_EQUERY, 27, "expected a term after 'OR'");
	PERR("a b (c OR d) NOT (e f) severity:x", LB_EQUERY, 23, "unknown severity 'x'");

	assert_non_null(big = malloc(100 * 1024));
	memset(big, 'a', 100 * 1024);
	perr(big, 100 * 1024, LB_ETOOBIG, LB_QUERY_MAX, "query longer than 16384 bytes");
	perr(big, LB_QUERY_MAX + 1, LB_ETOOBIG, LB_QUERY_MAX, "query longer than 16384 bytes");
	free(big);
}

static void
t_limits(void **state)
{
	char		*s;
	struct lb_qnode	*q;
	size_t		 n = 0;

	(void)state;
	assert_non_null(s = malloc(LB_QUERY_MAX + 1));
	/* Exactly LB_QUERY_MAX bytes is fine. */
	memset(s, 'a', LB_QUERY_MAX);
	s[LB_QUERY_MAX] = '\0';
	q = parse_ok(s);
	lb_query_free(q);
	/* 64 levels of nesting are fine, 65 are not. */
	for (int i = 0; i < LB_QUERY_DEPTH; i++)
		s[n++] = '(';
	s[n++] = 'a';
	for (int i = 0; i < LB_QUERY_DEPTH; i++)
		s[n++] = ')';
	s[n] = '\0';
	lb_query_free(parse_ok(s));
	n = 0;
	for (int i = 0; i < LB_QUERY_DEPTH; i++)
		n += (size_t)sprintf(s + n, "NOT ");
	n += (size_t)sprintf(s + n, "(a)");
	perr(s, n, LB_ETOOBIG, n - 3, "nested deeper than 64 levels");
	/* 4095 terms and their AND are fine; 4097 nodes are not. */
	n = 0;
	for (int i = 0; i < 4095; i++)
		s[n++] = 'a', s[n++] = ' ';
	s[n] = '\0';
	lb_query_free(parse_ok(s));
	n = 0;
	for (int i = 0; i < 4096; i++)
		s[n++] = 'a', s[n++] = ' ';
	perr(s, n, LB_ETOOBIG, 4095 * 2, "more than 4096 terms and operators");
	free(s);
}


/* ---------------------------------------------------------------- round trip */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint32_t
rnd(uint32_t n)
{
	return ((uint32_t)(t_rnd(&rng) >> 11) % n);
}

/* Returns 1 when s parsed; then fmt -> parse is the same tree and fmt again the same text. */
static int
roundtrip(const struct lb_tokconf *tc, const char *s, size_t len)
{
	struct lb_qnode	*q = NULL, *q2 = NULL;
	struct lb_qerr	 e;
	char		*f, *f2;
	size_t		 fl, fl2;
	int		 rc;

	rc = lb_query_parse(tc, s, len, &q, &e);
	if (rc != 0) {
		assert_true(rc == LB_EQUERY || rc == LB_ETOOBIG);
		assert_true(e.pos <= len);
		assert_true(e.msg[0] != '\0');
		return (0);
	}
	assert_ok(lb_query_fmt(tc, q, &f, &fl));
	rc = lb_query_parse(tc, f, fl, &q2, &e);
	if (rc != 0)
		print_error("'%.*s' -> '%s' -> %d at %zu: %s\n", (int)len, s, f, rc, e.pos,
		    e.msg);
	assert_int_equal(rc, 0);
	if (!lb_query_equal(q, q2))
		print_error("'%.*s' -> '%s' is another tree\n", (int)len, s, f);
	assert_true(lb_query_equal(q, q2));
	assert_true(lb_query_equal(q2, q));
	assert_ok(lb_query_fmt(tc, q2, &f2, &fl2));
	assert_int_equal(fl, fl2);
	assert_memory_equal(f, f2, fl);
	free(f);
	free(f2);
	lb_query_free(q);
	lb_query_free(q2);
	return (1);
}

static void
t_roundtrip_words(void **state)
{
	static const char *const parts[] = { "a", "B", "foo", "Connection:Error", "user?ame",
	    "sys*", "*x", "\\*", "\\\\", "\\ ", "\\\"", "host:web-01", "host:\"A b\"",
	    "severity<=warning", "severity>err", "facility:local0", "x@1.a:3", "meta.seq:*",
	    "x@1.b:\"p q*\"", "\xc3\xa9t\xc3\xa9", "\xff", "AND", "OR", "NOT", "(", ")",
	    "\"a b\"", "*", "?", ":", "/var/log", "\\AND", "pid:1*2", "msgid:\\?",
	    "program:a\\(b", "10.0.0.*", "message:x:y", "\\:", "a\\\\:b", "\"\\\"q\"", "\t",
	    "severity:7", "AND NOT", "(x OR y)", "NOT (", "\"*\"", "a\\tb", "a\\\nb" };
	static const char *const seps[] = { " ", " ", " ", "", "\t", "  " };
	char	 buf[1024];
	int	 ok = 0, total = 4000;

	(void)state;
	for (int i = 0; i < total; i++) {
		size_t n = 0;
		int k = 1 + (int)rnd(8);

		for (int j = 0; j < k; j++) {
			const char *w = parts[rnd(sizeof(parts) / sizeof(parts[0]))];
			const char *sp = seps[rnd(sizeof(seps) / sizeof(seps[0]))];

			n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s", j ? sp : "", w);
		}
		ok += roundtrip(&tcd, buf, n);
	}
	/* Most of them are queries. */
	assert_true(ok > total / 3);
}

static void
t_roundtrip_bytes(void **state)
{
	static const char alpha[] = "aZ09*?\\\"():/.@<>= \t\n-_\x00\x80\xff\x7f\x01";
	static const char *const ops[] = { "AND", "OR", "NOT", "host:", "severity<",
	    "facility:", "x@1.a:", "message:" };
	struct lb_tokconf	 tc2;
	char			 buf[256];
	int			 ok = 0;

	(void)state;
	assert_ok(lb_tokconf_set(&tc2, ".@", 2));
	for (int i = 0; i < 6000; i++) {
		size_t n = 0, len = rnd(40);

		while (n < len) {
			if (rnd(6) == 0) {
				const char *o = ops[rnd(sizeof(ops) / sizeof(ops[0]))];

				memcpy(buf + n, o, strlen(o));
				n += strlen(o);
			} else
				buf[n++] = alpha[rnd(sizeof(alpha) - 1)];
		}
		ok += roundtrip(i % 3 == 0 ? &tc2 : &tcd, buf, n);
	}
	assert_true(ok > 100);
}

/* ---------------------------------------------------------------- brute-force match */

static struct lb_msg
msg(const char *text)
{
	struct lb_msg m;

	memset(&m, 0, sizeof(m));
	m.facility = LB_NOVALUE;
	m.severity = LB_NOVALUE;
	m.timestamp = LB_NOTIME;
	m.message.p = (const uint8_t *)text;
	m.message.len = strlen(text);
	return (m);
}

static int
qm(const char *query, const struct lb_msg *m)
{
	struct lb_qnode	*q = parse_ok(query);
	int		 r = lb_query_match(q, &tcd, m);

	assert_true(r == 0 || r == 1);
	lb_query_free(q);
	return (r);
}

static void
t_match_text(void **state)
{
	struct lb_msg	 a = msg("Connection Error from 10.0.0.1"),
			 b = msg("Error Connection"),
			 c = msg("Error:Connection"),
			 d = msg("cat /var/log/syslog now"),
			 e = msg("");

	(void)state;
	assert_true(qm("Connection:Error", &a));
	assert_false(qm("Connection:Error", &b));
	assert_true(qm("\"connection error\"", &a));
	assert_false(qm("\"connection error\"", &c));
	assert_true(qm("Connection Error", &c));
	assert_true(qm("Connection Error", &b));
	assert_true(qm("\"error connection\"", &c));
	assert_true(qm("/var/log/syslog", &d));
	assert_false(qm("/var/syslog", &d));
	assert_true(qm("log:syslog:now", &d));
	assert_true(qm("10.0.0.1", &a));
	assert_false(qm("10.0.0", &a));
	assert_true(qm("10.0.0.*", &a));
	assert_true(qm("*.0.1", &a));
	assert_true(qm("10.?.0.1", &a));
	assert_true(qm("1*1", &a));
	assert_false(qm("1*2", &a));
	assert_true(qm("conn*", &a));
	assert_true(qm("*ection", &a));
	assert_true(qm("c*n*t*n", &a));
	assert_true(qm("\"* error\"", &a));
	assert_false(qm("\"* connection\"", &a));
	assert_true(qm("\"connection ?rror from\"", &a));
	assert_true(qm("*", &e));
	assert_false(qm("x", &e));
	assert_true(qm("NOT x", &e));
	assert_true(qm("NOT connection", &d));
	assert_false(qm("NOT connection", &a));
	assert_true(qm("foo OR error", &a));
	assert_false(qm("foo OR bar", &a));
	assert_true(qm("(foo OR error) AND NOT (bar OR baz)", &a));
	assert_true(qm("message:error", &a));
	/* fields are not text */
	assert_false(qm("host", &a));
}

static void
t_match_fields(void **state)
{
	struct lb_msg	 m = msg("Accepted password for bob");

	(void)state;
	m.host = t_str("Web-01");
	m.program = t_str("sshd");
	m.pid = t_str("4242");
	m.msgid = t_str("ID47");
	m.sd = t_str("[exampleSDID@32473 iut=\"3\" eventSource=\"Application Log\"]"
	    "[meta sequenceId=\"17\"]");
	m.facility = 4;
	m.severity = 6;
	assert_true(qm("host:web-01", &m));
	assert_true(qm("host:WEB-*", &m));
	assert_true(qm("host:*", &m));
	assert_false(qm("host:web", &m));
	assert_false(qm("web-01", &m));
	assert_true(qm("program:ssh*", &m));
	assert_false(qm("program:ssh", &m));
	assert_true(qm("pid:4242", &m));
	assert_true(qm("pid:4?42", &m));
	assert_true(qm("msgid:id47", &m));
	assert_true(qm("facility:auth", &m));
	assert_true(qm("facility:4", &m));
	assert_false(qm("facility:authpriv", &m));
	assert_true(qm("severity:info", &m));
	assert_true(qm("severity>=warning", &m));
	assert_false(qm("severity<=warning", &m));
	assert_true(qm("NOT severity<=warning", &m));
	assert_true(qm("exampleSDID@32473.iut:3", &m));
	assert_false(qm("exampleSDID@32473.iut:4", &m));
	assert_false(qm("exampleSDID@32473.other:3", &m));
	assert_true(qm("exampleSDID@32473.eventSource:\"application log\"", &m));
	assert_true(qm("exampleSDID@32473.eventSource:log", &m));
	assert_false(qm("exampleSDID@32473.eventSource:\"log application\"", &m));
	assert_true(qm("exampleSDID@32473.eventSource:app*", &m));
	assert_true(qm("meta.sequenceId:*", &m));
	assert_false(qm("meta.other:*", &m));
	assert_true(qm("host:web-01 program:sshd bob severity:info", &m));
	/* peer: like host: (the whole address, folded; no peer matches nothing). */
	assert_false(qm("peer:*", &m));
	m.peer = t_str("10.0.0.7");
	assert_true(qm("peer:10.0.0.7", &m));
	assert_true(qm("peer:10.0.0.*", &m));
	assert_false(qm("peer:10.0.0", &m));
	assert_false(qm("peer:10.0.0.70", &m));
	assert_false(qm("10.0.0.7", &m));
	assert_false(qm("host:10.0.0.7", &m));
	assert_true(qm("NOT peer:10.0.0.8", &m));
	/* A missing field or value matches nothing; NOT of it matches. */
	m.host.len = 0;
	m.severity = LB_NOVALUE;
	assert_false(qm("host:*", &m));
	assert_false(qm("severity<=debug", &m));
	assert_true(qm("NOT severity<=debug", &m));
}

/* Many terms: the buffers move from the stack to the heap. */
static void
t_match_big(void **state)
{
	size_t		 n = 200000;
	char		*s = malloc(n + 1);
	struct lb_msg	 m;

	(void)state;
	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		s[i] = i % 2 ? ' ' : (char)('a' + (i / 2) % 26);
	memcpy(s + n - 12, "end of line", 11);
	s[n - 1] = '\0';
	m = msg(s);
	assert_true(qm("\"end of line\"", &m));
	assert_true(qm("\"y z a b\"", &m));
	assert_false(qm("\"z y\"", &m));
	free(s);
}

/* A word finds a token before punctuation and a part of a compound token (QUERY.md §1). */
static void
t_match_forms(void **state)
{
	struct lb_msg	 a = msg("upstream connection refused. backend is down."),
			 b = msg("user non-existent-user from bob@example.com at 10.0.0.1"),
			 c = msg("day 2015-10-18 pid-1234 code 404."),
			 d = msg("for user bob@example.com ok");

	(void)state;
	assert_true(qm("refused", &a));
	assert_true(qm("down", &a));
	assert_true(qm("refused.", &a));
	assert_false(qm("refused..", &a));
	assert_true(qm("existent", &b));
	assert_true(qm("non", &b));
	assert_true(qm("example", &b));
	assert_true(qm("exist*", &b));
	assert_true(qm("*ample", &b));
	assert_true(qm("10.0.0.1", &b));
	assert_true(qm("10.0.0.*", &b));
	assert_false(qm("10.0.0", &b));
	assert_false(qm("0", &b));
	assert_false(qm("existen", &b));
	assert_false(qm("example.com", &b));	/* two parts: not a part */
	/* All-digit parts are not forms; a stripped all-digit token is. */
	assert_false(qm("2015", &c));
	assert_false(qm("1234", &c));
	assert_true(qm("pid", &c));
	assert_true(qm("404", &c));
	assert_true(qm("2015-*", &c));
	/* Phrases: the first word may end a token, the last may start one, the others whole. */
	assert_true(qm("\"connection refused\"", &a));
	assert_true(qm("\"refused backend\"", &a));
	assert_true(qm("\"is down\"", &a));
	assert_true(qm("\"user non\"", &b));
	assert_true(qm("\"user from\"", &b));
	assert_true(qm("\"user bob\"", &d));
	assert_true(qm("\"com ok\"", &d));
	assert_false(qm("\"user example\"", &d));
	assert_false(qm("\"example ok\"", &d));
	assert_false(qm("\"non existent\"", &b));
	assert_false(qm("\"existent from\"", &b));
	assert_false(qm("\"user existent\"", &b));
	assert_true(qm("\"user non-existent-user from\"", &b));
	assert_false(qm("message:2015", &c));
}

/*
 * A text's template (lb_text_template) decides a phrase of whole words without digits as the
 * text does: for random texts of words, digit runs, hex words, separators, punctuation and
 * high bytes, with the phrase's words put in often, lb_query_match() on the text and on its
 * template agree. A run longer than LB_TOKEN_MAX between whitespace has no template.
 */
static void
t_template_phrases(void **state)
{
	static const char *frag[] = { "fail", "Fail", "ed", "pass", "word", "user", "a", "b",
	    "x9", "12", "0", "0042", "7", "deadbeef", "c0ffee", "9fail", "pass9", " ", "  ",
	    ".", "-", "_", "@", "/", "+", ":", "(", ")", "\"", ",", "=", "[", "]", "\t",
	    "\x80", "'", "1.2.3.4", "fail pass", "(fail) pass.", "x-fail pass-y", "fail9 pass",
	    "user a", "a-b", "word_user@b.c" };
	static const char *words[] = { "fail", "pass", "word", "user", "a", "b", "ed",
	    "deadbeef", "x" };
	static const char *glue[] = { " ", " ", "  ", ".", "-", " (", ") ", "9 ", " 9", "/",
	    "\" \"", " x-", "-y ", ": ", "_", "@", "7-", " \x80" };
	uint64_t	 seed = 0x7e3a11ce5ULL;
	char		 text[800], phrase[64];
	uint8_t		 tpl[1024];
	size_t		 tl;
	unsigned	 agree = 0, matched = 0, none = 0;

	(void)state;
	for (int round = 0; round < 40000; round++) {
		struct lb_qnode	*q;
		struct lb_msg	 a, b;
		size_t		 n = 0, nw = 2 + t_rnd(&seed) % 2, k = 1 + t_rnd(&seed) % 30;
		int		 ok = 1, ra, rb;

		const char	*pw[3];

		phrase[0] = '"';
		tl = 1;
		for (size_t i = 0; i < nw; i++) {
			pw[i] = words[t_rnd(&seed) % (sizeof(words) / sizeof(words[0]))];
			tl += (size_t)sprintf(phrase + tl, "%s%s", i ? " " : "", pw[i]);
		}
		phrase[tl++] = '"';
		phrase[tl] = '\0';
		for (size_t i = 0; i < k; i++) {
			const char *f = frag[t_rnd(&seed) % (sizeof(frag) / sizeof(frag[0]))];

			if (i == k / 2 && t_rnd(&seed) % 2 == 0) {
				/* The phrase's words, glued and separated in ways that may match. */
				for (size_t j = 0; j < nw; j++) {
					const char *g = glue[t_rnd(&seed) % (sizeof(glue) /
					    sizeof(glue[0]))];

					n += (size_t)sprintf(text + n, "%s%s", j ? g : "", pw[j]);
				}
			}
			memcpy(text + n, f, strlen(f));
			n += strlen(f);
		}
		if (t_rnd(&seed) % 20 == 0)
			for (size_t i = 0; i < LB_TOKEN_MAX + 1; i++)
				text[n++] = i % 7 == 0 ? '5' : 'q';
		text[n] = '\0';
		q = parse_ok(phrase);
		assert_int_equal(q->kind, LB_Q_PHRASE);
		for (size_t i = 0; i < q->npats; i++)
			ok &= q->pats[i].kind == LB_QP_EXACT;
		assert_true(ok);
		a = msg(text);
		ra = lb_query_match(q, &tcd, &a);
		if (!lb_text_template(a.message.p, a.message.len, tpl, sizeof(tpl), &tl)) {
			assert_true(n > LB_TOKEN_MAX);
			none++;
		} else {
			b = a;
			b.message.p = tpl;
			b.message.len = tl;
			rb = lb_query_match(q, &tcd, &b);
			assert_true(ra == 0 || ra == 1);
			if (ra != rb)
				fail_msg("phrase %s: text \"%s\" gives %d, template \"%.*s\" %d",
				    phrase, text, ra, (int)tl, tpl, rb);
			agree++;
			matched += (unsigned)ra;
		}
		lb_query_free(q);
	}
	print_message("template phrases: %u agree, %u match, %u without a template\n", agree,
	    matched, none);
	/* Not vacuous: many matches, many misses, some texts without a template. */
	assert_true(matched > 1000 && agree - matched > 10000 && none > 500);
}

/* The template's bytes: runs with a digit are one "0", letters folded, the rest as is. */
static void
t_template_bytes(void **state)
{
	static const struct {
		const char	*text, *tpl;
	} cases[] = {
		{ "Failed password for root from 10.0.0.1 port 22 ssh2",
		  "failed password for root from 0.0.0.0 port 0 0" },
		{ "req-938015cb-d01e-4DAB Ab-cd x9y 0042 deadbeef", "req-0-0-0 ab-cd 0 0 deadbeef" },
		{ "", "" },
		{ "(Error) \x80\xff 12:34", "(error) \x80\xff 0:0" },
	};
	uint8_t	 out[64], big[LB_TOKEN_MAX + 2];
	size_t	 n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(lb_text_template((const uint8_t *)cases[i].text,
		    strlen(cases[i].text), out, sizeof(out), &n), 1);
		assert_int_equal(n, strlen(cases[i].tpl));
		assert_memory_equal(out, cases[i].tpl, n);
	}
	/* LB_TOKEN_MAX bytes between whitespace: a template; one more: none. */
	memset(big, 'a', sizeof(big));
	assert_int_equal(lb_text_template(big, LB_TOKEN_MAX, out, sizeof(out), &n), 0);
	assert_int_equal(lb_text_template(big, 10, out, 10, &n), 1);
	assert_int_equal(lb_text_template(big, 11, out, 10, &n), 0);	/* no room */
	memcpy(big, "aaaaaaaaa 1", 11);
	assert_int_equal(lb_text_template(big, 11, out, 10, &n), 0);
	assert_int_equal(lb_text_template(big, 11, out, 11, &n), 1);
	assert_true(n == 11 && memcmp(out, "aaaaaaaaa 0", 11) == 0);
	memcpy(big, "aaaaaaaa 12", 11);
	assert_int_equal(lb_text_template(big, 11, out, 10, &n), 1);
	assert_true(n == 10 && memcmp(out, "aaaaaaaa 0", 10) == 0);
	{
		uint8_t	 wide[LB_TOKEN_MAX + 1];

		memset(big, '1', sizeof(big));
		assert_int_equal(lb_text_template(big, LB_TOKEN_MAX, wide, sizeof(wide), &n), 1);
		assert_true(n == 1 && wide[0] == '0');
		assert_int_equal(lb_text_template(big, LB_TOKEN_MAX + 1, wide, sizeof(wide), &n),
		    0);
		big[100] = ' ';
		assert_int_equal(lb_text_template(big, LB_TOKEN_MAX + 1, wide, sizeof(wide), &n),
		    1);
		assert_true(n == 3 && memcmp(wide, "0 0", 3) == 0);
	}
}

T_MAIN_SETUP(setup,
	cmocka_unit_test(t_glob),
	cmocka_unit_test(t_glob_fast),
	cmocka_unit_test(t_shapes_ssb),
	cmocka_unit_test(t_shapes_fields),
	cmocka_unit_test(t_shapes_grammar),
	cmocka_unit_test(t_shapes_escapes),
	cmocka_unit_test(t_custom_delims),
	cmocka_unit_test(t_long_token),
	cmocka_unit_test(t_errors),
	cmocka_unit_test(t_limits),
	cmocka_unit_test(t_roundtrip_words),
	cmocka_unit_test(t_roundtrip_bytes),
	cmocka_unit_test(t_match_text),
	cmocka_unit_test(t_match_forms),
	cmocka_unit_test(t_match_fields),
	cmocka_unit_test(t_match_big),
	cmocka_unit_test(t_template_phrases),
	cmocka_unit_test(t_template_bytes))
