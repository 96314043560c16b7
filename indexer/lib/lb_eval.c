/*
 * lb_eval.c — the search evaluator: a query tree (lb_query.c) over one logspace's store between
 * two receive times gives hits in order with a cursor, an exact total, a histogram and the top
 * values of a field (QUERY.md §2, §3). It owns the id-list algebra (unions, galloping
 * intersections, differences), wildcard expansion in a segment's dictionary and the brute
 * force over messages not yet indexed. It does not parse queries, decode files or read the
 * catalog itself: lb_query.c, lb_segment.c and the store (lb_store_int.h) do.
 *
 * The one idea: ids follow receive time, so the time range is an id range, and that range is
 * cut into chunks that each hold every id of their own sub-range: a published segment (every
 * id in its [first_id, last_id] is indexed there) or the tail that is not indexed yet. A chunk
 * evaluates the whole tree to one sorted id list, so NOT is a difference against the chunk's
 * window, and chunks are visited in the order hits are wanted in, which lets a search for the
 * newest few stop early. A phrase is only known to the index as the AND of its words: such a
 * list is marked inexact (a superset) and its ids are checked with lb_query_match() on the
 * message, as lazily as the request allows.
 *
 * By event time (LB_TIME_EVENT) the range is no id range: a device's clock can say anything.
 * Every chunk is visited, and a segment's matches are ANDed with the union of its event-time
 * terms (LB_NS_EVTIME) of the range, one dictionary range scan; the tail reads each message's
 * time stamp. The histogram then counts each event second's term against the matches.
 */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_postings.h"
#include "lb_store_int.h"

#define EV_TICK		4096	/* ids or terms between two looks at the clock */
#define EV_WARN_MAX	100	/* warnings kept per search */
#define EV_RETRIES	5	/* listings again when a merge removed a listed segment */
#define EV_KEY_MAX	(LB_SEG_TERM_MAX + 1)

#define US		1000000LL

/* Values of the top field and their counts, by hash (open addressing). */
struct topent {
	uint8_t		*v;		/* NULL: an empty slot */
	size_t		 len;
	uint64_t	 count;
	uint64_t	 last;		/* the last tail message counted (once per message) */
	uint64_t	 h;
};

struct toph {
	struct topent	*t;
	size_t		 cap, n;
};

/* One search. */
struct ev {
	struct lb_store			*st;
	const struct lb_searchreq	*rq;
	const struct lb_tokconf		*tc;
	struct lb_searchres		*res;
	int				 full;		/* every match is needed, not only hits */
	int64_t				 deadline;	/* CLOCK_MONOTONIC ns; 0: none */
	uint64_t			 work;		/* ticks since the last look at the clock */
	uint64_t			 max_terms;
	uint64_t			 stamp;		/* the store's clock when the search began */

	/* The chunk being evaluated. */
	struct lb_segment		*sg;		/* NULL for the tail */
	uint32_t			 sgversion;	/* its format version */
	uint64_t			 sgcount;	/* its messages */
	uint64_t			 sgfirst, sglast;	/* its ids */
	uint64_t			 wlo, whi;	/* its window [wlo, whi) */
	uint64_t			 nterms;	/* terms wildcards expanded to in it */

	uint64_t			*bm;		/* a bitmap over the window, all zero */
	size_t				 bmcap;		/* (words) */
	int				 bmbusy;
	struct lb_postings		 tmp;		/* a decoded list */

	/* Results being built. */
	uint64_t			*hits;		/* up to limit + 1 */
	size_t				 nhits;
	uint64_t			*bounds;	/* histogram: nhist + 1 ids */
	struct toph			 top;
	uint8_t				 topkey[EV_KEY_MAX];	/* namespace (and sd name) prefix */
	size_t				 topkeylen;
	const struct lb_qpat		*pin;		/* top: every match's value (pin_of) */

	/* By event time (LB_TIME_EVENT). */
	int				 evt;
	int64_t				 evlo, evhi;	/* the seconds [evlo, evhi) */
	uint64_t			 noevt;		/* segments without event-time terms */
};

static int	ev_node(struct ev *, const struct lb_qnode *, struct lb_postings *, int *);
static int	holds(const uint8_t *, size_t, const uint8_t *, size_t);

/* ---------------------------------------------------------------- small things */

static int64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

/* Counts n units of work; LB_EDEADLINE past the deadline, ECANCELED once cancelled. */
static inline int
ev_tick(struct ev *e, uint64_t n)
{
	e->work += n;
	if (e->work < EV_TICK)
		return (0);
	e->work = 0;
	if (e->deadline != 0 && mono_ns() > e->deadline)
		return (LB_EDEADLINE);
	if (e->rq->cancel != NULL && atomic_load_explicit(e->rq->cancel, memory_order_relaxed))
		return (ECANCELED);
	return (0);
}

static void
ev_warn(struct ev *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Adds a warning to the result (quietly drops it past EV_WARN_MAX or without memory). */
static void
ev_warn(struct ev *e, const char *fmt, ...)
{
	struct lb_searchres	*r = e->res;
	char			**w, *s;
	va_list			 ap;

	if (r->nwarnings >= EV_WARN_MAX)
		return;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) == -1)
		s = NULL;
	va_end(ap);
	if (s == NULL)
		return;
	if ((w = realloc(r->warnings, (r->nwarnings + 1) * sizeof(*w))) == NULL) {
		free(s);
		return;
	}
	w[r->nwarnings++] = s;
	r->warnings = w;
}

/* The first index i with a[i] >= v. */
static size_t
lower(const uint64_t *a, size_t n, uint64_t v)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo);
}

/* From a[i] on, the first index with a[.] >= v, by galloping. */
static size_t
gallop(const uint64_t *a, size_t n, size_t i, uint64_t v)
{
	size_t step = 1, lo = i, hi;

	if (i >= n || a[i] >= v)
		return (i);
	while (lo + step < n && a[lo + step] < v) {
		lo += step;
		step *= 2;
	}
	hi = lo + step < n ? lo + step + 1 : n;
	return (lo + 1 + lower(a + lo + 1, hi - lo - 1, v));
}

/* Keeps the ids of p inside the window. */
static void
clip(const struct ev *e, struct lb_postings *p)
{
	size_t a = lower(p->ids, p->n, e->wlo), b = lower(p->ids, p->n, e->whi);

	if (a > 0 && b > a)
		memmove(p->ids, p->ids + a, (b - a) * sizeof(*p->ids));
	p->n = b > a ? b - a : 0;
}

/* Every id of the window. */
static int
all_ids(struct ev *e, struct lb_postings *out)
{
	size_t	n = (size_t)(e->whi - e->wlo);
	int	rc;

	out->n = 0;
	if ((rc = lb_postings_reserve(out, n)) != 0)
		return (rc);
	for (size_t i = 0; i < n; i++)
		out->ids[i] = e->wlo + i;
	out->n = n;
	return (ev_tick(e, n));
}

/* a := a ∩ b (galloping from the shorter side's elements). */
static void
isect(struct lb_postings *a, const struct lb_postings *b)
{
	size_t k = 0, j = 0;

	for (size_t i = 0; i < a->n && j < b->n; i++) {
		j = gallop(b->ids, b->n, j, a->ids[i]);
		if (j < b->n && b->ids[j] == a->ids[i])
			a->ids[k++] = a->ids[i];
	}
	a->n = k;
}

/* a := a \ b. */
static void
minus(struct lb_postings *a, const struct lb_postings *b)
{
	size_t k = 0, j = 0;

	for (size_t i = 0; i < a->n; i++) {
		j = gallop(b->ids, b->n, j, a->ids[i]);
		if (j >= b->n || b->ids[j] != a->ids[i])
			a->ids[k++] = a->ids[i];
	}
	a->n = k;
}

/* out := window \ p. */
static int
complement(struct ev *e, const struct lb_postings *p, struct lb_postings *out)
{
	size_t	j = 0, n = (size_t)(e->whi - e->wlo);
	int	rc;

	out->n = 0;
	if ((rc = lb_postings_reserve(out, n - (p->n < n ? p->n : n))) != 0)
		return (rc);
	for (uint64_t id = e->wlo; id < e->whi; id++) {
		if (j < p->n && p->ids[j] == id) {
			j++;
			continue;
		}
		out->ids[out->n++] = id;
	}
	return (ev_tick(e, n));
}

/* ---------------------------------------------------------------- unions */

/*
 * A union of sorted lists clipped to the window: the first list is kept as it is; from the
 * second on, every list sets bits in a bitmap over the window, read back at the end.
 */
struct uni {
	struct lb_postings	*out;
	uint64_t		*bm;
	size_t			 nw;
	int			 nlists;
	int			 own;		/* bm is not e->bm */
};

static void
uni_begin(struct ev *e, struct uni *u, struct lb_postings *out)
{
	(void)e;
	memset(u, 0, sizeof(*u));
	u->out = out;
	out->n = 0;
}

static void
bm_set(struct ev *e, uint64_t *bm, const uint64_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t d = ids[i] - e->wlo;

		bm[d >> 6] |= 1ULL << (d & 63);
	}
}

