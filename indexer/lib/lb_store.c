/*
 * lb_store.c — one logspace's store: the day's message file, the interval's in-memory index,
 * the published segments and the catalog, tied together. It owns the write path's ordering
 * (messages durable → segment durable → catalog points at it → inputs of a merge deleted),
 * recovery after a crash, flushing by time and memory, tiered merging, and the read side the
 * CLI and searches use (get by id, term lookup including the not-yet-indexed tail, verify,
 * stats; for lb_eval.c through lb_store_int.h: the segment list, the time map and a cache of
 * open segment files). Readers may share one catalog handle (lb_store_open_reader). It does
 * not know file layouts: lb_msgfile.c, lb_segment.c and lb_catalog.c do.
 *
 * The one idea: the message files are the truth. Everything in segments and the catalog can be
 * rebuilt from them, so recovery only has to find where indexing stopped (the last published
 * segment) and index the rest again.
 *
 * Threads: the writer indexes in a second thread, writes segments of timed flushes in a third
 * (and lb_msgfile.c compresses in a fourth). lb_store_append stores the message, then cuts,
 * folds and hashes its terms into a batch (lb_segw_terms_add); full batches go to the indexer
 * thread, which only inserts them into the open interval (st->segw), in id order
 * (lb_segw_add_terms). Everything else that touches st->segw (flush, reindex, close) first
 * waits for the thread to finish what is queued (ix_sync). A failure of a thread is returned
 * by the next append or flush. Nothing on disk depends on the threads: the message file is
 * written by the caller's thread before the terms are queued, and a segment is only written
 * after ix_sync.
 *
 * A flush that lb_store_append starts (time or memory) does not wait for the segment file:
 * after the messages are durable it hands the full builder to the segment thread, takes the
 * spare one (st->spare) for the next interval and goes on appending; the segment is published
 * (catalog, state, merges) by a later append, flush or close once the file is durable. The
 * order of the steps on disk is that of lb_store_flush, which does all of them before it
 * returns.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_store_int.h"

#define STORE_FANOUT		8	/* merge this many same-level segments of a day */
#define STORE_CACHE_DAYS	16	/* message files a reader keeps open */
#define STORE_TM_MS		200	/* time map entries reach the catalog this often at most */
#define STORE_CACHE_SEGS	64	/* segment files a store keeps open for searches */

struct ixq;

struct store_day {
	struct lb_dayref	 ref;
	struct lb_msgfile	*mf;		/* NULL until used */
	uint64_t		 used;		/* LRU stamp */
};

/* An open segment kept for the next search (keyed by day and file name). */
struct store_seg {
	struct lb_segment	*sg;		/* NULL: a free slot */
	uint32_t		 day;
	char			 file[64];
	uint64_t		 first_id, last_id;
	uint64_t		 used;		/* LRU stamp */
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
};

#define US_PER_DAY	(86400LL * 1000000)

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

static int64_t
mono_ms(void)
{
	struct timespec ts;

	/* Coarse (a few ms) is enough for flush intervals and cheaper on every append. */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

/* YYYYMMDD of a receive time (UTC). */
static uint32_t
day_of(int64_t us)
{
	time_t		t = (time_t)(us >= 0 ? us / 1000000 : (us - 999999) / 1000000);
	struct tm	tm;

	gmtime_r(&t, &tm);
	return ((uint32_t)(tm.tm_year + 1900) * 10000 + (uint32_t)(tm.tm_mon + 1) * 100 +
	    (uint32_t)tm.tm_mday);
}

static int
day_dir(const struct lb_store *st, uint32_t day, char *buf, size_t len)
{
	return (lb_path(buf, len, "%s/%s/%04u/%02u-%02u", st->data, st->ls, day / 10000,
	    day / 100 % 100, day % 100));
}

/* A logspace name of the right form (a reserved one is the catalog's to refuse on creation). */
static int
valid_name(const char *ls)
{
	size_t n = strlen(ls);

	return (lb_logspace_name_ok(ls, n, NULL) || lb_logspace_name_reserved(ls, n));
}

/* ---------------------------------------------------------------- the day list */

static void
days_free(struct lb_store *st)
{
	for (size_t i = 0; i < st->ndays; i++)
		lb_msgfile_close(st->days[i].mf);
	free(st->days);
	st->days = NULL;
	st->ndays = 0;
}

/* Reloads the day list from the catalog, keeping open files of days that are still there. */
static int
days_load(struct lb_store *st)
{
	struct lb_dayref	*refs = NULL;
	struct store_day	*nd;
	size_t			 n = 0;
	int			 rc;

	if ((rc = lb_catalog_days(st->cat, st->ls, &refs, &n)) != 0)
		return (rc);
	if ((nd = calloc(n > 0 ? n : 1, sizeof(*nd))) == NULL) {
		free(refs);
		return (errno);
	}
	for (size_t i = 0; i < n; i++) {
		nd[i].ref = refs[i];
		for (size_t k = 0; k < st->ndays; k++) {
			if (st->days[k].ref.day == refs[i].day && st->days[k].mf != NULL) {
				nd[i].mf = st->days[k].mf;
				nd[i].used = st->days[k].used;
				st->days[k].mf = NULL;
			}
		}
	}
	free(refs);
	days_free(st);
	st->days = nd;
	st->ndays = n;
	return (0);
}

/* The message file of day index i, opened read-only on first use (LRU of a few). */
static int
days_file(struct lb_store *st, size_t i, struct lb_msgfile **out)
{
	char	dir[PATH_MAX];
	size_t	open = 0, lru = SIZE_MAX;
	int	rc;

	if (st->mf != NULL && st->days[i].ref.day == st->day.day) {
		*out = st->mf;
		return (0);
	}
	if (st->days[i].mf == NULL) {
		for (size_t k = 0; k < st->ndays; k++) {
			if (st->days[k].mf == NULL)
				continue;
			open++;
			if (lru == SIZE_MAX || st->days[k].used < st->days[lru].used)
				lru = k;
		}
		if (open >= STORE_CACHE_DAYS && lru != SIZE_MAX) {
			lb_msgfile_close(st->days[lru].mf);
			st->days[lru].mf = NULL;
		}
		if ((rc = day_dir(st, st->days[i].ref.day, dir, sizeof(dir))) != 0)
			return (rc);
		if ((rc = lb_msgfile_open(dir, LB_RDONLY, st->days[i].ref.first_id,
		    &st->days[i].mf)) != 0)
			return (rc);
	}
	st->days[i].used = ++st->clock;
	*out = st->days[i].mf;
	return (0);
}

/* The index of the day holding id, or -1. Days are in id order. */
static ssize_t
days_find(struct lb_store *st, uint64_t id)
{
	size_t lo = 0, hi = st->ndays;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (st->days[mid].ref.first_id <= id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return (-1);
	return ((ssize_t)lo - 1);
}

/* ---------------------------------------------------------------- open and recovery */

static int
store_lock(struct lb_store *st)
{
	char	path[PATH_MAX];
	int	rc;

	if ((rc = lb_path(path, sizeof(path), "%s/%s", st->data, st->ls)) != 0)
		return (rc);
	if ((rc = lb_mkdirs(path)) != 0)
		return (rc);
	if ((rc = lb_path(path, sizeof(path), "%s/%s/%s", st->data, st->ls,
	    LB_FILE_LOCK)) != 0)
		return (rc);
	if ((st->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640)) == -1)
		return (errno);
	if (flock(st->lockfd, LOCK_EX | LOCK_NB) == -1)
		return (errno == EWOULDBLOCK ? LB_ELOCKED : errno);
	return (0);
}

/* The last published segment's end (one past its last id), or 1 when there is none. */
static int
indexed_end(struct lb_store *st, uint64_t *end)
{
	struct lb_segref	*refs = NULL;
	size_t			 n = 0;
	int			 rc;

	if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &n)) != 0)
		return (rc);
	*end = n > 0 ? refs[n - 1].last_id + 1 : 1;
	free(refs);
	return (0);
}

