/*
 * t_spans.c — lb_query_spans: the bytes a query marks in a message's text are whole tokens
 * its positive text terms match (words, wildcards, message:, phrases only where the phrase
 * matches in place), never tokens under NOT or of other fields, with the logspace's
 * delimiters and long tokens as the index cuts them.
 */
#include "t_helper.h"

static struct lb_tokconf tcd;

/*
 * The marked bytes of text for query qt, as the text with each span in brackets
 * ("[Failed] password for root"), in a static buffer.
 */
static const char *
marks(const struct lb_tokconf *tc, const char *qt, const char *text)
{
	static char	 buf[2048];
	struct lb_qnode	*q = NULL;
	struct lb_qerr	 err;
	struct lb_span	*sp;
	size_t		 n, at = 0, k = 0, tl = strlen(text);

	assert_ok(lb_query_parse(tc, qt, strlen(qt), &q, &err));
	assert_ok(lb_query_spans(q, tc, (const uint8_t *)text, tl, &sp, &n));
	for (size_t i = 0; i < n; i++) {
		assert_true(sp[i].off >= at && sp[i].len > 0 && sp[i].off + sp[i].len <= tl);
		memcpy(buf + k, text + at, sp[i].off - at);
		k += sp[i].off - at;
		k += (size_t)snprintf(buf + k, sizeof(buf) - k, "[%.*s]", (int)sp[i].len,
		    text + sp[i].off);
		at = sp[i].off + sp[i].len;
	}
	snprintf(buf + k, sizeof(buf) - k, "%s", text + at);
	free(sp);
	lb_query_free(q);
	return (buf);
}

static void
t_words(void **state)
{
	(void)state;
	assert_string_equal(marks(&tcd, "fail* \"for root\"",
	    "Failed password for ROOT from 10.0.0.1:22"),
	    "[Failed] password [for] [ROOT] from 10.0.0.1:22");
	assert_string_equal(marks(&tcd, "u?er", "user=bob usr=x USER"),
	    "[user]=bob usr=x [USER]");
	assert_string_equal(marks(&tcd, "message:bob OR host:x", "user=bob host x"),
	    "user=[bob] host x");
	assert_string_equal(marks(&tcd, "*", "anything at all"), "anything at all");
	assert_string_equal(marks(&tcd, "severity<=err facility:auth", "err auth"), "err auth");
	assert_string_equal(marks(&tcd, "x", ""), "");
	assert_string_equal(marks(&tcd, "x", " ;; "), " ;; ");
}

/* A phrase marks its tokens only where they stand together, in order. */
static void
t_phrases(void **state)
{
	(void)state;
	assert_string_equal(marks(&tcd, "Connection:Error",
	    "Error Connection refused; Connection Error occurred"),
	    "Error Connection refused; [Connection] [Error] occurred");
	assert_string_equal(marks(&tcd, "\"connection error\"", "Error Connection refused"),
	    "Error Connection refused");
	assert_string_equal(marks(&tcd, "\"a a\"", "a a a b a"), "[a] [a] [a] b a");
}

/* Under NOT nothing is marked; under two NOTs it is. */
static void
t_not(void **state)
{
	(void)state;
	assert_string_equal(marks(&tcd, "user AND NOT close*", "user closed the session"),
	    "[user] closed the session");
	assert_string_equal(marks(&tcd, "NOT (NOT user)", "user x"), "[user] x");
	assert_string_equal(marks(&tcd, "NOT (a OR NOT b)", "a b"), "a [b]");
}

/* The logspace's delimiters cut the text and the query alike. */
static void
t_delims(void **state)
{
	struct lb_tokconf tc;

	(void)state;
	assert_ok(lb_tokconf_set(&tc, "", 0));
	assert_string_equal(marks(&tc, "a\\:b", "x a:b a b"), "x [a:b] a b");
	assert_string_equal(marks(&tcd, "a\\:b", "x a:b a b"), "x a:b a b");
	assert_ok(lb_tokconf_set(&tc, "-", 1));
	assert_string_equal(marks(&tc, "b", "a-b=c b"), "a-b=c [b]");
	assert_string_equal(marks(&tc, "b=c", "a-b=c b"), "a-[b=c] b");
}

/* A token longer than LB_TOKEN_MAX matches by its first 255 bytes; the span is the whole run. */
static void
t_long_token(void **state)
{
	char	 text[400], q[300], want[420];

	(void)state;
	memset(text, 'x', 300);
	strcpy(text + 300, " y");
	memset(q, 'X', 255);
	q[255] = '\0';
	snprintf(want, sizeof(want), "[%.300s] y", text);
	assert_string_equal(marks(&tcd, q, text), want);
	/* bytes >= 0x80 are token bytes */
	assert_string_equal(marks(&tcd, "caf\xc3\xa9*", "un caf\xc3\xa9s\xff ok"),
	    "un [caf\xc3\xa9s\xff] ok");
}

static int
setup(void **state)
{
	(void)state;
	lb_tokconf_default(&tcd);
	return (0);
}

/* A form marks its own bytes inside the token; overlapping marks are one span. */
static void
t_forms(void **state)
{
	(void)state;
	assert_string_equal(marks(&tcd, "refused down", "connection refused. is down."),
	    "connection [refused]. is [down].");
	assert_string_equal(marks(&tcd, "existent", "user non-existent-user x"),
	    "user non-[existent]-user x");
	assert_string_equal(marks(&tcd, "example OR bob", "from bob@example.com"),
	    "from [bob]@[example].com");
	assert_string_equal(marks(&tcd, "example OR bob@example.com", "from bob@example.com"),
	    "from [bob@example.com]");
	assert_string_equal(marks(&tcd, "\"user bob\"", "user bob@example.com, bob"),
	    "[user] [bob]@example.com, bob");
	assert_string_equal(marks(&tcd, "\"connection refused\"", "connection refused."),
	    "[connection] [refused].");
	assert_string_equal(marks(&tcd, "\"non existent\"", "non-existent"), "non-existent");
	assert_string_equal(marks(&tcd, "2015", "2015-10-18 2015"), "2015-10-18 [2015]");
}

T_MAIN_SETUP(setup,
	cmocka_unit_test(t_words),
	cmocka_unit_test(t_phrases),
	cmocka_unit_test(t_not),
	cmocka_unit_test(t_delims),
	cmocka_unit_test(t_long_token),
	cmocka_unit_test(t_forms))
