/*
 * t_util.c — varints (every length and value boundary), little/big-endian helpers, the CRC,
 * and lb_strerror for every code family.
 */
#include "t_helper.h"
#include "lb_util.h"

#include <errno.h>
#include <lmdb.h>

static void
t_varint_roundtrip(void **state)
{
	uint8_t		 buf[LB_VARINT_MAX];
	uint64_t	 vals[] = { 0, 1, 127, 128, 255, 16383, 16384, UINT32_MAX,
	    (uint64_t)1 << 56, UINT64_MAX - 1, UINT64_MAX };

	(void)state;
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		uint64_t v = 0;
		size_t n = lb_varint_put(buf, vals[i]);

		assert_in_range(n, 1, LB_VARINT_MAX);
		assert_int_equal(lb_varint_get(buf, n, &v), n);
		assert_true(v == vals[i]);
		/* Any truncation is detected. */
		for (size_t k = 0; k < n; k++)
			assert_int_equal(lb_varint_get(buf, k, &v), 0);
	}
	/* Worked example from FORMAT.md: 300 = 0xac 0x02. */
	assert_int_equal(lb_varint_put(buf, 300), 2);
	assert_int_equal(buf[0], 0xac);
	assert_int_equal(buf[1], 0x02);
}

static void
t_varint_overflow(void **state)
{
	uint8_t		 buf[11];
	uint64_t	 v;

	(void)state;
	memset(buf, 0xff, sizeof(buf));
	assert_int_equal(lb_varint_get(buf, sizeof(buf), &v), 0);
	buf[9] = 0x02;	/* bit 64 set: overflow */
	assert_int_equal(lb_varint_get(buf, 10, &v), 0);
}

static void
t_endian(void **state)
{
	uint8_t b[8];

	(void)state;
	lb_put32(b, 0x11223344);
	assert_int_equal(b[0], 0x44);
	assert_int_equal(lb_get32(b), 0x11223344);
	lb_put64be(b, 0x0102030405060708ULL);
	assert_int_equal(b[0], 0x01);
	assert_true(lb_get64be(b) == 0x0102030405060708ULL);
	lb_put64(b, 0x0102030405060708ULL);
	assert_int_equal(b[0], 0x08);
	assert_true(lb_get64(b) == 0x0102030405060708ULL);
}

static void
t_crc(void **state)
{
	(void)state;
	/* The standard check value of CRC-32/ISO-HDLC. */
	assert_int_equal(lb_crc32("123456789", 9), 0xcbf43926);
}

static void
t_strerror(void **state)
{
	(void)state;
	assert_string_equal(lb_strerror(ENOENT), strerror(ENOENT));
	assert_string_equal(lb_strerror(MDB_NOTFOUND), mdb_strerror(MDB_NOTFOUND));
	assert_non_null(strstr(lb_strerror(LB_ECORRUPT), "corrupt"));
	assert_non_null(lb_strerror(-1234567));
}

T_MAIN(
	cmocka_unit_test(t_varint_roundtrip),
	cmocka_unit_test(t_varint_overflow),
	cmocka_unit_test(t_endian),
	cmocka_unit_test(t_crc),
	cmocka_unit_test(t_strerror))
