/*
 * lb_archive.h — what lb_archive.c (archived days read in place) shares with the store. The
 * public half (the cache, an archive's open and close, lb_store_set_archive) is in logbox.h.
 */
#ifndef LB_ARCHIVE_H
#define LB_ARCHIVE_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "logbox.h"

/* One file of an archived day, as its verified record lists it. */
struct afile {
	char		 name[80];	/* "messages", "chain", "index/<file>.seg", ... */
	uint64_t	 size;
	uint8_t		 sha[32];	/* of the whole file */
	uint64_t	 piece;		/* bytes a piece (0: no pieces: read whole) */
	uint8_t		(*pieces)[32];	/* npieces SHA-256s */
	size_t		 npieces;
};

/* One archived day. */
struct aday {
	uint32_t	 day;		/* YYYYMMDD */
	struct lb_dayref ref;
	struct afile	*files;
	size_t		 nfiles;
	uint64_t	 catsize;	/* catalog.json */
	uint8_t		 catsha[32];
	pthread_mutex_t	 mu;		/* the loads below (once the archive is open) */
	int		 mu_init;
	/* loaded on first use, under mu */
	struct lb_dayx	 x;		/* the catalog extract */
	int		 x_loaded;
	struct lb_blkref *blocks;	/* the message blocks (from the chain) */
	uint8_t		(*bsha)[32];
	size_t		 nblocks;
};

struct lb_archive {
	atomic_int	 refs;
	struct lb_acache *cache;
	char		 ls[LB_NAME_MAX + 1];
	char		 settings[PATH_MAX];
	char		 vdir[PATH_MAX];	/* <state>/<ls>/verified */
	struct timespec	 smtime, vmtime;	/* of both when read */
	char		 endpoint[512], bucket[64], prefix[256], region[64];
	char		 access_key[256], secret_key[256], ca_file[PATH_MAX];
	struct aday	*days;		/* in id order */
	size_t		 ndays;
	size_t		 unusable;	/* verified records this reader cannot use */
};

/*
 * lb_dayx.c's reading of a number in the archive's JSON (catalog.json, the verified record):
 * an integer, or above 2^53 a string of decimal digits. 0 or -1.
 */
int	lb_dayx_u64(json_t *j, uint64_t *v);

/* A verified record: -1 when this reader cannot use it (lb_archive.c; fuzzed). */
int	lb_archive_record_parse(const char *buf, size_t len, uint32_t day, struct aday *d);
void	lb_archive_record_free(struct aday *d);
int	lb_archive_day_segments(struct lb_archive *a, uint32_t day, uint64_t lo, uint64_t hi,
	    struct lb_segref **refs, size_t *n, struct lb_astat *stat);
int	lb_archive_day_time_to_id(struct lb_archive *a, uint32_t day, int64_t t, uint64_t *id,
	    struct lb_astat *stat);
int	lb_archive_segment(struct lb_archive *a, const struct lb_segref *ref,
	    struct lb_astat *stat, struct lb_segment **out);
int	lb_archive_msgfile(struct lb_archive *a, uint32_t day, struct lb_astat *stat,
	    struct lb_msgfile **out);

#endif
