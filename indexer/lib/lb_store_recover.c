/*
 * lb_store_recover.c — recovery after a crash, run when a writer opens its logspace: it finds
 * where indexing stopped (the end of the last published segment), removes segment files the
 * catalog does not name, and indexes the messages of the last day past that point again into
 * the open interval. It does not write segments itself; the next flush does.
 *
 * The one idea: the message files are the truth. Everything in segments and the catalog can be
 * rebuilt from them, so recovery only has to find where indexing stopped (the last published
 * segment) and index the rest again.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_store_priv.h"

/* The last published segment's end (one past its last id), or 1 when there is none. */
int
lb_store_indexed_end(struct lb_store *st, uint64_t *end)
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

	if ((rc = lb_store_day_dir(st, day, dir, sizeof(dir))) != 0)
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
		    (rc = lb_store_tm_add(st, m.received, id)) != 0)
			return (rc);
		step = m.received / LB_TIMEMAP_STEP;
		if (m.received > st->last_received)
			st->last_received = m.received;
	}
	if (next > from)
		st->interval_start = mono_ms();
	return (0);
}

int
lb_store_recover(struct lb_store *st)
{
	struct lb_lsstate	 ls;
	uint64_t		 first, next;
	int			 rc;

	if ((rc = lb_catalog_state_get(st->cat, st->ls, &ls)) != 0 && rc != LB_ENOTFOUND)
		return (rc);
	if (rc == LB_ENOTFOUND)
		memset(&ls, 0, sizeof(ls));
	if ((rc = lb_store_indexed_end(st, &st->indexed_id)) != 0)
		return (rc);
	st->next_id = ls.next_id > st->indexed_id ? ls.next_id : st->indexed_id;
	st->last_received = ls.last_received;
	if ((rc = lb_store_days_load(st)) != 0)
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

		if ((rc = lb_store_day_dir(st, st->day.day, dir, sizeof(dir))) != 0)
			return (rc);
		if ((rc = lb_mkdirs(dir)) != 0)
			return (rc);
		if ((rc = lb_msgfile_open(dir, LB_RDWR, st->day.first_id, &st->mf)) != 0)
			return (rc);
	}
	if ((rc = lb_store_chain_recover(st)) != 0)
		return (rc);
	lb_msgfile_range(st->mf, &first, &next);
	if (next > st->next_id)
		st->next_id = next;
	if (st->day.tmax > st->last_received)
		st->last_received = st->day.tmax;
	if (st->indexed_id < next)
		if ((rc = index_tail(st, st->indexed_id)) != 0)
			return (rc);
	st->last_step = st->last_received / LB_TIMEMAP_STEP;
	return (lb_store_tm_write(st));
}