/* Adds ids[0..n) (ascending; any ids outside the window are left out). */
static int
uni_add(struct ev *e, struct uni *u, const uint64_t *ids, size_t n)
{
	size_t	a = lower(ids, n, e->wlo), b = lower(ids, n, e->whi);
	int	rc;

	if ((rc = ev_tick(e, n)) != 0)
		return (rc);
	if (b <= a)
		return (0);
	if (u->nlists == 0) {
		u->out->n = 0;
		if ((rc = lb_postings_reserve(u->out, b - a)) != 0)
			return (rc);
		memcpy(u->out->ids, ids + a, (b - a) * sizeof(*ids));
		u->out->n = b - a;
		u->nlists = 1;
		return (0);
	}
	if (u->bm == NULL) {
		u->nw = (size_t)((e->whi - e->wlo + 63) / 64);
		if (!e->bmbusy) {
			if (e->bmcap < u->nw) {
				free(e->bm);
				e->bmcap = 0;
				if ((e->bm = calloc(u->nw, sizeof(*e->bm))) == NULL)
					return (errno);
				e->bmcap = u->nw;
			}
			u->bm = e->bm;
			e->bmbusy = 1;
		} else {
			if ((u->bm = calloc(u->nw, sizeof(*u->bm))) == NULL)
				return (errno);
			u->own = 1;
		}
		bm_set(e, u->bm, u->out->ids, u->out->n);
	}
	bm_set(e, u->bm, ids + a, b - a);
	u->nlists++;
	return (0);
}

/* Reads the bitmap back into out (and leaves it all zero). Also frees it on failure paths. */
static int
uni_end(struct ev *e, struct uni *u, int ok)
{
	size_t	cnt = 0;
	int	rc = 0;

	if (u->bm == NULL)
		return (0);
	if (ok) {
		for (size_t w = 0; w < u->nw; w++)
			cnt += (size_t)__builtin_popcountll(u->bm[w]);
		u->out->n = 0;
		if ((rc = lb_postings_reserve(u->out, cnt)) != 0)
			ok = 0;
	}
	for (size_t w = 0; w < u->nw; w++) {
		uint64_t x = u->bm[w];

		if (x == 0)
			continue;
		u->bm[w] = 0;
		while (ok && x != 0) {
			u->out->ids[u->out->n++] = e->wlo + w * 64 + (uint64_t)__builtin_ctzll(x);
			x &= x - 1;
		}
	}
	if (u->own)
		free(u->bm);
	else
		e->bmbusy = 0;
	u->bm = NULL;
	if (rc == 0)
		rc = ev_tick(e, u->nw);
	return (rc);
}

/* Ends a union after the adds returned rc; on any failure the output is empty. */
static int
uni_finish(struct ev *e, struct uni *u, int rc)
{
	int rc2 = uni_end(e, u, rc == 0);

	if (rc == 0)
		rc = rc2;
	if (rc != 0)
		u->out->n = 0;
	return (rc);
}

/* ---------------------------------------------------------------- terms */

/* The dictionary key of a pattern: namespace, sd name and 0x00 for LB_NS_SD, then bytes. */
static int
mkkey(uint8_t *key, size_t *klen, uint8_t ns, const char *sdname, const uint8_t *lit,
    size_t litlen)
{
	size_t n = 0, sl = 0;

	key[n++] = ns;
	if (ns == LB_NS_SD) {
		if (sdname == NULL)
			return (EINVAL);
		sl = strlen(sdname);
		if (sl > EV_KEY_MAX - 2)
			return (LB_ENOTFOUND);
		memcpy(key + n, sdname, sl);
		n += sl;
		key[n++] = 0x00;
	}
	if (litlen > EV_KEY_MAX - n)
		return (LB_ENOTFOUND);
	if (litlen > 0)
		memcpy(key + n, lit, litlen);
	*klen = n + litlen;
	return (0);
}

/* How a wildcard pattern is matched against each term of its range. */
#define GM_GLOB		0	/* lb_glob_match */
#define GM_SUFFIX	1	/* "*lit": the term ends with lit */
#define GM_INFIX	2	/* "*lit*": the term holds lit */
#define GM_SUFFIXQ	3	/* "*l?t": the term ends with lit, '?' any byte */

struct expand {
	struct ev		*e;
	const struct lb_qpat	*pat;
	size_t			 hlen;		/* bytes of namespace (and sd name) to skip */
	int			 gm;		/* GM_* */
	const uint8_t		*gl;		/* GM_SUFFIX, GM_INFIX: the literal */
	size_t			 gllen;
	int			 scanned;	/* lb_segment_scan matched the terms already */
	int			 forms;		/* a text term of a segment without forms */
	struct uni		 u;
};

/*
 * Leading wildcards scan a whole namespace: the two common shapes ("*lit" and "*lit*" with no
 * other wildcard or escape) skip the general matcher.
 */
static void
gm_setup(struct expand *x)
{
	const uint8_t	*g = x->pat->glob;
	size_t		 n = x->pat->globlen, i = 0, j, k;

	x->gm = GM_GLOB;
	while (i < n && g[i] == '*')
		i++;
	if (i == 0)
		return;
	for (j = i; j < n && g[j] != '*' && g[j] != '?' && g[j] != '\\'; j++)
		;
	for (k = j; k < n && g[k] == '*'; k++)
		;
	x->gl = g + i;
	x->gllen = j - i;
	if (j > i && k == n) {
		x->gm = j == n ? GM_SUFFIX : GM_INFIX;
		return;
	}
	/* "*l?t": a suffix of fixed length where '?' is any byte. */
	for (j = i; j < n && g[j] != '*' && g[j] != '\\'; j++)
		;
	if (j == n) {
		x->gm = GM_SUFFIXQ;
		x->gllen = n - i;
	}
}

static int
gm_match(const struct expand *x, const uint8_t *s, size_t len)
{
	switch (x->gm) {
	case GM_SUFFIXQ:
		if (len < x->gllen)
			return (0);
		s += len - x->gllen;
		for (size_t i = 0; i < x->gllen; i++)
			if (x->gl[i] != '?' && x->gl[i] != s[i])
				return (0);
		return (1);
	case GM_SUFFIX:
		return (len >= x->gllen && memcmp(s + len - x->gllen, x->gl, x->gllen) == 0);
	case GM_INFIX: {
		const uint8_t *p = s, *last = s + len - x->gllen;

		if (len < x->gllen)
			return (0);
		/* (Terms are short: memchr for the first byte beats memmem's setup.) */
		while (p <= last && (p = memchr(p, x->gl[0], (size_t)(last - p) + 1)) != NULL) {
			if (memcmp(p + 1, x->gl + 1, x->gllen - 1) == 0)
				return (1);
			p++;
		}
		return (0);
	}
	}
	return (lb_glob_match(x->pat->glob, x->pat->globlen, s, len));
}

static int
form_match(void *arg, const uint8_t *form, size_t len, size_t at, int flags)
{
	(void)at;
	(void)flags;
	return (lb_qpat_match(arg, form, len));
}

/*
 * In a segment without forms (version 2) a text pattern matches a token when it matches the
 * token or one of its forms (lb_token_forms), as the forms of a newer segment would.
 */
static int
forms_match(const struct lb_qpat *pat, const uint8_t *tok, size_t len)
{
	if (lb_qpat_match(pat, tok, len))
		return (1);
	return (lb_token_forms(tok, len, form_match, (void *)pat) == 1);
}

static int
expand_term(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct expand	*x = arg;
	struct ev	*e = x->e;
	int		 rc;

	(void)df;
	if ((rc = ev_tick(e, 1)) != 0)
		return (rc);
	if (x->forms) {
		if (len < x->hlen || !forms_match(x->pat, term + x->hlen, len - x->hlen))
			return (0);
	} else if (x->pat->kind == LB_QP_WILD && !x->scanned && (len < x->hlen ||
	    !gm_match(x, term + x->hlen, len - x->hlen)))
		return (0);
	if (++e->nterms > e->max_terms)
		return (LB_ETOOBROAD);
	e->tmp.n = 0;
	if ((rc = lb_segment_postings(e->sg, cookie, &e->tmp)) != 0)
		return (rc);
	return (uni_add(e, &x->u, e->tmp.ids, e->tmp.n));
}

/*
 * A text pattern over a segment written before forms were indexed (version 2): every text
 * term is a token, and a form of a token is some of its bytes, so the tokens that "*<glob>*"
 * matches are scanned (through the term blob when there is one, as for a leading wildcard)
 * and those of which the pattern matches the token or a form are taken. The list is exact:
 * the forms of a token depend on its bytes alone. `logbox reindex` writes current segments.
 */
static int
ev_pat_noforms(struct ev *e, const struct lb_qpat *pat, struct lb_postings *out)
{
	struct expand	 x;
	uint8_t		 key[1] = { LB_NS_TEXT };
	uint8_t		*glob;
	int		 rc;

	if ((glob = malloc(pat->globlen + 2)) == NULL)
		return (ENOMEM);
	glob[0] = '*';
	memcpy(glob + 1, pat->glob, pat->globlen);
	glob[pat->globlen + 1] = '*';
	memset(&x, 0, sizeof(x));
	x.e = e;
	x.pat = pat;
	x.hlen = 1;
	x.forms = 1;
	if ((rc = lb_store_segment_blob(e->st, e->sg, e->stamp)) != 0) {
		free(glob);
		return (rc);
	}
	uni_begin(e, &x.u, out);
	if (lb_segment_blob_size(e->sg, NULL) > 0)
		rc = lb_segment_scan(e->sg, key, 1, 1, glob, pat->globlen + 2, expand_term, &x);
	else
		rc = lb_segment_prefix(e->sg, key, 1, expand_term, &x);
	free(glob);
	return (uni_finish(e, &x.u, rc));
}

/* The ids of the messages of the segment holding a term that matches pat. */
static int
ev_pat(struct ev *e, uint8_t ns, const char *sdname, const struct lb_qpat *pat,
    struct lb_postings *out)
{
	struct expand	 x;
	uint8_t		 key[EV_KEY_MAX];
	size_t		 klen, hlen;
	int		 rc;

