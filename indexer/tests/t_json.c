/*
 * t_json.c — lb_utf8_len, the UTF-8 rule the JSON escaping and the CLI's text output share:
 * the valid sequences of 2, 3 and 4 bytes, and every way a sequence is refused (a stray
 * continuation byte, overlong forms, surrogates, past U+10FFFF, cut short). lb_json_bytes
 * escapes by it: valid UTF-8 passes, every other byte is \udcXX.
 */
#include "t_helper.h"

static size_t
u8(const char *s, size_t len)
{
	return (lb_utf8_len((const uint8_t *)s, len));
}

static void
t_utf8_len(void **state)
{
	(void)state;
	assert_int_equal(u8("\xc3\xa9", 2), 2);			/* é */
	assert_int_equal(u8("\xe2\x82\xac", 3), 3);		/* € */
	assert_int_equal(u8("\xf0\x9f\x98\x80", 4), 4);		/* U+1F600 */
	assert_int_equal(u8("\xf4\x8f\xbf\xbf", 4), 4);		/* U+10FFFF */
	assert_int_equal(u8("\xed\x9f\xbf", 3), 3);		/* U+D7FF */
	assert_int_equal(u8("\xc3\xa9xyz", 5), 2);		/* only the first character */
	assert_int_equal(u8("\x80", 1), 0);			/* a continuation byte alone */
	assert_int_equal(u8("\xc0\xaf", 2), 0);			/* overlong '/' */
	assert_int_equal(u8("\xc1\xbf", 2), 0);
	assert_int_equal(u8("\xe0\x80\xaf", 3), 0);		/* overlong, 3 bytes */
	assert_int_equal(u8("\xf0\x80\x80\xaf", 4), 0);		/* overlong, 4 bytes */
	assert_int_equal(u8("\xed\xa0\x80", 3), 0);		/* U+D800, a surrogate */
	assert_int_equal(u8("\xf4\x90\x80\x80", 4), 0);		/* U+110000 */
	assert_int_equal(u8("\xf5\x80\x80\x80", 4), 0);
	assert_int_equal(u8("\xff", 1), 0);
	assert_int_equal(u8("\xe2\x82\xac", 2), 0);		/* cut short */
	assert_int_equal(u8("\xe2\x28\xac", 3), 0);		/* not a continuation */
	assert_int_equal(u8("", 0), 0);
}

static void
t_json_bytes(void **state)
{
	static const char	in[] = "a\"\\\n\x01\x7f\xff \xc3\xa9 \xed\xa0\x80";
	static const char	want[] = "a\\\"\\\\\\n\\u0001\\u007f\\udcff \xc3\xa9 \\udced\\udca0\\udc80";
	char			*out = NULL;
	size_t			 len = 0;
	FILE			*f;

	(void)state;
	assert_non_null(f = open_memstream(&out, &len));
	lb_json_bytes(f, (const uint8_t *)in, sizeof(in) - 1);
	assert_int_equal(fclose(f), 0);
	assert_string_equal(out, want);
	free(out);
}

T_MAIN(
	cmocka_unit_test(t_utf8_len),
	cmocka_unit_test(t_json_bytes))
