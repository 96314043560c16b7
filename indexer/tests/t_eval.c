/*
 * t_eval.c — lb_search on a real store (several segments over two days plus a tail that is not
 * indexed yet) against a brute force over every message: random query trees (terms that exist
 * and do not, prefixes, inner and leading wildcards, phrases, fields, structured data, sets,
 * AND/OR/NOT, ALL) with random time ranges, orders, limits, histograms and top values; cursor
 * paging both ways; a damaged segment; wildcard limits; bad requests; segments of version 2
 * (before forms were indexed), where text patterns match the forms of the dictionary's terms.
 * Messages carry their own time stamps with skewed clocks (none, hours off, far future, before
 * 1970), and a third of the random requests select by event time (LB_TIME_EVENT); segments
 * written before event-time terms are skipped with a warning until lb_store_reindex.
 */
#include "t_helper.h"
#include "t_segv2.h"
#include "lb_format.h"
#include "lb_util.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define DAY_US	(86400LL * 1000000)
#define T0	(1735689600LL * 1000000)	/* 2025-01-01T00:00:00Z */
#define NMSG	3000
#define NDAY1	1400				/* messages on the first day */
#define FLUSH	350				/* a segment every this many messages */
#define NTAIL	230				/* the last messages stay unindexed */

/* ---------------------------------------------------------------- the data */

static const char *words[] = {
	"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
	"lambda", "mu", "alphabet", "betamax", "deltas", "error", "errors", "conn", "x",
	/* compound tokens and punctuation: words find their forms (FORMAT.md §6) */
	"non-existent-user", "existent", "bob@example.com", "example", "refused.", "refused",
	"404.", "404", "2015-10-18", "2015", "pid-1234",
};
#define NWORDS	(sizeof(words) / sizeof(words[0]))
static const char *hosts[] = { "web-01", "web-02", "DB-1", "mail" };
static const char *progs[] = { "sshd", "cron", "nginx", "" };
static const char *peers[] = { "10.0.0.7", "10.0.0.12", "2001:DB8::1", "" };

struct tmsg {
	char		 text[160];
	char		 sd[80];
	const char	*host, *prog, *peer;
	char		 pid[8];
	int64_t		 received;
	int64_t		 ts;		/* the message's own time stamp, or LB_NOTIME */
	uint8_t		 fac, sev;
	uint64_t	 id;
};

static struct tmsg	 msgs[NMSG];
static char		 dir[256];
static struct lb_tokconf tc;

static uint64_t rng = 88172645463325252ULL;
static uint64_t rng_ev = 2463534242ULL;	/* event times (the other draws stay as they were) */

static uint32_t
rnd(uint32_t n)
{
	return ((uint32_t)(t_rnd(&rng) % n));
}

static void
tm_fill(struct lb_msg *m, const struct tmsg *t)
{
	memset(m, 0, sizeof(*m));
	m->id = t->id;
	m->received = t->received;
	m->timestamp = t->ts;
	m->facility = t->fac;
	m->severity = t->sev;
	m->message = t_str(t->text);
	m->host = t_str(t->host);
	m->program = t_str(t->prog);
	m->peer = t_str(t->peer);
	m->pid = t_str(t->pid);
	m->sd = t_str(t->sd);
}

static void
gen_msgs(void)
{
	for (int i = 0; i < NMSG; i++) {
		struct tmsg	*t = &msgs[i];
		int		 nw = 1 + (int)rnd(6), n = 0;

		if (rnd(3) == 0) {
			/*
			 * A third from a few shapes with numbers in them: many messages share a
			 * template (FORMAT.md §6.1), which decides their phrases.
			 */
			const char *w = words[rnd(4)], *v = words[4 + rnd(3)];

			switch (rnd(4)) {
			case 0:
				snprintf(t->text, sizeof(t->text), "%s %s port %u from 10.0.%u.%u",
				    w, v, rnd(70000), rnd(256), rnd(256));
				break;
			case 1:
				snprintf(t->text, sizeof(t->text), "conn %u%s refused. %s-%u %s",
				    rnd(99), rnd(2) ? "" : "x", v, rnd(9), w);
				break;
			case 2:
				snprintf(t->text, sizeof(t->text), "Error %s %s (pid-%u) bob@example.com",
				    w, w, rnd(3000));
				break;
			default:
				snprintf(t->text, sizeof(t->text), "%s %u %s non-existent-user %x",
				    v, rnd(10), w, rnd(1u << 30));
				break;
			}
			goto fields;
		}
		for (int k = 0; k < nw; k++) {
			const char *w = words[rnd(NWORDS)];

			if (rnd(10) == 0)
				n += snprintf(t->text + n, sizeof(t->text) - (size_t)n, "%sConn:%u ",
				    k ? " " : "", rnd(40));
			else {
				int at = n + (k ? 1 : 0);

				n += snprintf(t->text + n, sizeof(t->text) - (size_t)n, "%s%s",
				    k ? " " : "", w);
				/* Some words in capitals: the index folds them. */
				for (int c = at; rnd(4) == 0 && c < n; c++)
					if (t->text[c] >= 'a' && t->text[c] <= 'z')
						t->text[c] -= 32;
			}
		}
 fields:
		if (rnd(4) == 0)
			snprintf(t->sd, sizeof(t->sd), "[ex@1 user=\"%s smith\" n=\"%u\"]",
			    rnd(2) ? "bob" : "Alice", rnd(5));
		t->host = hosts[rnd(4)];
		t->prog = progs[rnd(4)];
		t->peer = peers[rnd(4)];
		if (rnd(3))
			snprintf(t->pid, sizeof(t->pid), "%u", 100 + rnd(20));
		t->fac = rnd(10) == 0 ? LB_NOVALUE : (uint8_t)rnd(24);
		t->sev = rnd(10) == 0 ? LB_NOVALUE : (uint8_t)rnd(8);
		/* Two days, a few seconds each; some steps of a second left empty. */
		if (i < NDAY1)
			t->received = T0 + 1000000 + (int64_t)i * 3217 + (i > 700 ? 3000000 : 0);
		else
			t->received = T0 + DAY_US + 500000 + (int64_t)(i - NDAY1) * 2903;
		/* Event times: most a little behind, some far off, some missing. */
		switch (t_rnd(&rng_ev) % 16) {
		case 0: case 1:
			t->ts = LB_NOTIME;
			break;
		case 2: case 3:		/* hours off, either way (the other day's ranges) */
			t->ts = t->received + ((int64_t)(t_rnd(&rng_ev) % (2 * DAY_US)) - DAY_US);
			break;
		case 4:			/* far future */
			t->ts = t->received + 10 * 365 * DAY_US;
			break;
		case 5:			/* before 1970: seconds round down */
			t->ts = -(int64_t)(t_rnd(&rng_ev) % 5000000000LL);
			break;
		default:
			t->ts = t->received - (int64_t)(t_rnd(&rng_ev) % 4000000);
			break;
		}
	}
}

/* ---------------------------------------------------------------- brute force */


/* A request for q over receive times [T0, to): want, at most limit hits, the rest zero. */
static struct lb_searchreq
req(const struct lb_qnode *q, int64_t to, uint32_t want, uint32_t limit)
{
	struct lb_searchreq	 rq;

	memset(&rq, 0, sizeof(rq));
	rq.q = q;
	rq.from = T0;
	rq.to = to;
	rq.want = want;
	rq.limit = limit;
	return (rq);
}

