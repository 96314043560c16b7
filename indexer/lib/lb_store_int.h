/*
 * lb_store_int.h — what the search evaluator (lb_eval.c) needs from a store beyond the public
 * API: the catalog's time map and segment list through the store's catalog, and the store's
 * cache of open segment files. Internal to liblogbox.
 */
#ifndef LB_STORE_INT_H
#define LB_STORE_INT_H

#include "logbox.h"

/* Readers: reloads the day list from the catalog (new days, new ranges). Writer: nothing. */
int	lb_store_refresh(struct lb_store *st);

/* lb_catalog_time_to_id() on the store's logspace. */
int	lb_store_time_to_id(struct lb_store *st, int64_t t, uint64_t *id);

/*
 * lb_catalog_segments() on the store's logspace (one read: a consistent snapshot of the
 * published segments overlapping ids [lo, hi]). Also closes cached segments that a listed one
 * replaced. *out is malloc'ed: free() it.
 */
int	lb_store_segments(struct lb_store *st, uint64_t lo, uint64_t hi, struct lb_segref **out,
	    size_t *n);

/*
 * The open segment of ref, from the store's cache (opened and cached on a miss, the least
 * recently used one closed when the cache is full). path[0..plen) gets the file's path in any
 * case (for messages). *out is owned by st: valid until the next lb_store_segment(),
 * lb_store_segments() or lb_store_close() on st. ENOENT when the file is gone (a merge
 * replaced it after the listing: list again); LB_ECORRUPT/LB_EFORMAT on damage, also when the
 * file's ids are not the catalog's.
 */
int	lb_store_segment(struct lb_store *st, const struct lb_segref *ref, struct lb_segment **out,
	    char *path, size_t plen);

/* Closes sg (found damaged) and forgets it. */
void	lb_store_segment_drop(struct lb_store *st, struct lb_segment *sg);

#endif /* LB_STORE_INT_H */