	out->n = 0;
	if (ns == LB_NS_TEXT && e->sgversion == LB_SEG_VERSION_NOFORMS)
		return (ev_pat_noforms(e, pat, out));
	if ((rc = mkkey(key, &hlen, ns, sdname, NULL, 0)) != 0 ||
	    (rc = mkkey(key, &klen, ns, sdname, pat->lit, pat->litlen)) != 0)
		return (rc == LB_ENOTFOUND ? 0 : rc);
	if (pat->kind == LB_QP_EXACT) {
		if ((rc = lb_segment_lookup(e->sg, key, klen, out)) == LB_ENOTFOUND) {
			out->n = 0;
			return (0);
		}
		if (rc != 0)
			return (rc);
		clip(e, out);
		return (ev_tick(e, out->n));
	}
	if (pat->kind != LB_QP_PREFIX && pat->kind != LB_QP_WILD)
		return (EINVAL);
	memset(&x, 0, sizeof(x));
	x.e = e;
	x.pat = pat;
	x.hlen = hlen;
	gm_setup(&x);
	/*
	 * A leading wildcard scans the whole namespace: through the segment's term blob (built
	 * on the first such scan when the store's budget allows), a memmem() over the terms'
	 * bytes instead of inflating and decoding every dictionary block. A wildcard with a
	 * literal prefix uses the blob when it is there.
	 */
	if (pat->kind == LB_QP_WILD && pat->litlen == 0 &&
	    (rc = lb_store_segment_blob(e->st, e->sg, e->stamp)) != 0)
		return (rc);
	uni_begin(e, &x.u, out);
	if (pat->kind == LB_QP_WILD && lb_segment_blob_size(e->sg, NULL) > 0) {
		x.scanned = 1;
		rc = lb_segment_scan(e->sg, key, klen, hlen, pat->glob, pat->globlen,
		    expand_term, &x);
	} else
		rc = lb_segment_prefix(e->sg, key, klen, expand_term, &x);
	return (uni_finish(e, &x.u, rc));
}

/* Unions of whole lists (SET values, OR children). */
static int
union_of(struct ev *e, struct lb_postings *ls, size_t n, struct lb_postings *out)
{
	struct uni	u;
	int		rc = 0;

	uni_begin(e, &u, out);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = uni_add(e, &u, ls[i].ids, ls[i].n);
	return (uni_finish(e, &u, rc));
}

static int
ev_set(struct ev *e, const struct lb_qnode *q, struct lb_postings *out)
{
	struct lb_postings	 one = { NULL, 0, 0 };
	struct uni		 u;
	uint8_t			 key[2];
	int			 rc = 0;

	if (q->ns != LB_NS_FACILITY && q->ns != LB_NS_SEVERITY)
		return (EINVAL);
	uni_begin(e, &u, out);
	for (unsigned v = 0; v < 32 && rc == 0; v++) {
		if (!(q->mask & (1U << v)))
			continue;
		key[0] = q->ns;
		key[1] = (uint8_t)v;
		if ((rc = lb_segment_lookup(e->sg, key, 2, &one)) == LB_ENOTFOUND) {
			rc = 0;
			continue;
		}
		if (rc == 0)
			rc = uni_add(e, &u, one.ids, one.n);
	}
	rc = uni_finish(e, &u, rc);
	lb_postings_free(&one);
	return (rc);
}

/* ---------------------------------------------------------------- verification */

/* lb_query_match's failures: a negated errno becomes the errno. */
static int
match_err(int rc)
{
	return (rc < 0 && rc > -4096 ? -rc : rc);
}

/* One thread's share of a verification: ids[0..n) checked through st, kept ids compacted. */
struct vpart {
	struct lb_store			*st;
	const struct lb_qnode		*q;
	const struct lb_tokconf		*tc;
	uint64_t			*ids;
	size_t				 n, kept;
	int64_t				 deadline;	/* CLOCK_MONOTONIC ns; 0: none */
	const atomic_int		*cancel;	/* lb_searchreq.cancel */
	uint64_t			 skipped;	/* unreadable messages left out */
	uint64_t			 first_bad;	/* the first of them */
	int				 bad_rc;
	int				 rc;
};

static void *
vpart_run(void *arg)
{
	struct vpart	*v = arg;
	struct lb_msg	 m;
	size_t		 k = 0;
	int		 rc = 0;

	for (size_t i = 0; i < v->n; i++) {
		if ((i & 255) == 0 && v->deadline != 0 && mono_ns() > v->deadline) {
			rc = LB_EDEADLINE;
			break;
		}
		if ((i & 255) == 0 && v->cancel != NULL &&
		    atomic_load_explicit(v->cancel, memory_order_relaxed)) {
			rc = ECANCELED;
			break;
		}
		if ((rc = lb_store_get(v->st, v->ids[i], &m)) != 0) {
			if (rc != LB_ECORRUPT && rc != LB_EFORMAT && rc != LB_ENOTFOUND)
				break;
			if (v->skipped++ == 0) {
				v->first_bad = v->ids[i];
				v->bad_rc = rc;
			}
			rc = 0;
			continue;
		}
		if ((rc = lb_query_match(v->q, v->tc, &m)) != 0 && rc != 1) {
			rc = match_err(rc);
			break;
		}
		if (rc == 1)
			v->ids[k++] = v->ids[i];
		rc = 0;
	}
	v->kept = k;
	v->rc = rc;
	return (NULL);
}

#define EV_PAR_MIN	4096	/* candidates worth a second thread */

/*
 * Keeps the ids of p whose message matches q. A message that cannot be read is left out with
 * a warning (the index said it might match; the message file is damaged). Many candidates are
 * split in two id ranges, the newer half read by a helper thread through a second reader of
 * the store: reading (inflating blocks) is what a phrase check costs.
 */
static int
verify(struct ev *e, const struct lb_qnode *q, struct lb_postings *p)
{
	struct vpart	 v[2];
	struct lb_store	*helper = NULL;
	pthread_t	 tid;
	int		 nv = 1, rc;

	memset(v, 0, sizeof(v));
	v[0].st = e->st;
	v[0].q = q;
	v[0].tc = e->tc;
	v[0].ids = p->ids;
	v[0].n = p->n;
	v[0].deadline = e->deadline;
	v[0].cancel = e->rq->cancel;
	if (p->n >= EV_PAR_MIN && lb_store_helper(e->st, &helper) == 0) {
		v[1] = v[0];
		v[1].st = helper;
		v[0].n = p->n / 2;
		v[1].ids = p->ids + v[0].n;
		v[1].n = p->n - v[0].n;
		if (pthread_create(&tid, NULL, vpart_run, &v[1]) == 0)
			nv = 2;
		else
			v[0].n = p->n;
	}
	vpart_run(&v[0]);
	if (nv == 2)
		pthread_join(tid, NULL);
	for (int i = 0; i < nv; i++)
		if (v[i].skipped > 0)
			ev_warn(e, "message %llu skipped: %s (%llu unreadable)",
			    (unsigned long long)v[i].first_bad, lb_strerror(v[i].bad_rc),
			    (unsigned long long)v[i].skipped);
	if ((rc = v[0].rc) != 0 || (nv == 2 && (rc = v[1].rc) != 0))
		return (rc);
	if (nv == 2)
		memmove(p->ids + v[0].kept, v[1].ids, v[1].kept * sizeof(*p->ids));
	p->n = v[0].kept + (nv == 2 ? v[1].kept : 0);
	return (0);
}

/* ---------------------------------------------------------------- the tree over one segment */

static int
cmp_len(const void *a, const void *b)
{
	const struct lb_postings *x = a, *y = b;

	return (x->n < y->n ? -1 : x->n > y->n);
}

