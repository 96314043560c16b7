/*
 * t_terms.c — lb_msg_terms() (what the brute-force tail matcher compares against) and the
 * segment builder's own fast indexing agree exactly: for random messages with every kind of
 * field and structured data, the set of (term, id) pairs in a written segment equals the set
 * lb_msg_terms() yields (tokens and their forms: stripped tokens, parts of compound tokens).
 * Beside them the segment holds one template term (LB_NS_TPL) or the LB_NS_NOTPL list for
 * every message, exactly once (t_segment checks which). The event-time term (LB_NS_EVTIME):
 * its bytes (FORMAT.md §4.1), its order, and seconds rounded down before 1970.
 */
#include "t_helper.h"

#include <unistd.h>

struct pair {
	uint8_t		 term[400];
	size_t		 len;
	uint64_t	 id;
};

struct pairs {
	struct pair	*v;
	size_t		 n, cap;
	uint64_t	 id;
};

static int
add_pair(struct pairs *ps, const uint8_t *term, size_t len, uint64_t id)
{
	T_GROW(ps->v, ps->n, ps->cap, 1024);
	assert_true(len <= sizeof(ps->v[0].term));
	memcpy(ps->v[ps->n].term, term, len);
	ps->v[ps->n].len = len;
	ps->v[ps->n].id = id;
	ps->n++;
	return (0);
}

static int
on_term(void *arg, const uint8_t *term, size_t len)
{
	struct pairs *ps = arg;

	return (add_pair(ps, term, len, ps->id));
}

static int
cmp_pair(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;

	return (t_term_id_cmp(x->term, x->len, x->id, y->term, y->len, y->id));
}

static void
uniq(struct pairs *ps)
{
	size_t k = 0;

	qsort(ps->v, ps->n, sizeof(*ps->v), cmp_pair);
	for (size_t i = 0; i < ps->n; i++)
		if (k == 0 || cmp_pair(&ps->v[k - 1], &ps->v[i]) != 0)
			ps->v[k++] = ps->v[i];
	ps->n = k;
}

#define NMSG	3000

struct seg_walk {
	struct lb_segment	*sg;
	struct pairs		*ps;
	struct lb_postings	 p;
	unsigned		 tpl[NMSG + 1];	/* template terms per id */
};

static int
on_seg_term(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct seg_walk *w = arg;

	w->p.n = 0;
	assert_ok(lb_segment_postings(w->sg, cookie, &w->p));
	assert_int_equal(w->p.n, df);
	for (size_t i = 0; i < w->p.n; i++) {
		if (term[0] == LB_NS_TPL || term[0] == LB_NS_NOTPL) {
			assert_true(w->p.ids[i] >= 1 && w->p.ids[i] <= NMSG);
			w->tpl[w->p.ids[i]]++;
		} else
			add_pair(w->ps, term, len, w->p.ids[i]);
	}
	return (0);
}

static uint64_t rng = 88172645463325252ULL;

static uint64_t
rnd(void)
{
	return (t_rnd(&rng));
}

static size_t
rnd_text(char *buf, size_t cap, const char *alphabet)
{
	size_t n = rnd() % cap, al = strlen(alphabet);

	for (size_t i = 0; i < n; i++)
		buf[i] = alphabet[rnd() % al];
	return (n);
}