/* ---------------------------------------------------------------- trees */

/*
 * Query trees built by hand, of plain malloc'ed data as lb_query_parse() builds them, so that
 * lb_query_free() frees them too.
 */

static struct lb_qnode *
qn(int kind)
{
	struct lb_qnode *q = calloc(1, sizeof(*q));

	assert_non_null(q);
	q->kind = kind;
	return (q);
}

static void
mkpat(struct lb_qpat *p, const char *glob)
{
	size_t n = strlen(glob), lit = strcspn(glob, "*?");

	p->glob = (uint8_t *)strdup(glob);
	p->globlen = n;
	p->lit = (uint8_t *)strndup(glob, lit);
	p->litlen = lit;
	if (lit == n)
		p->kind = LB_QP_EXACT;
	else if (strspn(glob + lit, "*") == n - lit)
		p->kind = LB_QP_PREFIX;
	else
		p->kind = LB_QP_WILD;
}

/* A term or phrase node (kind) of the n patterns globs[] on field ns (sdname for sd). */
static struct lb_qnode *
qpats(int kind, uint8_t ns, const char *sdname, size_t n, const char *const *globs)
{
	struct lb_qnode *q = qn(kind);

	q->ns = ns;
	if (sdname != NULL)
		q->sdname = strdup(sdname);
	q->pats = calloc(n, sizeof(*q->pats));
	q->npats = n;
	for (size_t i = 0; i < n; i++)
		mkpat(&q->pats[i], globs[i]);
	return (q);
}

static struct lb_qnode *
qterm(uint8_t ns, const char *sdname, const char *glob)
{
	return (qpats(LB_Q_TERM, ns, sdname, 1, &glob));
}

static struct lb_qnode *
qphrase(uint8_t ns, const char *sdname, const char *a, const char *b)
{
	return (qpats(LB_Q_PHRASE, ns, sdname, 2, (const char *const[]){ a, b }));
}

static struct lb_qnode *
qkids(int kind, int n, struct lb_qnode **k)
{
	struct lb_qnode *q = qn(kind);

	q->kids = calloc((size_t)n, sizeof(*q->kids));
	memcpy(q->kids, k, (size_t)n * sizeof(*k));
	q->nkids = (size_t)n;
	return (q);
}

static const char *text_pats[] = {
	"alpha", "beta", "eta", "error", "errors", "nosuchword", "conn", "7", "x",
	"al*", "e*", "err*", "zz*", "*ta", "*a", "e?a", "*et*", "a*a", "?", "*", "b*x", "*rr*s",
	"*?a", "**e?a", "*t?*",
};
static const char *host_pats[] = { "web-01", "db-1", "web-*", "*-0?", "nohost", "*" };
static const char *prog_pats[] = { "sshd", "cron", "*n*", "ng*", "*" };
static const char *peer_pats[] = { "10.0.0.7", "10.0.0.*", "2001:db8::1", "*:*", "*" };

static struct lb_qnode *
gen_leaf(void)
{
	struct lb_qnode	*q;
	const char	*a, *b;

	switch (rnd(12)) {
	case 0: case 1: case 2: case 3:
		return (qterm(LB_NS_TEXT, NULL,
		    text_pats[rnd(sizeof(text_pats) / sizeof(*text_pats))]));
	case 4:
		if (rnd(3) == 0)
			return (qterm(LB_NS_PEER, NULL, peer_pats[rnd(5)]));
		return (qterm(LB_NS_HOST, NULL, host_pats[rnd(6)]));
	case 5:
		return (qterm(LB_NS_PROGRAM, NULL, prog_pats[rnd(5)]));
	case 6:
		return (qterm(LB_NS_SD, rnd(3) ? "ex@1.user" : "ex@1.n",
		    (const char *[]){ "bob", "alice", "sm*", "*i*", "3", "*" }[rnd(6)]));
	case 7: case 8:
		a = words[rnd(NWORDS)];
		b = rnd(3) == 0 ? "*a" : words[rnd(NWORDS)];
		if (rnd(5) == 0)
			return (qphrase(LB_NS_SD, "ex@1.user", "bob", "smith"));
		if (rnd(4) == 0)
			return (qphrase(LB_NS_TEXT, NULL, "conn", "1*"));
		if (rnd(2) == 0) {
			/* Word pairs of the shapes' templates, matching or nearly. */
			static const char *const pairs[][2] = {
				{ "alpha", "epsilon" }, { "epsilon", "port" }, { "port", "from" },
				{ "refused", "zeta" }, { "refused.", "eta" }, { "conn", "refused" },
				{ "error", "beta" }, { "gamma", "gamma" }, { "delta", "bob" },
				{ "existent", "user" }, { "eta", "non" }, { "user", "alpha" },
				{ "example", "com" }, { "beta", "non-existent-user" }, { "pid", "bob" },
			};
			int k = (int)rnd(sizeof(pairs) / sizeof(pairs[0]));

			return (qphrase(LB_NS_TEXT, NULL, pairs[k][0], pairs[k][1]));
		}
		return (qphrase(LB_NS_TEXT, NULL, a, b));
	case 9: case 10:
		q = qn(LB_Q_SET);
		q->ns = rnd(2) ? LB_NS_FACILITY : LB_NS_SEVERITY;
		q->mask = (uint32_t)rnd(1U << 24) | (1U << rnd(24));
		if (q->ns == LB_NS_SEVERITY)
			q->mask &= 0xff;
		if (q->mask == 0)
			q->mask = 1;
		return (q);
	default:
		return (qn(LB_Q_ALL));
	}
}

static struct lb_qnode *
gen_tree(int depth)
{
	struct lb_qnode	*k[3];
	int		 n = 2 + (int)rnd(2);

	if (depth == 0 || rnd(3) == 0)
		return (gen_leaf());
	switch (rnd(3)) {
	case 0:
		for (int i = 0; i < n; i++)
			k[i] = gen_tree(depth - 1);
		return (qkids(LB_Q_AND, n, k));
	case 1:
		for (int i = 0; i < n; i++)
			k[i] = gen_tree(depth - 1);
		return (qkids(LB_Q_OR, n, k));
	default:
		k[0] = gen_tree(depth - 1);
		return (qkids(LB_Q_NOT, 1, k));
	}
}

/* ---------------------------------------------------------------- expected results */

struct expect {
	uint64_t	*ids;		/* matches, ascending */
	size_t		 n;
	uint64_t	 hist[LB_HIST_MAX];
	uint32_t	 nhist;
	int64_t		 step;
	struct lb_topval top[4096];
	size_t		 ntop;
};

static int64_t
fl(int64_t t)
{
	return (t / 1000000 * 1000000 - (t % 1000000 < 0 ? 1000000 : 0));
}

static int64_t
cl(int64_t t)
{
	return (-fl(-t));
}

struct topcol {
	struct expect	*x;
	uint8_t		 key[80];
	size_t		 keylen;
	uint8_t		 seen[64][300];
	size_t		 seenlen[64];
	int		 nseen;
};

