/*
 * t_tokenize.c — the token contract: default delimiters split, the DESIGN.md examples stay one
 * token, ASCII folds, high bytes and NUL stay, long tokens are cut once, custom delimiters.
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

T_MAIN(
	cmocka_unit_test(t_design_examples),
	cmocka_unit_test(t_every_default_delimiter),
	cmocka_unit_test(t_fold_and_bytes),
	cmocka_unit_test(t_long_token_cut_once),
	cmocka_unit_test(t_custom_delims),
	cmocka_unit_test(t_callback_stops))
