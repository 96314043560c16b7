/*
 * lb_postings.c — id lists: the delta-varint encoding segment files store (FORMAT.md §4) and
 * the decoded form, struct lb_postings. It owns the arithmetic and the checks a decoder makes
 * on bytes read from disk; it does not know where a list lives in a file or how it is checked
 * for damage (that is lb_segment.c). The one idea: a list is the first id minus a base, then
 * the gaps between ids; whole groups of 128 ids are bit-packed (gap - 1 in the width that
 * makes the group smallest, the few values too wide for it patched in afterwards as
 * exceptions), the rest are varints, so dense lists cost a few bits an id even when a list
 * jumps now and then, and a decoder can still reject anything that is not strictly
 * ascending within [base, max].
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "logbox.h"
#include "lb_util.h"
#include "lb_postings.h"

void
lb_postings_free(struct lb_postings *p)
{
	if (p == NULL)
		return;
	free(p->ids);
	p->ids = NULL;
	p->n = p->cap = 0;
}

int
lb_postings_reserve(struct lb_postings *p, size_t extra)
{
	uint64_t	*ids;
	size_t		 cap;

	if (extra <= p->cap - p->n)
		return (0);
	if (extra > SIZE_MAX / sizeof(uint64_t) - p->n)
		return (ENOMEM);
	cap = p->cap < 16 ? 16 : p->cap;
	while (cap < p->n + extra)
		cap = cap > SIZE_MAX / 2 / sizeof(uint64_t) ? p->n + extra : cap * 2;
	if ((ids = realloc(p->ids, cap * sizeof(*ids))) == NULL)
		return (ENOMEM);
	p->ids = ids;
	p->cap = cap;
	return (0);
}

/* Packs the low b bits of each of v[0..LB_PACK_IDS) into out (16 * b bytes, LSB first). */
static void
pack(const uint64_t *v, unsigned b, uint8_t *out)
{
	uint64_t	 acc = 0, x;
	unsigned	 nacc = 0, left, take;

	if (b < 64) {
		/* Each value is below 2^b: it spills into at most one more word. */
		for (int k = 0; k < LB_PACK_IDS; k++) {
			x = v[k];
			acc |= x << nacc;
			nacc += b;
			if (nacc >= 64) {
				lb_put64(out, acc);
				out += 8;
				nacc -= 64;
				acc = nacc > 0 ? x >> (b - nacc) : 0;
			}
		}
		return;
	}
	for (int k = 0; k < LB_PACK_IDS; k++) {
		x = v[k];
		for (left = b; left > 0; left -= take) {
			take = left < 64 - nacc ? left : 64 - nacc;
			acc |= (take == 64 ? x : x & ((1ULL << take) - 1)) << nacc;
			x = take == 64 ? 0 : x >> take;
			nacc += take;
			if (nacc == 64) {
				lb_put64(out, acc);
				out += 8;
				acc = 0;
				nacc = 0;
			}
		}
	}
}

/* The inverse of pack(): in holds 16 * b bytes. */
static void
unpack(const uint8_t *in, unsigned b, uint64_t *v)
{
	uint64_t	 acc = 0, part;
	unsigned	 avail = 0, got, left, take;

	if (b == 0) {
		memset(v, 0, LB_PACK_IDS * sizeof(*v));
		return;
	}
	if (b <= 56) {
		/* Every value lies within one unaligned 8-byte load. */
		const uint8_t	*end = in + 16 * b;
		uint64_t	 mask = (1ULL << b) - 1;
		size_t		 bit = 0;

		for (int k = 0; k < LB_PACK_IDS; k++, bit += b) {
			const uint8_t *p = in + (bit >> 3);

			if (end - p >= 8)
				v[k] = (lb_get64(p) >> (bit & 7)) & mask;
			else {
				uint64_t w = 0;

				for (int i = 0; i < end - p; i++)
					w |= (uint64_t)p[i] << (8 * i);
				v[k] = (w >> (bit & 7)) & mask;
			}
		}
		return;
	}
	for (int k = 0; k < LB_PACK_IDS; k++) {
		v[k] = 0;
		for (got = 0, left = b; left > 0; left -= take, got += take) {
			if (avail == 0) {
				acc = lb_get64(in);
				in += 8;
				avail = 64;
			}
			take = left < avail ? left : avail;
			part = take == 64 ? acc : acc & ((1ULL << take) - 1);
			v[k] |= part << got;
			acc = take == 64 ? 0 : acc >> take;
			avail -= take;
		}
	}
}

int
lb_postings_decode(const uint8_t *buf, size_t len, uint64_t base, uint64_t max, uint64_t n,
    struct lb_postings *out)
{
	uint64_t	*ids, v, id = base, vals[LB_PACK_IDS];
	size_t		 i, k, vl, off = 0, groups = 0;
	int		 rc;

