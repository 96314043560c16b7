/*
 * lb_segout.h — the streaming segment file writer (lb_segout.c), shared inside liblogbox (not
 * part of the public API). FORMAT.md §4 "Segment file"; its glossary (§1.1) names the parts.
 */
#ifndef LB_SEGOUT_H
#define LB_SEGOUT_H

#include <stddef.h>
#include <stdint.h>

/*
 * The streaming segment writer (lb_segout.c) that lb_segw_write() and lb_segment_merge()
 * feed: terms in strictly ascending order, each with its encoded id list (base first_id).
 * lb_segout_finish() writes the index and header, fsyncs and renames path.tmp to path; it and
 * lb_segout_abort() free so (abort removes the temporary files).
 */
struct lb_segout;
struct lb_seginfo;

/*
 * Starts path.tmp for a segment whose header will hold info's first_id, last_id, count, tmin
 * and tmax (its nterms and size are the writer's to count: not read). EINVAL when first_id >
 * last_id.
 */
int	lb_segout_begin(const char *path, const struct lb_seginfo *info, struct lb_segout **out);
/*
 * The segment is an interval's, which merges rewrite: its dictionary blocks are compressed
 * faster and a little less (FORMAT.md §4.10). Before the first term.
 */
void	lb_segout_fresh(struct lb_segout *so);
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

#endif /* LB_SEGOUT_H */
