/*
 * lb_store.c — one logspace's store: the day's message file, the interval's in-memory index,
 * the published segments and the catalog, tied together. This file owns the store's life
 * (open, close, the delimiters), the list of days and the names of its files; the rest is one
 * file per concept, sharing struct lb_store through lb_store_priv.h:
 *   lb_store_write.c    appending, the indexer and segment threads, flushing, commits, and
 *                       the write path's ordering (messages durable → segment durable →
 *                       catalog points at it → inputs of a merge deleted)
 *   lb_store_recover.c  recovery after a crash, when a writer opens
 *   lb_store_merge.c    tiered merging of a day's segments
 *   lb_store_read.c     get by id, the id range, term lookup including the not-yet-indexed tail
 *   lb_store_search.c   what lb_eval.c needs through lb_store_int.h: the segment list, the time
 *                       map and a cache of open segment files
 *   lb_store_reindex.c  rebuilding the segments from the message files
 *   lb_store_verify.c   verify and stats
 * Readers may share one catalog handle (lb_store_open_reader). None of them knows file layouts:
 * lb_msgfile.c, lb_segment.c and lb_catalog.c do.
 *
 * The one idea: the message files are the truth. Everything in segments and the catalog can be
 * rebuilt from them, so recovery only has to find where indexing stopped (the last published
 * segment) and index the rest again.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_store_priv.h"
#include "lb_archive.h"

#define STORE_CACHE_DAYS	16	/* message files a reader keeps open */

int
lb_store_day_dir(const struct lb_store *st, uint32_t day, char *buf, size_t len)
{
	return (lb_day_dir(buf, len, st->data, st->ls, day));
}

int
lb_day_dir(char *buf, size_t len, const char *data, const char *ls, uint32_t day)
{
	return (lb_path(buf, len, "%s/%s/%04u/%02u-%02u", data, ls, day / 10000,
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

static int
cmp_day(const void *a, const void *b)
{
	const struct store_day *x = a, *y = b;

	return (x->ref.first_id < y->ref.first_id ? -1 : x->ref.first_id > y->ref.first_id);
}

/*
 * Reloads the day list from the catalog (and the archive's days not on local disk), keeping
 * open files of days that are still there.
 */
int
lb_store_days_load(struct lb_store *st)
{
	struct lb_dayref	*refs = NULL;
	struct store_day	*nd;
	size_t			 n = 0;
	int			 rc;

	size_t			 na = st->ar != NULL ? lb_archive_ndays(st->ar, NULL) : 0, nl;

	if ((rc = lb_catalog_days(st->cat, st->ls, &refs, &n)) != 0)
		return (rc);
	if ((nd = calloc(n + na > 0 ? n + na : 1, sizeof(*nd))) == NULL) {
		free(refs);
		return (errno);
	}
	/* Archived days not on local disk (a day on both is read locally). */
	nl = n;
	for (size_t i = 0; i < na; i++) {
		const struct lb_dayref	*d = lb_archive_day(st->ar, i);
		int			 here = 0;

		for (size_t k = 0; k < nl && !here; k++)
			here = refs[k].day == d->day;
		if (!here) {
			nd[n].remote = 1;
			nd[n++].ref = *d;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (i < nl)
			nd[i].ref = refs[i];
		for (size_t k = 0; k < st->ndays; k++) {
			if (st->days[k].ref.day == nd[i].ref.day && st->days[k].mf != NULL &&
			    st->days[k].remote == nd[i].remote) {
				nd[i].mf = st->days[k].mf;
				nd[i].used = st->days[k].used;
				st->days[k].mf = NULL;
			}
		}
	}
	free(refs);
	days_free(st);
	if (n > nl)
		qsort(nd, n, sizeof(*nd), cmp_day);
	st->days = nd;
	st->ndays = n;
	return (0);
}

int
lb_store_day_remote(const struct lb_store *st, uint32_t day)
{
	for (size_t i = st->ndays; i > 0; i--)
		if (st->days[i - 1].ref.day == day)
			return (st->days[i - 1].remote);
	return (0);
}

int
lb_store_set_archive(struct lb_store *st, struct lb_archive *a)
{
	if (st->mode != LB_RDONLY)
		return (EINVAL);
	/* What was read through the one before goes. */
	for (size_t i = 0; i < st->ndays; i++)
		if (st->days[i].remote)
			lb_store_days_forget(st, i);
	for (size_t i = 0; i < STORE_CACHE_SEGS; i++) {
		if (st->segs[i].sg != NULL && lb_store_day_remote(st, st->segs[i].day)) {
			lb_segment_close(st->segs[i].sg);
			memset(&st->segs[i], 0, sizeof(st->segs[i]));
		}
	}
	lb_archive_unref(st->ar);
	st->ar = lb_archive_ref(a);
	if (st->helper != NULL)
		(void)lb_store_set_archive(st->helper, a);
	return (lb_store_days_load(st));
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x < y ? -1 : x > y);
}

static void
astat_add(struct lb_astat *to, struct lb_astat *from)
{
	for (size_t i = 0; i < from->ndays; i++)
		(void)lb_astat_day(to, from->days[i]);
	to->us += from->us;
	to->fetched += from->fetched;
	to->cached += from->cached;
	to->gets += from->gets;
	if (to->why[0] == '\0')
		memcpy(to->why, from->why, sizeof(to->why));
	from->ndays = 0;
	from->us = from->fetched = from->cached = from->gets = 0;
	from->why[0] = '\0';
}

void
lb_store_archive_take(struct lb_store *st, struct lb_astat *out)
{
	if (st->helper != NULL)
		astat_add(out, &st->helper->astat);
	astat_add(out, &st->astat);
	if (out->ndays > 1)
		qsort(out->days, out->ndays, sizeof(*out->days), cmp_u32);
}

/* The message file of day index i, opened read-only on first use (LRU of a few). */
int
lb_store_days_file(struct lb_store *st, size_t i, struct lb_msgfile **out)
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
		if (st->days[i].remote) {
			if ((rc = lb_archive_msgfile(st->ar, st->days[i].ref.day, &st->astat,
			    &st->days[i].mf)) != 0)
				return (rc);
		} else if ((rc = lb_store_day_dir(st, st->days[i].ref.day, dir,
		    sizeof(dir))) != 0)
			return (rc);
		else if ((rc = lb_msgfile_open(dir, LB_RDONLY, st->days[i].ref.first_id,
		    &st->days[i].mf)) != 0)
			return (rc);
	}
	if (st->days[i].remote)
		(void)lb_astat_day(&st->astat, st->days[i].ref.day);
	st->days[i].used = ++st->clock;
	*out = st->days[i].mf;
	return (0);
}

void
lb_store_days_forget(struct lb_store *st, size_t i)
{
	lb_msgfile_close(st->days[i].mf);
	st->days[i].mf = NULL;
}

/* ---------------------------------------------------------------- open and close */

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
		if ((rc = lb_store_recover(st)) != 0)
			goto fail;
	} else if ((rc = lb_store_days_load(st)) != 0)
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