/* Removes segment files of a day's index/ that the catalog does not name (crash leftovers). */
static int
remove_orphans(struct lb_store *st, uint32_t day)
{
	struct lb_segref	*refs = NULL;
	size_t			 n = 0;
	char			 dir[PATH_MAX], idx[PATH_MAX], path[PATH_MAX];
	DIR			*d;
	struct dirent		*de;
	int			 rc, removed = 0;

	if ((rc = day_dir(st, day, dir, sizeof(dir))) != 0)
		return (rc);
	if ((rc = lb_path(idx, sizeof(idx), "%s/%s", dir, LB_DIR_INDEX)) != 0)
		return (rc);
	if ((d = opendir(idx)) == NULL)
		return (errno == ENOENT ? 0 : errno);
	if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &n)) != 0)
		goto done;
	while ((de = readdir(d)) != NULL) {
		int known = 0;

		if (de->d_name[0] == '.')
			continue;
		for (size_t i = 0; i < n && !known; i++)
			known = refs[i].day == day && strcmp(refs[i].file, de->d_name) == 0;
		if (known)
			continue;
		if ((rc = lb_path(path, sizeof(path), "%s/%s", idx, de->d_name)) != 0)
			goto done;
		if (unlink(path) == -1 && errno != ENOENT) {
			rc = errno;
			goto done;
		}
		removed = 1;
	}
	if (removed)
		rc = lb_fsync_dir(idx);
 done:
	free(refs);
	closedir(d);
	return (rc);
}

/* Opens (creating) the writer's message file for day d, first id first. */
static int
writer_open_day(struct lb_store *st, uint32_t day, uint64_t first, int64_t t)
{
	char	dir[PATH_MAX];
	int	rc;

	if ((rc = day_dir(st, day, dir, sizeof(dir))) != 0)
		return (rc);
	memset(&st->day, 0, sizeof(st->day));
	st->day.day = day;
	st->day.first_id = first;
	st->day.next_id = first;
	st->day.tmin = t;
	st->day.tmax = t;
	/* The catalog names the day before its directory holds a message. */
	if ((rc = lb_catalog_day_put(st->cat, st->ls, &st->day)) != 0)
		return (rc);
	if ((rc = lb_mkdirs(dir)) != 0)
		return (rc);
	if ((rc = lb_path(dir + strlen(dir), sizeof(dir) - strlen(dir), "/%s",
	    LB_DIR_INDEX)) != 0)
		return (rc);
	if ((rc = lb_mkdirs(dir)) != 0)
		return (rc);
	dir[strlen(dir) - strlen(LB_DIR_INDEX) - 1] = '\0';
	if ((rc = lb_msgfile_open(dir, LB_RDWR, first, &st->mf)) != 0)
		return (rc);
	return (days_load(st));
}

/*
 * The time map. Each new second of receive time gets an entry (its first id), kept here and
 * written to the catalog in one transaction by tm_write: from lb_store_commit at most every
 * STORE_TM_MS (or with every synced commit), and always before a segment is published, so the
 * catalog never points at messages whose entries could still be lost. Recovery puts the
 * entries of the messages it indexes again (a put never replaces a step's first id).
 */
static int
tm_add(struct lb_store *st, int64_t t, uint64_t id)
{
	if (st->tm_n == st->tm_cap) {
		size_t		 cap = st->tm_cap ? st->tm_cap * 2 : 256;
		int64_t		*tt;
		uint64_t	*ii;

		if ((tt = realloc(st->tm_t, cap * sizeof(*tt))) == NULL)
			return (errno);
		st->tm_t = tt;
		if ((ii = realloc(st->tm_id, cap * sizeof(*ii))) == NULL)
			return (errno);
		st->tm_id = ii;
		st->tm_cap = cap;
	}
	if (st->tm_n == 0)
		st->tm_since = mono_ms();
	st->tm_t[st->tm_n] = t;
	st->tm_id[st->tm_n++] = id;
	return (0);
}

static int
tm_write(struct lb_store *st)
{
	int rc;

	if (st->tm_n == 0)
		return (0);
	if ((rc = lb_catalog_timemap_putv(st->cat, st->ls, st->tm_t, st->tm_id, st->tm_n)) != 0)
		return (rc);
	st->tm_n = 0;
	return (0);
}

/* Indexes the messages of the current day from id `from` on again (recovery, reindex). */
static int
index_tail(struct lb_store *st, uint64_t from)
{
	struct lb_msg	m;
	uint64_t	first, next;
	int64_t		step = 0;
	int		rc;

	lb_msgfile_range(st->mf, &first, &next);
	if (from < first)
		from = first;
	for (uint64_t id = from; id < next; id++) {
		if ((rc = lb_msgfile_get(st->mf, id, &m)) != 0)
			return (rc);
		if ((rc = lb_segw_add(st->segw, &st->tc, &m)) != 0)
			return (rc);
		if ((id == from || m.received / LB_TIMEMAP_STEP > step) &&
		    (rc = tm_add(st, m.received, id)) != 0)
			return (rc);
		step = m.received / LB_TIMEMAP_STEP;
		if (m.received > st->last_received)
			st->last_received = m.received;
	}
	if (next > from)
		st->interval_start = mono_ms();
	return (0);
}

static int
writer_recover(struct lb_store *st)
{
	struct lb_lsstate	 ls;
	uint64_t		 first, next;
	int			 rc;

	if ((rc = lb_catalog_state_get(st->cat, st->ls, &ls)) != 0 && rc != LB_ENOTFOUND)
		return (rc);
	if (rc == LB_ENOTFOUND)
		memset(&ls, 0, sizeof(ls));
	if ((rc = indexed_end(st, &st->indexed_id)) != 0)
		return (rc);
	st->next_id = ls.next_id > st->indexed_id ? ls.next_id : st->indexed_id;
	st->last_received = ls.last_received;
	if ((rc = days_load(st)) != 0)
		return (rc);
	for (size_t i = 0; i < st->ndays; i++)
		if ((rc = remove_orphans(st, st->days[i].ref.day)) != 0)
			return (rc);
	if (st->ndays == 0)
		return (0);
	/* Messages only ever go to the last day: open it as the writer's file and catch up. */
	st->day = st->days[st->ndays - 1].ref;
	{
		char dir[PATH_MAX];

		if ((rc = day_dir(st, st->day.day, dir, sizeof(dir))) != 0)
			return (rc);
		if ((rc = lb_mkdirs(dir)) != 0)
			return (rc);
		if ((rc = lb_msgfile_open(dir, LB_RDWR, st->day.first_id, &st->mf)) != 0)
			return (rc);
	}
	lb_msgfile_range(st->mf, &first, &next);
	if (next > st->next_id)
		st->next_id = next;
	if (st->day.tmax > st->last_received)
		st->last_received = st->day.tmax;
	if (st->indexed_id < next)
		if ((rc = index_tail(st, st->indexed_id)) != 0)
			return (rc);
	st->last_step = st->last_received / LB_TIMEMAP_STEP;
	return (tm_write(st));
}

/* lb_store_open, and with cat != NULL lb_store_open_reader. */
static int
store_open(struct lb_catalog *cat, const char *data, const char *ls, int mode,
    struct lb_store **out)
{
	struct lb_store	*st;
	int		 rc;

	if (!valid_name(ls))
		return (LB_EBADCONF);
	if ((st = calloc(1, sizeof(*st))) == NULL)
		return (errno);
	st->lockfd = -1;
	st->blob_budget = LB_BLOB_BUDGET;
	st->mode = mode;
	if ((rc = lb_path(st->data, sizeof(st->data), "%s", data)) != 0)
		goto fail;
	memcpy(st->ls, ls, strlen(ls) + 1);
	if (mode == LB_RDWR) {
		if ((rc = lb_mkdirs(data)) != 0)
			goto fail;
		if ((rc = store_lock(st)) != 0)
			goto fail;
	}
	if (cat != NULL) {
		st->cat = cat;
		st->borrowed = 1;
	} else if ((rc = lb_catalog_open(data, mode, &st->cat)) != 0)
		goto fail;
	if ((rc = lb_catalog_logspace_get(st->cat, ls, &st->conf)) == LB_ENOTFOUND &&
	    mode == LB_RDWR) {
		lb_lsconf_default(&st->conf);
		rc = lb_catalog_logspace_create(st->cat, ls, &st->conf);
		if (rc == EEXIST)
			rc = lb_catalog_logspace_get(st->cat, ls, &st->conf);
	}
	if (rc != 0)
		goto fail;
	if ((rc = lb_tokconf_set(&st->tc, st->conf.delims, strlen(st->conf.delims))) != 0)
		goto fail;
	if (mode == LB_RDWR) {
		if ((rc = lb_segw_new(&st->segw)) != 0)
			goto fail;
		if ((rc = writer_recover(st)) != 0)
			goto fail;
	} else if ((rc = days_load(st)) != 0)
		goto fail;
	*out = st;
	return (0);
 fail:
	lb_store_close(st);
	return (rc);
}

