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
	/* The worked examples of FORMAT.md §4.3. */
	uint64_t		 ids[] = { 1000, 1001, 1301 };
	uint8_t			 buf[32], want[] = { 0x00, 0x01, 0xac, 0x02 };

	(void)state;
	uint64_t		 many[129];
	uint8_t			 exc[] = { 0x80, 0x00, 0x7f, 0xe9, 0x06 };
	uint8_t			 two[] = { 0x01, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

	assert_int_equal(lb_postings_encode(ids, 3, 1000, buf), 4);
	assert_memory_equal(buf, want, 4);
	/* 1000..1127: one group of width 0; 1000..1128: then the varint gap 1. */
	for (int i = 0; i < 129; i++)
		many[i] = 1000 + (uint64_t)i;
	assert_int_equal(lb_postings_encode(many, 128, 1000, buf), 1);
	assert_int_equal(buf[0], 0x00);
	assert_int_equal(lb_postings_encode(many, 129, 1000, buf), 2);
	assert_true(buf[0] == 0x00 && buf[1] == 0x01);
	/* 1000, 1002, ..., 1254: values 0 then 127 ones at width 1. */
	for (int i = 0; i < 128; i++)
		many[i] = 1000 + 2 * (uint64_t)i;
	assert_int_equal(lb_postings_encode(many, 128, 1000, buf), 17);
	assert_memory_equal(buf, two, 17);
	/* 1000..1126, 2000: width 0 and one exception, 873 at position 127. */
	for (int i = 0; i < 127; i++)
		many[i] = 1000 + (uint64_t)i;
	many[127] = 2000;
	assert_int_equal(lb_postings_encode(many, 128, 1000, buf), 5);
	assert_memory_equal(buf, exc, 5);
}

/* Groups with exceptions: random jumpy lists round trip; damaged exceptions are refused. */
static void
t_exceptions(void **state)
{
	struct lb_postings	 p = { NULL, 0, 0 };
	uint64_t		 ids[1000], seed = 42, id;
	uint8_t			 buf[1000 * LB_VARINT_MAX];
	size_t			 len;
	/* Group of 128 zeros but an exception; each case breaks one rule. */
	static const uint8_t	 bad[][5] = {
		{ 0x80, 0x00, 0x80, 0xe9, 0x06 },	/* position 128 */
		{ 0x80, 0x00, 0x7f, 0x00, 0x00 },	/* high part 0 */
		{ 0x80, 0x80, 0x7f, 0xe9, 0x06 },	/* 129 exceptions */
		{ 0xc0, 0x00, 0x7f, 0xe9, 0x06 },	/* width 64 with exceptions */
		{ 0x80, 0x01, 0x7f, 0x01, 0x7e },	/* positions not ascending (and short) */
	};

	(void)state;
	for (int round = 0; round < 200; round++) {
		id = 5;
		for (size_t i = 0; i < 1000; i++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			id += 1 + ((seed >> 33) % 7 == 0 ? (seed >> 20) % (1ULL << (round % 40)) :
			    (seed >> 40) % 3);
			ids[i] = id;
		}
		len = lb_postings_encode(ids, 1000, 5, buf);
		p.n = 0;
		assert_ok(lb_postings_decode(buf, len, 5, UINT64_MAX, 1000, &p));
		assert_int_equal(p.n, 1000);
		assert_memory_equal(p.ids, ids, sizeof(ids));
		/* Cutting the list anywhere is damage. */
		assert_int_equal(lb_postings_decode(buf, len - 1 - round % 3, 5, UINT64_MAX, 1000,
		    &p), LB_ECORRUPT);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(lb_postings_decode(bad[i], 5, 0, UINT64_MAX, 128, &p),
		    LB_ECORRUPT);
	lb_postings_free(&p);
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

/* Bit-packed groups: every width, group boundaries, the first value allowed to be 0. */
static void
t_packed(void **state)
{
	static const unsigned	 widths[] = { 0, 1, 2, 7, 8, 13, 31, 32, 33, 55, 56, 57, 63, 64 };
	size_t			 counts[] = { 127, 128, 129, 255, 256, 300, 1000 };
	struct lb_postings	 p = { NULL, 0, 0 };
	uint64_t		*ids, seed = 88172645463325252ULL;
	uint8_t			*buf;

	(void)state;
	assert_non_null(ids = malloc(1000 * sizeof(*ids)));
	assert_non_null(buf = malloc(1000 * LB_VARINT_MAX));
	for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
			size_t		 n = counts[c], len;
			uint64_t	 base = 5, id = base;

			/* Gaps of 1 + up to width bits; keep the sum within 64 bits. */
			for (size_t i = 0; i < n; i++) {
				uint64_t g = t_rnd(&seed);

				g = widths[w] == 0 ? 0 : g >> (64 - widths[w]);
				if (widths[w] > 50)
					g >>= 10;	/* 1000 gaps must fit in 64 bits */
				if (i == 0)
					id = base + g;
				else
					id += g + 1;
				ids[i] = id;
			}
			len = lb_postings_encode(ids, n, base, buf);
			if (widths[w] == 0 && n >= 128)
				assert_true(len < n);	/* a dense list costs bits, not bytes */
			p.n = 0;
			assert_ok(lb_postings_decode(buf, len, base, ids[n - 1], n, &p));
			assert_int_equal(p.n, n);
			assert_memory_equal(p.ids, ids, n * sizeof(uint64_t));
			/* One id short of max, or a byte short, is damage. */
			if (ids[n - 1] > base)
				assert_int_equal(lb_postings_decode(buf, len, base, ids[n - 1] - 1,
				    n, &p), LB_ECORRUPT);
			assert_int_equal(lb_postings_decode(buf, len - 1, base, UINT64_MAX, n, &p),
			    LB_ECORRUPT);
		}
	}
	/* A width over 64, and a group whose bytes run out. */
	buf[0] = 65;
	assert_int_equal(lb_postings_decode(buf, 2000, 0, UINT64_MAX, 128, &p), LB_ECORRUPT);
	buf[0] = 8;
	assert_int_equal(lb_postings_decode(buf, 128, 0, UINT64_MAX, 128, &p), LB_ECORRUPT);
	/* 128 consecutive ids take one byte: width 0. */
	for (size_t i = 0; i < 128; i++)
		ids[i] = 1000 + i;
	assert_int_equal(lb_postings_encode(ids, 128, 1000, buf), 1);
	assert_int_equal(buf[0], 0);
	lb_postings_free(&p);
	free(ids);
	free(buf);
}

T_MAIN(
	cmocka_unit_test(t_roundtrip),
	cmocka_unit_test(t_worked_example),
	cmocka_unit_test(t_damage),
	cmocka_unit_test(t_packed),
	cmocka_unit_test(t_exceptions))
