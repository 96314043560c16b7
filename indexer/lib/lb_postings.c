/*
 * lb_postings.c — id lists: the delta-varint encoding segment files store (FORMAT.md §4) and
 * the decoded form, struct lb_postings. It owns the arithmetic and the checks a decoder makes
 * on bytes read from disk; it does not know where a list lives in a file or how it is checked
 * for damage (that is lb_segment.c). The one idea: a list is the first id minus a base, then
 * gaps of at least 1, so a decoder can reject anything that is not strictly ascending.
 */
#include <errno.h>
#include <stdlib.h>

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

int
lb_postings_decode(const uint8_t *buf, size_t len, uint64_t base, uint64_t max, uint64_t n,
    struct lb_postings *out)
{
	uint64_t	*ids, v, id = base;
	size_t		 i, k, off = 0;
	int		 rc;

	/* Every id takes at least one byte: a count past len is damage, not an allocation. */
	if (n == 0 || n > len || base > max)
		return (LB_ECORRUPT);
	if ((rc = lb_postings_reserve(out, (size_t)n)) != 0)
		return (rc);
	ids = out->ids + out->n;
	for (i = 0; i < n; i++) {
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

size_t
lb_postings_encode(const uint64_t *ids, size_t n, uint64_t base, uint8_t *buf)
{
	size_t		 off = 0;
	uint64_t	 prev = base;

	for (size_t i = 0; i < n; i++) {
		off += lb_varint_put(buf + off, ids[i] - prev);
		prev = ids[i];
	}
	return (off);
}