int
lb_store_open(const char *data, const char *ls, int mode, struct lb_store **out)
{
	return (store_open(NULL, data, ls, mode, out));
}

int
lb_store_open_reader(struct lb_catalog *cat, const char *data, const char *ls,
    struct lb_store **out)
{
	if (cat == NULL)
		return (EINVAL);
	return (store_open(cat, data, ls, LB_RDONLY, out));
}

int
lb_store_open_writer(struct lb_catalog *cat, const char *data, const char *ls,
    struct lb_store **out)
{
	if (cat == NULL)
		return (EINVAL);
	return (store_open(cat, data, ls, LB_RDWR, out));
}

/* ---------------------------------------------------------------- the indexer thread */

#define IX_DEPTH	4		/* batches: one being filled, the others queued */
#define IX_MSGS		1024		/* messages per batch */
#define IX_BYTES	(512 * 1024)	/* term bytes after which a batch is queued early */

/*
 * lb_store_append adds each message's terms to the batch being filled and queues it when full;
 * the thread feeds queued batches to st->segw in order. The thread touches st->segw only
 * while a batch is queued, so anyone else uses it after ix_sync(). nq, stop, err and mem
 * are under mu; a queued batch belongs to the thread until nq drops below it.
 */
struct ixq {
	struct lb_store	*st;
	pthread_t	 thr;
	int		 thr_on;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv_work, cv_done;
	struct lb_segw_terms *b[IX_DEPTH];
	unsigned	 fill;		/* appender: the batch being filled */
	unsigned	 work;		/* thread: the next batch to index */
	unsigned	 nq;		/* batches queued */
	int		 stop;
	int		 err;		/* sticky: the first lb_segw_add failure */
	size_t		 mem;		/* lb_segw_mem() after the last batch */
	pthread_t	 wthr;		/* the segment thread */
	int		 wthr_on;
	pthread_cond_t	 cv_wjob;
	struct lb_segw	*wseg;		/* the builder it writes to wpath; NULL: idle */
	const char	*wpath;
	int		 wrc;		/* the result of the last write */
	int		 awidle;	/* appender's copy of wseg == NULL */
	int		 aerr;		/* appender's sticky error: err, or its own */
	size_t		 amem;		/* appender's copy of mem */
};

static void *
ix_main(void *arg)
{
	struct ixq	*ix = arg;
	struct lb_segw_terms *b;
	struct lb_segw	*w;
	size_t		 mem;
	int		 err, rc;

	pthread_mutex_lock(&ix->mu);
	for (;;) {
		while (ix->nq == 0 && !ix->stop)
			pthread_cond_wait(&ix->cv_work, &ix->mu);
		if (ix->nq == 0)
			break;
		b = ix->b[ix->work];
		w = ix->st->segw;
		err = ix->err;
		pthread_mutex_unlock(&ix->mu);
		rc = err == 0 ? lb_segw_add_terms(w, b) : 0;
		mem = lb_segw_mem(w);
		pthread_mutex_lock(&ix->mu);
		if (ix->err == 0)
			ix->err = rc;
		ix->mem = mem;
		ix->work = (ix->work + 1) % IX_DEPTH;
		ix->nq--;
		pthread_cond_broadcast(&ix->cv_done);
	}
	pthread_mutex_unlock(&ix->mu);
	return (NULL);
}

/* The segment thread: writes the builder it is handed, one at a time. */
static void *
ix_writer(void *arg)
{
	struct ixq	*ix = arg;
	struct lb_segw	*w;
	const char	*path;
	int		 rc;

	pthread_mutex_lock(&ix->mu);
	for (;;) {
		while (ix->wseg == NULL && !ix->stop)
			pthread_cond_wait(&ix->cv_wjob, &ix->mu);
		if (ix->wseg == NULL)
			break;
		w = ix->wseg;
		path = ix->wpath;
		pthread_mutex_unlock(&ix->mu);
		rc = lb_segw_write(w, path);
		pthread_mutex_lock(&ix->mu);
		ix->wrc = rc;
		ix->wseg = NULL;
		pthread_cond_broadcast(&ix->cv_done);
	}
	pthread_mutex_unlock(&ix->mu);
	return (NULL);
}

static void
ix_free(struct ixq *ix)
{
	if (ix == NULL)
		return;
	if (ix->thr_on) {
		pthread_mutex_lock(&ix->mu);
		ix->stop = 1;
		pthread_cond_signal(&ix->cv_work);
		pthread_cond_signal(&ix->cv_wjob);
		pthread_mutex_unlock(&ix->mu);
		pthread_join(ix->thr, NULL);
		if (ix->wthr_on)
			pthread_join(ix->wthr, NULL);
		pthread_cond_destroy(&ix->cv_wjob);
		pthread_cond_destroy(&ix->cv_work);
		pthread_cond_destroy(&ix->cv_done);
		pthread_mutex_destroy(&ix->mu);
	}
	for (unsigned i = 0; i < IX_DEPTH; i++)
		lb_segw_terms_free(ix->b[i]);
	free(ix);
}

static int
ix_new(struct lb_store *st, struct ixq **out)
{
	struct ixq	*ix;
	int		 rc;

	if ((ix = calloc(1, sizeof(*ix))) == NULL)
		return (errno);
	ix->st = st;
	for (unsigned i = 0; i < IX_DEPTH; i++)
		if ((rc = lb_segw_terms_new(&ix->b[i])) != 0)
			goto fail;
	if ((rc = pthread_mutex_init(&ix->mu, NULL)) != 0)
		goto fail;
	if ((rc = pthread_cond_init(&ix->cv_work, NULL)) != 0) {
		pthread_mutex_destroy(&ix->mu);
		goto fail;
	}
	if ((rc = pthread_cond_init(&ix->cv_done, NULL)) != 0) {
		pthread_cond_destroy(&ix->cv_work);
		pthread_mutex_destroy(&ix->mu);
		goto fail;
	}
	if ((rc = pthread_cond_init(&ix->cv_wjob, NULL)) != 0) {
		pthread_cond_destroy(&ix->cv_done);
		pthread_cond_destroy(&ix->cv_work);
		pthread_mutex_destroy(&ix->mu);
		goto fail;
	}
	if ((rc = pthread_create(&ix->thr, NULL, ix_main, ix)) != 0) {
		pthread_cond_destroy(&ix->cv_wjob);
		pthread_cond_destroy(&ix->cv_done);
		pthread_cond_destroy(&ix->cv_work);
		pthread_mutex_destroy(&ix->mu);
		goto fail;
	}
	ix->thr_on = 1;
	if (pthread_create(&ix->wthr, NULL, ix_writer, ix) == 0)
		ix->wthr_on = 1;	/* (without it, every flush writes in the caller) */
	ix->awidle = 1;
	*out = ix;
	return (0);
 fail:
	ix_free(ix);
	return (rc);
}

/*
 * Queues the batch being filled (if not empty); waits for room when wait_all is 0, else until
 * the thread has indexed everything. Returns the thread's sticky error.
 */
static int
ix_submit(struct ixq *ix, int wait_all)
{
	pthread_mutex_lock(&ix->mu);
	if (lb_segw_terms_count(ix->b[ix->fill]) > 0) {
		ix->nq++;
		ix->fill = (ix->fill + 1) % IX_DEPTH;
		pthread_cond_signal(&ix->cv_work);
	}
	while (ix->nq >= (wait_all ? 1u : IX_DEPTH))
		pthread_cond_wait(&ix->cv_done, &ix->mu);
	if (ix->aerr == 0)
		ix->aerr = ix->err;
	ix->amem = ix->mem;
	ix->awidle = ix->wseg == NULL;
	pthread_mutex_unlock(&ix->mu);
	lb_segw_terms_clear(ix->b[ix->fill]);
	return (ix->aerr);
}

/* Every appended message is in st->segw, and the thread leaves it alone until more come. */
static int
ix_sync(struct lb_store *st)
{
	if (st->ix == NULL)
		return (0);
	return (ix_submit(st->ix, 1));
}

/* Hands the terms of m to the indexer thread. */
static int
ix_put(struct ixq *ix, const struct lb_store *st, const struct lb_msg *m)
{
	struct lb_segw_terms	*b = ix->b[ix->fill];
	int			 rc;

	if (lb_segw_terms_count(b) == IX_MSGS || lb_segw_terms_size(b) >= IX_BYTES) {
		if ((rc = ix_submit(ix, 0)) != 0)
			return (rc);
		b = ix->b[ix->fill];
	} else if (ix->aerr != 0)
		return (ix->aerr);
	if ((rc = lb_segw_terms_add(b, &st->tc, m)) != 0)
		ix->aerr = rc;		/* sticky, as the thread's errors are */
	return (rc);
}


