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

/*
 * The streaming segment writer (lb_segment.c) that lb_segw_write() and lb_segment_merge()
 * feed: terms in strictly ascending order, each with its encoded id list (base first_id).
 * lb_segout_finish() writes the index and header, fsyncs and renames path.tmp to path; it and
 * lb_segout_abort() free so (abort removes the temporary files).
 */
struct lb_segout;
struct lb_segmeta {
	uint64_t	 first_id;
	uint64_t	 last_id;
	uint64_t	 count;
	int64_t		 tmin, tmax;
};
int	lb_segout_begin(const char *path, const struct lb_segmeta *meta, struct lb_segout **out);
int	lb_segout_term(struct lb_segout *so, const uint8_t *term, size_t len, uint64_t df,
	    const uint8_t *list, size_t listlen);
/*
 * The same for a list too long to hold: lb_segout_ids() any number of times with the term's
 * ids in ascending order, then lb_segout_ids_end() with the term. Memory stays constant.
 */
int	lb_segout_ids(struct lb_segout *so, const uint64_t *ids, size_t n);
int	lb_segout_ids_end(struct lb_segout *so, const uint8_t *term, size_t len);
int	lb_segout_finish(struct lb_segout *so);
void	lb_segout_abort(struct lb_segout *so);

#endif /* LB_POSTINGS_H */
