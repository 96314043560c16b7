/*
 * t_time.c — lb_time_parse: RFC 3339 with fractions, offsets, a space for "T" and dates alone;
 * relative times; "now"; epoch seconds; and everything else refused. lb_time_fmt output parses
 * back to the same instant.
 */
#include "t_helper.h"

#define S	INT64_C(1000000)

static int64_t
tp(const char *s, int64_t now)
{
	int64_t v = 12345;

	assert_ok(lb_time_parse(s, now, &v));
	return (v);
}

static void
t_rfc3339(void **state)
{
	const int64_t base = INT64_C(1795348800) * S;	/* 2026-11-22T12:00:00Z */

	(void)state;
	assert_true(tp("2026-11-22T12:00:00Z", 0) == base);
	assert_true(tp("2026-11-22t12:00:00z", 0) == base);
	assert_true(tp("2026-11-22 12:00:00Z", 0) == base);
	assert_true(tp("2026-11-22T12:00:00", 0) == base);
	assert_true(tp("2026-11-22T12:00Z", 0) == base);
	assert_true(tp("2026-11-22T12:00:00.000001Z", 0) == base + 1);
	assert_true(tp("2026-11-22T12:00:00.5Z", 0) == base + 500000);
	assert_true(tp("2026-11-22T12:00:00.1234567891Z", 0) == base + 123456);
	assert_true(tp("2026-11-22T13:00:00+01:00", 0) == base);
	assert_true(tp("2026-11-22T10:30:00.25-01:30", 0) == base + 250000);
	assert_true(tp("2026-11-22", 0) == base - 12 * 3600 * S);
	assert_true(tp("1970-01-01T00:00:00Z", 0) == 0);
	assert_true(tp("1969-12-31T23:59:59Z", 0) == -S);
	assert_true(tp("2024-02-29T00:00:00Z", 0) == INT64_C(1709164800) * S);
	assert_true(tp("2000-03-01", 0) == INT64_C(951868800) * S);
	assert_true(tp("2016-12-31T23:59:60Z", 0) == INT64_C(1483228800) * S);
}

static void
t_relative(void **state)
{
	const int64_t now = INT64_C(1795348800) * S + 123;

	(void)state;
	assert_true(tp("now", now) == now);
	assert_true(tp("-15m", now) == now - 15 * 60 * S);
	assert_true(tp("-2h", now) == now - 2 * 3600 * S);
	assert_true(tp("-1d", now) == now - 86400 * S);
	assert_true(tp("-1w", now) == now - 7 * 86400 * S);
	assert_true(tp("-30s", now) == now - 30 * S);
	assert_true(tp("+30s", now) == now + 30 * S);
	assert_true(tp("+0d", now) == now);
	assert_true(tp("1795348800", now) == INT64_C(1795348800) * S);
	assert_true(tp("0", now) == 0);
}

static void
t_refused(void **state)
{
	const char *bad[] = { "", "now ", "Now", "yesterday", "-15", "-m", "15m", "-15y",
	    "-15mm", "+", "-", "2026-13-01", "2026-02-29", "2026-11-31", "2026-11-22T24:00:00Z",
	    "2026-11-22T12:60:00Z", "2026-11-22T12:00:61Z", "2026-11-22T12:00:00+0100",
	    "2026-11-22T12:00:00.Z", "2026-11-22T12", "2026-11-22X12:00:00Z",
	    "2026-11-22T12:00:00Z ", " 2026-11-22", "26-11-22", "2026-1-22",
	    "12.5", "1e9", "99999999999999999999", "9223372036855", "-99999999999999999999s",
	    "-9999999999999w", "2026-11-22T12:00:00+25:00", "0x10" };
	int64_t v = 7;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = lb_time_parse(bad[i], 0, &v);

		if (rc != LB_EQUERY)
			print_error("accepted '%s'\n", bad[i]);
		assert_int_equal(rc, LB_EQUERY);
		assert_true(v == 7);
	}
	assert_int_equal(lb_time_parse("-1s", INT64_MIN + 1, &v), LB_EQUERY);
	assert_int_equal(lb_time_parse("+1s", INT64_MAX, &v), LB_EQUERY);
}

static void
t_fmt_roundtrip(void **state)
{
	const int64_t vals[] = { 0, 1, -1, INT64_C(1795348800123456), -INT64_C(86400000001),
	    INT64_C(4102444799999999) };
	const int offs[] = { 0, 60, -90, 330, -720 };
	char buf[64];

	(void)state;
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		for (size_t k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
			lb_time_fmt(buf, sizeof(buf), vals[i], offs[k]);
			if (tp(buf, 0) != vals[i])
				print_error("%s\n", buf);
			assert_true(tp(buf, 0) == vals[i]);
		}
}

T_MAIN(
	cmocka_unit_test(t_rfc3339),
	cmocka_unit_test(t_relative),
	cmocka_unit_test(t_refused),
	cmocka_unit_test(t_fmt_roundtrip))