/* ---------------------------------------------------------------- flush and merge */

static int
seg_name(char *buf, size_t len, uint64_t first, uint64_t last)
{
	return (lb_path(buf, len, "%016llx-%016llx%s", (unsigned long long)first,
	    (unsigned long long)last, LB_SEG_SUFFIX));
}

static int
seg_path(struct lb_store *st, uint32_t day, const char *file, char *buf, size_t len)
{
	char	dir[PATH_MAX];
	int	rc;

	if ((rc = day_dir(st, day, dir, sizeof(dir))) != 0)
		return (rc);
	return (lb_path(buf, len, "%s/%s/%s", dir, LB_DIR_INDEX, file));
}

static int
state_save(struct lb_store *st)
{
	struct lb_lsstate ls;

	ls.next_id = st->next_id;
	ls.indexed_id = st->indexed_id;
	ls.last_received = st->last_received;
	return (lb_catalog_state_put(st->cat, st->ls, &ls));
}

/*
 * Merges a day's run of segments refs[a..b) into one, publishes it in place of them, then
 * deletes the inputs.
 */
static int
merge_run(struct lb_store *st, struct lb_segref *refs, size_t a, size_t b)
{
	struct lb_segment	**in;
	struct lb_segref	 out;
	uint64_t		*del;
	char			 path[PATH_MAX];
	struct stat		 sb;
	int			 rc = 0, n = (int)(b - a);

	in = calloc((size_t)n, sizeof(*in));
	del = calloc((size_t)n, sizeof(*del));
	if (in == NULL || del == NULL) {
		rc = errno;
		goto done;
	}
	memset(&out, 0, sizeof(out));
	out.first_id = refs[a].first_id;
	out.last_id = refs[b - 1].last_id;
	out.tmin = refs[a].tmin;
	out.tmax = refs[a].tmax;
	out.day = refs[a].day;
	for (size_t i = a; i < b; i++) {
		if ((rc = seg_path(st, refs[i].day, refs[i].file, path, sizeof(path))) != 0)
			goto done;
		if ((rc = lb_segment_open(path, &in[i - a])) != 0)
			goto done;
		del[i - a] = refs[i].first_id;
		out.count += refs[i].count;
		if (refs[i].tmin < out.tmin)
			out.tmin = refs[i].tmin;
		if (refs[i].tmax > out.tmax)
			out.tmax = refs[i].tmax;
		if (refs[i].level + 1 > out.level)
			out.level = refs[i].level + 1;
	}
	if ((rc = seg_name(out.file, sizeof(out.file), out.first_id, out.last_id)) != 0)
		goto done;
	if ((rc = seg_path(st, out.day, out.file, path, sizeof(path))) != 0)
		goto done;
	if ((rc = lb_segment_merge(in, n, path)) != 0)
		goto done;
	if (stat(path, &sb) == -1) {
		rc = errno;
		goto done;
	}
	out.size = (uint64_t)sb.st_size;
	if ((rc = lb_catalog_publish(st->cat, st->ls, del, n, &out, 1)) != 0) {
		unlink(path);
		goto done;
	}
	for (size_t i = a; i < b; i++) {
		if (seg_path(st, refs[i].day, refs[i].file, path, sizeof(path)) == 0)
			(void)unlink(path);
	}
 done:
	if (in != NULL)
		for (int i = 0; i < n; i++)
			lb_segment_close(in[i]);
	free(in);
	free(del);
	return (rc);
}

/*
 * Tiered merging within a day: whenever STORE_FANOUT consecutive segments of one day share a
 * level, they become one segment of the next level. With all, every day but the current one
 * that has more than one segment is merged into one.
 */
static int
merge_day(struct lb_store *st, uint32_t day, int all)
{
	struct lb_segref	*refs = NULL;
	size_t			 n = 0, a, b, k = 0;
	int			 rc, again = 1;

	while (again) {
		again = 0;
		free(refs);
		refs = NULL;
		if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &n)) != 0)
			return (rc);
		/* Keep only the day's segments (they are contiguous in id order). */
		for (a = 0; a < n && refs[a].day != day; a++)
			;
		for (b = a; b < n && refs[b].day == day; b++)
			;
		if (all) {
			if (b - a > 1)
				rc = merge_run(st, refs, a, b);
			break;
		}
		for (size_t i = a; i < b; i = k) {
			for (k = i + 1; k < b && refs[k].level == refs[i].level; k++)
				;
			if (k - i >= STORE_FANOUT) {
				if ((rc = merge_run(st, refs, i, i + STORE_FANOUT)) != 0)
					goto done;
				again = 1;
				break;
			}
		}
	}
 done:
	free(refs);
	return (rc);
}

/* The catalog entry (but its size) and the path of the open interval as a segment of day. */
static int
segw_ref(struct lb_store *st, uint32_t day, struct lb_segref *ref, char *path, size_t plen)
{
	uint64_t	count, first, last;
	int64_t		tmin, tmax;
	int		rc;

	lb_segw_stats(st->segw, &count, &first, &last, &tmin, &tmax);
	memset(ref, 0, sizeof(*ref));
	ref->first_id = first;
	ref->last_id = last;
	ref->count = count;
	ref->tmin = tmin;
	ref->tmax = tmax;
	ref->day = day;
	if ((rc = seg_name(ref->file, sizeof(ref->file), first, last)) != 0)
		return (rc);
	return (seg_path(st, day, ref->file, path, plen));
}

/* Writes the open interval as a durable segment file of day; empties the builder. */
static int
write_segw(struct lb_store *st, uint32_t day, struct lb_segref *ref)
{
	char		path[PATH_MAX];
	struct stat	sb;
	int		rc;

	if ((rc = segw_ref(st, day, ref, path, sizeof(path))) != 0)
		return (rc);
	if ((rc = lb_segw_write(st->segw, path)) != 0)
		return (rc);
	if (stat(path, &sb) == -1)
		return (errno);
	ref->size = (uint64_t)sb.st_size;
	return (0);
}

/* Writes the open interval as a segment of day and publishes it. */
static int
publish_segw(struct lb_store *st, uint32_t day, struct lb_segref *ref)
{
	char	path[PATH_MAX];
	int	rc;

	if ((rc = write_segw(st, day, ref)) != 0)
		return (rc);
	if ((rc = lb_catalog_publish(st->cat, st->ls, NULL, 0, ref, 1)) != 0 &&
	    seg_path(st, day, ref->file, path, sizeof(path)) == 0)
		unlink(path);
	return (rc);
}

/*
 * Waits for the segment thread; publishes the segment it wrote (the rest of lb_store_flush's
 * steps). A failed write or publish is returned and retried by the next call (pend_step): a
 * full disk that gets space back loses nothing and needs no reopen.
 */
static int
seg_finish(struct lb_store *st)
{
	struct ixq	*ix = st->ix;
	struct stat	 sb;
	int		 rc;

	if (!st->pending)
		return (0);
	if (st->pend_step == PEND_THREAD) {
		pthread_mutex_lock(&ix->mu);
		while (ix->wseg != NULL)
			pthread_cond_wait(&ix->cv_done, &ix->mu);
		rc = ix->wrc;
		ix->wrc = 0;
		ix->awidle = 1;
		pthread_mutex_unlock(&ix->mu);
		st->pend_step = rc == 0 ? PEND_WRITTEN : PEND_REWRITE;
		if (rc != 0)
			return (rc);
	}
	if (st->pend_step == PEND_REWRITE) {
		/* (lb_segw_write leaves the builder as it was when it fails) */
		if ((rc = lb_segw_write(st->spare, st->pend_path)) != 0)
			return (rc);
		st->pend_step = PEND_WRITTEN;
	}
	if (stat(st->pend_path, &sb) == -1)
		return (errno);
	st->pend_ref.size = (uint64_t)sb.st_size;
	if ((rc = lb_catalog_publish(st->cat, st->ls, NULL, 0, &st->pend_ref, 1)) != 0)
		return (rc);
	st->pending = 0;
	st->indexed_id = st->pend_ref.last_id + 1;
	if ((rc = state_save(st)) != 0)
		return (rc);
	return (merge_day(st, st->pend_ref.day, 0));
}

/*
 * The first step of every flush: waits for the indexer and any pending segment, then makes
 * the messages the interval indexes durable and the day's record cover them, so a segment
 * never points at a message a crash could lose. *count is 0 when there is nothing to flush
 * (then nothing was written); *last is the interval's last id.
 */
