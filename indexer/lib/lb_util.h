/*
 * lb_util.h — small helpers shared by the liblogbox modules (not part of the public API):
 * little-endian loads and stores, LEB128 varints, the CRC-32 every file uses, header
 * decimals, hex digits, calendar days, growing arrays, and the write-fsync-rename dance for
 * durable files.
 */
#ifndef LB_UTIL_H
#define LB_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void
lb_put16(uint8_t *p, uint16_t v)
{
	p[0] = v; p[1] = v >> 8;
}

static inline void
lb_put32(uint8_t *p, uint32_t v)
{
	p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24;
}

static inline void
lb_put64(uint8_t *p, uint64_t v)
{
	lb_put32(p, (uint32_t)v);
	lb_put32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t
lb_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t
lb_get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

static inline uint64_t
lb_get64(const uint8_t *p)
{
	return (uint64_t)lb_get32(p) | (uint64_t)lb_get32(p + 4) << 32;
}

/* Big-endian 64-bit, for LMDB keys that must sort numerically. */
static inline void
lb_put64be(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static inline uint64_t
lb_get64be(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return (v);
}

#define LB_VARINT_MAX	10	/* bytes of the longest 64-bit varint */

/* Writes v as an unsigned LEB128 varint at p; returns the bytes written (1..10). */
static inline size_t
lb_varint_put(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return (n);
}

/*
 * Reads a varint from p[0..len). Returns the bytes read, or 0 if the varint is truncated or
 * longer than 10 bytes / overflows 64 bits (the caller reports LB_ECORRUPT).
 */
static inline size_t
lb_varint_get(const uint8_t *p, size_t len, uint64_t *v)
{
	uint64_t r = 0;
	size_t i;

	for (i = 0; i < len && i < LB_VARINT_MAX; i++) {
		if (i == 9 && p[i] > 1)
			return (0);
		r |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if ((p[i] & 0x80) == 0) {
			*v = r;
			return (i + 1);
		}
	}
	return (0);
}

/* CRC-32 (zlib's crc32(), the ISO-HDLC polynomial) of p[0..len). */
uint32_t	lb_crc32(const void *p, size_t len);
/* The same CRC continued over p[0..len) from crc (the CRC of the bytes before; 0 to start). */
uint32_t	lb_crc32_update(uint32_t crc, const void *p, size_t len);

/* Byte order of terms (as memcmp, a prefix first): <0, 0 or >0. */
static inline int
lb_term_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	if (c != 0)
		return (c);
	return (alen < blen ? -1 : alen > blen);
}

/*
 * The decimal digits p[0..n) as written in frame and spool headers: 1..maxd of them, no
 * leading zero unless alone. 1 with *out set, or 0.
 */
static inline int
lb_dec_parse(const uint8_t *p, size_t n, size_t maxd, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > maxd || (n > 1 && p[0] == '0'))
		return (0);
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return (0);
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	*out = v;
	return (1);
}

/* The value of the hex digit c (either case), or -1: percent and \u escapes. */
static inline int
lb_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return (c - '0');
	if (c >= 'a' && c <= 'f')
		return (c - 'a' + 10);
	if (c >= 'A' && c <= 'F')
		return (c - 'A' + 10);
	return (-1);
}

/*
 * The proleptic Gregorian calendar on integers, never through mktime/timegm and the process's
 * time zone: days since 1970-01-01 of y-m-d (Howard Hinnant's days_from_civil), and the days
 * of month m (1..12) in year y. Syslog headers (lb_syslog.c) and typed times (lb_time.c) use
 * them.
 */
static inline int64_t
lb_days_from_civil(int64_t y, int64_t m, int64_t d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return (era * 146097 + doe - 719468);
}

static inline int
lb_month_days(int64_t y, int64_t m)
{
	static const int mdays[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	if (m == 2 && y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))
		return (29);
	return (mdays[m - 1]);
}

/*
 * Makes the array *pp (of *cap elements of elem bytes; NULL when *cap is 0) hold at least need
 * elements, doubling from 64: 0, or ENOMEM with *pp and *cap untouched.
 */
int	lb_grow(void *pp, size_t *cap, size_t need, size_t elem);
/* write(2) all of buf at the current offset, retrying on EINTR and short writes. 0 or errno. */
int	lb_write_all(int fd, const void *buf, size_t len);
/* pread(2) exactly len bytes at off: 0, errno, or LB_ECORRUPT when the file is shorter. */
int	lb_pread_all(int fd, void *buf, size_t len, uint64_t off);
/* pwrite(2) of all len bytes at off (retrying short writes and EINTR). */
int	lb_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* fsync(2)s the directory holding path (after a rename or create). 0 or errno. */
int	lb_fsync_dir(const char *dir);
/* mkdir -p with mode 0750. 0 or errno. */
int	lb_mkdirs(const char *path);
/* snprintf that returns ENAMETOOLONG instead of truncating. */
/*
 * Inflates the raw DEFLATE stream src[0..srclen) into exactly dst[0..dstlen) with ISA-L. The
 * stream must end exactly at srclen and give exactly dstlen bytes; anything else is
 * LB_ECORRUPT. *state is scratch (about 90 KB) allocated on first use and kept for reuse:
 * free() it when done.
 */
struct inflate_state;
int	lb_inflate_raw(struct inflate_state **state, const uint8_t *src, size_t srclen,
	    uint8_t *dst, size_t dstlen);

int	lb_path(char *buf, size_t len, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

/*
 * A reader's explanation of damage: fmt into why[0..len) (cut to fit), nothing when why is
 * NULL or len 0. The one copy for every file reader that says what it found wrong.
 */
void	lb_setwhy(char *why, size_t len, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

#endif /* LB_UTIL_H */
