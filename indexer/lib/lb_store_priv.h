/*
 * lb_store_priv.h — struct lb_store and what the lb_store*.c files share (lb_store.c lists
 * them). Private to those files: not even lb_eval.c sees it (it has lb_store_int.h).
 */
#ifndef LB_STORE_PRIV_H
#define LB_STORE_PRIV_H

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "logbox.h"

#define STORE_CACHE_SEGS	64	/* segment files a store keeps open for searches */
#define STORE_REMOTE_BYTES	(256ULL << 20)	/* what archived segments a store keeps hold */

struct ixq;

struct store_day {
	struct lb_dayref	 ref;
	struct lb_msgfile	*mf;		/* NULL until used */
	uint64_t		 used;		/* LRU stamp */
	int			 remote;	/* an archived day read in place (st->ar) */
};

/* An open segment kept for the next search (keyed by day and file name). */
struct store_seg {
	struct lb_segment	*sg;		/* NULL: a free slot */
	uint32_t		 day;
	char			 file[64];
	uint64_t		 first_id, last_id;
	uint64_t		 used;		/* LRU stamp */
	int			 remote;	/* read from the archive (lb_archive_segment) */
};

struct lb_store {
	char			 data[PATH_MAX];
	char			 ls[LB_NAME_MAX + 1];
	int			 mode;
	int			 lockfd;
	struct lb_catalog	*cat;
	int			 borrowed;	/* cat is the caller's (lb_store_open_reader) */
	struct lb_store		*helper;	/* a second reader for parallel reads, or NULL */
	struct store_seg	 segs[STORE_CACHE_SEGS];
	struct lb_archive	*ar;		/* archived days read in place, or NULL */
	struct lb_astat		 astat;		/* what reads took from it */
	size_t			 blob_budget;	/* bytes of term blobs the segs may hold */
	struct lb_lsconf	 conf;
	struct lb_tokconf	 tc;

	/* Days known from the catalog (readers and the writer's reads). */
	struct store_day	*days;
	size_t			 ndays;
	uint64_t		 clock;		/* LRU clock for days[].used */

	/* Writer state. */
	struct lb_msgfile	*mf;		/* the current day's file (owned here, not in days) */
	struct lb_dayref	 day;		/* the current day */
	struct lb_segw		*segw;		/* the open interval */
	struct lb_segw		*spare;		/* the builder of the segment thread, or NULL */
	int			 pending;	/* pend_ref is being written, not yet published */
	int			 pend_step;	/* enum pend_step: where that is */
	struct lb_segref	 pend_ref;	/* (size set when published) */
	char			 pend_path[PATH_MAX];
	struct ixq		*ix;		/* its indexer thread, once started */
	uint64_t		 next_id;
	uint64_t		 indexed_id;	/* every id below is in a published segment */
	int64_t			 last_received;
	int64_t			 interval_start;	/* monotonic ms of the interval's first message */
	int64_t			 last_step;	/* time map: last step recorded */
	int64_t			*tm_t;		/* time map entries not yet in the catalog */
	uint64_t		*tm_id;
	size_t			 tm_n, tm_cap;
	int64_t			 tm_since;	/* monotonic ms of the oldest of them */
	int64_t			 last_sync;	/* monotonic ms of the last fdatasync */
	int			 dirty;		/* appended since the last commit */
	int			 unsynced;	/* committed without fdatasync since the last sync */
	int64_t			 dnum;		/* UTC day number of the last receive time */
	uint32_t		 ch_day;	/* the day whose chained blocks ch_end knows */
	uint64_t		 ch_end;	/* its blocks before this offset are chained */
	atomic_int		 ch_err;	/* a chain append failed: returned once by a flush */

	/* verify */
	uint8_t			 vkey[LB_SEAL_KEYLEN];	/* lb_store_set_verify_key */
	int			 has_vkey;
	char			 pubpath[PATH_MAX];	/* lb_store_set_verify_pubkey */
	int			 verify_fast;	/* lb_store_set_verify_fast */
	char			 tsa_ca[PATH_MAX];	/* lb_store_set_verify_tsa_ca */
	struct lb_sealinfo	 sinfo;		/* what the last verify found */
	struct lb_dayinfo	*vdays;		/* ... of each day (nvdays) */
	size_t			 nvdays;
	struct lb_dayinfo	*vcur;		/* the day being checked, or NULL */
};