static int
flush_begin(struct lb_store *st, uint64_t *count, uint64_t *last)
{
	uint64_t	first;
	int64_t		tmin, tmax;
	int		rc;

	st->interval_start = 0;
	if ((rc = ix_sync(st)) != 0 || (rc = seg_finish(st)) != 0)
		return (rc);
	lb_segw_stats(st->segw, count, &first, last, &tmin, &tmax);
	if (*count == 0)
		return (0);
	if ((rc = lb_msgfile_commit(st->mf, 1)) != 0 || (rc = tm_write(st)) != 0)
		return (rc);
	st->dirty = 0;
	st->unsynced = 0;
	st->last_sync = mono_ms();
	st->day.next_id = st->next_id;
	if (tmax > st->day.tmax)
		st->day.tmax = tmax;
	return (lb_catalog_day_put(st->cat, st->ls, &st->day));
}

static int
flush_async(struct lb_store *st)
{
	struct ixq	*ix = st->ix;
	struct lb_segw	*w;
	uint64_t	 count, last;
	int		 rc;

	if (!ix->wthr_on)
		return (lb_store_flush(st));
	if (st->spare == NULL && (rc = lb_segw_new(&st->spare)) != 0)
		return (rc);
	if ((rc = flush_begin(st, &count, &last)) != 0 || count == 0)
		return (rc);
	if ((rc = segw_ref(st, st->day.day, &st->pend_ref, st->pend_path,
	    sizeof(st->pend_path))) != 0)
		return (rc);
	w = st->segw;
	st->segw = st->spare;
	st->spare = w;
	st->pending = 1;
	st->pend_step = PEND_THREAD;
	ix->amem = lb_segw_mem(st->segw);	/* (not the memory of the one written) */
	pthread_mutex_lock(&ix->mu);
	ix->wseg = w;
	ix->wpath = st->pend_path;
	ix->awidle = 0;
	pthread_cond_signal(&ix->cv_wjob);
	pthread_mutex_unlock(&ix->mu);
	return (0);
}

int
lb_store_flush(struct lb_store *st)
{
	struct lb_segref	 ref;
	uint64_t		 count, last;
	int			 rc;

	if (st->mode != LB_RDWR)
		return (EBADF);
	if ((rc = flush_begin(st, &count, &last)) != 0 || count == 0)
		return (rc);
	if ((rc = publish_segw(st, st->day.day, &ref)) != 0)
		return (rc);
	if (st->ix != NULL) {
		/* The interval is empty now (the thread is idle: flush_begin synced it). */
		pthread_mutex_lock(&st->ix->mu);
		st->ix->mem = st->ix->amem = lb_segw_mem(st->segw);
		pthread_mutex_unlock(&st->ix->mu);
	}
	st->indexed_id = last + 1;
	if ((rc = state_save(st)) != 0)
		return (rc);
	return (merge_day(st, st->day.day, 0));
}

/* Ends the current day: seal, flush, merge the day into one segment, close its file. */
static int
end_day(struct lb_store *st)
{
	uint32_t	day = st->day.day;
	int		rc;

	if ((rc = lb_msgfile_seal(st->mf)) != 0)
		return (rc);
	if ((rc = lb_store_flush(st)) != 0)
		return (rc);
	lb_msgfile_close(st->mf);
	st->mf = NULL;
	return (merge_day(st, day, 1));
}

int
lb_store_append(struct lb_store *st, struct lb_msg *m)
{
	uint32_t	day;
	int64_t		step, now, dnum;
	int		rc;

	if (st->mode != LB_RDWR)
		return (EBADF);
	lb_msg_fit(m);
	if (m->received > LB_RECEIVED_MAX)
		return (LB_EBADMSG);
	if (m->received == 0)
		m->received = now_us();
	if (m->received < st->last_received)
		m->received = st->last_received;
	/* gmtime only when the UTC day number changes (a day is 86400 s in time_t). */
	dnum = m->received >= 0 ? m->received / US_PER_DAY :
	    (m->received - US_PER_DAY + 1) / US_PER_DAY;
	if (st->mf == NULL || dnum != st->dnum) {
		day = day_of(m->received);
		st->dnum = dnum;
	} else
		day = st->day.day;
	if (st->mf == NULL || day != st->day.day) {
		if (st->mf != NULL && (rc = end_day(st)) != 0)
			return (rc);
		if ((rc = writer_open_day(st, day, st->next_id, m->received)) != 0)
			return (rc);
	}
	m->id = st->next_id;
	if ((rc = lb_msgfile_append(st->mf, m)) != 0)
		return (rc);
	st->next_id++;
	st->dirty = 1;
	st->last_received = m->received;
	if (m->received > st->day.tmax)
		st->day.tmax = m->received;
	step = m->received / LB_TIMEMAP_STEP;
	if (step > st->last_step) {
		if ((rc = tm_add(st, m->received, m->id)) != 0)
			return (rc);
		st->last_step = step;
	}
	now = mono_ms();
	if (st->interval_start == 0)
		st->interval_start = now;
	if (st->ix == NULL && (rc = ix_new(st, &st->ix)) != 0)
		return (rc);
	if ((rc = ix_put(st->ix, st, m)) != 0)
		return (rc);
	/* (The memory seen when the last batch was queued: a few batches behind at most.) */
	if (st->ix->amem >= st->conf.mem_limit / 2 ||
	    now - st->interval_start >= (int64_t)st->conf.flush_ms)
		return (flush_async(st));
	if (st->pending && st->ix->awidle)
		return (seg_finish(st));
	return (0);
}

size_t
lb_store_mem(const struct lb_store *st)
{
	if (st == NULL || st->mode != LB_RDWR || st->ix == NULL)
		return (0);
	return (st->ix->amem);
}

int
lb_store_sync(struct lb_store *st)
{
	int rc;

	if (st->mode != LB_RDWR)
		return (EBADF);
	if (st->dirty)
		return (lb_store_commit(st, 1));
	if (st->mf == NULL || !st->unsynced)
		return (0);
	if ((rc = lb_msgfile_commit(st->mf, 1)) != 0)
		return (rc);
	st->last_sync = mono_ms();
	st->unsynced = 0;
	if (st->tm_n > 0)
		return (tm_write(st));
	return (0);
}

int
lb_store_commit(struct lb_store *st, int sync)
{
	int rc;

	if (st->mode != LB_RDWR)
		return (EBADF);
	if (st->mf == NULL || !st->dirty)
		return (0);
	if ((rc = lb_msgfile_commit(st->mf, sync)) != 0)
		return (rc);
	if (sync)
		st->last_sync = mono_ms();
	st->unsynced = !sync;
	st->dirty = 0;
	/* The time map after the messages it points at. */
	if (st->tm_n > 0 && (sync || mono_ms() - st->tm_since >= STORE_TM_MS))
		return (tm_write(st));
	return (0);
}

int
lb_store_close(struct lb_store *st)
{
	int rc = 0;

	if (st == NULL)
		return (0);
	if (st->mode == LB_RDWR && st->mf != NULL && st->segw != NULL) {
		rc = lb_msgfile_commit(st->mf, 1);
		if (rc == 0)
			rc = tm_write(st);
		if (rc == 0)
			rc = lb_store_flush(st);
		if (rc == 0)
			rc = state_save(st);
	}
	ix_free(st->ix);	/* (after the flush above: the thread is idle) */
	lb_msgfile_close(st->mf);
	days_free(st);
	lb_segw_free(st->segw);
	lb_segw_free(st->spare);
	free(st->tm_t);
	free(st->tm_id);
	lb_store_close(st->helper);
	for (size_t i = 0; i < STORE_CACHE_SEGS; i++)
		lb_segment_close(st->segs[i].sg);
	if (!st->borrowed)
		lb_catalog_close(st->cat);
	if (st->lockfd != -1)
		close(st->lockfd);
	free(st);
	return (rc);
}

/* ---------------------------------------------------------------- reading */

void
lb_store_range(struct lb_store *st, uint64_t *first, uint64_t *next)
{
	uint64_t f = 1, nx = 1, a, b;

	if (st->ndays > 0) {
		f = st->days[0].ref.first_id;
		nx = st->days[st->ndays - 1].ref.next_id;
		if (st->mf != NULL) {
			lb_msgfile_range(st->mf, &a, &b);
			if (b > nx)
				nx = b;
		} else if (days_file(st, st->ndays - 1, &st->days[st->ndays - 1].mf) == 0) {
			lb_msgfile_range(st->days[st->ndays - 1].mf, &a, &b);
			if (b > nx)
				nx = b;
		}
	}
	if (st->mode == LB_RDWR && st->next_id > nx)
		nx = st->next_id;
	*first = f;
	*next = nx;
}

