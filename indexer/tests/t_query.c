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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_glob),
		cmocka_unit_test(t_glob_fast),
	};

	return (cmocka_run_group_tests(tests, NULL, NULL));
}
