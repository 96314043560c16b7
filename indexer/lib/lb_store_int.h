/*
 * lb_store_int.h — what the search evaluator (lb_eval.c) needs from a store beyond the public
 * API: the catalog's time map and segment list through the store's catalog, and the store's
 * cache of open segment files. Internal to liblogbox.
 */
#ifndef LB_STORE_INT_H
#define LB_STORE_INT_H

#include "logbox.h"

/* (lb_store_refresh is public: logbox.h.) */

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

/* The store's clock: segments lb_store_segment() returns later are used after it. */
uint64_t lb_store_stamp(struct lb_store *st);

/*
 * Builds the term blob of sg (a segment of st's cache) for wildcard scans when the store's
 * blob budget allows, freeing blobs of less recently used segments to make room, but not of
 * those used after stamp since (the search's own: a search over more segments than fit does
 * not evict the blobs it has just used, it walks the rest). 0 also when it does not fit (scans
 * then walk the dictionary); LB_ECORRUPT when the dictionary is damaged.
 */
int	lb_store_segment_blob(struct lb_store *st, struct lb_segment *sg, uint64_t since);

/* Closes sg (found damaged) and forgets it. */
void	lb_store_segment_drop(struct lb_store *st, struct lb_segment *sg);

/*
 * A second reader of the same logspace on the same catalog, for a thread that helps a search
 * read messages in parallel (a store handle is used by one thread at a time). Opened on first
 * use and kept: owned by st, valid until lb_store_close(st).
 */
int	lb_store_helper(struct lb_store *st, struct lb_store **out);

#endif /* LB_STORE_INT_H */
