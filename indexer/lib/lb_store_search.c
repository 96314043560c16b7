/*
 * lb_store_search.c — what a search (lb_eval.c) needs from a store beyond the public API,
 * declared in lb_store_int.h: a refreshed view of the catalog, the time map, the segment list,
 * a second reader for parallel reads, and the cache of open segment files with the budget of
 * their term blobs. The one idea: a search holds no lock; it lists the segments once and opens
 * each from the cache, and a segment a merge removed in between is listed again (ENOENT).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_store_priv.h"
#include "lb_store_int.h"
#include "lb_archive.h"

static void	remote_trim(struct lb_store *st);

int
lb_store_refresh(struct lb_store *st)
{
	int	rc, known;

	if (st->mode == LB_RDWR)
		return (0);
	if ((rc = lb_store_days_load(st)) != 0)
		return (rc);
	/*
	 * A removed day's segments: their files are gone, let their space go too. So too a day
	 * now read from the archive: its local files were deleted to free their space.
	 */
	for (size_t i = 0; i < STORE_CACHE_SEGS; i++) {
		if (st->segs[i].sg == NULL)
			continue;
		known = 0;
		for (size_t k = 0; k < st->ndays && !known; k++)
			known = st->days[k].ref.day == st->segs[i].day &&
			    st->days[k].remote == st->segs[i].remote;
		if (!known) {
			lb_segment_close(st->segs[i].sg);
			memset(&st->segs[i], 0, sizeof(st->segs[i]));
		}
	}
	remote_trim(st);
	/* (the second reader's days too: it reads the same days' messages) */
	if (st->helper != NULL && (rc = lb_store_refresh(st->helper)) != 0)
		return (rc);
	return (0);
}

/*
 * Archived segments keep what they read in memory (lb_segment_open_src), which the kernel
 * cannot take back as it takes a mapped file's pages: past STORE_REMOTE_BYTES, the least
 * recently used go. Only between searches (lb_store_refresh), when none is in use.
 */
static void
remote_trim(struct lb_store *st)
{
	struct store_seg	*lru;
	uint64_t		 held;

	for (;;) {
		held = 0;
		lru = NULL;
		for (size_t i = 0; i < STORE_CACHE_SEGS; i++) {
			struct store_seg *c = &st->segs[i];

			if (c->sg == NULL || !c->remote)
				continue;
			held += lb_segment_resident(c->sg);
			if (lru == NULL || c->used < lru->used)
				lru = c;
		}
		if (held <= STORE_REMOTE_BYTES || lru == NULL)
			return;
		lb_segment_close(lru->sg);
		memset(lru, 0, sizeof(*lru));
	}
}

int
lb_store_helper(struct lb_store *st, struct lb_store **out)
{
	int rc;

	if (st->helper == NULL) {
		if ((rc = lb_store_open_reader(st->cat, st->data, st->ls, &st->helper)) != 0)
			return (rc);
		if (st->ar != NULL && (rc = lb_store_set_archive(st->helper, st->ar)) != 0)
			return (rc);
	}
	*out = st->helper;
	return (0);
}

int
lb_store_time_to_id(struct lb_store *st, int64_t t, uint64_t *id)
{
	struct lb_msg	 m;
	uint64_t	 lo, hi, first, mid;
	int		 rc;

	/* An archived day's entry comes first: those days are older than the local ones. */
	for (size_t i = 0; i < st->ndays && st->ar != NULL; i++) {
		if (!st->days[i].remote || (st->days[i].ref.tmax != INT64_MIN &&
		    st->days[i].ref.tmax < t - LB_TIMEMAP_STEP))
			continue;
		rc = lb_archive_day_time_to_id(st->ar, st->days[i].ref.day, t, &lo, &st->astat);
		if (rc == 0) {
			uint64_t l;

			if ((rc = lb_catalog_time_to_id(st->cat, st->ls, t, &l)) == 0 && l < lo)
				lo = l;
			else if (rc != 0 && rc != LB_ENOTFOUND)
				return (rc);
			*id = lo;
			return (0);
		}
		if (rc != LB_ENOTFOUND)
			return (rc);
	}
	if ((rc = lb_catalog_time_to_id(st->cat, st->ls, t, id)) != LB_ENOTFOUND)
		return (rc);
	/*
	 * t is past every entry in the catalog. Entries reach it a little after their messages
	 * (lb_store_tm_write), but always before the segment that indexes them: every message
	 * below the indexed end was received before t. Find the first one at or after t among
	 * the newer ones by their receive times, which never go backwards.
	 */
	if (st->mode == LB_RDWR)
		lo = st->indexed_id;
	else if ((rc = lb_store_indexed_end(st, &lo)) != 0)
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

static int
cmp_segref(const void *a, const void *b)
{
	const struct lb_segref *x = a, *y = b;

	return (x->first_id < y->first_id ? -1 : x->first_id > y->first_id);
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
	if (st->ar != NULL) {
		size_t local = nr;

		for (size_t i = 0; i < st->ndays; i++) {
			const struct lb_dayref *d = &st->days[i].ref;

			if (!st->days[i].remote || d->next_id <= lo || d->first_id > hi)
				continue;
			if ((rc = lb_archive_day_segments(st->ar, d->day, lo, hi, &refs, &nr,
			    &st->astat)) != 0) {
				free(refs);
				return (rc);
			}
		}
		if (nr > local)
			qsort(refs, nr, sizeof(*refs), cmp_segref);
	}
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

	int			 remote = st->ar != NULL && lb_store_day_remote(st, ref->day);

	if (remote) {
		(void)lb_astat_day(&st->astat, ref->day);
		snprintf(path, plen, "archive:%s/%u/%s", st->ls, ref->day, ref->file);
	} else if ((rc = lb_store_seg_path(st, ref->day, ref->file, path, plen)) != 0)
		return (rc);
	for (size_t i = 0; i < STORE_CACHE_SEGS; i++) {
		c = &st->segs[i];
		if (c->sg == NULL) {
			if (slot == NULL || slot->sg != NULL)
				slot = c;
			continue;
		}
		if (c->day == ref->day && c->remote == remote && strcmp(c->file, ref->file) == 0) {
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
	if ((rc = remote ? lb_archive_segment(st->ar, ref, &st->astat, &sg) :
	    lb_segment_open(path, &sg)) != 0)
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
	slot->remote = remote;
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