static void
lists_free(struct lb_postings *ls, size_t n)
{
	if (ls == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		lb_postings_free(&ls[i]);
	free(ls);
}

/* An exact list of the messages matching NOT's child (the child's candidates verified). */
static int
ev_exact(struct ev *e, const struct lb_qnode *q, struct lb_postings *out)
{
	int rc, inexact = 0;

	if ((rc = ev_node(e, q, out, &inexact)) != 0)
		return (rc);
	return (inexact ? verify(e, q, out) : 0);
}

/* PHRASE (candidates: every pattern's list, intersected) and AND. */
static int
ev_and(struct ev *e, const struct lb_qnode *q, struct lb_postings *out, int *inexact)
{
	struct lb_postings	*pos = NULL, neg = { NULL, 0, 0 };
	size_t			 npos = 0, n = q->kind == LB_Q_PHRASE ? q->npats : q->nkids;
	int			 rc = 0, inx = q->kind == LB_Q_PHRASE;

	out->n = 0;
	if (n == 0)
		return (EINVAL);
	if ((pos = calloc(n, sizeof(*pos))) == NULL)
		return (errno);
	/* The positive parts first; an empty one ends it. */
	for (size_t i = 0; i < n; i++) {
		int kx = 0;

		if (q->kind == LB_Q_PHRASE)
			rc = ev_pat(e, q->ns, q->sdname, &q->pats[i], &pos[npos]);
		else if (q->kids[i]->kind == LB_Q_NOT || q->kids[i]->kind == LB_Q_ALL)
			continue;
		else
			rc = ev_node(e, q->kids[i], &pos[npos], &kx);
		if (rc != 0)
			goto done;
		inx |= kx;
		if (pos[npos++].n == 0)
			goto done;
	}
	if (npos == 0) {
		if ((rc = all_ids(e, out)) != 0)
			goto done;
	} else {
		qsort(pos, npos, sizeof(*pos), cmp_len);
		for (size_t i = 1; i < npos && pos[0].n > 0; i++) {
			if ((rc = ev_tick(e, pos[0].n)) != 0)
				goto done;
			isect(&pos[0], &pos[i]);
		}
		lb_postings_free(out);
		*out = pos[0];
		memset(&pos[0], 0, sizeof(pos[0]));
	}
	/* Then each NOT child takes its (exact) matches away. */
	for (size_t i = 0; q->kind == LB_Q_AND && i < n && out->n > 0; i++) {
		if (q->kids[i]->kind != LB_Q_NOT)
			continue;
		if (q->kids[i]->nkids != 1) {
			rc = EINVAL;
			goto done;
		}
		if ((rc = ev_exact(e, q->kids[i]->kids[0], &neg)) != 0)
			goto done;
		if ((rc = ev_tick(e, out->n)) != 0)
			goto done;
		minus(out, &neg);
	}
	*inexact = inx && out->n > 0;
 done:
	if (rc != 0)
		out->n = 0;
	lists_free(pos, n);
	lb_postings_free(&neg);
	return (rc);
}

/* ---------------------------------------------------------------- phrases by template */

/* 1 for a text phrase whose words are whole literals without digits (lb_text_template). */
static int
tpl_phrase(const struct lb_qnode *q)
{
	if (q->ns != LB_NS_TEXT)
		return (0);
	for (size_t i = 0; i < q->npats; i++) {
		const struct lb_qpat *pt = &q->pats[i];

		if (pt->kind != LB_QP_EXACT || pt->litlen == 0)
			return (0);
		for (size_t j = 0; j < pt->litlen; j++)
			if (pt->lit[j] >= '0' && pt->lit[j] <= '9')
				return (0);
	}
	return (1);
}

struct tscan {
	struct ev		*e;
	const struct lb_qnode	*q;
	struct uni		 u;
	uint64_t		 covered;	/* messages of the templates met */
};

/* A template term: its messages are taken when the phrase matches the template. */
static int
tpl_term(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct tscan	*x = arg;
	struct ev	*e = x->e;
	struct lb_msg	 m;
	int		 rc;

	x->covered += df;
	if ((rc = ev_tick(e, 1)) != 0)
		return (rc);
	for (size_t i = 0; i < x->q->npats; i++)
		if (!holds(term + 1, len - 1, x->q->pats[i].lit, x->q->pats[i].litlen))
			return (0);	/* a word's bytes are not in it: no token or form is */
	memset(&m, 0, sizeof(m));
	m.message.p = term + 1;
	m.message.len = len - 1;
	if ((rc = lb_query_match(x->q, e->tc, &m)) != 1)
		return (rc == 0 ? 0 : match_err(rc));
	e->tmp.n = 0;
	if ((rc = lb_segment_postings(e->sg, cookie, &e->tmp)) != 0)
		return (rc);
	return (uni_add(e, &x->u, e->tmp.ids, e->tmp.n));
}

/*
 * A text phrase over a segment whose messages all have a template term (LB_NS_TPL) or are in
 * the LB_NS_NOTPL list: exact without reading a message for the templated ones. The templates
 * the phrase matches give their messages; the messages without a template are the words'
 * candidates among them, verified. A segment written before templates were indexed (or merged
 * with one) does not add up to its count: its candidates are all verified, as before.
 */
static int
ev_phrase(struct ev *e, const struct lb_qnode *q, struct lb_postings *out, int *inexact)
{
	static const uint8_t	 tkey[1] = { LB_NS_TPL }, nkey[1] = { LB_NS_NOTPL };
	struct lb_postings	 un = { NULL, 0, 0 }, cand = { NULL, 0, 0 };
	struct lb_postings	 two[2];
	struct tscan		 x;
	int			 rc, inx = 0;

	*inexact = 0;
	if (!tpl_phrase(q) || e->sg == NULL)
		return (ev_and(e, q, out, inexact));
	memset(&x, 0, sizeof(x));
	x.e = e;
	x.q = q;
	uni_begin(e, &x.u, out);
	rc = lb_segment_prefix(e->sg, tkey, sizeof(tkey), tpl_term, &x);
	if ((rc = uni_finish(e, &x.u, rc)) != 0)
		return (rc);
	if ((rc = lb_segment_lookup(e->sg, nkey, sizeof(nkey), &un)) == LB_ENOTFOUND) {
		un.n = 0;
		rc = 0;
	}
	if (rc != 0)
		goto done;
	if (x.covered + un.n != e->sgcount) {
		rc = ev_and(e, q, out, inexact);
		goto done;
	}
	clip(e, &un);
	if (un.n == 0)
		goto done;
	if ((rc = ev_and(e, q, &cand, &inx)) != 0)
		goto done;
	isect(&cand, &un);
	if (cand.n == 0)
		goto done;
	if ((rc = verify(e, q, &cand)) != 0 || cand.n == 0)
		goto done;
	two[0] = *out;
	two[1] = cand;
	memset(out, 0, sizeof(*out));
	rc = union_of(e, two, 2, out);
	lb_postings_free(&two[0]);
 done:
	if (rc != 0)
		out->n = 0;
	lb_postings_free(&un);
	lb_postings_free(&cand);
	return (rc);
}

static int
ev_or(struct ev *e, const struct lb_qnode *q, struct lb_postings *out, int *inexact)
{
	struct lb_postings	*ls;
	int			 rc = 0, inx = 0;

	out->n = 0;
	if (q->nkids == 0)
		return (EINVAL);
	if ((ls = calloc(q->nkids, sizeof(*ls))) == NULL)
		return (errno);
	for (size_t i = 0; i < q->nkids && rc == 0; i++) {
		int kx = 0;

		if (q->kids[i]->kind == LB_Q_ALL) {
			rc = all_ids(e, out);
			inx = 0;
			goto done;
		}
		rc = ev_node(e, q->kids[i], &ls[i], &kx);
		inx |= kx;
	}
	if (rc == 0)
		rc = union_of(e, ls, q->nkids, out);
 done:
	*inexact = rc == 0 && inx && out->n > 0;
	lists_free(ls, q->nkids);
	return (rc);
}

/*
 * Evaluates q over the window of the current segment into out (ascending, inside the window).
 * *inexact is set when out may hold ids that do not match (a phrase): a superset then.
 */
static int
ev_node(struct ev *e, const struct lb_qnode *q, struct lb_postings *out, int *inexact)
{
	struct lb_postings	tmp = { NULL, 0, 0 };
	int			rc;

	*inexact = 0;
	switch (q->kind) {
	case LB_Q_ALL:
		return (all_ids(e, out));
	case LB_Q_TERM:
		if (q->npats != 1)
			return (EINVAL);
		return (ev_pat(e, q->ns, q->sdname, &q->pats[0], out));
	case LB_Q_PHRASE:
		if (q->npats == 0)
			return (EINVAL);
		return (ev_phrase(e, q, out, inexact));
	case LB_Q_SET:
		return (ev_set(e, q, out));
	case LB_Q_AND:
		return (ev_and(e, q, out, inexact));
	case LB_Q_OR:
		return (ev_or(e, q, out, inexact));
	case LB_Q_NOT:
		if (q->nkids != 1)
			return (EINVAL);
		if ((rc = ev_exact(e, q->kids[0], &tmp)) == 0)
			rc = complement(e, &tmp, out);
		lb_postings_free(&tmp);
		return (rc);
	}
	return (EINVAL);
}

/* ---------------------------------------------------------------- results */

static uint64_t
fnv(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return (h);
}

static void
top_free(struct toph *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free(t->t[i].v);
	free(t->t);
	memset(t, 0, sizeof(*t));
}

/* Adds count to value v; with id != 0, at most once per message id. */
static int
top_add(struct toph *t, const uint8_t *v, size_t len, uint64_t count, uint64_t id)
{
	uint64_t	h = fnv(v, len);
	size_t		i;

	if (t->n + 1 > t->cap / 2) {
		size_t		 cap = t->cap ? t->cap * 2 : 256;
		struct topent	*nt = calloc(cap, sizeof(*nt));

		if (nt == NULL)
			return (errno);
		for (size_t k = 0; k < t->cap; k++) {
			if (t->t[k].v == NULL)
				continue;
			for (i = t->t[k].h & (cap - 1); nt[i].v != NULL; i = (i + 1) & (cap - 1))
				;
			nt[i] = t->t[k];
		}
		free(t->t);
		t->t = nt;
		t->cap = cap;
	}
	for (i = h & (t->cap - 1); t->t[i].v != NULL; i = (i + 1) & (t->cap - 1)) {
		struct topent *x = &t->t[i];

		if (x->h == h && x->len == len && memcmp(x->v, v, len) == 0) {
			if (id != 0 && x->last == id)
				return (0);
			x->last = id;
			x->count += count;
			return (0);
		}
	}
	if ((t->t[i].v = malloc(len > 0 ? len : 1)) == NULL)
		return (errno);
	memcpy(t->t[i].v, v, len);
	t->t[i].len = len;
	t->t[i].count = count;
	t->t[i].last = id;
	t->t[i].h = h;
	t->n++;
	return (0);
}

static int
cmp_top(const void *a, const void *b)
{
	const struct topent	*x = a, *y = b;
	size_t			 n = x->len < y->len ? x->len : y->len;
	int			 c;

	if (x->count != y->count)
		return (x->count > y->count ? -1 : 1);
	if ((c = memcmp(x->v, y->v, n)) != 0)
		return (c);
	return (x->len < y->len ? -1 : x->len > y->len);
}

/* Moves the topk values into the result. */
static int
top_finish(struct ev *e)
{
	struct toph	*t = &e->top;
	struct topent	*all;
	size_t		 n = 0, k;

	if (t->n == 0)
		return (0);
	if ((all = malloc(t->n * sizeof(*all))) == NULL)
		return (errno);
	for (size_t i = 0; i < t->cap; i++)
		if (t->t[i].v != NULL)
			all[n++] = t->t[i];
	qsort(all, n, sizeof(*all), cmp_top);
	k = n < e->rq->topk ? n : e->rq->topk;
	if ((e->res->top = calloc(k, sizeof(*e->res->top))) == NULL) {
		free(all);
		return (errno);
	}
	for (size_t i = 0; i < k; i++) {
		struct lb_topval *tv = &e->res->top[i];

		/* (The value moves from the table to the result.) */
		for (size_t j = all[i].h & (t->cap - 1);; j = (j + 1) & (t->cap - 1)) {
			if (t->t[j].v == all[i].v) {
				t->t[j].v = NULL;
				break;
			}
		}
		tv->value = all[i].v;
		tv->len = all[i].len;
		tv->count = all[i].count;
		e->res->ntop++;
	}
	free(all);
	return (0);
}

struct topwalk {
	struct ev		*e;
	const uint64_t		*bm;		/* the matches of the window, or NULL: all of it */
};

static int
top_term(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct topwalk	*w = arg;
	struct ev	*e = w->e;
	uint64_t	 cnt = 0;
	int		 rc;

	if ((rc = ev_tick(e, 1)) != 0)
		return (rc);
	if (w->bm == NULL && e->wlo <= e->sgfirst && e->whi > e->sglast) {
		/* Every message of the segment matches: the value's count is its df. */
		if (df == 0)
			return (0);
		return (top_add(&e->top, term + e->topkeylen, len - e->topkeylen, df, 0));
	}
	e->tmp.n = 0;
	if ((rc = lb_segment_postings(e->sg, cookie, &e->tmp)) != 0)
		return (rc);
	clip(e, &e->tmp);
	if ((rc = ev_tick(e, e->tmp.n)) != 0)
		return (rc);
	if (w->bm == NULL)
		cnt = e->tmp.n;
	else
		for (size_t i = 0; i < e->tmp.n; i++) {
			uint64_t d = e->tmp.ids[i] - e->wlo;

			cnt += (w->bm[d >> 6] >> (d & 63)) & 1;
		}
	if (cnt == 0)
		return (0);
	return (top_add(&e->top, term + e->topkeylen, len - e->topkeylen, cnt, 0));
}

/*
 * The pattern of the one value of field ns that every match of q has, or NULL: ns holds one
 * value per message, without forms (host, program, pid, msgid, peer), and q is an exact term
 * on it or an AND with one as a child.
 */
static const struct lb_qpat *
pin_of(const struct lb_qnode *q, uint8_t ns)
{
	const struct lb_qpat	*p;

	if (ns != LB_NS_HOST && ns != LB_NS_PROGRAM && ns != LB_NS_PID && ns != LB_NS_MSGID &&
	    ns != LB_NS_PEER)
		return (NULL);
	if (q->kind == LB_Q_TERM && q->ns == ns && q->npats == 1 &&
	    q->pats[0].kind == LB_QP_EXACT)
		return (&q->pats[0]);
	if (q->kind == LB_Q_AND)
		for (size_t i = 0; i < q->nkids; i++)
			if ((p = pin_of(q->kids[i], ns)) != NULL)
				return (p);
	return (NULL);
}

/* Counts the top field's values over the matches (ids) of the current segment's window. */
static int
top_segment(struct ev *e, const struct lb_postings *ids)
{
	struct topwalk	w = { e, NULL };
	struct uni	u;
	int		rc;

	if (ids->n == 0)
		return (0);
	memset(&u, 0, sizeof(u));
	if (ids->n < e->whi - e->wlo) {
		/* A bitmap of the matches: one test per id of each list. */
		struct lb_postings dummy = { NULL, 0, 0 };

		uni_begin(e, &u, &dummy);
		u.nlists = 1;
		if ((rc = uni_add(e, &u, ids->ids, ids->n)) != 0) {
			uni_end(e, &u, 0);
			return (rc);
		}
		w.bm = u.bm;
	}
	rc = lb_segment_prefix(e->sg, e->topkey, e->topkeylen, top_term, &w);
	if (w.bm != NULL)
		uni_end(e, &u, 0);
	return (rc);
}

struct toptail {
	struct ev	*e;
	uint64_t	 id;
};

static int
top_msgterm(void *arg, const uint8_t *term, size_t len)
{
	struct toptail	*t = arg;
	struct ev	*e = t->e;

	if (len < e->topkeylen || memcmp(term, e->topkey, e->topkeylen) != 0)
		return (0);
	return (top_add(&e->top, term + e->topkeylen, len - e->topkeylen, 1, t->id));
}

/* Counts the top field's values of one message. */
static int
top_message(struct ev *e, uint64_t id, const struct lb_msg *m)
{
	struct toptail tt = { e, id };

	return (lb_msg_terms(e->tc, m, top_msgterm, &tt));
}

/* A segment's matches up to this many are read, not looked for in the field's lists. */
#define EV_TOP_READ	256
#define EV_TOP_READ_TEXT 4096	/* (for tokens, whose lists are the whole text index) */

/*
 * The top values of a segment's matches. A few matches are counted from their messages (a
 * block read each), which beats decoding every list of the field (the whole text index for
 * LB_NS_TEXT) to find them. When the query pins the field, every match has the one value.
 */
static int
top_matches(struct ev *e, const struct lb_postings *ids)
{
	struct lb_msg	m;
	int		rc;

	if (e->pin != NULL)
		return (ids->n == 0 ? 0 :
		    top_add(&e->top, e->pin->lit, e->pin->litlen, ids->n, 0));

	if (ids->n > (e->rq->top_ns == LB_NS_TEXT ? EV_TOP_READ_TEXT : EV_TOP_READ))
		return (top_segment(e, ids));
	for (size_t i = 0; i < ids->n; i++) {
		if ((rc = ev_tick(e, 16)) != 0)
			return (rc);
		if ((rc = lb_store_get(e->st, ids->ids[i], &m)) != 0) {
			if (rc != LB_ECORRUPT && rc != LB_EFORMAT && rc != LB_ENOTFOUND)
				return (rc);
			ev_warn(e, "message %llu skipped: %s", (unsigned long long)ids->ids[i],
			    lb_strerror(rc));
			continue;
		}
		if ((rc = top_message(e, ids->ids[i], &m)) != 0)
			return (rc);
	}
	return (0);
}

/* Adds the ascending matches ids[0..n) to the histogram. */
static void
hist_add(struct ev *e, const uint64_t *ids, size_t n)
{
	struct lb_searchres	*r = e->res;
	size_t			 k, at, next;

	if (n == 0 || r->nhist == 0)
		return;
	/* The bucket of ids[0]: the last k with bounds[k] <= ids[0]. */
	k = lower(e->bounds, r->nhist + 1, ids[0] + 1);
	k = k > 0 ? k - 1 : 0;
	for (at = 0; at < n && k < r->nhist; k++) {
		next = at + lower(ids + at, n - at, e->bounds[k + 1]);
		r->hist[k] += next - at;
		at = next;
	}
}

/* ---------------------------------------------------------------- event time */

/* Adds count to the histogram bucket of event second sec. */
static void
hist_sec(struct ev *e, int64_t sec, uint64_t count)
{
	struct lb_searchres	*r = e->res;
	int64_t			 t;
	uint64_t		 k;

	if (r->nhist == 0 || sec > INT64_MAX / US || sec < INT64_MIN / US)
		return;
	t = sec * US;
	if (t < r->hist_from)
		return;
	k = ((uint64_t)t - (uint64_t)r->hist_from) / (uint64_t)r->hist_step;
	if (k < r->nhist)
		r->hist[k] += count;
}

/* The dictionary range of the event seconds [evlo, evhi). */
static void
evt_range(const struct ev *e, uint8_t lo[LB_EVTIME_TERM_LEN], uint8_t hi[LB_EVTIME_TERM_LEN])
{
	lb_evtime_term(e->evlo, lo);
	lb_evtime_term(e->evhi, hi);
}

struct evwalk {
	struct ev		*e;
	struct uni		 u;
	const uint64_t		*bm;		/* evt_hist: the matches of the window, or NULL */
};

static int
evt_term(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct evwalk	*w = arg;
	struct ev	*e = w->e;
	int		 rc;

	(void)term;
	(void)df;
	if (len != LB_EVTIME_TERM_LEN)
		return (0);
	if ((rc = ev_tick(e, 1)) != 0)
		return (rc);
	e->tmp.n = 0;
	if ((rc = lb_segment_postings(e->sg, cookie, &e->tmp)) != 0)
		return (rc);
	return (uni_add(e, &w->u, e->tmp.ids, e->tmp.n));
}

static int
evt_found(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	int *any = arg;

	(void)term;
	(void)cookie;
	(void)df;
	if (len != LB_EVTIME_TERM_LEN)
		return (0);
	*any = 1;
	return (EEXIST);	/* (stops the walk) */
}

/* *any: whether the segment holds an event second of [evlo, evhi) (the first block of it). */
static int
evt_any(struct ev *e, int *any)
{
	uint8_t	lo[LB_EVTIME_TERM_LEN], hi[LB_EVTIME_TERM_LEN];
	int	rc;

	*any = 0;
	evt_range(e, lo, hi);
	rc = lb_segment_terms(e->sg, lo, sizeof(lo), hi, sizeof(hi), evt_found, any);
	return (rc == EEXIST && *any ? 0 : rc);
}

/* The ids of the window whose event second is in [evlo, evhi): a union of a few terms. */
static int
evt_filter(struct ev *e, struct lb_postings *out)
{
	struct evwalk	w;
	uint8_t		lo[LB_EVTIME_TERM_LEN], hi[LB_EVTIME_TERM_LEN];
	int		rc;

	memset(&w, 0, sizeof(w));
	w.e = e;
	evt_range(e, lo, hi);
	uni_begin(e, &w.u, out);
	rc = lb_segment_terms(e->sg, lo, sizeof(lo), hi, sizeof(hi), evt_term, &w);
	return (uni_finish(e, &w.u, rc));
}

static int
evt_hist_term(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct evwalk	*w = arg;
	struct ev	*e = w->e;
	uint64_t	 cnt = 0;
	int		 rc;

	(void)df;
	if (len != LB_EVTIME_TERM_LEN)
		return (0);
	if ((rc = ev_tick(e, 1)) != 0)
		return (rc);
	e->tmp.n = 0;
	if ((rc = lb_segment_postings(e->sg, cookie, &e->tmp)) != 0)
		return (rc);
	clip(e, &e->tmp);
	if ((rc = ev_tick(e, e->tmp.n)) != 0)
		return (rc);
	for (size_t i = 0; i < e->tmp.n; i++) {
		uint64_t d = e->tmp.ids[i] - e->wlo;

		cnt += (w->bm[d >> 6] >> (d & 63)) & 1;
	}
	if (cnt > 0)
		hist_sec(e, lb_evtime_sec(term), cnt);
	return (0);
}

/* The histogram of a segment window's matches by event second: each term of the range counted. */
static int
evt_hist(struct ev *e, const struct lb_postings *ids)
{
	struct evwalk		w;
	struct lb_postings	dummy = { NULL, 0, 0 };
	uint8_t			lo[LB_EVTIME_TERM_LEN], hi[LB_EVTIME_TERM_LEN];
	int			rc;

	if (e->res->nhist == 0 || ids->n == 0)
		return (0);
	memset(&w, 0, sizeof(w));
	w.e = e;
	/* A bitmap of the matches (as top_segment makes one). */
	uni_begin(e, &w.u, &dummy);
	w.u.nlists = 1;
	if ((rc = uni_add(e, &w.u, ids->ids, ids->n)) != 0) {
		uni_end(e, &w.u, 0);
		return (rc);
	}
	w.bm = w.u.bm;
	evt_range(e, lo, hi);
	rc = lb_segment_terms(e->sg, lo, sizeof(lo), hi, sizeof(hi), evt_hist_term, &w);
	uni_end(e, &w.u, 0);
	return (rc);
}

/* 1 when the tail message m is in the event-time range (its second in *sec). */
static int
evt_match(const struct ev *e, const struct lb_msg *m, int64_t *sec)
{
	if (m->timestamp == LB_NOTIME)
		return (0);
	*sec = lb_evtime_of(m->timestamp);
	return (*sec >= e->evlo && *sec < e->evhi);
}

/* Takes hits from the ascending matches ids[0..n) in the requested order. */
static void
hits_add(struct ev *e, const uint64_t *ids, size_t n)
{
	const struct lb_searchreq	*rq = e->rq;
	size_t				 lim = (size_t)rq->limit + 1;

	if (!(rq->want & LB_WANT_HITS))
		return;
	if (rq->order == LB_ORDER_NEWEST) {
		size_t i = rq->cursor != 0 ? lower(ids, n, rq->cursor) : n;

		while (i > 0 && e->nhits < lim)
			e->hits[e->nhits++] = ids[--i];
	} else {
		size_t i = rq->cursor != 0 ? lower(ids, n, rq->cursor + 1) : 0;

		while (i < n && e->nhits < lim)
			e->hits[e->nhits++] = ids[i++];
	}
}

static int
hits_done(const struct ev *e)
{
	return ((e->rq->want & LB_WANT_HITS) && e->nhits > e->rq->limit);
}

/* Everything a chunk's exact matches give: total, histogram, top, hits. */
static int
take(struct ev *e, const struct lb_postings *m)
{
	int rc;

	/* (Top first: a damaged list there skips the segment before anything is counted.) */
	if ((e->rq->want & LB_WANT_TOP) && (rc = top_matches(e, m)) != 0)
		return (rc);
	if (e->evt) {
		if ((rc = evt_hist(e, m)) != 0)
			return (rc);
	} else
		hist_add(e, m->ids, m->n);
	e->res->total += m->n;
	hits_add(e, m->ids, m->n);
	return (0);
}

/* take() for every id of [lo, hi) without listing them (ALL, without top values). */
static void
take_range(struct ev *e, uint64_t lo, uint64_t hi)
{
	const struct lb_searchreq	*rq = e->rq;
	struct lb_searchres		*r = e->res;
	size_t				 lim = (size_t)rq->limit + 1;
	uint64_t			 id;

	r->total += hi - lo;
	for (uint32_t k = 0; k < r->nhist; k++) {
		uint64_t a = e->bounds[k] > lo ? e->bounds[k] : lo;
		uint64_t b = e->bounds[k + 1] < hi ? e->bounds[k + 1] : hi;

		if (b > a)
			r->hist[k] += b - a;
	}
	if (!(rq->want & LB_WANT_HITS))
		return;
	if (rq->order == LB_ORDER_NEWEST) {
		id = rq->cursor != 0 && rq->cursor < hi ? rq->cursor : hi;
		while (id > lo && e->nhits < lim)
			e->hits[e->nhits++] = --id;
	} else {
		id = rq->cursor != 0 && rq->cursor >= lo ? rq->cursor + 1 : lo;
		while (id < hi && e->nhits < lim)
			e->hits[e->nhits++] = id++;
	}
}

/* take() for the window minus the ascending ids c[0..n) without listing it (NOT, no top). */
static void
take_not(struct ev *e, const struct lb_postings *c)
{
	const struct lb_searchreq	*rq = e->rq;
	struct lb_searchres		*r = e->res;
	size_t				 lim = (size_t)rq->limit + 1, j;
	uint64_t			 id;

	r->total += (e->whi - e->wlo) - c->n;
	for (uint32_t k = 0; k < r->nhist; k++) {
		uint64_t a = e->bounds[k] > e->wlo ? e->bounds[k] : e->wlo;
		uint64_t b = e->bounds[k + 1] < e->whi ? e->bounds[k + 1] : e->whi;

		if (b > a)
			r->hist[k] += (b - a) - (lower(c->ids, c->n, b) - lower(c->ids, c->n, a));
	}
	if (!(rq->want & LB_WANT_HITS))
		return;
	if (rq->order == LB_ORDER_NEWEST) {
		id = rq->cursor != 0 && rq->cursor < e->whi ? rq->cursor : e->whi;
		j = lower(c->ids, c->n, id);
		while (id > e->wlo && e->nhits < lim) {
			id--;
			if (j > 0 && c->ids[j - 1] == id)
				j--;
			else
				e->hits[e->nhits++] = id;
		}
	} else {
		id = rq->cursor != 0 && rq->cursor >= e->wlo ? rq->cursor + 1 : e->wlo;
		j = lower(c->ids, c->n, id);
		for (; id < e->whi && e->nhits < lim; id++) {
			if (j < c->n && c->ids[j] == id)
				j++;
			else
				e->hits[e->nhits++] = id;
		}
	}
}

/* ---------------------------------------------------------------- chunks */

/* Hits only: checks candidates one by one in the requested order until enough are found. */
static int
take_lazy(struct ev *e, struct lb_postings *c)
{
	const struct lb_searchreq	*rq = e->rq;
	struct lb_postings		 one;
	uint64_t			 id;
	int				 rc;

	for (size_t k = 0; k < c->n && !hits_done(e); k++) {
		id = rq->order == LB_ORDER_NEWEST ? c->ids[c->n - 1 - k] : c->ids[k];
		one.ids = &id;
		one.n = 1;
		one.cap = 1;
		if ((rc = verify(e, rq->q, &one)) != 0)
			return (rc);
		if (one.n == 1)
			hits_add(e, &id, 1);
	}
	return (0);
}

/* 1 when q holds ALL or NOT: its list can be as long as the window. */
static int
wide(const struct lb_qnode *q)
{
	if (q->kind == LB_Q_ALL || q->kind == LB_Q_NOT)
		return (1);
	for (size_t i = 0; i < q->nkids; i++)
		if (wide(q->kids[i]))
			return (1);
	return (0);
}

#define EV_SUBWIN	65536	/* ids of the first part of a segment a wide search for hits takes */

/*
 * One published segment: window [lo, hi). A search for hits alone with a wide tree takes the
 * window in parts from the end hits come from, each twice as large as the one before, so that
 * "*" or "NOT x" does not list a whole large segment to return a page of it.
 */
static int
run_segment(struct ev *e, const struct lb_segref *ref, uint64_t lo, uint64_t hi)
{
	struct lb_postings	 m = { NULL, 0, 0 }, f = { NULL, 0, 0 };
	struct lb_seginfo	 si;
	char			 path[PATH_MAX];
	uint64_t		 part = e->full || !wide(e->rq->q) ? hi - lo : EV_SUBWIN;
	uint64_t		 a = lo, b = hi;
	int			 rc, inexact = 0, any;

	path[0] = '\0';
	if ((rc = lb_store_segment(e->st, ref, &e->sg, path, sizeof(path))) != 0)
		goto bad;
	lb_segment_info(e->sg, &si);
	e->sgversion = si.version;
	e->sgcount = si.count;
	e->sgfirst = si.first_id;
	e->sglast = si.last_id;
	e->res->segments++;
	if (e->evt && si.noevtime) {
		/* Indexed before event-time terms: said once in a warning (lb_search). */
		e->noevt++;
		goto bad;
	}
	if (e->evt)
		;	/* (no shortcut: the matches are cut to the event-time range below) */
	else if (e->full && !(e->rq->want & LB_WANT_TOP) && e->rq->q->kind == LB_Q_ALL) {
		take_range(e, lo, hi);
		goto bad;
	}
	else if (e->full && e->rq->q->kind == LB_Q_ALL && lo <= si.first_id && hi > si.last_id) {
		/* ALL over the whole segment: top values from the dictionary's dfs, unlisted. */
		struct topwalk w = { e, NULL };

		e->wlo = lo;
		e->whi = hi;
		e->nterms = 0;
		if ((rc = lb_segment_prefix(e->sg, e->topkey, e->topkeylen, top_term, &w)) == 0)
			take_range(e, lo, hi);
		goto bad;
	}
	else if (e->full && !(e->rq->want & LB_WANT_TOP) && e->rq->q->kind == LB_Q_NOT &&
	    e->rq->q->nkids == 1) {
		/* Counted as the window minus the child: the complement is not listed. */
		e->wlo = lo;
		e->whi = hi;
		e->nterms = 0;
		if ((rc = ev_exact(e, e->rq->q->kids[0], &m)) == 0)
			take_not(e, &m);
		goto bad;
	}
	while (a < b && !(hits_done(e) && !e->full)) {
		if (e->rq->order == LB_ORDER_NEWEST) {
			e->whi = b;
			e->wlo = b - a > part ? b - part : a;
			b = e->wlo;
		} else {
			e->wlo = a;
			e->whi = b - a > part ? a + part : b;
			a = e->whi;
		}
		part = part > UINT64_MAX / 2 ? UINT64_MAX : part * 2;
		e->nterms = 0;
		if (e->evt) {
			/*
			 * Cheapest first: whether the segment has a second of the range at all
			 * (one dictionary block), then the query, then the range's lists.
			 */
			if ((rc = evt_any(e, &any)) != 0)
				goto bad;
			if (!any)
				break;
			if (e->rq->q->kind == LB_Q_ALL) {
				if ((rc = evt_filter(e, &m)) != 0)
					goto bad;
				inexact = 0;
			} else {
				if ((rc = ev_node(e, e->rq->q, &m, &inexact)) != 0)
					goto bad;
				if (m.n == 0)
					continue;
				if ((rc = evt_filter(e, &f)) != 0)
					goto bad;
				isect(&m, &f);
			}
		} else if ((rc = ev_node(e, e->rq->q, &m, &inexact)) != 0)
			goto bad;
		if (inexact && !e->full)
			rc = take_lazy(e, &m);
		else if (!inexact || (rc = verify(e, e->rq->q, &m)) == 0)
			rc = take(e, &m);
		if (rc != 0)
			goto bad;
	}
 bad:
	if (rc == LB_ECORRUPT || rc == LB_EFORMAT) {
		ev_warn(e, "segment %s skipped: %s", path, lb_strerror(rc));
		if (e->sg != NULL)
			lb_store_segment_drop(e->st, e->sg);
		rc = 0;
	}
	e->sg = NULL;
	lb_postings_free(&m);
	lb_postings_free(&f);
	return (rc);
}

static inline uint8_t
fold(uint8_t c)
{
	return (c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : c);
}

/*
 * A literal that every message matching q holds in its text (ASCII case aside), or none
 * (*len 0): a text term's bytes before its first wildcard are the start of one of the
 * message's tokens, and tokens are runs of the text, folded.
 */
static void
required(const struct lb_qnode *q, const uint8_t **lit, size_t *len)
{
	const uint8_t	*l;
	size_t		 n;

	*len = 0;
	switch (q->kind) {
	case LB_Q_TERM:
	case LB_Q_PHRASE:
		if (q->ns != LB_NS_TEXT)
			return;
		for (size_t i = 0; i < q->npats; i++) {
			if (q->pats[i].litlen > *len) {
				*lit = q->pats[i].lit;
				*len = q->pats[i].litlen;
			}
		}
		return;
	case LB_Q_AND:
		for (size_t i = 0; i < q->nkids; i++) {
			required(q->kids[i], &l, &n);
			if (n > *len) {
				*lit = l;
				*len = n;
			}
		}
		return;
	}
}

/* 1 when lit[0..n) (n >= 1) occurs in s[0..len), ASCII case aside. */
static int
holds(const uint8_t *s, size_t len, const uint8_t *lit, size_t n)
{
	uint8_t c = fold(lit[0]);

	for (size_t i = 0; i + n <= len; i++) {
		size_t k;

		if (fold(s[i]) != c)
			continue;
		for (k = 1; k < n && fold(s[i + k]) == fold(lit[k]); k++)
			;
		if (k == n)
			return (1);
	}
	return (0);
}

/*
 * Ids [lo, hi) that are not in a published segment: brute force over the messages. A message
 * whose text lacks the query's required literal is passed over without lb_query_match().
 */
static int
run_tail(struct ev *e, uint64_t lo, uint64_t hi)
{
	const struct lb_searchreq	*rq = e->rq;
	struct lb_msg			 m;
	const uint8_t			*lit = NULL;
	size_t				 litlen;
	uint64_t			 id;
	int64_t				 sec = 0;
	int				 rc;

	e->sg = NULL;
	required(rq->q, &lit, &litlen);
	for (uint64_t k = 0; k < hi - lo && !(hits_done(e) && !e->full); k++) {
		id = rq->order == LB_ORDER_NEWEST ? hi - 1 - k : lo + k;
		if ((rc = ev_tick(e, 16)) != 0)
			return (rc);
		if ((rc = lb_store_get(e->st, id, &m)) != 0) {
			if (rc == LB_ENOTFOUND)
				continue;
			if (rc != LB_ECORRUPT && rc != LB_EFORMAT)
				return (rc);
			ev_warn(e, "message %llu skipped: %s", (unsigned long long)id,
			    lb_strerror(rc));
			continue;
		}
		e->res->tail++;
		if (e->evt && !evt_match(e, &m, &sec))
			continue;
		if (litlen > 0 && !holds(m.message.p, m.message.len, lit, litlen))
			continue;
		if ((rc = lb_query_match(rq->q, e->tc, &m)) != 0 && rc != 1)
			return (match_err(rc));
		if (rc == 0)
			continue;
		e->res->total++;
		if (e->evt)
			hist_sec(e, sec, 1);
		else
			hist_add(e, &id, 1);
		hits_add(e, &id, 1);
		if ((rq->want & LB_WANT_TOP) && (rc = top_message(e, id, &m)) != 0)
			return (rc);
	}
	return (0);
}

/* A piece of the id range: a segment (ref) or tail (ref NULL). */
struct chunk {
	const struct lb_segref	*ref;
	uint64_t		 lo, hi;
};

/*
 * One pass over [id_lo, id_hi): ENOENT when a listed segment disappeared (the caller lists
 * again).
 */
static int
run(struct ev *e, uint64_t lo, uint64_t hi)
{
	const struct lb_searchreq	*rq = e->rq;
	struct lb_segref		*refs = NULL;
	struct chunk			*ch = NULL;
	size_t				 nrefs = 0, nch = 0;
	uint64_t			 at;
	int				 rc;

	/* Hits alone need only the ids on the cursor's side. */
	if (!e->full && rq->cursor != 0) {
		if (rq->order == LB_ORDER_NEWEST && rq->cursor < hi)
			hi = rq->cursor > lo ? rq->cursor : lo;
		if (rq->order == LB_ORDER_OLDEST && rq->cursor >= lo)
			lo = rq->cursor < hi ? rq->cursor + 1 : hi;
	}
	if (lo >= hi)
		return (0);
	if ((rc = lb_store_segments(e->st, lo, hi - 1, &refs, &nrefs)) != 0)
		return (rc);
	if ((ch = calloc(2 * nrefs + 1, sizeof(*ch))) == NULL) {
		rc = errno;
		goto done;
	}
	/* Gaps between segments (normally only the end: the tail) are searched by brute force. */
	at = lo;
	for (size_t i = 0; i < nrefs; i++) {
		uint64_t a = refs[i].first_id > lo ? refs[i].first_id : lo;
		uint64_t b = refs[i].last_id + 1 < hi ? refs[i].last_id + 1 : hi;

		if (a > at)
			ch[nch++] = (struct chunk){ NULL, at, a };
		if (b > a)
			ch[nch++] = (struct chunk){ &refs[i], a, b };
		if (b > at)
			at = b;
	}
	if (at < hi)
		ch[nch++] = (struct chunk){ NULL, at, hi };
	for (size_t k = 0; k < nch && !(hits_done(e) && !e->full); k++) {
		struct chunk *c = &ch[rq->order == LB_ORDER_NEWEST ? nch - 1 - k : k];

		if (c->ref != NULL)
			rc = run_segment(e, c->ref, c->lo, c->hi);
		else
			rc = run_tail(e, c->lo, c->hi);
		if (rc != 0)
			goto done;
	}
 done:
	free(ch);
	free(refs);
	return (rc);
}

/* ---------------------------------------------------------------- the request */

static int
check_req(const struct lb_searchreq *rq)
{
	if (rq == NULL || rq->q == NULL || rq->from > rq->to)
		return (EINVAL);
	if (rq->order != LB_ORDER_NEWEST && rq->order != LB_ORDER_OLDEST)
		return (EINVAL);
	if ((rq->want & LB_WANT_HITS) && rq->limit == 0)
		return (EINVAL);
	if ((rq->want & LB_WANT_HIST) && (rq->nbuckets == 0 || rq->nbuckets > LB_HIST_MAX))
		return (EINVAL);
	if (rq->want & LB_WANT_TOP) {
		if (rq->topk == 0 || rq->topk > LB_TOP_MAX)
			return (EINVAL);
		switch (rq->top_ns) {
		case LB_NS_TEXT: case LB_NS_HOST: case LB_NS_PROGRAM: case LB_NS_PID:
		case LB_NS_MSGID: case LB_NS_FACILITY: case LB_NS_SEVERITY: case LB_NS_PEER:
			break;
		case LB_NS_SD:
			if (rq->top_sdname == NULL || rq->top_sdname[0] == '\0')
				return (EINVAL);
			break;
		default:
			return (EINVAL);
		}
	}
	if (rq->deadline_ms < 0)
		return (EINVAL);
	if (rq->time != LB_TIME_RECEIVED && rq->time != LB_TIME_EVENT)
		return (EINVAL);
	return (0);
}

static int64_t
floor_s(int64_t t)
{
	int64_t q = t / US;

	if (t % US < 0)
		q--;
	return (q < INT64_MIN / US ? INT64_MIN : q * US);
}

static int64_t
ceil_s(int64_t t)
{
	int64_t q = t / US;

	if (t % US > 0)
		q++;
	return (q > INT64_MAX / US ? INT64_MAX : q * US);
}

/* The first id received at or after t (whole seconds), or next past the map's end. */
static int
time_id(struct ev *e, int64_t t, uint64_t next, uint64_t *id)
{
	int rc;

	if ((rc = lb_store_time_to_id(e->st, t, id)) == LB_ENOTFOUND) {
		*id = next;
		return (0);
	}
	if (rc == 0 && *id > next)
		*id = next;
	return (rc);
}

/* The histogram's buckets and their id bounds. */
static int
hist_setup(struct ev *e, int64_t from, int64_t to, uint64_t next)
{
	struct lb_searchres	*r = e->res;
	uint64_t		 span = (uint64_t)to - (uint64_t)from, step, nb;
	int			 rc;

	r->hist_from = from;
	nb = e->rq->nbuckets;
	step = span / nb + (span % nb != 0);
	if (step > (uint64_t)INT64_MAX / 2)
		step = (uint64_t)INT64_MAX / 2;
	step = (step + US - 1) / US * US;
	if (step < (uint64_t)US)
		step = US;
	r->hist_step = (int64_t)step;
	span = span / step + (span % step != 0);
	r->nhist = (uint32_t)(span < nb ? span : nb);
	if (r->nhist == 0)
		return (0);
	if ((r->hist = calloc(r->nhist, sizeof(*r->hist))) == NULL ||
	    (e->bounds = calloc(r->nhist + 1, sizeof(*e->bounds))) == NULL)
		return (errno);
	e->bounds[0] = r->id_lo;
	e->bounds[r->nhist] = r->id_hi;
	for (uint32_t k = 1; k < r->nhist; k++) {
		if ((rc = time_id(e, (int64_t)((uint64_t)from + k * step), next,
		    &e->bounds[k])) != 0)
			return (rc);
		if (e->bounds[k] < e->bounds[k - 1])
			e->bounds[k] = e->bounds[k - 1];
		if (e->bounds[k] > r->id_hi)
			e->bounds[k] = r->id_hi;
	}
	return (0);
}

/*
 * Cuts [id_lo, id_hi) to the request's id window: above after, up to upto, and with indexed
 * below the end of the published segments (those that overlap the window are listed: few,
 * when the window is the newest ids). Sets through.
 */
static int
id_window(struct ev *e, uint64_t next)
{
	const struct lb_searchreq	*rq = e->rq;
	struct lb_searchres		*r = e->res;
	struct lb_segref		*refs = NULL;
	size_t				 n = 0;
	uint64_t			 end;
	int				 rc;

	if (rq->after != 0 && r->id_lo <= rq->after)
		r->id_lo = rq->after < next ? rq->after + 1 : next;
	if (rq->upto != 0 && rq->upto < UINT64_MAX && r->id_hi > rq->upto + 1)
		r->id_hi = rq->upto + 1;
	if (rq->indexed && r->id_lo < r->id_hi) {
		if ((rc = lb_store_segments(e->st, r->id_lo, r->id_hi - 1, &refs, &n)) != 0)
			return (rc);
		end = n > 0 ? refs[n - 1].last_id + 1 : r->id_lo;
		free(refs);
		if (r->id_hi > end)
			r->id_hi = end;
	}
	if (r->id_hi < r->id_lo)
		r->id_hi = r->id_lo;
	r->through = r->id_hi > 0 ? r->id_hi - 1 : 0;
	if (r->through < rq->after)
		r->through = rq->after;
	return (0);
}

void
lb_searchres_free(struct lb_searchres *res)
{
	if (res == NULL)
		return;
	free(res->ids);
	free(res->hist);
	for (size_t i = 0; i < res->ntop; i++)
		free(res->top[i].value);
	free(res->top);
	for (size_t i = 0; i < res->nwarnings; i++)
		free(res->warnings[i]);
	free(res->warnings);
	memset(res, 0, sizeof(*res));
}

int
lb_search(struct lb_store *st, const struct lb_searchreq *rq, struct lb_searchres *res)
{
	struct lb_searchres	 r;
	struct ev		 e;
	uint64_t		 first, next;
	int64_t			 from, to;
	int			 rc, tries = 0;

	if (st == NULL || res == NULL)
		return (EINVAL);
	if ((rc = check_req(rq)) != 0)
		return (rc);
	memset(&r, 0, sizeof(r));
	memset(&e, 0, sizeof(e));
	e.st = st;
	e.stamp = lb_store_stamp(st);
	e.rq = rq;
	e.tc = lb_store_tokconf(st);
	e.res = &r;
	e.full = (rq->want & (LB_WANT_TOTAL | LB_WANT_HIST | LB_WANT_TOP)) != 0;
	e.max_terms = rq->max_terms != 0 ? rq->max_terms : LB_MAX_TERMS;
	if (rq->deadline_ms > 0)
		e.deadline = mono_ns() + rq->deadline_ms * 1000000;
	if ((rq->want & LB_WANT_HITS) &&
	    (e.hits = calloc((size_t)rq->limit + 1, sizeof(*e.hits))) == NULL)
		return (errno);
	if (rq->want & LB_WANT_TOP) {
		e.topkey[0] = rq->top_ns;
		e.topkeylen = 1;
		e.pin = pin_of(rq->q, rq->top_ns);
		if (rq->top_ns == LB_NS_SD &&
		    (rc = mkkey(e.topkey, &e.topkeylen, LB_NS_SD, rq->top_sdname, NULL, 0)) != 0) {
			rc = rc == LB_ENOTFOUND ? EINVAL : rc;
			goto fail;
		}
	}
	if ((rc = lb_store_refresh(st)) != 0)
		goto fail;
	lb_store_range(st, &first, &next);
	from = floor_s(rq->from);
	to = ceil_s(rq->to);
	if (rq->time == LB_TIME_EVENT) {
		/* Any id may hold any event time: every one is visited. */
		e.evt = 1;
		e.evlo = from / US;
		e.evhi = to / US;
		r.id_lo = first;
		r.id_hi = next;
	} else if ((rc = time_id(&e, from, next, &r.id_lo)) != 0 ||
	    (rc = time_id(&e, to, next, &r.id_hi)) != 0)
		goto fail;
	if (r.id_lo < first)
		r.id_lo = first;
	if (r.id_hi < r.id_lo)
		r.id_hi = r.id_lo;
	if ((rc = id_window(&e, next)) != 0)
		goto fail;
	if ((rq->want & LB_WANT_HIST) && (rc = hist_setup(&e, from, to, next)) != 0)
		goto fail;
	while (rq->want != 0 && (rc = run(&e, r.id_lo, r.id_hi)) == ENOENT &&
	    ++tries < EV_RETRIES) {
		/* A merge replaced a segment after it was listed: start again. */
		r.total = r.segments = r.tail = 0;
		if (r.hist != NULL)
			memset(r.hist, 0, r.nhist * sizeof(*r.hist));
		top_free(&e.top);
		e.nhits = 0;
		e.noevt = 0;
	}
	if (rc != 0)
		goto fail;
	if (e.noevt > 0)
		ev_warn(&e, "%llu segment%s indexed before event-time terms not searched by event "
		    "time: run logbox reindex", (unsigned long long)e.noevt, e.noevt == 1 ? "" : "s");
	if ((rc = top_finish(&e)) != 0)
		goto fail;
	if (e.nhits > rq->limit && rq->limit > 0) {
		e.nhits = rq->limit;
		r.next_cursor = e.hits[rq->limit - 1];
	}
	if (!(rq->want & LB_WANT_TOTAL))
		r.total = 0;
	r.ids = e.hits;
	r.n = e.nhits;
	e.hits = NULL;
	*res = r;
	rc = 0;
	goto done;
 fail:
	lb_searchres_free(&r);
 done:
	free(e.hits);
	free(e.bounds);
	free(e.bm);
	lb_postings_free(&e.tmp);
	top_free(&e.top);
	return (rc);
}