int
lb_store_get(struct lb_store *st, uint64_t id, struct lb_msg *m)
{
	struct lb_msgfile	*mf;
	ssize_t			 i;
	int			 rc;

	if ((i = days_find(st, id)) < 0) {
		if ((rc = days_load(st)) != 0)
			return (rc);
		if ((i = days_find(st, id)) < 0)
			return (LB_ENOTFOUND);
	}
	if ((rc = days_file(st, (size_t)i, &mf)) != 0)
		return (rc);
	return (lb_msgfile_get(mf, id, m));
}

struct match {
	const uint8_t	*term;
	size_t		 len;
	int		 prefix;
};

static int
match_term(void *arg, const uint8_t *term, size_t len)
{
	struct match *mt = arg;

	if (mt->prefix ? len >= mt->len && memcmp(term, mt->term, mt->len) == 0 :
	    len == mt->len && memcmp(term, mt->term, len) == 0)
		return (1);
	return (0);
}

static int
postings_push(struct lb_postings *p, uint64_t id)
{
	if (p->n == p->cap) {
		size_t		 cap = p->cap ? p->cap * 2 : 64;
		uint64_t	*ids = realloc(p->ids, cap * sizeof(*ids));

		if (ids == NULL)
			return (errno);
		p->ids = ids;
		p->cap = cap;
	}
	p->ids[p->n++] = id;
	return (0);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

struct prefix_walk {
	struct lb_segment	*sg;
	struct lb_postings	*acc;
};

static int
prefix_term(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct prefix_walk *pw = arg;

	(void)term;
	(void)len;
	(void)df;
	return (lb_segment_postings(pw->sg, cookie, pw->acc));
}

/*
 * Appends to acc the ids of one segment holding a term that starts with prefix: the union of
 * every matching term's list, sorted, without duplicates.
 */
static int
segment_prefix_ids(struct lb_segment *sg, const uint8_t *prefix, size_t len,
    struct lb_postings *acc)
{
	struct prefix_walk	 pw = { sg, acc };
	size_t			 from = acc->n, k;
	int			 rc;

	if ((rc = lb_segment_prefix(sg, prefix, len, prefix_term, &pw)) != 0)
		return (rc);
	qsort(acc->ids + from, acc->n - from, sizeof(*acc->ids), cmp_u64);
	for (size_t i = k = from; i < acc->n; i++)
		if (k == from || acc->ids[k - 1] != acc->ids[i])
			acc->ids[k++] = acc->ids[i];
	if (acc->n > from)
		acc->n = k;
	return (0);
}

int
lb_store_lookup(struct lb_store *st, const uint8_t *term, size_t len, int prefix,
    struct lb_postings *out)
{
	struct lb_segref	*refs = NULL;
	struct lb_segment	*sg;
	struct lb_postings	 acc, one;
	struct lb_msg		 m;
	struct match		 mt;
	size_t			 n = 0;
	uint64_t		 tail, first, next;
	char			 path[PATH_MAX];
	int			 rc, tries = 0;

	memset(&acc, 0, sizeof(acc));
	memset(&one, 0, sizeof(one));
 again:
	acc.n = 0;
	if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &n)) != 0)
		goto done;
	tail = 1;
	for (size_t i = 0; i < n; i++) {
		if ((rc = seg_path(st, refs[i].day, refs[i].file, path, sizeof(path))) != 0)
			goto done;
		if ((rc = lb_segment_open(path, &sg)) != 0) {
			/* A merge may have replaced it since we listed: list again. */
			if (rc == ENOENT && ++tries < 5) {
				free(refs);
				refs = NULL;
				goto again;
			}
			goto done;
		}
		if (prefix)
			rc = segment_prefix_ids(sg, term, len, &acc);
		else if ((rc = lb_segment_lookup(sg, term, len, &one)) == LB_ENOTFOUND)
			rc = 0;
		else if (rc == 0)
			for (size_t k = 0; k < one.n && rc == 0; k++)
				rc = postings_push(&acc, one.ids[k]);
		lb_segment_close(sg);
		if (rc != 0)
			goto done;
		tail = refs[i].last_id + 1;
	}
	/* The tail: messages stored but not yet in a published segment. */
	if (st->mode != LB_RDWR && (rc = days_load(st)) != 0)
		goto done;
	lb_store_range(st, &first, &next);
	if (tail < first)
		tail = first;	/* (days before first were removed: retention) */
	for (uint64_t id = tail; id < next; id++) {
		if ((rc = lb_store_get(st, id, &m)) != 0) {
			if (rc == LB_ENOTFOUND && id + 1 == next)
				break;
			goto done;
		}
		mt.term = term;
		mt.len = len;
		mt.prefix = prefix;
		if (lb_msg_terms(&st->tc, &m, match_term, &mt) == 1 &&
		    (rc = postings_push(&acc, id)) != 0)
			goto done;
	}
	lb_postings_free(out);
	*out = acc;
	memset(&acc, 0, sizeof(acc));
 done:
	lb_postings_free(&acc);
	lb_postings_free(&one);
	free(refs);
	return (rc);
}

int
lb_store_set_delims(struct lb_store *st, const char *delims)
{
	struct lb_tokconf	tc;
	size_t			len;
	int			rc;

	if (st->mode != LB_RDWR)
		return (EBADF);
	if ((len = strnlen(delims, sizeof(st->conf.delims))) == sizeof(st->conf.delims))
		return (LB_EBADCONF);
	if ((rc = lb_tokconf_set(&tc, delims, len)) != 0)
		return (rc);
	if (memcmp(&tc, &st->tc, sizeof(tc)) != 0) {
		/* The interval's terms (queued ones too) were cut the old way: a segment of them. */
		if ((rc = lb_store_flush(st)) != 0)
			return (rc);
		st->tc = tc;
	}
	memset(st->conf.delims, 0, sizeof(st->conf.delims));
	memcpy(st->conf.delims, delims, len);
	return (0);
}

const struct lb_tokconf *
lb_store_tokconf(const struct lb_store *st)
{
	return (&st->tc);
}

/* ---------------------------------------------------------------- what searches need (lb_store_int.h) */

int
lb_store_refresh(struct lb_store *st)
{
	int	rc, known;

	if (st->mode == LB_RDWR)
		return (0);
	if ((rc = days_load(st)) != 0)
		return (rc);
	/* A removed day's segments: their files are gone, let their space go too. */
	for (size_t i = 0; i < STORE_CACHE_SEGS; i++) {
		if (st->segs[i].sg == NULL)
			continue;
		known = 0;
		for (size_t k = 0; k < st->ndays && !known; k++)
			known = st->days[k].ref.day == st->segs[i].day;
		if (!known) {
			lb_segment_close(st->segs[i].sg);
			memset(&st->segs[i], 0, sizeof(st->segs[i]));
		}
	}
	return (0);
}

int
lb_store_helper(struct lb_store *st, struct lb_store **out)
{
	int rc;

	if (st->helper == NULL &&
	    (rc = lb_store_open_reader(st->cat, st->data, st->ls, &st->helper)) != 0)
		return (rc);
	*out = st->helper;
	return (0);
}