	/* A packed group of LB_PACK_IDS ids takes at least one byte, a varint one byte. */
	if (n == 0 || n / LB_PACK_IDS > len || (n < LB_PACK_IDS && n > len) || base > max)
		return (LB_ECORRUPT);
	if ((rc = lb_postings_reserve(out, (size_t)n)) != 0)
		return (rc);
	ids = out->ids + out->n;
	for (i = 0; groups < n / LB_PACK_IDS; groups++) {
		unsigned	b, ne = 0, pos;
		int		last = -1;

		if (off >= len)
			return (LB_ECORRUPT);
		b = buf[off] & 0x7f;
		if (buf[off++] & LB_PACK_EXC) {
			if (off >= len || b >= 64)
				return (LB_ECORRUPT);
			ne = (unsigned)buf[off++] + 1;
			if (ne > LB_PACK_IDS)
				return (LB_ECORRUPT);
		}
		if (b > 64 || 16 * (size_t)b > len - off)
			return (LB_ECORRUPT);
		unpack(buf + off, b, vals);
		off += 16 * (size_t)b;
		/* Exceptions: position, then the bits above b (not 0). */
		for (k = 0; k < ne; k++) {
			if (off >= len || (pos = buf[off++]) >= LB_PACK_IDS || (int)pos <= last)
				return (LB_ECORRUPT);
			last = (int)pos;
			if ((vl = lb_varint_get(buf + off, len - off, &v)) == 0 || v == 0 ||
			    v > UINT64_MAX >> b)
				return (LB_ECORRUPT);
			off += vl;
			vals[pos] |= v << b;
		}
		for (k = 0; k < LB_PACK_IDS; k++, i++) {
			v = vals[k];
			if (i == 0) {
				if (v > max - base)
					return (LB_ECORRUPT);
				id = base + v;
			} else {
				if (id == max || v > max - id - 1)
					return (LB_ECORRUPT);
				id += v + 1;
			}
			ids[i] = id;
		}
	}
	for (; i < n; i++) {
		if ((k = lb_varint_get(buf + off, len - off, &v)) == 0)
			return (LB_ECORRUPT);
		off += k;
		if (i == 0) {
			if (v > max - base)
				return (LB_ECORRUPT);
			id = base + v;
		} else {
			if (v == 0 || v > max - id)
				return (LB_ECORRUPT);
			id += v;
		}
		ids[i] = id;
	}
	if (off != len)
		return (LB_ECORRUPT);
	out->n += (size_t)n;
	return (0);
}

void
lb_penc_init(struct lb_penc *e, uint64_t base)
{
	e->base = e->prev = base;
	e->n = 0;
	e->np = 0;
}

/* Bits needed for v (0 for 0). */
static inline unsigned
nbits(uint64_t v)
{
	return (v == 0 ? 0 : 64 - (unsigned)__builtin_clzll(v));
}

/*
 * The width for a group: the one giving the fewest bytes (16 * b for the packed values, plus
 * for exceptions a count byte and, each, a position byte and a varint of the bits above b),
 * the widest of equals. hist[L] counts the values of L bits.
 */
static unsigned
pick_width(const unsigned *hist, unsigned mx)
{
	size_t		 best = 16 * (size_t)mx, cost;
	unsigned	 bestb = mx, ne;

	for (unsigned b = mx; b-- > 0;) {
		cost = 16 * (size_t)b + 1;
		ne = 0;
		for (unsigned l = b + 1; l <= mx; l++) {
			ne += hist[l];
			cost += hist[l] * (size_t)(1 + (l - b + 6) / 7);
		}
		if (ne > LB_PACK_IDS || cost > best)
			continue;
		if (cost < best) {
			best = cost;
			bestb = b;
		}
	}
	return (bestb);
}

size_t
lb_penc_add(struct lb_penc *e, uint64_t id, uint8_t *out)
{
	uint64_t	 vals[LB_PACK_IDS], lows[LB_PACK_IDS], mx = 0, prev = e->prev;
	unsigned	 b, hist[65], wmax, ne = 0;
	size_t		 off;

	e->pend[e->np++] = id;
	e->n++;
	if (e->np < LB_PACK_IDS)
		return (0);
	/* A full group: the list's first value is id - base, every other gap - 1. */
	for (size_t k = 0; k < LB_PACK_IDS; k++) {
		vals[k] = e->n == LB_PACK_IDS && k == 0 ? e->pend[0] - e->base :
		    e->pend[k] - prev - 1;
		prev = e->pend[k];
		mx |= vals[k];
	}
	wmax = nbits(mx);
	memset(hist, 0, sizeof(hist));
	for (size_t k = 0; k < LB_PACK_IDS; k++)
		hist[nbits(vals[k])]++;
	b = pick_width(hist, wmax);
	for (size_t k = 0; k < LB_PACK_IDS; k++) {
		lows[k] = b == 64 ? vals[k] : vals[k] & ((1ULL << b) - 1);
		ne += b < 64 && (vals[k] >> b) != 0;
	}
	out[0] = (uint8_t)b;
	off = 1;
	if (ne > 0) {
		out[0] |= LB_PACK_EXC;
		out[off++] = (uint8_t)(ne - 1);
	}
	pack(lows, b, out + off);
	off += 16 * (size_t)b;
	for (size_t k = 0; k < LB_PACK_IDS && ne > 0; k++)
		if ((vals[k] >> b) != 0) {
			out[off++] = (uint8_t)k;
			off += lb_varint_put(out + off, vals[k] >> b);
		}
	e->prev = prev;
	e->np = 0;
	return (off);
}

size_t
lb_penc_finish(struct lb_penc *e, uint8_t *out)
{
	size_t	off = 0;

	for (uint32_t k = 0; k < e->np; k++) {
		off += lb_varint_put(out + off, e->pend[k] - e->prev);
		e->prev = e->pend[k];
	}
	e->np = 0;
	return (off);
}

size_t
lb_postings_encode(const uint64_t *ids, size_t n, uint64_t base, uint8_t *buf)
{
	struct lb_penc	 e;
	size_t		 off = 0;

	lb_penc_init(&e, base);
	for (size_t i = 0; i < n; i++)
		off += lb_penc_add(&e, ids[i], buf + off);
	return (off + lb_penc_finish(&e, buf + off));
}