int
lb_store_close(struct lb_store *st)
{
	int rc = 0;

	if (st == NULL)
		return (0);
	if (st->mode == LB_RDWR && st->mf != NULL && st->segw != NULL) {
		/*
		 * Not a commit alone: it would leave the records of blocks still queued in the WAL,
		 * where they would hide a messages file cut short from verify.
		 */
		rc = lb_msgfile_settle(st->mf);
		if (rc == 0)
			rc = lb_store_chain_blocks(st);
		if (rc == 0)
			rc = lb_store_tm_write(st);
		if (rc == 0)
			rc = lb_store_flush(st);
		if (rc == 0)
			rc = lb_store_state_save(st);
	}
	lb_store_ix_free(st->ix);	/* (after the flush above: the thread is idle) */
	lb_msgfile_close(st->mf);
	days_free(st);
	lb_segw_free(st->segw);
	lb_segw_free(st->spare);
	free(st->tm_t);
	free(st->tm_id);
	lb_store_close(st->helper);
	lb_archive_unref(st->ar);
	free(st->astat.days);
	free(st->vdays);
	for (size_t i = 0; i < STORE_CACHE_SEGS; i++)
		lb_segment_close(st->segs[i].sg);
	if (!st->borrowed)
		lb_catalog_close(st->cat);
	if (st->lockfd != -1)
		close(st->lockfd);
	free(st);
	return (rc);
}

/* ---------------------------------------------------------------- file names */

int
lb_store_seg_name(char *buf, size_t len, uint64_t first, uint64_t last)
{
	return (lb_path(buf, len, "%016llx-%016llx%s", (unsigned long long)first,
	    (unsigned long long)last, LB_SEG_SUFFIX));
}

int
lb_store_seg_path(struct lb_store *st, uint32_t day, const char *file, char *buf, size_t len)
{
	char	dir[PATH_MAX];
	int	rc;

	if ((rc = lb_store_day_dir(st, day, dir, sizeof(dir))) != 0)
		return (rc);
	return (lb_path(buf, len, "%s/%s/%s", dir, LB_DIR_INDEX, file));
}

/* ---------------------------------------------------------------- settings */

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