static int
top_col(void *arg, const uint8_t *term, size_t len)
{
	struct topcol	*c = arg;
	const uint8_t	*v = term + c->keylen;
	size_t		 vl = len - c->keylen;

	if (len < c->keylen || memcmp(term, c->key, c->keylen) != 0)
		return (0);
	for (int i = 0; i < c->nseen; i++)
		if (c->seenlen[i] == vl && memcmp(c->seen[i], v, vl) == 0)
			return (0);
	memcpy(c->seen[c->nseen], v, vl);
	c->seenlen[c->nseen++] = vl;
	for (size_t i = 0; i < c->x->ntop; i++) {
		if (c->x->top[i].len == vl && memcmp(c->x->top[i].value, v, vl) == 0) {
			c->x->top[i].count++;
			return (0);
		}
	}
	assert_true(c->x->ntop < 4096);
	c->x->top[c->x->ntop].value = malloc(vl + 1);
	memcpy(c->x->top[c->x->ntop].value, v, vl);
	c->x->top[c->x->ntop].len = vl;
	c->x->top[c->x->ntop++].count = 1;
	return (0);
}

static int
cmp_tv(const void *a, const void *b)
{
	const struct lb_topval	*x = a, *y = b;
	size_t			 n = x->len < y->len ? x->len : y->len;
	int			 c;

	if (x->count != y->count)
		return (x->count > y->count ? -1 : 1);
	if ((c = memcmp(x->value, y->value, n)) != 0)
		return (c);
	return (x->len < y->len ? -1 : x->len > y->len);
}

static void
brute(const struct lb_searchreq *rq, int nmsg, struct expect *x)
{
	int64_t		 from = fl(rq->from), to = cl(rq->to);
	struct topcol	*tc2 = calloc(1, sizeof(*tc2));
	struct lb_msg	 m;

	assert_non_null(tc2);
	memset(x, 0, offsetof(struct expect, top));
	x->ntop = 0;
	x->ids = calloc(NMSG, sizeof(*x->ids));
	if (rq->want & LB_WANT_HIST) {
		uint64_t span = (uint64_t)(to - from), st;

		st = (span + rq->nbuckets - 1) / rq->nbuckets;
		st = (st + 999999) / 1000000 * 1000000;
		if (st < 1000000)
			st = 1000000;
		x->step = (int64_t)st;
		x->nhist = (uint32_t)((span + st - 1) / st);
	}
	tc2->x = x;
	tc2->key[0] = rq->top_ns;
	tc2->keylen = 1;
	if (rq->top_ns == LB_NS_SD) {
		memcpy(tc2->key + 1, rq->top_sdname, strlen(rq->top_sdname) + 1);
		tc2->keylen = 1 + strlen(rq->top_sdname) + 1;
	}
	for (int i = 0; i < nmsg; i++) {
		const struct tmsg	*t = &msgs[i];
		int64_t			 at = t->received;

		if (rq->time == LB_TIME_EVENT) {
			if (t->ts == LB_NOTIME)
				continue;
			at = fl(t->ts);
		}
		if (at < from || at >= to)
			continue;
		tm_fill(&m, t);
		if (lb_query_match(rq->q, &tc, &m) != 1)
			continue;
		x->ids[x->n++] = t->id;
		if (x->nhist > 0)
			x->hist[(at - from) / x->step]++;
		if (rq->want & LB_WANT_TOP) {
			tc2->nseen = 0;
			lb_msg_terms(&tc, &m, top_col, tc2);
		}
	}
	qsort(x->top, x->ntop, sizeof(*x->top), cmp_tv);
	free(tc2);
}

static void
expect_free(struct expect *x)
{
	free(x->ids);
	for (size_t i = 0; i < x->ntop; i++)
		free(x->top[i].value);
	x->ntop = 0;
}

/* Compares a result with the brute force; returns a short description of the first mismatch. */
static const char *
compare(const struct lb_searchreq *rq, const struct lb_searchres *r, const struct expect *x)
{
	size_t want = x->n < rq->limit ? x->n : rq->limit;

	if ((rq->want & LB_WANT_TOTAL) && r->total != x->n)
		return ("total");
	if (rq->want & LB_WANT_HITS) {
		if (rq->cursor == 0) {
			if (r->n != want)
				return ("number of hits");
			for (size_t i = 0; i < want; i++) {
				uint64_t e = rq->order == LB_ORDER_NEWEST ? x->ids[x->n - 1 - i] :
				    x->ids[i];

				if (r->ids[i] != e)
					return ("hits");
			}
			if (r->next_cursor != (x->n > rq->limit ? r->ids[want - 1] : 0))
				return ("next_cursor");
		}
	}
	if (rq->want & LB_WANT_HIST) {
		if (r->nhist != x->nhist || r->hist_step != x->step)
			return ("histogram shape");
		for (uint32_t k = 0; k < x->nhist; k++)
			if (r->hist[k] != x->hist[k])
				return ("histogram counts");
	}
	if (rq->want & LB_WANT_TOP) {
		size_t k = x->ntop < rq->topk ? x->ntop : rq->topk;

		if (r->ntop != k)
			return ("number of top values");
		for (size_t i = 0; i < k; i++)
			if (r->top[i].count != x->top[i].count || r->top[i].len != x->top[i].len ||
			    memcmp(r->top[i].value, x->top[i].value, x->top[i].len) != 0)
				return ("top values");
	}
	return (NULL);
}

static void
print_tree(const struct lb_qnode *q)
{
	switch (q->kind) {
	case LB_Q_ALL: fprintf(stderr, "*"); break;
	case LB_Q_TERM: fprintf(stderr, "%d%s%s:%.*s", q->ns, q->sdname ? "/" : "",
	    q->sdname ? q->sdname : "", (int)q->pats[0].globlen, q->pats[0].glob); break;
	case LB_Q_PHRASE: fprintf(stderr, "%d:\"%.*s %.*s\"", q->ns, (int)q->pats[0].globlen,
	    q->pats[0].glob, (int)q->pats[1].globlen, q->pats[1].glob); break;
	case LB_Q_SET: fprintf(stderr, "set%d:%x", q->ns, q->mask); break;
	default:
		fprintf(stderr, "%s(", q->kind == LB_Q_AND ? "AND" : q->kind == LB_Q_OR ? "OR" : "NOT");
		for (size_t i = 0; i < q->nkids; i++) {
			if (i)
				fprintf(stderr, ", ");
			print_tree(q->kids[i]);
		}
		fprintf(stderr, ")");
	}
}

/* ---------------------------------------------------------------- the store */

static struct lb_store *
build(void)
{
	struct lb_store	*st;
	struct lb_msg	 m;

	t_mkdtemp(dir, sizeof(dir));
	lb_tokconf_default(&tc);
	gen_msgs();
	assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
	for (int i = 0; i < NMSG; i++) {
		tm_fill(&m, &msgs[i]);
		m.id = 0;
		assert_ok(lb_store_append(st, &m));
		msgs[i].id = m.id;
		assert_int_equal(m.received, msgs[i].received);
		if ((i + 1) % FLUSH == 0 && i < NMSG - NTAIL)
			assert_ok(lb_store_flush(st));
	}
	assert_ok(lb_store_commit(st, 0));
	return (st);
}

/* Closes the store that build() made and removes its directory. */
static void
build_done(struct lb_store *st)
{
	assert_ok(lb_store_close(st));
	t_rmtree(dir);
}

