/*
 * lb_store_write.c — the store's write path: lb_store_append, the indexer and segment threads,
 * flushing by time and memory, commits and syncs, and the time map entries on their way to the
 * catalog. It owns the write path's ordering: messages durable → segment durable → catalog
 * points at it (merges, lb_store_merge.c, then delete their inputs). Recovery
 * (lb_store_recover.c) finds where this order was cut by a crash.
 *
 * Threads: the writer indexes in a second thread, writes segments of timed flushes in a third,
 * merges segments in a fourth (and lb_msgfile.c compresses in a fifth). lb_store_append stores
 * the message, then cuts, folds and hashes its terms into a batch (lb_segw_terms_add); full
 * batches go to the indexer thread, which only inserts them into the open interval
 * (st->segw), in id order (lb_segw_add_terms). Everything else that touches st->segw (flush, reindex, close) first
 * waits for the thread to finish what is queued (ix_sync). A failure of a thread is returned
 * by the next append or flush. Nothing on disk depends on the threads: the message file is
 * written by the caller's thread before the terms are queued, and a segment is only written
 * after ix_sync.
 *
 * A flush that lb_store_append starts (time or memory) does not wait for the segment file:
 * after the messages are durable it hands the full builder to the segment thread, takes the
 * spare one (st->spare) for the next interval and goes on appending; the segment is published
 * (catalog, state) by a later append, flush or close once the file is durable. The order of
 * the steps on disk is that of lb_store_flush, which does all of them before it returns.
 *
 * Merges (lb_store_merge.c) run in the merge thread, so that the appender never waits for
 * one: a publish asks it for the tiered merges of the segment's day, a day's end for the
 * whole day in one segment. It runs one merge at a time, in the order asked; lb_store_flush,
 * reindex and close wait until it has done everything asked (merge_wait). A merge's failure
 * loses nothing (its inputs stay published) and is returned once by the next append or flush
 * that asks for a merge, which tries again; a day that retention removed meanwhile is not one.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_store_priv.h"

#define STORE_TM_MS	200	/* time map entries reach the catalog this often at most */
#define US_PER_DAY	(86400LL * 1000000)

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

/* Opens (creating) the writer's message file for day d, first id first. */
static int
writer_open_day(struct lb_store *st, uint32_t day, uint64_t first, int64_t t)
{
	char	dir[PATH_MAX];
	int	rc;

	if ((rc = lb_store_day_dir(st, day, dir, sizeof(dir))) != 0)
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
	return (lb_store_days_load(st));
}

/*
 * The time map. Each new second of receive time gets an entry (its first id), kept here and
 * written to the catalog in one transaction by lb_store_tm_write: from lb_store_commit at most
 * every STORE_TM_MS (or with every synced commit), and always before a segment is published,
 * so the catalog never points at messages whose entries could still be lost. Recovery puts
 * the entries of the messages it indexes again (a put never replaces a step's first id).
 */
int
lb_store_tm_add(struct lb_store *st, int64_t t, uint64_t id)
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