static void
t_segw_equals_msg_terms(void **state)
{
	static const char	*sds[] = { "", "[a b=\"x y\"]", "[ex@1 k=\"A\\\"B\" k2=\"C\\]D\"][o p=\"\"]",
	    "[bad", "[i n=\"v\" m=\"w w\"]", "[i n=v]" };
	const char		*alpha = "abcABC:= .,-_/\\\x80\xff\x01[]\"@+#09";	/* forms too */
	struct lb_tokconf	 tc;
	struct lb_segw		*w;
	struct lb_segment	*sg;
	struct pairs		 want = { 0 }, got = { 0 };
	struct seg_walk		 walk;
	char			 dir[256], path[300];
	char			 text[300], host[40], prog[20], peer[300];
	struct lb_msg		 m;

	(void)state;
	lb_tokconf_default(&tc);
	t_mkdtemp(dir, sizeof(dir));
	assert_ok(lb_segw_new(&w));
	for (uint64_t id = 1; id <= NMSG; id++) {
		memset(&m, 0, sizeof(m));
		m.id = id;
		m.received = 1000 + (int64_t)id;
		/* Event times: none, before 1970 (seconds round down), now. */
		m.timestamp = id % 3 == 0 ? LB_NOTIME : (int64_t)id * 123456789 - 2000000000LL;
		m.message.p = (const uint8_t *)text;
		m.message.len = rnd_text(text, sizeof(text), alpha);
		m.host.p = (const uint8_t *)host;
		m.host.len = rnd_text(host, sizeof(host), "abAB-.0");
		m.program.p = (const uint8_t *)prog;
		m.program.len = rnd_text(prog, sizeof(prog), "sshdSSHD");
		m.pid = m.program;
		m.msgid.len = 0;
		m.peer.p = (const uint8_t *)peer;
		m.peer.len = id % 7 == 0 ? sizeof(peer) : rnd_text(peer, sizeof(peer), "01.:aF");
		if (id % 7 == 0)
			memset(peer, 'P', sizeof(peer));	/* cut at LB_TOKEN_MAX */
		m.facility = rnd() % 5 == 0 ? LB_NOVALUE : (uint8_t)(rnd() % 24);
		m.severity = rnd() % 5 == 0 ? LB_NOVALUE : (uint8_t)(rnd() % 8);
		m.sd.p = (const uint8_t *)sds[id % 6];
		m.sd.len = strlen(sds[id % 6]);
		assert_ok(lb_segw_add(w, &tc, &m));
		want.id = id;
		assert_ok(lb_msg_terms(&tc, &m, on_term, &want));
	}
	snprintf(path, sizeof(path), "%s/t.seg", dir);
	assert_ok(lb_segw_write(w, path));
	assert_ok(lb_segment_open(path, &sg));
	memset(&walk, 0, sizeof(walk));
	walk.sg = sg;
	walk.ps = &got;
	assert_ok(lb_segment_terms(sg, NULL, 0, NULL, 0, on_seg_term, &walk));
	for (size_t id = 1; id <= NMSG; id++)
		assert_int_equal(walk.tpl[id], 1);
	uniq(&want);
	uniq(&got);
	assert_int_equal(got.n, want.n);
	for (size_t i = 0; i < want.n; i++)
		assert_int_equal(cmp_pair(&got.v[i], &want.v[i]), 0);
	lb_postings_free(&walk.p);
	lb_segment_close(sg);
	lb_segw_free(w);
	free(want.v);
	free(got.v);
	t_rmtree(dir);
}

static void
t_evtime_term(void **state)
{
	static const uint8_t	 want[] = { 0x0c, 0x80, 0x00, 0x00, 0x00, 0x69, 0xb4, 0xa5, 0x00 };
	static const int64_t	 secs[] = { INT64_MIN / 1000000, -86400, -2, -1, 0, 1, 1773446399,
	    1773446400, 4102444800LL, INT64_MAX / 1000000 };
	uint8_t			 a[LB_EVTIME_TERM_LEN], b[LB_EVTIME_TERM_LEN];

	(void)state;
	lb_evtime_term(1773446400, a);	/* 2026-03-14T00:00:00Z */
	assert_memory_equal(a, want, sizeof(want));
	for (size_t i = 0; i < sizeof(secs) / sizeof(*secs); i++) {
		lb_evtime_term(secs[i], a);
		assert_int_equal(a[0], LB_NS_EVTIME);
		assert_int_equal(lb_evtime_sec(a), secs[i]);
		if (i > 0) {
			lb_evtime_term(secs[i - 1], b);
			assert_true(memcmp(b, a, sizeof(a)) < 0);	/* sorted as time */
		}
	}
	assert_int_equal(lb_evtime_of(0), 0);
	assert_int_equal(lb_evtime_of(999999), 0);
	assert_int_equal(lb_evtime_of(1000000), 1);
	assert_int_equal(lb_evtime_of(-1), -1);
	assert_int_equal(lb_evtime_of(-1000000), -1);
	assert_int_equal(lb_evtime_of(-1000001), -2);
}

T_MAIN(
	cmocka_unit_test(t_segw_equals_msg_terms),
	cmocka_unit_test(t_evtime_term))