/*
 * A pending segment's progress. A failed write or publish (ENOSPC...) is retried by the next
 * seg_finish: the builder (st->spare) keeps the interval until its file is written, and the
 * written file stays until the catalog points at it.
 */
enum pend_step {
	PEND_THREAD,		/* handed to the segment thread */
	PEND_REWRITE,		/* its write failed: write it again here */
	PEND_WRITTEN		/* the file is durable: publish it */
};

static inline int64_t
mono_ms(void)
{
	struct timespec ts;

	/* Coarse (a few ms) is enough for flush intervals and cheaper on every append. */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* lb_store.c: the day list and file names. */
int	lb_store_day_dir(const struct lb_store *st, uint32_t day, char *buf, size_t len);
/* Reloads the day list from the catalog, keeping open files of days that are still there. */
int	lb_store_days_load(struct lb_store *st);
int	lb_store_day_remote(const struct lb_store *st, uint32_t day);
int	lb_store_days_file(struct lb_store *st, size_t i, struct lb_msgfile **out);
/* Closes day i's cached message file (not the writer's): the next use reads it anew. */
void	lb_store_days_forget(struct lb_store *st, size_t i);
int	lb_store_seg_name(char *buf, size_t len, uint64_t first, uint64_t last);
int	lb_store_seg_path(struct lb_store *st, uint32_t day, const char *file, char *buf,
	    size_t len);

/* lb_store_recover.c */
int	lb_store_indexed_end(struct lb_store *st, uint64_t *end);
int	lb_store_recover(struct lb_store *st);

/* lb_store_write.c */
int	lb_store_tm_add(struct lb_store *st, int64_t t, uint64_t id);
int	lb_store_tm_write(struct lb_store *st);
int	lb_store_state_save(struct lb_store *st);
int	lb_store_write_segw(struct lb_store *st, uint32_t day, struct lb_segref *ref);
void	lb_store_ix_free(struct ixq *ix);
/* Waits until the merge thread has done every merge asked for; a failure of one, once. */
int	lb_store_merge_wait(struct lb_store *st);

/* lb_store_merge.c */
int	lb_store_merge_day(struct lb_store *st, uint32_t day, int all);

/* lb_store_chain.c (FORMAT.md §14) */
/*
 * Chains the writer's durable blocks not chained yet (after a synced commit). A failure
 * leaves them for the next call, which starts where the chain stops.
 */
int	lb_store_chain_blocks(struct lb_store *st);
/* A chain append's failure that did not fail its caller (a flush, a merge): once. */
int	lb_store_chain_err(struct lb_store *st);
/* Chains made[] of day, made[0] naming old[] as what it replaced; flags LB_CHF_*. */
int	lb_store_chain_segs(struct lb_store *st, uint32_t day, const struct lb_segref *old,
	    size_t nold, const struct lb_segref *made, size_t nmade, uint8_t flags);
/*
 * lb_catalog_publish (made[] replacing old[]), then lb_store_chain_segs. Its error is that of
 * the publish: a chain append that fails is kept for lb_store_chain_err.
 */
int	lb_store_publish(struct lb_store *st, uint32_t day, const struct lb_segref *old,
	    size_t nold, const struct lb_segref *made, size_t nmade);
/* A day that ended: its chain's day root, signed (none when signing is not set up). */
int	lb_store_sign_day(struct lb_store *st, uint32_t day);
/* At the writer's open (after recovery): chains what the last two days have unchained. */
int	lb_store_chain_recover(struct lb_store *st);
/* lb_store_verify's check of day i against its chain (mf: its message file, or NULL). */
struct lb_chrec;
/*
 * (cut: the chain is damaged after recs[0..n); prev[0..nprev): the chain of day i - 1, or
 * NULL.) Returns the problems it reported.
 */
int	lb_store_chain_check(struct lb_store *st, size_t i, struct lb_msgfile *mf,
	    const struct lb_chrec *recs, size_t n, int cut, const struct lb_chrec *prev,
	    size_t nprev,
	    const struct lb_segref *refs, size_t nrefs,
	    void (*report)(void *, const char *, const char *), void *arg);

#endif /* LB_STORE_PRIV_H */