int
lb_store_time_to_id(struct lb_store *st, int64_t t, uint64_t *id)
{
	struct lb_msg	 m;
	uint64_t	 lo, hi, first, mid;
	int		 rc;

	if ((rc = lb_catalog_time_to_id(st->cat, st->ls, t, id)) != LB_ENOTFOUND)
		return (rc);
	/*
	 * t is past every entry in the catalog. Entries reach it a little after their messages
	 * (tm_write), but always before the segment that indexes them: every message below the
	 * indexed end was received before t. Find the first one at or after t among the newer
	 * ones by their receive times, which never go backwards.
	 */
	if (st->mode == LB_RDWR)
		lo = st->indexed_id;
	else if ((rc = indexed_end(st, &lo)) != 0)
		return (rc);
	lb_store_range(st, &first, &hi);
	if (lo < first)
		lo = first;
	if (lo >= hi)
		return (LB_ENOTFOUND);
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if ((rc = lb_store_get(st, mid, &m)) != 0)
			return (rc);
		if (m.received < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	lb_store_range(st, &first, &mid);
	if (lo >= mid)
		return (LB_ENOTFOUND);
	*id = lo;
	return (0);
}

int
lb_store_segments(struct lb_store *st, uint64_t lo, uint64_t hi, struct lb_segref **out,
    size_t *n)
{
	struct lb_segref	*refs = NULL;
	size_t			 nr = 0;
	int			 rc;

	if ((rc = lb_catalog_segments(st->cat, st->ls, lo, hi, &refs, &nr)) != 0)
		return (rc);
	/*
	 * A cached segment whose ids a listed one covers under another name was merged or
	 * rebuilt away: close it now rather than keep a deleted file mapped.
	 */
	for (size_t i = 0; i < STORE_CACHE_SEGS; i++) {
		struct store_seg *c = &st->segs[i];

		if (c->sg == NULL)
			continue;
		for (size_t k = 0; k < nr; k++) {
			if (refs[k].first_id > c->last_id || refs[k].last_id < c->first_id)
				continue;
			if (refs[k].day != c->day || strcmp(refs[k].file, c->file) != 0) {
				lb_segment_close(c->sg);
				c->sg = NULL;
				break;
			}
		}
	}
	*out = refs;
	*n = nr;
	return (0);
}

int
lb_store_segment(struct lb_store *st, const struct lb_segref *ref, struct lb_segment **out,
    char *path, size_t plen)
{
	struct store_seg	*c, *slot = NULL;
	struct lb_seginfo	 si;
	struct lb_segment	*sg;
	int			 rc;

	if ((rc = seg_path(st, ref->day, ref->file, path, plen)) != 0)
		return (rc);
	for (size_t i = 0; i < STORE_CACHE_SEGS; i++) {
		c = &st->segs[i];
		if (c->sg == NULL) {
			if (slot == NULL || slot->sg != NULL)
				slot = c;
			continue;
		}
		if (c->day == ref->day && strcmp(c->file, ref->file) == 0) {
			lb_segment_info(c->sg, &si);
			if (si.size == ref->size && si.first_id == ref->first_id &&
			    si.last_id == ref->last_id) {
				c->used = ++st->clock;
				*out = c->sg;
				return (0);
			}
			/* The same name for another file (a reindex): open it again. */
			lb_segment_close(c->sg);
			c->sg = NULL;
			slot = c;
			continue;
		}
		if (slot == NULL || (slot->sg != NULL && c->used < slot->used))
			slot = c;
	}
	if ((rc = lb_segment_open(path, &sg)) != 0)
		return (rc);
	lb_segment_info(sg, &si);
	if (si.first_id != ref->first_id || si.last_id != ref->last_id) {
		lb_segment_close(sg);
		return (LB_ECORRUPT);
	}
	lb_segment_close(slot->sg);
	slot->sg = sg;
	slot->day = ref->day;
	memcpy(slot->file, ref->file, sizeof(slot->file));
	slot->file[sizeof(slot->file) - 1] = '\0';
	slot->first_id = ref->first_id;
	slot->last_id = ref->last_id;
	slot->used = ++st->clock;
	*out = sg;
	return (0);
}

void
lb_store_segment_drop(struct lb_store *st, struct lb_segment *sg)
{
	for (size_t i = 0; i < STORE_CACHE_SEGS; i++) {
		if (st->segs[i].sg == sg) {
			lb_segment_close(sg);
			st->segs[i].sg = NULL;
		}
	}
}

size_t
lb_store_blob_bytes(const struct lb_store *st)
{
	size_t n = 0;

	for (size_t i = 0; i < STORE_CACHE_SEGS; i++)
		if (st->segs[i].sg != NULL)
			n += lb_segment_blob_size(st->segs[i].sg, NULL);
	return (n);
}

/*
 * Frees the blobs of the least recently used segments other than keep, and other than those
 * used after stamp since, until want more bytes fit the budget (or none is left to free).
 * Returns the bytes held then.
 */
static size_t
blob_trim(struct lb_store *st, const struct lb_segment *keep, uint64_t since, size_t want)
{
	struct store_seg	*lru;
	size_t			 held;

	for (;;) {
		held = lb_store_blob_bytes(st);
		if (held <= st->blob_budget && want <= st->blob_budget - held)
			return (held);
		lru = NULL;
		for (size_t i = 0; i < STORE_CACHE_SEGS; i++) {
			struct store_seg *c = &st->segs[i];

			if (c->sg != NULL && c->sg != keep && c->used <= since &&
			    lb_segment_blob_size(c->sg, NULL) > 0 &&
			    (lru == NULL || c->used < lru->used))
				lru = c;
		}
		if (lru == NULL)
			return (held);
		lb_segment_blob_free(lru->sg);
	}
}

void
lb_store_set_blob_budget(struct lb_store *st, size_t bytes)
{
	st->blob_budget = bytes;
	blob_trim(st, NULL, UINT64_MAX, 0);
}

uint64_t
lb_store_stamp(struct lb_store *st)
{
	return (st->clock);
}

int
lb_store_segment_blob(struct lb_store *st, struct lb_segment *sg, uint64_t since)
{
	struct lb_seginfo	si;
	size_t			need, want, held;
	int			rc, tries;

	if (lb_segment_blob_size(sg, &need) > 0)
		return (0);
	lb_segment_info(sg, &si);
	if (si.nterms == 0 || st->blob_budget == 0 || need > st->blob_budget)
		return (0);
	for (tries = 0; tries < 2; tries++) {
		/* Unknown yet: guess 8 bytes a term and its offset. */
		want = need != 0 ? need : si.nterms > st->blob_budget / 12 ? st->blob_budget :
		    si.nterms * 12;
		held = blob_trim(st, sg, since, want);
		if (held >= st->blob_budget)
			return (0);
		/* A known size that does not fit without evicting blobs in use: no walk for it. */
		if (need != 0 && need > st->blob_budget - held)
			return (0);
		rc = lb_segment_blob(sg, st->blob_budget - held);
		if (rc == ENOMEM)
			return (0);	/* (the scan walks the dictionary instead) */
		if (rc != LB_ETOOBIG)
			return (rc);
		/* The build learnt what it needs: make that much room once. */
		lb_segment_blob_size(sg, &need);
		if (need == 0 || need > st->blob_budget)
			return (0);
	}
	return (0);
}

/* ---------------------------------------------------------------- reindex, verify, stats */

/* Rebuilds the segments of day i: one new set replaces the old in one catalog transaction. */
static int
reindex_day(struct lb_store *st, size_t i, uint64_t *done, uint64_t total,
    void (*progress)(void *, uint64_t, uint64_t), void *arg)
{
	struct lb_segref	*refs = NULL, *made = NULL, ref;
	uint64_t		*del = NULL;
	struct lb_msgfile	*mf;
	struct lb_msg		 m;
	uint64_t		 first, next;
	size_t			 n = 0, nmade = 0, ndel = 0;
	uint32_t		 day = st->days[i].ref.day;
	char			 path[PATH_MAX];
	int			 rc;

	if ((rc = days_file(st, i, &mf)) != 0)
		return (rc);
	lb_msgfile_range(mf, &first, &next);
	if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &n)) != 0)
		return (rc);
	if ((del = calloc(n + 1, sizeof(*del))) == NULL ||
	    (made = calloc(n + 1, sizeof(*made))) == NULL) {
		rc = errno;
		goto done;
	}
	for (size_t k = 0; k < n; k++)
		if (refs[k].day == day)
			del[ndel++] = refs[k].first_id;
	for (uint64_t id = first; id < next; id++) {
		if ((rc = lb_msgfile_get(mf, id, &m)) != 0)
			goto done;
		if ((rc = lb_segw_add(st->segw, &st->tc, &m)) != 0)
			goto done;
		if (++*done % 65536 == 0 && progress != NULL)
			progress(arg, *done, total);
		if (lb_segw_mem(st->segw) >= st->conf.mem_limit / 2 || id + 1 == next) {
			if ((rc = write_segw(st, day, &ref)) != 0)
				goto done;
			made = realloc(made, (nmade + 1) * sizeof(*made));
			if (made == NULL) {
				rc = errno;
				goto done;
			}
			made[nmade++] = ref;
		}
	}
	/* The new set replaces the old in one transaction: readers see one or the other. */
	if ((nmade > 0 || ndel > 0) && (rc = lb_catalog_publish(st->cat, st->ls, del,
	    (int)ndel, made, (int)nmade)) != 0)
		goto done;
	/* Delete the old files whose names the new set did not reuse. */
	for (size_t k = 0; k < n; k++) {
		int kept = 0;

		if (refs[k].day != day)
			continue;
		for (size_t j = 0; j < nmade && !kept; j++)
			kept = strcmp(made[j].file, refs[k].file) == 0;
		if (!kept && seg_path(st, day, refs[k].file, path, sizeof(path)) == 0)
			(void)unlink(path);
	}
 done:
	free(refs);
	free(del);
	free(made);
	return (rc);
}

