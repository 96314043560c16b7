/*
 * lb_store_read.c — reading a store by id and by term for the CLI and tools: the id range,
 * lb_store_get through the day list's message files, and lb_store_lookup, which answers from
 * the published segments and, for the not-yet-indexed tail, by matching the messages
 * themselves. Searches go through lb_eval.c and lb_store_search.c instead.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_store_priv.h"

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
		} else if (lb_store_days_file(st, st->ndays - 1,
		    &st->days[st->ndays - 1].mf) == 0) {
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

int
lb_store_get(struct lb_store *st, uint64_t id, struct lb_msg *m)
{
	struct lb_msgfile	*mf;
	ssize_t			 i;
	int			 rc;

	if ((i = days_find(st, id)) < 0) {
		if ((rc = lb_store_days_load(st)) != 0)
			return (rc);
		if ((i = days_find(st, id)) < 0)
			return (LB_ENOTFOUND);
	}
	if ((rc = lb_store_days_file(st, (size_t)i, &mf)) != 0)
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
		if ((rc = lb_store_seg_path(st, refs[i].day, refs[i].file, path,
		    sizeof(path))) != 0)
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
	if (st->mode != LB_RDWR && (rc = lb_store_days_load(st)) != 0)
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