static void
random_req(struct lb_searchreq *rq, struct lb_qnode *q)
{
	static const uint8_t tops[] = { LB_NS_HOST, LB_NS_PROGRAM, LB_NS_SEVERITY, LB_NS_TEXT,
	    LB_NS_SD, LB_NS_FACILITY, LB_NS_PID, LB_NS_PEER };
	int64_t span[] = { T0, T0 + 2 * DAY_US };

	memset(rq, 0, sizeof(*rq));
	rq->q = q;
	switch (rnd(4)) {
	case 0:		/* everything */
		rq->from = span[0];
		rq->to = span[1];
		break;
	case 1:		/* within the first day, to the microsecond */
		rq->from = T0 + (int64_t)rnd(9000000);
		rq->to = rq->from + (int64_t)rnd(6000000);
		break;
	case 2:		/* the second day, into the tail */
		rq->from = T0 + DAY_US + (int64_t)rnd(5000000);
		rq->to = T0 + DAY_US + (int64_t)rnd(9000000);
		if (rq->to < rq->from)
			rq->to = rq->from;
		break;
	default:	/* across the days */
		rq->from = T0 + (int64_t)rnd(8000000);
		rq->to = T0 + DAY_US + (int64_t)rnd(9000000);
		break;
	}
	if (t_rnd(&rng_ev) % 3 == 0) {
		rq->time = LB_TIME_EVENT;
		if (t_rnd(&rng_ev) % 4 == 0) {	/* a few with messages before 1970 */
			rq->from = -4000000000LL + (int64_t)(t_rnd(&rng_ev) % 3000000000LL);
			rq->to = rq->from + (int64_t)(t_rnd(&rng_ev) % 2000000000LL);
		}
	}
	rq->want = LB_WANT_HITS | (rnd(4) ? LB_WANT_TOTAL : 0) | (rnd(3) ? LB_WANT_HIST : 0) |
	    (rnd(3) == 0 ? LB_WANT_TOP : 0);
	rq->limit = 1 + rnd(60);
	rq->order = (int)rnd(2);
	rq->nbuckets = 1 + rnd(40);
	rq->top_ns = tops[rnd(sizeof(tops))];
	rq->top_sdname = rnd(2) ? "ex@1.user" : "ex@1.n";
	rq->topk = 1 + rnd(12);
}

static int
check_random(struct lb_store *st, int ntrees, int nmsg)
{
	struct lb_searchreq	 rq;
	struct lb_searchres	 r;
	struct expect		*x = calloc(1, sizeof(*x));
	uint64_t		 segs = 0;
	int			 bad = 0, nonempty = 0, tail = 0, evt = 0;

	assert_non_null(x);
	for (int i = 0; i < ntrees; i++) {
		struct lb_qnode	*q = gen_tree(3);
		const char	*why;

		random_req(&rq, q);
		assert_ok(lb_search(st, &rq, &r));
		brute(&rq, nmsg, x);
		if ((why = compare(&rq, &r, x)) != NULL) {
			fprintf(stderr, "tree %d: %s differs (got total %llu n %zu, want %zu): ", i,
			    why, (unsigned long long)r.total, r.n, x->n);
			print_tree(q);
			fprintf(stderr, " want %#x order %d limit %u [%lld, %lld)\n", rq.want,
			    rq.order, rq.limit, (long long)rq.from, (long long)rq.to);
			bad++;
		}
		assert_int_equal(r.nwarnings, 0);
		nonempty += x->n > 0;
		evt += rq.time == LB_TIME_EVENT && x->n > 0;
		segs += r.segments;
		tail += r.tail > 0;
		lb_searchres_free(&r);
		expect_free(x);
		lb_query_free(q);
	}
	/* The trees must not be trivially empty, and both the index and the tail must be used. */
	assert_true(nonempty > ntrees / 3);
	assert_true(segs > (uint64_t)ntrees);
	assert_true(evt > ntrees / 20);
	if (getenv("T_EVAL_VERBOSE") != NULL)
		fprintf(stderr, "%d trees: %d nonempty, %llu segments, %d with tail\n", ntrees,
		    nonempty, (unsigned long long)segs, tail);
	free(x);
	return (bad);
}

/*
 * Top values of a field that the query pins (an exact term on host, program or peer, alone or
 * in an AND), which the evaluator counts without the field's lists: against brute force, with
 * patterns that do not pin (wildcards, OR, NOT) mixed in.
 */
static int
check_pinned(struct lb_store *st, int ntrees, int nmsg)
{
	struct lb_searchreq	 rq;
	struct lb_searchres	 r;
	struct expect		*x = calloc(1, sizeof(*x));
	int			 bad = 0, counted = 0;

	assert_non_null(x);
	for (int i = 0; i < ntrees; i++) {
		static const uint8_t	 nss[] = { LB_NS_HOST, LB_NS_PROGRAM, LB_NS_PEER };
		uint8_t			 ns = nss[rnd(3)];
		const char		*pat = ns == LB_NS_HOST ? host_pats[rnd(6) % 3 == 2 ? 2 : rnd(2)] :
		    ns == LB_NS_PROGRAM ? prog_pats[rnd(3)] : peer_pats[rnd(2)];
		struct lb_qnode		*k[2] = { qterm(ns, NULL, pat), gen_tree(2) }, *q;
		const char		*why;

		switch (rnd(4)) {
		case 0:
			q = k[0];
			lb_query_free(k[1]);
			break;
		case 1:
			q = qkids(LB_Q_AND, 2, k);
			break;
		case 2:
			q = qkids(LB_Q_AND, 2, (struct lb_qnode *[]){ k[1], k[0] });
			break;
		default:
			q = qkids(LB_Q_OR, 2, k);
			break;
		}
		random_req(&rq, q);
		rq.want |= LB_WANT_TOP;
		rq.top_ns = ns;
		assert_ok(lb_search(st, &rq, &r));
		brute(&rq, nmsg, x);
		if ((why = compare(&rq, &r, x)) != NULL) {
			fprintf(stderr, "pinned %d: %s differs: ", i, why);
			print_tree(q);
			fprintf(stderr, "\n");
			bad++;
		}
		counted += r.ntop > 0;
		lb_searchres_free(&r);
		expect_free(x);
		lb_query_free(q);
	}
	assert_true(counted > ntrees / 4);
	free(x);
	return (bad);
}

/* ---------------------------------------------------------------- tests */

/* Queries as users write them, through the parser. */
static const char *texts[] = {
	"alpha", "alpha beta", "alpha OR beta", "NOT alpha", "alpha AND NOT (beta OR gamma)",
	"\"alpha beta\"", "alpha-beta", "conn:1*", "Conn:1", "host:web-*", "host:WEB-01",
	"program:*n* severity<=warning", "facility:kern OR facility:3", "ex@1.user:bob",
	"ex@1.user:\"bob smith\"", "*ta AND e?a", "NOT (*a OR *e)", "*", "pid:1?0",
	"severity>err NOT host:mail", "nosuchword OR x", "e* NOT eta", "\"* smith\"",
	"message:alpha", "program:* AND NOT pid:*", "peer:10.0.0.7", "peer:10.0.0.*",
	"peer:2001\\:db8\\:\\:1", "peer:* AND NOT host:mail",
};

