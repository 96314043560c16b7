/*
 * t_tokenize.c — the token contract: default delimiters split, the DESIGN.md examples stay one
 * token, ASCII folds, high bytes and NUL stay, long tokens are cut once, custom delimiters;
 * the forms of a token (lb_token_forms): stripped punctuation, parts of compound tokens.
 */
#include "t_helper.h"

struct col {
	char	 toks[64][LB_TOKEN_MAX + 1];
	size_t	 lens[64];
	size_t	 offs[64];
	int	 n;
};

static int
collect(void *arg, const uint8_t *tok, size_t len, uint32_t pos, size_t off)
{
	struct col *c = arg;

	assert_int_equal(pos, (uint32_t)c->n);
	assert_true(c->n < 64);
	memcpy(c->toks[c->n], tok, len);
	c->toks[c->n][len] = '\0';
	c->lens[c->n] = len;
	c->offs[c->n] = off;
	c->n++;
	return (0);
}

static struct col
run(const struct lb_tokconf *tc, const char *s, size_t len)
{
	struct col c;

	memset(&c, 0, sizeof(c));
	assert_ok(lb_tokenize(tc, (const uint8_t *)s, len, collect, &c));
	return (c);
}

static void
t_design_examples(void **state)
{
	struct lb_tokconf	 tc;
	struct col		 c;
	const char		*s = "10.0.0.1 web-01 user_id bob@example.com Connection:Error "
	    "/var/log/syslog a+b";
	const char		*want[] = { "10.0.0.1", "web-01", "user_id", "bob@example.com",
	    "connection", "error", "var", "log", "syslog", "a+b" };

	(void)state;
	lb_tokconf_default(&tc);
	c = run(&tc, s, strlen(s));
	assert_int_equal(c.n, 10);
	for (int i = 0; i < c.n; i++)
		assert_string_equal(c.toks[i], want[i]);
	assert_int_equal(c.offs[0], 0);
	assert_int_equal(c.offs[1], 9);
}

static void
t_every_default_delimiter(void **state)
{
	struct lb_tokconf	 tc;
	const char		*d = LB_DEFAULT_DELIMS " \t\n\v\f\r";

	(void)state;
	lb_tokconf_default(&tc);
	for (int b = 0; b < 256; b++) {
		char s[3] = { 'a', (char)b, 'b' };
		struct col c = run(&tc, s, 3);
		int is_delim = b != 0 && strchr(d, b) != NULL;

		assert_int_equal(c.n, is_delim ? 2 : 1);
	}
}

static void
t_fold_and_bytes(void **state)
{
	struct lb_tokconf	 tc;
	const char		 s[] = "ÄBC\x00x\xff" "Z";
	struct col		 c;

	(void)state;
	lb_tokconf_default(&tc);
	c = run(&tc, s, sizeof(s) - 1);
	assert_int_equal(c.n, 1);
	/* UTF-8 bytes kept as they are, only ASCII folded; NUL is a token byte. */
	assert_int_equal(c.lens[0], sizeof(s) - 1);
	assert_memory_equal(c.toks[0], "\xc3\x84" "bc\x00x\xff" "z", sizeof(s) - 1);
}

static void
t_long_token_cut_once(void **state)
{
	struct lb_tokconf	 tc;
	char			 s[1000];
	struct col		 c;

	(void)state;
	lb_tokconf_default(&tc);
	memset(s, 'q', 600);
	memcpy(s + 600, " end", 4);
	c = run(&tc, s, 604);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.lens[0], LB_TOKEN_MAX);
	assert_string_equal(c.toks[1], "end");
}

static void
t_custom_delims(void **state)
{
	struct lb_tokconf	 tc;
	struct col		 c;

	(void)state;
	assert_ok(lb_tokconf_set(&tc, ".", 1));
	c = run(&tc, "a.b:c d", 7);
	assert_int_equal(c.n, 3);
	assert_string_equal(c.toks[1], "b:c");
	assert_int_equal(lb_tokconf_set(&tc, "a", 1), LB_EBADCONF);
	c = run(&tc, "", 0);
	assert_int_equal(c.n, 0);
}

