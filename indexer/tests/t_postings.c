/*
 * t_postings.c — id-list coding: round trips at value boundaries, the FORMAT.md worked
 * example, and every kind of damage a decoder must reject (truncation, zero gaps, ids outside
 * [base, max], leftover bytes, wrong counts, 64-bit overflow).
 */
#include "t_helper.h"
#include "lb_util.h"
#include "lb_postings.h"

static void
t_roundtrip(void **state)
{
	uint64_t		 ids[] = { 100, 101, 227, 228, 100000, (uint64_t)1 << 40,
	    UINT64_MAX - 1, UINT64_MAX };
	size_t			 n = sizeof(ids) / sizeof(ids[0]);
	uint8_t			 buf[sizeof(ids) / sizeof(ids[0]) * LB_VARINT_MAX];
	struct lb_postings	 p = { NULL, 0, 0 };
	size_t			 len;

	(void)state;
	for (size_t k = 1; k <= n; k++) {
		len = lb_postings_encode(ids, k, 100, buf);
		p.n = 0;
		assert_ok(lb_postings_decode(buf, len, 100, UINT64_MAX, k, &p));
		assert_int_equal(p.n, k);
		assert_memory_equal(p.ids, ids, k * sizeof(uint64_t));
		assert_true(p.cap >= p.n);
	}
	/* Decoding appends. */
	len = lb_postings_encode(ids, 2, 100, buf);
	assert_ok(lb_postings_decode(buf, len, 100, UINT64_MAX, 2, &p));
	assert_int_equal(p.n, n + 2);
	assert_true(p.ids[n] == 100 && p.ids[n + 1] == 101);
	lb_postings_free(&p);
	assert_null(p.ids);
	lb_postings_free(NULL);
}

static void
t_worked_example(void **state)
{
	/* FORMAT.md: ids 1000, 1001, 1301 with first_id 1000 → 00 01 ac 02. */
	uint64_t		 ids[] = { 1000, 1001, 1301 };
	uint8_t			 buf[32], want[] = { 0x00, 0x01, 0xac, 0x02 };

	(void)state;
	assert_int_equal(lb_postings_encode(ids, 3, 1000, buf), 4);
	assert_memory_equal(buf, want, 4);
}

static void
t_damage(void **state)
{
	struct lb_postings	 p = { NULL, 0, 0 };
	const uint8_t		 ok[] = { 0x05, 0x01, 0x02 };
	const uint8_t		 zero_gap[] = { 0x05, 0x00 };
	const uint8_t		 trunc[] = { 0x05, 0x81 };
	const uint8_t		 big[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	    0xff, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	const uint8_t		 toolong[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
	    0x80, 0x80, 0x80, 0x00 };

	(void)state;
	assert_ok(lb_postings_decode(ok, 3, 10, 18, 3, &p));
	assert_int_equal(p.n, 3);
	assert_true(p.ids[0] == 15 && p.ids[1] == 16 && p.ids[2] == 18);
	/* Past max, count too small (leftover bytes), count too large, zero count. */
	assert_int_equal(lb_postings_decode(ok, 3, 10, 17, 3, &p), LB_ECORRUPT);
	assert_int_equal(lb_postings_decode(ok, 3, 10, 18, 2, &p), LB_ECORRUPT);
	assert_int_equal(lb_postings_decode(ok, 3, 10, 18, 4, &p), LB_ECORRUPT);
	assert_int_equal(lb_postings_decode(ok, 3, 10, 18, 0, &p), LB_ECORRUPT);
	assert_int_equal(lb_postings_decode(ok, 3, 19, 18, 1, &p), LB_ECORRUPT);
	assert_int_equal(lb_postings_decode(zero_gap, 2, 0, 100, 2, &p), LB_ECORRUPT);
	assert_int_equal(lb_postings_decode(trunc, 2, 0, 1000, 2, &p), LB_ECORRUPT);
	/* Two maximal varints: the sum overflows 64 bits. */
	assert_int_equal(lb_postings_decode(big, sizeof(big), 1, UINT64_MAX, 2, &p),
	    LB_ECORRUPT);
	assert_int_equal(lb_postings_decode(toolong, sizeof(toolong), 0, UINT64_MAX, 1, &p),
	    LB_ECORRUPT);
	/* A count far beyond the bytes is damage, not a huge allocation. */
	assert_int_equal(lb_postings_decode(ok, 3, 0, 100, (uint64_t)1 << 60, &p), LB_ECORRUPT);
	/* Failures leave what was there. */
	assert_int_equal(p.n, 3);
	assert_true(p.ids[2] == 18);
	lb_postings_free(&p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_roundtrip),
		cmocka_unit_test(t_worked_example),
		cmocka_unit_test(t_damage),
	};
	return (cmocka_run_group_tests(tests, NULL, NULL));
}
