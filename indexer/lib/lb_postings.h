/*
 * lb_postings.h — id-list encoding shared inside liblogbox (not part of the public API).
 * An encoded list of n ids: n / LB_PACK_IDS bit-packed groups, then the remaining ids as
 * varints. FORMAT.md §4 "Id lists".
 */
#ifndef LB_POSTINGS_H
#define LB_POSTINGS_H

#include <stddef.h>
#include <stdint.h>

struct lb_postings;

#define LB_PACK_IDS	128	/* ids per bit-packed group (stored on disk: fixed) */
#define LB_PACK_EXC	0x80	/* group width byte: a count of exceptions follows */

/* Makes room for at least extra more ids in p. 0 or ENOMEM. */
int	lb_postings_reserve(struct lb_postings *p, size_t extra);

/*
 * Decodes the n ids of buf[0..len) (the first is base plus the first value) and appends them
 * to *out. Every group and varint must be well formed, the bytes used up exactly, every id in
 * [base, max] and strictly ascending; anything else is LB_ECORRUPT and *out keeps only its
 * old ids.
 */
int	lb_postings_decode(const uint8_t *buf, size_t len, uint64_t base, uint64_t max,
	    uint64_t n, struct lb_postings *out);

/*
 * Encodes ids[0..n) (ascending, ids[0] >= base) into buf, which must hold
 * n * LB_VARINT_MAX bytes. Returns the bytes written.
 */
size_t	lb_postings_encode(const uint64_t *ids, size_t n, uint64_t base, uint8_t *buf);

/*
 * A streaming encoder: the same bytes as lb_postings_encode(), fed one id at a time, holding
 * at most LB_PACK_IDS ids. lb_penc_add() returns the bytes of a group when it completes one
 * (0 otherwise); lb_penc_finish() the varints of the ids left. out must hold LB_PENC_OUT.
 */
#define LB_PENC_OUT	(LB_PACK_IDS * 10)	/* a group never passes 1 + 16 * 64 */
struct lb_penc {
	uint64_t	 base;
	uint64_t	 prev;		/* the id before pend[0] */
	uint64_t	 n;		/* ids taken */
	uint32_t	 np;		/* ids in pend */
	uint64_t	 pend[LB_PACK_IDS];
};
void	lb_penc_init(struct lb_penc *e, uint64_t base);
size_t	lb_penc_add(struct lb_penc *e, uint64_t id, uint8_t *out);
size_t	lb_penc_finish(struct lb_penc *e, uint8_t *out);

#endif /* LB_POSTINGS_H */