static void
t_parsed(void **state)
{
	struct lb_store		*st;
	struct lb_searchreq	 rq;
	struct lb_searchres	 r;
	struct lb_qerr		 err;
	struct expect		*x = calloc(1, sizeof(*x));
	struct lb_qnode		*q;

	(void)state;
	assert_non_null(x);
	st = build();
	for (size_t i = 0; i < sizeof(texts) / sizeof(*texts); i++) {
		if (lb_query_parse(&tc, texts[i], strlen(texts[i]), &q, &err) != 0)
			fail_msg("%s: %s at %zu", texts[i], err.msg, err.pos);
		for (int k = 0; k < 20; k++) {
			const char *why;

			random_req(&rq, q);
			assert_ok(lb_search(st, &rq, &r));
			brute(&rq, NMSG, x);
			if ((why = compare(&rq, &r, x)) != NULL)
				fail_msg("%s: %s differs", texts[i], why);
			lb_searchres_free(&r);
			expect_free(x);
		}
		lb_query_free(q);
	}
	free(x);
	build_done(st);
}

static void
t_random(void **state)
{
	struct lb_store		*st, *rd;
	struct lb_catalog	*cat;

	size_t			 blob;

	(void)state;
	st = build();
	/* The writer: segments and a tail not indexed yet; leading wildcards through term blobs. */
	assert_int_equal(check_random(st, 1500, NMSG), 0);
	assert_int_equal(check_pinned(st, 400, NMSG), 0);
	blob = lb_store_blob_bytes(st);
	assert_true(blob > 0 && blob <= LB_BLOB_BUDGET);
	assert_ok(lb_store_close(st));
	/* Readers over one catalog, after the close flushed the tail. */
	assert_ok(lb_catalog_open(dir, LB_RDONLY, &cat));
	assert_ok(lb_store_open_reader(cat, dir, "main", &rd));
	assert_int_equal(check_random(rd, 500, NMSG), 0);
	/* Without blobs (dictionary walks), and with room for only some of them (LRU). */
	lb_store_set_blob_budget(rd, 0);
	assert_int_equal(lb_store_blob_bytes(rd), 0);
	assert_int_equal(check_random(rd, 300, NMSG), 0);
	assert_int_equal(lb_store_blob_bytes(rd), 0);
	lb_store_set_blob_budget(rd, blob / 2);
	assert_int_equal(check_random(rd, 300, NMSG), 0);
	assert_true(lb_store_blob_bytes(rd) <= blob / 2);
	lb_store_close(rd);
	lb_catalog_close(cat);
	t_rmtree(dir);
}

/*
 * Segments rewritten at version 2 (no forms indexed, DEFLATE dictionary blocks; FORMAT.md §9): every text pattern goes through
 * the scan that matches the forms of each term, with term blobs and without; the answers stay
 * the brute force's. (These files do hold forms too, which the scan takes as terms like any
 * other: tests/test_token_forms.py reads a store written before forms existed.)
 */
static void
t_old_segments(void **state)
{
	struct lb_store		*st, *rd;
	struct lb_catalog	*cat;
	char			 pat[400];
	glob_t			 g;

	(void)state;
	st = build();
	assert_ok(lb_store_close(st));
	snprintf(pat, sizeof(pat), "%s/main/*/*/index/*%s", dir, LB_SEG_SUFFIX);
	assert_int_equal(glob(pat, 0, NULL, &g), 0);
	assert_true(g.gl_pathc >= 2);
	for (size_t i = 0; i < g.gl_pathc; i++)
		t_seg_to_v2(g.gl_pathv[i]);
	globfree(&g);
	assert_ok(lb_catalog_open(dir, LB_RDONLY, &cat));
	assert_ok(lb_store_open_reader(cat, dir, "main", &rd));
	assert_int_equal(check_random(rd, 400, NMSG), 0);
	assert_true(lb_store_blob_bytes(rd) > 0);
	lb_store_set_blob_budget(rd, 0);
	assert_int_equal(check_random(rd, 200, NMSG), 0);
	lb_store_close(rd);
	lb_catalog_close(cat);
	t_rmtree(dir);
}

