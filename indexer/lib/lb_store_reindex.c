/*
 * lb_store_reindex.c — rebuilding a store's segments from its message files (`logbox
 * reindex`): day by day, one new set of segments replaces the old in one catalog transaction.
 * The message files are the truth, so this loses nothing.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_store_priv.h"

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

	if ((rc = lb_store_days_file(st, i, &mf)) != 0)
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
			if ((rc = lb_store_write_segw(st, day, &ref)) != 0)
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
	if (nmade > 0 || ndel > 0) {
		struct lb_segref *old = refs;	/* the day's: contiguous in id order */

		while (old < refs + n && old->day != day)
			old++;
		if ((rc = lb_store_publish(st, day, old, ndel, made, nmade)) != 0)
			goto done;
	}
	/* Delete the old files whose names the new set did not reuse. */
	for (size_t k = 0; k < n; k++) {
		int kept = 0;

		if (refs[k].day != day)
			continue;
		for (size_t j = 0; j < nmade && !kept; j++)
			kept = strcmp(made[j].file, refs[k].file) == 0;
		if (!kept && lb_store_seg_path(st, day, refs[k].file, path, sizeof(path)) == 0)
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
	} else if ((rc = lb_store_merge_wait(st)) != 0)
		return (rc);
	if ((rc = lb_store_days_load(st)) != 0)
		return (rc);
	lb_store_range(st, &first, &next);
	for (size_t i = 0; i < st->ndays; i++)
		if ((rc = reindex_day(st, i, &done, next - first, progress, arg)) != 0)
			return (rc);
	if (progress != NULL)
		progress(arg, done, next - first);
	if ((rc = lb_store_indexed_end(st, &st->indexed_id)) != 0)
		return (rc);
	return (lb_store_state_save(st));
}