int
lb_store_tm_write(struct lb_store *st)
{
	int rc;

	if (st->tm_n == 0)
		return (0);
	if ((rc = lb_catalog_timemap_putv(st->cat, st->ls, st->tm_t, st->tm_id, st->tm_n)) != 0)
		return (rc);
	st->tm_n = 0;
	return (0);
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
	pthread_t	 mthr;		/* the merge thread */
	int		 mthr_on;
	pthread_cond_t	 cv_mjob;
	uint32_t	 mtier;		/* a day whose tiered merges are asked for; 0: none */
	uint32_t	 mall;		/* a day to merge into one segment; 0: none */
	int		 mbusy;		/* a merge is running */
	int		 merr;		/* the last failed merge's error, until returned */
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

/* The merge thread: the merges asked for, one at a time, a whole day first. */
static void *
ix_merger(void *arg)
{
	struct ixq	*ix = arg;
	uint32_t	 day;
	int		 all, rc;

	pthread_mutex_lock(&ix->mu);
	for (;;) {
		while (ix->mtier == 0 && ix->mall == 0 && !ix->stop)
			pthread_cond_wait(&ix->cv_mjob, &ix->mu);
		if (ix->mtier == 0 && ix->mall == 0)
			break;
		all = ix->mall != 0;
		day = all ? ix->mall : ix->mtier;
		if (all)
			ix->mall = 0;
		else
			ix->mtier = 0;
		ix->mbusy = 1;
		pthread_mutex_unlock(&ix->mu);
		rc = lb_store_merge_day(ix->st, day, all);
		if (rc == ENOENT || rc == LB_ENOTFOUND)
			rc = 0;		/* the day's segments went meanwhile (retention) */
		pthread_mutex_lock(&ix->mu);
		ix->mbusy = 0;
		if (rc != 0)
			ix->merr = rc;
		pthread_cond_broadcast(&ix->cv_done);
	}
	pthread_mutex_unlock(&ix->mu);
	return (NULL);
}

/*
 * Asks for the merges of day (tiered, or with all the whole day in one segment); merges at
 * once without the thread. Returns a failure of an earlier merge, once.
 */
static int
merge_ask(struct lb_store *st, uint32_t day, int all)
{
	struct ixq	*ix = st->ix;
	int		 rc;

	if (ix == NULL || !ix->mthr_on)
		return (lb_store_merge_day(st, day, all));
	pthread_mutex_lock(&ix->mu);
	if (all) {
		while (ix->mall != 0 && ix->mall != day)
			pthread_cond_wait(&ix->cv_done, &ix->mu);
		ix->mall = day;
	} else
		ix->mtier = day;
	rc = ix->merr;
	ix->merr = 0;
	pthread_cond_signal(&ix->cv_mjob);
	pthread_mutex_unlock(&ix->mu);
	return (rc);
}

int
lb_store_merge_wait(struct lb_store *st)
{
	struct ixq	*ix = st->ix;
	int		 rc;

	if (ix == NULL || !ix->mthr_on)
		return (0);
	pthread_mutex_lock(&ix->mu);
	while (ix->mtier != 0 || ix->mall != 0 || ix->mbusy)
		pthread_cond_wait(&ix->cv_done, &ix->mu);
	rc = ix->merr;
	ix->merr = 0;
	pthread_mutex_unlock(&ix->mu);
	return (rc);
}

void
lb_store_ix_free(struct ixq *ix)
{
	if (ix == NULL)
		return;
	if (ix->thr_on) {
		pthread_mutex_lock(&ix->mu);
		ix->stop = 1;
		pthread_cond_signal(&ix->cv_work);
		pthread_cond_signal(&ix->cv_wjob);
		pthread_cond_signal(&ix->cv_mjob);
		pthread_mutex_unlock(&ix->mu);
		pthread_join(ix->thr, NULL);
		if (ix->wthr_on)
			pthread_join(ix->wthr, NULL);
		if (ix->mthr_on)	/* (it does what was asked first) */
			pthread_join(ix->mthr, NULL);
		pthread_cond_destroy(&ix->cv_mjob);
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
	if ((rc = pthread_cond_init(&ix->cv_mjob, NULL)) != 0) {
		pthread_cond_destroy(&ix->cv_wjob);
		pthread_cond_destroy(&ix->cv_done);
		pthread_cond_destroy(&ix->cv_work);
		pthread_mutex_destroy(&ix->mu);
		goto fail;
	}
	if ((rc = pthread_create(&ix->thr, NULL, ix_main, ix)) != 0) {
		pthread_cond_destroy(&ix->cv_mjob);
		pthread_cond_destroy(&ix->cv_wjob);
		pthread_cond_destroy(&ix->cv_done);
		pthread_cond_destroy(&ix->cv_work);
		pthread_mutex_destroy(&ix->mu);
		goto fail;
	}
	ix->thr_on = 1;
	if (pthread_create(&ix->wthr, NULL, ix_writer, ix) == 0)
		ix->wthr_on = 1;	/* (without it, every flush writes in the caller) */
	if (pthread_create(&ix->mthr, NULL, ix_merger, ix) == 0)
		ix->mthr_on = 1;	/* (without it, the caller merges) */
	ix->awidle = 1;
	*out = ix;
	return (0);
 fail:
	lb_store_ix_free(ix);
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

/* ---------------------------------------------------------------- flush */

int
lb_store_state_save(struct lb_store *st)
{
	struct lb_lsstate ls;

	ls.next_id = st->next_id;
	ls.indexed_id = st->indexed_id;
	ls.last_received = st->last_received;
	return (lb_catalog_state_put(st->cat, st->ls, &ls));
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
	if ((rc = lb_store_seg_name(ref->file, sizeof(ref->file), first, last)) != 0)
		return (rc);
	return (lb_store_seg_path(st, day, ref->file, path, plen));
}

/* Writes the open interval as a durable segment file of day; empties the builder. */
int
lb_store_write_segw(struct lb_store *st, uint32_t day, struct lb_segref *ref)
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

	if ((rc = lb_store_write_segw(st, day, ref)) != 0)
		return (rc);
	if ((rc = lb_store_publish(st, day, NULL, 0, ref, 1)) != 0 &&
	    lb_store_seg_path(st, day, ref->file, path, sizeof(path)) == 0)
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
	if ((rc = lb_store_publish(st, st->pend_ref.day, NULL, 0, &st->pend_ref, 1)) != 0)
		return (rc);
	st->pending = 0;
	st->indexed_id = st->pend_ref.last_id + 1;
	if ((rc = lb_store_state_save(st)) != 0)
		return (rc);
	return (merge_ask(st, st->pend_ref.day, 0));
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
	if ((rc = lb_msgfile_commit(st->mf, 1)) != 0)
		return (rc);
	/* Ingest goes on when the chain cannot: lb_store_flush retries and says so. */
	if ((rc = lb_store_chain_blocks(st)) != 0)
		atomic_store(&st->ch_err, rc);
	if ((rc = lb_store_tm_write(st)) != 0)
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

/* lb_store_flush without waiting for the merges it asks for. */
static int
flush_now(struct lb_store *st)
{
	struct lb_segref	 ref;
	uint64_t		 count, last;
	int			 rc;

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
	if ((rc = lb_store_state_save(st)) != 0)
		return (rc);
	return (merge_ask(st, st->day.day, 0));
}

int
lb_store_flush(struct lb_store *st)
{
	int	rc, mrc;

	if (st->mode != LB_RDWR)
		return (EBADF);
	rc = flush_now(st);
	mrc = lb_store_merge_wait(st);
	if (rc == 0)
		rc = mrc;
	/* Blocks a failed chain append left, and what failed where the caller went on. */
	if ((mrc = lb_store_chain_err(st)) != 0 && rc == 0 &&
	    (rc = lb_store_chain_blocks(st)) == 0)
		rc = mrc;
	return (rc);
}

/* Ends the current day: seal, flush, close its file; the day is merged into one segment. */
static int
end_day(struct lb_store *st)
{
	uint32_t	day = st->day.day;
	int		rc;

	if ((rc = lb_msgfile_seal(st->mf)) != 0 || (rc = lb_store_chain_blocks(st)) != 0)
		return (rc);
	if ((rc = flush_now(st)) != 0)
		return (rc);
	lb_msgfile_close(st->mf);
	st->mf = NULL;
	return (merge_ask(st, day, 1));
}

/* ---------------------------------------------------------------- append and commit */

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
		if ((rc = lb_store_tm_add(st, m->received, m->id)) != 0)
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

int
lb_store_flush_due(struct lb_store *st)
{
	int	idle, rc;

	if (st == NULL || st->mode != LB_RDWR || st->ix == NULL)
		return (0);
	if (st->pending) {
		pthread_mutex_lock(&st->ix->mu);
		idle = st->ix->wseg == NULL;
		pthread_mutex_unlock(&st->ix->mu);
		if (!idle)
			return (0);	/* the thread still writes it: the next call */
		if ((rc = seg_finish(st)) != 0)
			return (rc);
	}
	if (st->interval_start != 0 &&
	    mono_ms() - st->interval_start >= (int64_t)st->conf.flush_ms)
		return (flush_async(st));
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
		return (lb_store_tm_write(st));
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
		return (lb_store_tm_write(st));
	return (0);
}