int
lb_store_reindex(struct lb_store *st, void (*progress)(void *arg, uint64_t done,
    uint64_t total), void *arg)
{
	uint64_t	first, next, done = 0;
	int		rc;

	if (st->mode != LB_RDWR)
		return (EBADF);
	if (st->mf != NULL) {
		if ((rc = lb_msgfile_commit(st->mf, 1)) != 0)
			return (rc);
		if ((rc = lb_store_flush(st)) != 0)
			return (rc);
	}
	if ((rc = days_load(st)) != 0)
		return (rc);
	lb_store_range(st, &first, &next);
	for (size_t i = 0; i < st->ndays; i++)
		if ((rc = reindex_day(st, i, &done, next - first, progress, arg)) != 0)
			return (rc);
	if (progress != NULL)
		progress(arg, done, next - first);
	if ((rc = indexed_end(st, &st->indexed_id)) != 0)
		return (rc);
	return (state_save(st));
}

struct vctx {
	void	(*report)(void *, const char *, const char *);
	void	*arg;
	int	 bad;
};

static void
vreport(struct vctx *v, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
vreport(struct vctx *v, const char *path, const char *fmt, ...)
{
	char	buf[512];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	v->bad = 1;
	if (v->report != NULL)
		v->report(v->arg, path, buf);
}

int
lb_store_verify(struct lb_store *st,
    void (*report)(void *arg, const char *path, const char *what), void *arg)
{
	struct vctx		 v = { report, arg, 0 };
	struct lb_segref	*refs = NULL;
	struct lb_segment	*sg;
	struct lb_seginfo	 si;
	struct lb_msgfile	*mf;
	uint64_t		 first, next, expect = 0, msgs_next = 0;
	size_t			 n = 0;
	char			 path[PATH_MAX], why[512];
	int			 rc;

	if ((rc = days_load(st)) != 0)
		return (rc);
	for (size_t i = 0; i < st->ndays; i++) {
		const struct lb_dayref *d = &st->days[i].ref;

		if ((rc = day_dir(st, d->day, path, sizeof(path))) != 0)
			goto done;
		if ((rc = days_file(st, i, &mf)) != 0) {
			char file[PATH_MAX];

			/*
			 * The writer names a day in the catalog before it creates the day's
			 * message file (writer_open_day): a writer killed in between leaves
			 * the newest day with no file and no message. Not damage: the next
			 * writer creates the file.
			 */
			if (rc == ENOENT && i == st->ndays - 1 && d->next_id == d->first_id) {
				rc = 0;
				continue;
			}
			if (lb_path(file, sizeof(file), "%s/%s", path, LB_FILE_MESSAGES) != 0)
				snprintf(file, sizeof(file), "%s", path);
			vreport(&v, file, "cannot open the message file: %s", lb_strerror(rc));
			continue;
		}
		why[0] = '\0';
		if ((rc = lb_msgfile_verify(mf, why, sizeof(why))) != 0)
			vreport(&v, path, "%s", why[0] ? why : lb_strerror(rc));
		lb_msgfile_range(mf, &first, &next);
		if (next > first && first != d->first_id)
			vreport(&v, path, "messages start at id %llu, the catalog says %llu",
			    (unsigned long long)first, (unsigned long long)d->first_id);
		if (next < d->next_id) {
			char file[PATH_MAX];

			/* The newest messages of a day live in the WAL until their block is sealed. */
			if (lb_path(file, sizeof(file), "%s/%s", path, LB_FILE_WAL) != 0)
				snprintf(file, sizeof(file), "%s", path);
			vreport(&v, file, "messages end before id %llu, the catalog says %llu "
			    "(messages or their WAL records are missing)",
			    (unsigned long long)next, (unsigned long long)d->next_id);
		}
		if (i > 0 && d->first_id != msgs_next)
			vreport(&v, path, "day starts at id %llu, the previous day ends before %llu",
			    (unsigned long long)d->first_id, (unsigned long long)msgs_next);
		msgs_next = next;
	}
	if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &n)) != 0)
		goto done;
	expect = st->ndays > 0 ? st->days[0].ref.first_id : 1;
	for (size_t i = 0; i < n; i++) {
		const struct lb_segref *r = &refs[i];

		if ((rc = seg_path(st, r->day, r->file, path, sizeof(path))) != 0)
			goto done;
		if (r->first_id != expect)
			vreport(&v, path, "segment starts at id %llu, expected %llu (gap or overlap)",
			    (unsigned long long)r->first_id, (unsigned long long)expect);
		if (r->last_id < r->first_id || r->count != r->last_id - r->first_id + 1)
			vreport(&v, path, "segment ids %llu-%llu do not match its count %llu",
			    (unsigned long long)r->first_id, (unsigned long long)r->last_id,
			    (unsigned long long)r->count);
		expect = r->last_id + 1;
		if ((rc = lb_segment_open(path, &sg)) != 0) {
			vreport(&v, path, "cannot open: %s", lb_strerror(rc));
			continue;
		}
		why[0] = '\0';
		if ((rc = lb_segment_verify(sg, why, sizeof(why))) != 0)
			vreport(&v, path, "%s", why[0] ? why : lb_strerror(rc));
		lb_segment_info(sg, &si);
		if (si.first_id != r->first_id || si.last_id != r->last_id ||
		    si.count != r->count || si.size != r->size)
			vreport(&v, path, "file (ids %llu-%llu, %llu messages, %llu bytes) does not "
			    "match the catalog (ids %llu-%llu, %llu messages, %llu bytes)",
			    (unsigned long long)si.first_id, (unsigned long long)si.last_id,
			    (unsigned long long)si.count, (unsigned long long)si.size,
			    (unsigned long long)r->first_id, (unsigned long long)r->last_id,
			    (unsigned long long)r->count, (unsigned long long)r->size);
		lb_segment_close(sg);
	}
	if (n > 0 && refs[n - 1].last_id >= msgs_next)
		vreport(&v, st->data, "segments index id %llu but messages end before %llu",
		    (unsigned long long)refs[n - 1].last_id, (unsigned long long)msgs_next);
	rc = 0;
 done:
	free(refs);
	if (rc == 0 && v.bad)
		rc = LB_ECORRUPT;
	return (rc);
}

static uint64_t
disk_bytes(const char *path)
{
	struct stat sb;

	if (stat(path, &sb) == -1)
		return (0);
	return ((uint64_t)sb.st_blocks * 512 < (uint64_t)sb.st_size ?
	    (uint64_t)sb.st_blocks * 512 : (uint64_t)sb.st_size);
}

int
lb_store_stats(struct lb_store *st, struct lb_storestats *ss)
{
	struct lb_segref	*refs = NULL;
	struct lb_msgfile	*mf;
	uint64_t		 disk, raw, first, next;
	size_t			 n = 0;
	char			 path[PATH_MAX];
	int			 rc;

	memset(ss, 0, sizeof(*ss));
	if (st->mode != LB_RDWR && (rc = days_load(st)) != 0)
		return (rc);
	for (size_t i = 0; i < st->ndays; i++) {
		if ((rc = days_file(st, i, &mf)) != 0) {
			/* The newest day named before its file exists: empty (lb_store_verify). */
			if (rc == ENOENT && i == st->ndays - 1 &&
			    st->days[i].ref.next_id == st->days[i].ref.first_id)
				continue;
			return (rc);
		}
		lb_msgfile_sizes(mf, &disk, &raw);
		ss->messages_bytes += disk;
		ss->raw_bytes += raw;
	}
	ss->days = st->ndays;
	lb_store_range(st, &first, &next);
	ss->messages = next - first;
	if ((rc = lb_catalog_segments(st->cat, st->ls, 0, UINT64_MAX, &refs, &n)) != 0)
		return (rc);
	ss->segments = n;
	for (size_t i = 0; i < n; i++)
		ss->index_bytes += refs[i].size;
	free(refs);
	if (lb_path(path, sizeof(path), "%s/%s/data.mdb", st->data, LB_DIR_CATALOG) == 0)
		ss->catalog_bytes = disk_bytes(path);
	return (0);
}