/* Clears a segment file's LB_SEG_F_EVTIME: as written before event-time terms. */
static void
seg_clear_evtime(const char *path)
{
	size_t	 len;
	uint8_t	*b = t_read_file(path, &len);
	FILE	*f;

	assert_true(len >= LB_SEG_HDR_SIZE);
	assert_int_equal(lb_get32(b + LB_SEG_H_FLAGS), LB_SEG_F_EVTIME);
	lb_put32(b + LB_SEG_H_FLAGS, 0);
	lb_put32(b + LB_SEG_H_CRC, lb_crc32(b, LB_SEG_H_CRC));
	assert_non_null(f = fopen(path, "wb"));
	assert_int_equal(fwrite(b, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	free(b);
}

/*
 * Segments written before event-time terms: a search by event time skips them and says so
 * (one warning: run logbox reindex); by receive time nothing changes. lb_store_reindex gives
 * them the terms, and then every event-time search is the brute force's again.
 */
static void
t_evtime_old(void **state)
{
	struct lb_store		*st;
	struct lb_searchreq	 rq;
	struct lb_searchres	 r;
	struct expect		*x = calloc(1, sizeof(*x));
	struct lb_qnode		*all = qn(LB_Q_ALL);
	char			 pat[400];
	glob_t			 g;

	(void)state;
	assert_non_null(x);
	st = build();
	assert_ok(lb_store_close(st));
	snprintf(pat, sizeof(pat), "%s/main/*/*/index/*%s", dir, LB_SEG_SUFFIX);
	assert_int_equal(glob(pat, 0, NULL, &g), 0);
	assert_true(g.gl_pathc >= 2);
	seg_clear_evtime(g.gl_pathv[0]);
	globfree(&g);
	assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
	rq = req(all, T0 + 2 * DAY_US, LB_WANT_TOTAL, 0);
	rq.time = LB_TIME_EVENT;
	assert_ok(lb_search(st, &rq, &r));
	brute(&rq, NMSG, x);
	assert_int_equal(r.nwarnings, 1);
	assert_non_null(strstr(r.warnings[0], "1 segment indexed before event-time terms"));
	assert_non_null(strstr(r.warnings[0], "run logbox reindex"));
	assert_true(r.total > 0 && r.total < x->n);
	lb_searchres_free(&r);
	expect_free(x);
	/* By receive time the segment is searched as ever. */
	rq.time = LB_TIME_RECEIVED;
	assert_ok(lb_search(st, &rq, &r));
	brute(&rq, NMSG, x);
	assert_int_equal(r.nwarnings, 0);
	assert_int_equal(r.total, x->n);
	lb_searchres_free(&r);
	expect_free(x);
	assert_ok(lb_store_reindex(st, NULL, NULL));
	rq.time = LB_TIME_EVENT;
	assert_ok(lb_search(st, &rq, &r));
	brute(&rq, NMSG, x);
	assert_int_equal(r.nwarnings, 0);
	assert_int_equal(r.total, x->n);
	lb_searchres_free(&r);
	expect_free(x);
	assert_int_equal(check_random(st, 300, NMSG), 0);
	lb_query_free(all);
	free(x);
	build_done(st);
}

/* Pages of a query newest first and oldest first give every match once, in order. */
static void
t_paging(void **state)
{
	struct lb_store		*st;
	struct lb_searchreq	 rq;
	struct lb_searchres	 r;
	struct expect		*x = calloc(1, sizeof(*x));

	(void)state;
	st = build();
	for (int i = 0; i < 40; i++) {
		struct lb_qnode	*q = gen_tree(2);

		for (int order = 0; order < 2; order++) {
			size_t got = 0;

			rq = req(q, T0 + 2 * DAY_US, LB_WANT_HITS, 1 + rnd(90));
			rq.order = order;
			brute(&rq, NMSG, x);
			for (;;) {
				assert_ok(lb_search(st, &rq, &r));
				for (size_t k = 0; k < r.n; k++, got++) {
					assert_true(got < x->n);
					assert_int_equal(r.ids[k], order == LB_ORDER_NEWEST ?
					    x->ids[x->n - 1 - got] : x->ids[got]);
				}
				rq.cursor = r.next_cursor;
				lb_searchres_free(&r);
				if (rq.cursor == 0)
					break;
			}
			assert_int_equal(got, x->n);
			expect_free(x);
		}
		lb_query_free(q);
	}
	free(x);
	build_done(st);
}

/* A damaged segment is skipped with a warning; the others still answer. */
static void
t_corrupt(void **state)
{
	struct lb_store		*st;
	struct lb_catalog	*cat;
	struct lb_segref	*refs = NULL;
	struct lb_searchreq	 rq;
	struct lb_searchres	 r;
	struct expect		*x = calloc(1, sizeof(*x));
	struct lb_qnode		*q;
	size_t			 n = 0, in = 0;
	char			 path[PATH_MAX];
	uint8_t			 h[128], junk[4096];
	uint64_t		 idxoff;
	int			 fd;

	(void)state;
	st = build();
	assert_ok(lb_store_close(st));
	assert_ok(lb_catalog_open(dir, LB_RDONLY, &cat));
	assert_ok(lb_catalog_segments(cat, "main", 0, UINT64_MAX, &refs, &n));
	assert_true(n >= 3);
	/* Overwrite the id lists and dictionary of the second segment. */
	snprintf(path, sizeof(path), "%s/main/%04u/%02u-%02u/index/%s", dir, refs[1].day / 10000,
	    refs[1].day / 100 % 100, refs[1].day % 100, refs[1].file);
	assert_true((fd = open(path, O_RDWR)) >= 0);
	assert_int_equal(pread(fd, h, sizeof(h), 0), sizeof(h));
	idxoff = 0;
	for (int i = 7; i >= 0; i--)
		idxoff = idxoff << 8 | h[LB_SEG_H_IDXOFF + i];
	memset(junk, 0x5a, sizeof(junk));
	for (uint64_t off = 128; off < idxoff; off += sizeof(junk))
		assert_true(pwrite(fd, junk, idxoff - off < sizeof(junk) ? idxoff - off :
		    sizeof(junk), (off_t)off) > 0);
	close(fd);

	assert_ok(lb_store_open_reader(cat, dir, "main", &st));
	q = qterm(LB_NS_TEXT, NULL, "alpha");
	rq = req(q, T0 + 2 * DAY_US, LB_WANT_HITS | LB_WANT_TOTAL, 10000);
	brute(&rq, NMSG, x);
	assert_ok(lb_search(st, &rq, &r));
	assert_int_equal(r.nwarnings, 1);
	assert_non_null(strstr(r.warnings[0], refs[1].file));
	assert_non_null(strstr(r.warnings[0], "skipped"));
	for (size_t i = 0; i < x->n; i++)
		in += x->ids[i] >= refs[1].first_id && x->ids[i] <= refs[1].last_id;
	assert_true(in > 0);
	assert_int_equal(r.total, x->n - in);
	assert_int_equal(r.n, x->n - in);
	lb_searchres_free(&r);
	/* The same again from the cache of the handle (the segment is not kept open). */
	assert_ok(lb_search(st, &rq, &r));
	assert_int_equal(r.nwarnings, 1);
	assert_int_equal(r.total, x->n - in);
	lb_searchres_free(&r);
	expect_free(x);
	free(x);
	lb_query_free(q);
	free(refs);
	lb_store_close(st);
	lb_catalog_close(cat);
	t_rmtree(dir);
}

static void
t_limits(void **state)
{
	struct lb_store		*st;
	struct lb_searchreq	 rq, ok;
	struct lb_searchres	 r;
	struct lb_qnode		*q, *w;

	(void)state;
	st = build();
	q = qterm(LB_NS_TEXT, NULL, "alpha");
	memset(&ok, 0, sizeof(ok));
	ok.q = q;
	ok.from = T0;
	ok.to = T0 + 2 * DAY_US;
	ok.want = LB_WANT_HITS | LB_WANT_TOTAL | LB_WANT_HIST | LB_WANT_TOP;
	ok.limit = 10;
	ok.nbuckets = 10;
	ok.topk = 5;
	ok.top_ns = LB_NS_HOST;
	assert_ok(lb_search(st, &ok, &r));
	lb_searchres_free(&r);

	rq = ok; rq.from = rq.to + 1;
	assert_int_equal(lb_search(st, &rq, &r), EINVAL);
	rq = ok; rq.limit = 0;
	assert_int_equal(lb_search(st, &rq, &r), EINVAL);
	rq = ok; rq.nbuckets = 0;
	assert_int_equal(lb_search(st, &rq, &r), EINVAL);
	rq = ok; rq.nbuckets = LB_HIST_MAX + 1;
	assert_int_equal(lb_search(st, &rq, &r), EINVAL);
	rq = ok; rq.topk = 0;
	assert_int_equal(lb_search(st, &rq, &r), EINVAL);
	rq = ok; rq.topk = LB_TOP_MAX + 1;
	assert_int_equal(lb_search(st, &rq, &r), EINVAL);
	rq = ok; rq.top_ns = 0x0a;
	assert_int_equal(lb_search(st, &rq, &r), EINVAL);
	rq = ok; rq.top_ns = LB_NS_SD; rq.top_sdname = NULL;
	assert_int_equal(lb_search(st, &rq, &r), EINVAL);
	rq = ok; rq.order = 2;
	assert_int_equal(lb_search(st, &rq, &r), EINVAL);
	rq = ok; rq.q = NULL;
	assert_int_equal(lb_search(st, &rq, &r), EINVAL);
	/* limit 0 is fine without hits. */
	rq = ok; rq.want = LB_WANT_TOTAL; rq.limit = 0;
	assert_ok(lb_search(st, &rq, &r));
	assert_true(r.total > 0);
	assert_int_equal(r.n, 0);
	lb_searchres_free(&r);

	/* Wildcards past max_terms. */
	w = qterm(LB_NS_TEXT, NULL, "*a");
	rq = ok; rq.q = w; rq.max_terms = 2;
	assert_int_equal(lb_search(st, &rq, &r), LB_ETOOBROAD);
	rq.max_terms = 1000;
	assert_ok(lb_search(st, &rq, &r));
	lb_searchres_free(&r);
	lb_query_free(w);
	w = qterm(LB_NS_TEXT, NULL, "e*");
	rq = ok; rq.q = w; rq.max_terms = 1;
	assert_int_equal(lb_search(st, &rq, &r), LB_ETOOBROAD);
	lb_query_free(w);

	/* An empty time range, and one before every message. */
	rq = ok; rq.from = rq.to = T0 + 5 * 1000000;
	assert_ok(lb_search(st, &rq, &r));
	assert_int_equal(r.total, 0);
	assert_int_equal(r.nhist, 0);
	lb_searchres_free(&r);
	rq = ok; rq.from = 0; rq.to = T0;
	assert_ok(lb_search(st, &rq, &r));
	assert_int_equal(r.total, 0);
	assert_int_equal(r.n, 0);
	lb_searchres_free(&r);
	rq = ok; rq.from = INT64_MIN; rq.to = INT64_MAX;
	assert_ok(lb_search(st, &rq, &r));
	assert_true(r.total > 0);
	lb_searchres_free(&r);

	lb_query_free(q);
	build_done(st);
}

/* A message is found as soon as the writer has it; a later flush gives the same answer. */
static void
t_tail(void **state)
{
	struct lb_store		*st;
	struct lb_searchreq	 rq;
	struct lb_searchres	 r;
	struct lb_msg		 m;
	struct lb_qnode		*q;
	const char		*text = "fresh needle here";

	(void)state;
	st = build();
	memset(&m, 0, sizeof(m));
	m.message.p = (const uint8_t *)text;
	m.message.len = strlen(text);
	m.received = T0 + DAY_US + 20 * 1000000LL;
	m.facility = m.severity = LB_NOVALUE;
	assert_ok(lb_store_append(st, &m));
	q = qterm(LB_NS_TEXT, NULL, "needle");
	rq = req(q, T0 + 2 * DAY_US, LB_WANT_HITS | LB_WANT_TOTAL, 5);
	assert_ok(lb_search(st, &rq, &r));
	assert_int_equal(r.total, 1);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.ids[0], m.id);
	assert_true(r.tail > 0);
	lb_searchres_free(&r);
	assert_ok(lb_store_flush(st));
	assert_ok(lb_search(st, &rq, &r));
	assert_int_equal(r.total, 1);
	assert_int_equal(r.ids[0], m.id);
	assert_int_equal(r.tail, 0);
	lb_searchres_free(&r);
	lb_query_free(q);
	build_done(st);
}

/*
 * Hits alone of "*" and NOT in one segment much larger than the first part a wide search takes
 * (65536 ids): every page, both orders, against a brute force.
 */
#define WIDE_N	150000

static void
wide_msg(struct lb_msg *m, char *buf, size_t len, uint64_t i)
{
	memset(m, 0, sizeof(*m));
	snprintf(buf, len, "w%llu v%llu%s", (unsigned long long)(i % 13),
	    (unsigned long long)(i % 101), i % 50000 == 17 ? " rare" : "");
	m->message.p = (const uint8_t *)buf;
	m->message.len = strlen(buf);
	m->facility = m->severity = LB_NOVALUE;
	m->timestamp = LB_NOTIME;
	m->received = T0 + (int64_t)i * 20;
}

static void
t_wide(void **state)
{
	static const char *qs[] = { "*", "NOT w3", "rare OR NOT v7", "w1 AND NOT v1*",
	    "NOT (w1 OR w2 OR w3 OR w4 OR w5 OR w6 OR w7 OR w8 OR w9 OR w10 OR w11 OR w12)",
	    "NOT w0 AND NOT w1 AND NOT w2 AND NOT w3 AND NOT w4 AND NOT w5 AND NOT w6",
	    "v5 AND NOT w0", "NOT w0 AND (v5 OR v6 OR rare)" };
	static const uint32_t limits[] = { 100000, 997, 7000 };
	struct lb_store		*st;
	struct lb_searchreq	 rq;
	struct lb_searchres	 r;
	struct lb_qerr		 err;
	struct lb_msg		 m;
	struct lb_qnode		*q;
	struct lb_catalog	*cat;
	struct lb_lsconf	 conf;
	struct lb_segref	*refs = NULL;
	size_t			 nrefs = 0;
	uint64_t		*want = calloc(WIDE_N, sizeof(*want));
	char			 buf[64];

	(void)state;
	assert_non_null(want);
	t_mkdtemp(dir, sizeof(dir));
	lb_tokconf_default(&tc);
	/* One segment for the whole run: no timed flush. */
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	lb_lsconf_default(&conf);
	conf.flush_ms = 3600 * 1000;
	assert_ok(lb_catalog_logspace_create(cat, "main", &conf));
	lb_catalog_close(cat);
	assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
	for (uint64_t i = 1; i <= WIDE_N; i++) {
		wide_msg(&m, buf, sizeof(buf), i);
		assert_ok(lb_store_append(st, &m));
		assert_int_equal(m.id, i);
		if (i == WIDE_N - 100)
			assert_ok(lb_store_flush(st));
	}
	for (size_t k = 0; k < sizeof(qs) / sizeof(*qs); k++) {
		size_t nw = 0;

		assert_ok(lb_query_parse(&tc, qs[k], strlen(qs[k]), &q, &err));
		for (uint64_t i = 1; i <= WIDE_N; i++) {
			wide_msg(&m, buf, sizeof(buf), i);
			if (lb_query_match(q, &tc, &m) == 1)
				want[nw++] = i;
		}
		for (int run = 0; run < 6; run++) {
			int	order = run % 2;
			size_t	got = 0;

			rq = req(q, T0 + DAY_US, LB_WANT_HITS, limits[run / 2]);
			rq.order = order;
			for (;;) {
				assert_ok(lb_search(st, &rq, &r));
				for (size_t j = 0; j < r.n; j++, got++) {
					assert_true(got < nw);
					assert_int_equal(r.ids[j], order == LB_ORDER_NEWEST ?
					    want[nw - 1 - got] : want[got]);
				}
				rq.cursor = r.next_cursor;
				lb_searchres_free(&r);
				if (rq.cursor == 0)
					break;
			}
			assert_int_equal(got, nw);
		}
		lb_query_free(q);
	}
	/*
	 * A deadline of 1 ms is far too short for counting "NOT rare" with its top tokens here
	 * (each token's list is read; "*" over whole segments takes the dictionary's counts).
	 */
	assert_ok(lb_query_parse(&tc, "NOT rare", 8, &q, &err));
	rq = req(q, T0 + DAY_US, LB_WANT_TOTAL | LB_WANT_TOP, 0);
	rq.top_ns = LB_NS_TEXT;
	rq.topk = 10;
	rq.deadline_ms = 1;
	assert_int_equal(lb_search(st, &rq, &r), LB_EDEADLINE);
	rq.deadline_ms = 0;
	/* Cancelled (searchd: the client went away): given up at the first look at the clock. */
	{
		atomic_int cancel;

		atomic_init(&cancel, 1);
		rq.cancel = &cancel;
		assert_int_equal(lb_search(st, &rq, &r), ECANCELED);
		atomic_store(&cancel, 0);
		assert_ok(lb_search(st, &rq, &r));
		assert_int_equal(r.total, WIDE_N - (WIDE_N + 50000 - 17) / 50000);	/* not rare */
		lb_searchres_free(&r);
		rq.cancel = NULL;
	}
	/* "*" over whole segments: the counts of the dictionary, exact. */
	lb_query_free(q);
	assert_ok(lb_query_parse(&tc, "*", 1, &q, &err));
	rq.q = q;
	assert_ok(lb_search(st, &rq, &r));
	assert_int_equal(r.total, WIDE_N);
	assert_int_equal(r.ntop, 10);
	assert_int_equal(r.top[0].count, WIDE_N / 13 + 1);	/* w1 .. w8: 11539 each */
	assert_memory_equal(r.top[0].value, "w1", 2);
	assert_int_equal(r.top[6].count, WIDE_N / 13);
	assert_int_equal(r.top[6].len, 2);
	assert_memory_equal(r.top[6].value, "w0", 2);
	lb_searchres_free(&r);
	lb_query_free(q);

	free(want);
	assert_ok(lb_store_close(st));
	assert_ok(lb_catalog_open(dir, LB_RDONLY, &cat));
	assert_ok(lb_catalog_segments(cat, "main", 0, UINT64_MAX, &refs, &nrefs));
	assert_true(nrefs >= 1 && refs[0].count == WIDE_N - 100);
	free(refs);
	lb_catalog_close(cat);
	t_rmtree(dir);
}

/*
 * A reader in one process while the writer in another appends, flushes and merges: every
 * search sees one consistent state (the count of a term equals what the id range holds), also
 * when the segments it had open were merged away, and the tail not yet indexed is found.
 */
#define RD_N	24000

static void
rd_writer(const char *d)
{
	struct lb_store	*st;
	struct lb_msg	 m;
	char		 buf[64];

	if (lb_store_open(d, "main", LB_RDWR, &st) != 0)
		_exit(1);
	for (uint64_t i = 1; i <= RD_N; i++) {
		memset(&m, 0, sizeof(m));
		snprintf(buf, sizeof(buf), "common k%llu", (unsigned long long)(i % 4));
		m.message.p = (const uint8_t *)buf;
		m.message.len = strlen(buf);
		m.facility = m.severity = LB_NOVALUE;
		m.timestamp = LB_NOTIME;
		m.received = T0 + (int64_t)i * 1000;
		if (lb_store_append(st, &m) != 0 || m.id != i)
			_exit(2);
		if (i % 100 == 0 && lb_store_commit(st, 0) != 0)
			_exit(3);
		if (i % 300 == 0 && lb_store_flush(st) != 0)
			_exit(4);
	}
	_exit(lb_store_close(st) == 0 ? 0 : 5);
}

static void
t_reader(void **state)
{
	struct lb_catalog	*cat = NULL;
	struct lb_store		*st;
	struct lb_searchreq	 rq;
	struct lb_searchres	 r;
	struct lb_qerr		 err;
	struct lb_qnode		*q;
	pid_t			 pid;
	int			 status = 0, done = 0, searches = 0, tails = 0;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	lb_tokconf_default(&tc);
	/* The logspace exists before the reader opens it. */
	assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
	assert_ok(lb_store_close(st));
	if ((pid = fork()) == 0)
		rd_writer(dir);
	assert_true(pid > 0);
	assert_ok(lb_catalog_open(dir, LB_RDONLY, &cat));
	assert_ok(lb_store_open_reader(cat, dir, "main", &st));
	assert_ok(lb_query_parse(&tc, "k3", 2, &q, &err));
	rq = req(q, T0 + DAY_US, LB_WANT_TOTAL | LB_WANT_HITS | LB_WANT_HIST, 3);
	rq.nbuckets = 5;
	while (!done || searches == 0 || status == 0) {
		uint64_t want;

		if (!done && waitpid(pid, &status, WNOHANG) == pid)
			done = 1;
		assert_ok(lb_search(st, &rq, &r));
		searches++;
		tails += r.tail > 0;
		assert_int_equal(r.nwarnings, 0);
		/* ids 1.. in the range: k3 is every id with id % 4 == 3. */
		assert_true(r.id_lo <= 1 || r.id_hi == r.id_lo);
		want = r.id_hi > 3 ? (r.id_hi - 4) / 4 + 1 : 0;
		assert_int_equal(r.total, want);
		if (want > 0) {
			assert_int_equal(r.ids[0], (r.id_hi - 4) / 4 * 4 + 3);
			assert_int_equal(r.n, want < 3 ? want : 3);
		}
		lb_searchres_free(&r);
		if (done)
			break;
	}
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* After the writer is gone: everything, all indexed. */
	assert_ok(lb_search(st, &rq, &r));
	assert_int_equal(r.total, RD_N / 4);
	assert_int_equal(r.tail, 0);
	lb_searchres_free(&r);
	if (getenv("T_EVAL_VERBOSE") != NULL)
		fprintf(stderr, "%d searches while writing, %d with a tail\n", searches, tails);
	assert_true(searches > 1);
	lb_query_free(q);
	lb_store_close(st);
	lb_catalog_close(cat);
	t_rmtree(dir);
}

/* More segments than a store keeps open (one a day for 80 days): the cache evicts and reopens. */
static void
t_many(void **state)
{
	struct lb_store		*st;
	struct lb_catalog	*cat;
	struct lb_searchreq	 rq;
	struct lb_searchres	 r;
	struct lb_qerr		 err;
	struct lb_qnode		*q;
	struct lb_msg		 m;
	struct lb_segref	*refs = NULL;
	size_t			 n = 0;
	char			 buf[64];

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	lb_tokconf_default(&tc);
	assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
	for (int d = 0; d < 80; d++) {
		for (int i = 0; i < 10; i++) {
			memset(&m, 0, sizeof(m));
			snprintf(buf, sizeof(buf), "day%d n%d all", d, i);
			m.message.p = (const uint8_t *)buf;
			m.message.len = strlen(buf);
			m.facility = m.severity = LB_NOVALUE;
			m.timestamp = LB_NOTIME;
			m.received = T0 + d * DAY_US + i * 1000000LL;
			assert_ok(lb_store_append(st, &m));
		}
	}
	assert_ok(lb_store_close(st));
	assert_ok(lb_catalog_open(dir, LB_RDONLY, &cat));
	assert_ok(lb_catalog_segments(cat, "main", 0, UINT64_MAX, &refs, &n));
	assert_true(n >= 80);
	free(refs);
	assert_ok(lb_store_open_reader(cat, dir, "main", &st));
	assert_int_equal(lb_store_open_reader(NULL, dir, "main", &st), EINVAL);
	memset(&rq, 0, sizeof(rq));
	rq.from = T0;
	rq.to = T0 + 100 * DAY_US;
	rq.want = LB_WANT_HITS | LB_WANT_TOTAL | LB_WANT_HIST | LB_WANT_TOP;
	rq.limit = 1000;
	rq.nbuckets = 100;
	rq.top_ns = LB_NS_TEXT;
	rq.topk = 3;
	for (int k = 0; k < 3; k++) {
		const char *text = k == 0 ? "n3" : k == 1 ? "all AND NOT n3" : "day7*";

		assert_ok(lb_query_parse(&tc, text, strlen(text), &q, &err));
		rq.q = q;
		for (int rep = 0; rep < 2; rep++) {
			uint64_t want = k == 0 ? 80 : k == 1 ? 720 : 110;

			assert_ok(lb_search(st, &rq, &r));
			assert_int_equal(r.total, want);
			assert_int_equal(r.n, want);
			assert_int_equal(r.nwarnings, 0);
			assert_int_equal(r.nhist, 100);
			for (size_t i = 1; i < r.n; i++)
				assert_true(r.ids[i] < r.ids[i - 1]);
			lb_searchres_free(&r);
		}
		lb_query_free(q);
	}
	lb_store_close(st);
	lb_catalog_close(cat);
	t_rmtree(dir);
}

T_MAIN(
	cmocka_unit_test(t_random),
	cmocka_unit_test(t_parsed),
	cmocka_unit_test(t_paging),
	cmocka_unit_test(t_corrupt),
	cmocka_unit_test(t_limits),
	cmocka_unit_test(t_tail),
	cmocka_unit_test(t_wide),
	cmocka_unit_test(t_reader),
	cmocka_unit_test(t_many),
	cmocka_unit_test(t_old_segments),
	cmocka_unit_test(t_evtime_old))