static int
stop_at_two(void *arg, const uint8_t *tok, size_t len, uint32_t pos, size_t off)
{
	(void)arg; (void)tok; (void)len; (void)off;
	return (pos == 1 ? 42 : 0);
}

static void
t_callback_stops(void **state)
{
	struct lb_tokconf tc;

	(void)state;
	lb_tokconf_default(&tc);
	assert_int_equal(lb_tokenize(&tc, (const uint8_t *)"a b c", 5, stop_at_two, NULL), 42);
}

struct forms {
	char	 buf[512];	/* "form@at/flags " for each form */
	size_t	 len;
};

static int
form_col(void *arg, const uint8_t *form, size_t len, size_t at, int flags)
{
	struct forms	*f = arg;
	int		 n;

	n = snprintf(f->buf + f->len, sizeof(f->buf) - f->len, "%s%.*s@%zu/%d",
	    f->len ? " " : "", (int)len, (const char *)form, at, flags);
	assert_true(n > 0 && (size_t)n < sizeof(f->buf) - f->len);
	f->len += (size_t)n;
	return (0);
}

static const char *
forms_of(const char *tok, struct forms *f)
{
	memset(f, 0, sizeof(*f));
	assert_ok(lb_token_forms((const uint8_t *)tok, strlen(tok), form_col, f));
	return (f->buf);
}

/* DESIGN.md "Tokens": the stripped form and the parts, with their offsets and flags. */
static void
t_forms(void **state)
{
	static const struct { const char *tok, *want; } cases[] = {
		{ "refused", "" },
		{ "refused.", "refused@0/3" },
		{ "\"quoted\"", "quoted@1/3" },
		{ "(error)", "error@1/3" },
		{ "...", "" },
		{ "non-existent-user", "non@0/1 existent@4/0 user@13/2" },
		{ "bob@example.com", "bob@0/1 example@4/0 com@12/2" },
		{ "10.0.0.1", "" },
		{ "2015-10-18", "" },
		{ "2015-10-18.", "2015-10-18@0/3" },
		{ "404.", "404@0/3" },
		{ "pid-1234", "pid@0/1" },
		{ "v2.3", "v2@0/1" },
		{ "user_id", "user@0/1 id@5/2" },
		{ "a+b", "a@0/1 b@2/2" },
		{ "x//y", "x@0/1 y@3/2" },
		{ "(upstream).", "upstream@1/3" },
		{ "foo.(bar)", "foo.(bar@0/3 foo@0/1 bar@5/2" },
		{ "-a-a-", "a-a@1/3 a@1/1 a@3/2" },
		{ "appattempt_1445144423722_0020_000001", "appattempt@0/1" },
		{ "caf\xc3\xa9-au-lait", "caf\xc3\xa9@0/1 au@6/0 lait@9/2" },
		{ "a:b", "" },
		{ "key=value,", "key=value@0/3" },
	};
	struct forms f;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = forms_of(cases[i].tok, &f);

		if (strcmp(got, cases[i].want) != 0)
			fail_msg("%s: got '%s', want '%s'", cases[i].tok, got, cases[i].want);
	}
	/* The punctuation that strips is ASCII's, no more. */
	for (int c = 0; c < 256; c++) {
		int p = (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) ||
		    (c >= 0x5b && c <= 0x60) || (c >= 0x7b && c <= 0x7e);

		assert_int_equal(lb_form_punct[c], p);
	}
}

static int
stop_form(void *arg, const uint8_t *form, size_t len, size_t at, int flags)
{
	(void)arg; (void)form; (void)len; (void)flags;
	return (at > 0 ? 7 : 0);
}

static void
t_forms_stop(void **state)
{
	(void)state;
	assert_int_equal(lb_token_forms((const uint8_t *)"a-b-c", 5, stop_form, NULL), 7);
}

T_MAIN(
	cmocka_unit_test(t_design_examples),
	cmocka_unit_test(t_every_default_delimiter),
	cmocka_unit_test(t_fold_and_bytes),
	cmocka_unit_test(t_long_token_cut_once),
	cmocka_unit_test(t_custom_delims),
	cmocka_unit_test(t_callback_stops),
	cmocka_unit_test(t_forms),
	cmocka_unit_test(t_forms_stop))
