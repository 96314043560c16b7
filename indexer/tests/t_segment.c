/*
 * t_segment.c — segments against an oracle. Random messages (seeded, small vocabularies so
 * terms repeat, with fields, structured data, long tokens and high bytes) are indexed and
 * written; every term's lookup, every prefix and range walk, and a merge of several segments
 * are compared with a brute-force index the test computes itself from the same messages.
 * Damaged files (every byte flipped, every truncation) must give an error or the right
 * answer, never a wrong one.
 */
#include "t_helper.h"
#include "t_segv2.h"
#include "lb_format.h"
#include "lb_segout.h"
#include "lb_util.h"

#include <ctype.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- random messages */

#define SDP_MAX	4

struct tmsg {
	char		 text[8192];
	size_t		 textlen;
	char		 host[300];
	char		 prog[32];
	char		 pid[16];
	char		 msgid[16];
	char		 sd[1200];
	int		 nsd;			/* oracle: params of the structured data */
	char		 sdkey[SDP_MAX][64];	/* "<id>.<name>" */
	char		 sdval[SDP_MAX][128];	/* unescaped value */
	struct lb_msg	 m;
};

static const char *words[] = { "Error", "error", "connection", "Connection", "user_42",
    "10.0.0.1", "web-01", "a", "B", "failed", "ok", "\xc3\xa9t\xc3\xa9", "x.y.z", "bob@ex.com",
    "123", "1234", "12", "zz", "Zz", "session", "opened", "closed", "for", "root" };
static const char *seps[] = { " ", " ", " ", ":", "=", "/", ", ", "\t", "[", "]" };
static const char *hosts[] = { "Web-01", "web-01", "DB.example.COM", "", "mail" };
static const char *progs[] = { "sshd", "SSHD", "cron", "", "kernel" };
static const char *sdids[] = { "ex@1", "meta", "origin" };
static const char *sdnames[] = { "user", "ip", "seq" };

static void
app(char *buf, size_t cap, size_t *len, const char *s, size_t n)
{
	assert_true(*len + n < cap);
	memcpy(buf + *len, s, n);
	*len += n;
	buf[*len] = '\0';
}

static void
gen_msg(uint64_t *seed, struct tmsg *t, uint64_t id)
{
	size_t	 n = 0, sn = 0;
	int	 ntok = 1 + (int)(t_rnd(seed) % 20);

	memset(t, 0, sizeof(*t));
	for (int i = 0; i < ntok; i++) {
		uint64_t r = t_rnd(seed) % 100;

		if (r < 2) {
			/* A token longer than LB_TOKEN_MAX: only its first 255 bytes count. */
			char	 lng[300];
			size_t	 l = 250 + t_rnd(seed) % 40;

			memset(lng, 'L', l);
			lng[l - 1] = (char)('a' + t_rnd(seed) % 3);
			app(t->text, sizeof(t->text), &n, lng, l);
		} else if (r < 4) {
			app(t->text, sizeof(t->text), &n, "nul\0byte", 8);
		} else {
			const char *w = words[t_rnd(seed) % (sizeof(words) / sizeof(words[0]))];

			app(t->text, sizeof(t->text), &n, w, strlen(w));
		}
		const char *s = seps[t_rnd(seed) % (sizeof(seps) / sizeof(seps[0]))];

		app(t->text, sizeof(t->text), &n, s, strlen(s));
	}
	t->textlen = n;
	if (t_rnd(seed) % 50 == 0) {
		memset(t->host, 'H', 290);
		t->host[290] = '\0';
	} else
		strcpy(t->host, hosts[t_rnd(seed) % 5]);
	strcpy(t->prog, progs[t_rnd(seed) % 5]);
	if (t_rnd(seed) % 3)
		snprintf(t->pid, sizeof(t->pid), "%u", (unsigned)(t_rnd(seed) % 20));
	if (t_rnd(seed) % 4 == 0)
		strcpy(t->msgid, t_rnd(seed) % 2 ? "ID47" : "id47");
	if (t_rnd(seed) % 3 == 0) {
		int nel = 1 + (int)(t_rnd(seed) % 2);

		for (int e = 0; e < nel; e++) {
			const char	*sid = sdids[t_rnd(seed) % 3];
			int		 np = 1 + (int)(t_rnd(seed) % 2);

			app(t->sd, sizeof(t->sd), &sn, "[", 1);
			app(t->sd, sizeof(t->sd), &sn, sid, strlen(sid));
			for (int p = 0; p < np && t->nsd < SDP_MAX; p++) {
				const char	*nm = sdnames[t_rnd(seed) % 3];
				size_t		 vl = 0;
				int		 nv = 1 + (int)(t_rnd(seed) % 3);
				char		*v = t->sdval[t->nsd];

				snprintf(t->sdkey[t->nsd], sizeof(t->sdkey[0]), "%s.%s", sid, nm);
				app(t->sd, sizeof(t->sd), &sn, " ", 1);
				app(t->sd, sizeof(t->sd), &sn, nm, strlen(nm));
				app(t->sd, sizeof(t->sd), &sn, "=\"", 2);
				for (int k = 0; k < nv; k++) {
					const char *w = words[t_rnd(seed) % (sizeof(words) /
					    sizeof(words[0]))];
					static const char *vs[] = { " ", "\"", "\\", "]", "-" };
					const char *s = vs[t_rnd(seed) % 5];

					app(v, sizeof(t->sdval[0]), &vl, w, strlen(w));
					app(t->sd, sizeof(t->sd), &sn, w, strlen(w));
					app(v, sizeof(t->sdval[0]), &vl, s, 1);
					if (*s == '"' || *s == '\\' || *s == ']')
						app(t->sd, sizeof(t->sd), &sn, "\\", 1);
					app(t->sd, sizeof(t->sd), &sn, s, 1);
				}
				app(t->sd, sizeof(t->sd), &sn, "\"", 1);
				t->nsd++;
			}
			app(t->sd, sizeof(t->sd), &sn, "]", 1);
		}
	}
	t->m.id = id;
	t->m.received = 1700000000000000LL + (int64_t)id * 1000;
	t->m.timestamp = LB_NOTIME;
	t->m.facility = t_rnd(seed) % 10 == 0 ? LB_NOVALUE : (uint8_t)(t_rnd(seed) % 24);
	t->m.severity = t_rnd(seed) % 10 == 0 ? LB_NOVALUE : (uint8_t)(t_rnd(seed) % 8);
	t->m.host = t_str(t->host);
	t->m.program = t_str(t->prog);
	t->m.pid = t_str(t->pid);
	t->m.msgid = t_str(t->msgid);
	t->m.sd = (struct lb_slice){ (const uint8_t *)t->sd, sn };
	t->m.message = (struct lb_slice){ (const uint8_t *)t->text, t->textlen };
}

static struct tmsg *
gen_msgs(uint64_t seed, size_t n, uint64_t first)
{
	struct tmsg	*t = calloc(n, sizeof(*t));
	uint64_t	 id = first;

	assert_non_null(t);
	for (size_t i = 0; i < n; i++) {
		gen_msg(&seed, &t[i], id);
		id += 1 + t_rnd(&seed) % 3;
	}
	return (t);
}

/* ---------------------------------------------------------------- the oracle */

struct opair {
	uint32_t	 off;
	uint16_t	 len;
	uint64_t	 id;
};

struct oterm {
	const uint8_t	*t;
	size_t		 len;
	uint64_t	*ids;
	size_t		 n;
};

struct oracle {
	uint8_t		*arena;
	size_t		 alen, acap;
	struct opair	*pairs;
	size_t		 np, pcap;
	struct oterm	*terms;
	size_t		 nt;
	uint64_t	*ids;
	uint8_t		 pre[1100];	/* prefix for the tokenizer callback */
	size_t		 prelen;
	uint64_t	 cur;
};

static const uint8_t *g_arena;	/* for qsort */

static void
or_add(struct oracle *o, const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	if (o->alen + alen + blen > o->acap) {
		o->acap = (o->acap + alen + blen) * 2;
		assert_non_null(o->arena = realloc(o->arena, o->acap));
	}
	T_GROW(o->pairs, o->np, o->pcap, 1024);
	memcpy(o->arena + o->alen, a, alen);
	memcpy(o->arena + o->alen + alen, b, blen);
	o->pairs[o->np++] = (struct opair){ (uint32_t)o->alen, (uint16_t)(alen + blen), o->cur };
	o->alen += alen + blen;
}

static int
or_form(void *arg, const uint8_t *form, size_t len, size_t at, int flags)
{
	struct oracle *o = arg;

	(void)at;
	(void)flags;
	or_add(o, o->pre, o->prelen, form, len);
	return (0);
}

/* A token; in message text, its forms too (lb_token_forms). */
static int
or_tok(void *arg, const uint8_t *tok, size_t len, uint32_t pos, size_t off)
{
	struct oracle *o = arg;

	(void)pos;
	(void)off;
	or_add(o, o->pre, o->prelen, tok, len);
	if (o->prelen == 1 && o->pre[0] == LB_NS_TEXT)
		return (lb_token_forms(tok, len, or_form, o));
	return (0);
}

static void
or_field(struct oracle *o, uint8_t ns, const char *v)
{
	uint8_t	buf[LB_TOKEN_MAX];
	size_t	n = strlen(v);

	if (n == 0)
		return;
	if (n > LB_TOKEN_MAX)
		n = LB_TOKEN_MAX;
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)((v[i] >= 'A' && v[i] <= 'Z') ? v[i] + 32 : v[i]);
	or_add(o, &ns, 1, buf, n);
}

static int
pair_cmp(const void *a, const void *b)
{
	const struct opair *x = a, *y = b;

	return (t_term_id_cmp(g_arena + x->off, x->len, x->id, g_arena + y->off, y->len, y->id));
}

static int
or_alnum(uint8_t c)
{
	return ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
}

/*
 * The template of a text the plain way (FORMAT.md §6.1): none (SIZE_MAX) when a run between
 * ASCII whitespace is longer than LB_TOKEN_MAX or the term would be longer than
 * LB_SEG_TERM_MAX; else each run of letters and digits holding a digit is "0", letters folded.
 */
static size_t
or_template(const char *text, size_t n, uint8_t *out)
{
	size_t	 o = 0, run = 0;

	for (size_t i = 0; i < n; i++) {
		if (strchr(" \t\n\v\f\r", text[i]) != NULL && text[i] != '\0')
			run = 0;
		else if (++run > LB_TOKEN_MAX)
			return (SIZE_MAX);
	}
	for (size_t i = 0; i < n;) {
		size_t	 j = i;
		int	 digit = 0;

		if (!or_alnum((uint8_t)text[i])) {
			out[o++] = (uint8_t)text[i++];
			continue;
		}
		while (j < n && or_alnum((uint8_t)text[j]))
			digit |= text[j++] <= '9';
		if (digit)
			out[o++] = '0';
		else
			for (; i < j; i++)
				out[o++] = (uint8_t)tolower((unsigned char)text[i]);
		i = j;
	}
	return (o + 1 > LB_SEG_TERM_MAX ? SIZE_MAX : o);
}

/*
 * Every (term, id) of msgs computed the plain way, then grouped, for the segments written
 * from msgs[cut[k]..cut[k + 1]) (k < ncut) and merged: a text's template is a term when
 * another message of its segment has it, else the message is in the LB_NS_NOTPL list.
 */
static void
or_build_cuts(struct oracle *o, const struct lb_tokconf *tc, const struct tmsg *msgs,
    const size_t *cut, size_t ncut)
{
	size_t	 n = cut[ncut], c = 0;
	uint8_t	*tpl, *tl;
	size_t	*tlen;

	assert_non_null(tpl = malloc(n * LB_SEG_TERM_MAX + 1));
	assert_non_null(tlen = calloc(n + 1, sizeof(*tlen)));
	for (size_t i = 0; i < n; i++)
		tlen[i] = or_template(msgs[i].text, msgs[i].textlen, tpl + i * LB_SEG_TERM_MAX);
	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < n; i++) {
		const struct tmsg *t = &msgs[i];
		uint8_t b[2];
		size_t df = 0;

		while (i >= cut[c + 1])
			c++;
		tl = tpl + i * LB_SEG_TERM_MAX;
		for (size_t j = cut[c]; tlen[i] != SIZE_MAX && j < cut[c + 1] && df < 2; j++)
			df += tlen[j] == tlen[i] &&
			    memcmp(tpl + j * LB_SEG_TERM_MAX, tl, tlen[i]) == 0;
		o->cur = t->m.id;
		o->pre[0] = LB_NS_TEXT;
		o->prelen = 1;
		assert_ok(lb_tokenize(tc, (const uint8_t *)t->text, t->textlen, or_tok, o));
		or_field(o, LB_NS_HOST, t->host);
		or_field(o, LB_NS_PROGRAM, t->prog);
		or_field(o, LB_NS_PID, t->pid);
		or_field(o, LB_NS_MSGID, t->msgid);
		if (t->m.facility != LB_NOVALUE) {
			b[0] = LB_NS_FACILITY;
			b[1] = t->m.facility;
			or_add(o, b, 1, b + 1, 1);
		}
		if (t->m.severity != LB_NOVALUE) {
			b[0] = LB_NS_SEVERITY;
			b[1] = t->m.severity;
			or_add(o, b, 1, b + 1, 1);
		}
		for (int k = 0; k < t->nsd; k++) {
			size_t kl = strlen(t->sdkey[k]);

			o->pre[0] = LB_NS_SD;
			memcpy(o->pre + 1, t->sdkey[k], kl);
			o->pre[1 + kl] = 0;
			o->prelen = kl + 2;
			assert_ok(lb_tokenize(tc, (const uint8_t *)t->sdval[k],
			    strlen(t->sdval[k]), or_tok, o));
		}
		b[0] = df >= LB_SEG_TPL_MIN ? LB_NS_TPL : LB_NS_NOTPL;
		or_add(o, b, 1, tl, b[0] == LB_NS_TPL ? tlen[i] : 0);
	}
	free(tpl);
	free(tlen);
	g_arena = o->arena;
	qsort(o->pairs, o->np, sizeof(*o->pairs), pair_cmp);
	assert_non_null(o->terms = calloc(o->np + 1, sizeof(*o->terms)));
	assert_non_null(o->ids = calloc(o->np + 1, sizeof(*o->ids)));
	for (size_t i = 0, k = 0; i < o->np; i++) {
		const struct opair *p = &o->pairs[i];
		struct oterm *ot = o->nt ? &o->terms[o->nt - 1] : NULL;

		if (ot == NULL || ot->len != p->len || memcmp(ot->t, o->arena + p->off, p->len)) {
			ot = &o->terms[o->nt++];
			ot->t = o->arena + p->off;
			ot->len = p->len;
			ot->ids = &o->ids[k];
		}
		if (ot->n > 0 && ot->ids[ot->n - 1] == p->id)
			continue;	/* a set: once per message */
		ot->ids[ot->n++] = p->id;
		k++;
	}
}

static void
or_build(struct oracle *o, const struct lb_tokconf *tc, const struct tmsg *msgs, size_t n)
{
	size_t cut[2] = { 0, n };

	or_build_cuts(o, tc, msgs, cut, 1);
}

static void
or_free(struct oracle *o)
{
	free(o->arena);
	free(o->pairs);
	free(o->terms);
	free(o->ids);
}

/* ---------------------------------------------------------------- helpers */

static void
build(const struct lb_tokconf *tc, const struct tmsg *msgs, size_t n, const char *path)
{
	struct lb_segw *w;

	assert_ok(lb_segw_new(&w));
	for (size_t i = 0; i < n; i++)
		assert_ok(lb_segw_add(w, tc, &msgs[i].m));
	assert_ok(lb_segw_write(w, path));
	lb_segw_free(w);
}

/* A walk that checks each term against the oracle's terms [next, end) in order. */
struct walk {
	struct lb_segment	*sg;
	const struct oterm	*want;
	size_t			 next, end;
	int			 lenient;	/* damaged file: stop at the first mismatch */
	int			 bad;
	struct lb_postings	 p;
};

static int
walk_fn(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct walk		*wk = arg;
	const struct oterm	*o;
	int			 rc;

	if (wk->next >= wk->end) {
		wk->bad = 1;
		if (!wk->lenient)
			fail_msg("walk: extra term");
		return (1);
	}
	o = &wk->want[wk->next++];
	if (len != o->len || memcmp(term, o->t, len) != 0 || df != o->n) {
		wk->bad = 1;
		if (!wk->lenient)
			fail_msg("walk: term %zu differs", wk->next - 1);
		return (1);
	}
	wk->p.n = 0;
	rc = lb_segment_postings(wk->sg, cookie, &wk->p);
	if (rc != 0) {
		if (!wk->lenient)
			fail_msg("postings: %s", lb_strerror(rc));
		return (rc);
	}
	if (wk->p.n != o->n || memcmp(wk->p.ids, o->ids, o->n * sizeof(uint64_t)) != 0) {
		wk->bad = 1;
		if (!wk->lenient)
			fail_msg("walk: ids of term %zu differ", wk->next - 1);
		return (1);
	}
	return (0);
}

/* The oracle terms in [lo, hi) as an index range. */
static void
or_range(const struct oracle *o, const uint8_t *lo, size_t lolen, const uint8_t *hi,
    size_t hilen, size_t *a, size_t *b)
{
	size_t i = 0, j;

	while (lo != NULL && i < o->nt) {
		size_t n = o->terms[i].len < lolen ? o->terms[i].len : lolen;
		int c = memcmp(o->terms[i].t, lo, n);

		if (c > 0 || (c == 0 && o->terms[i].len >= lolen))
			break;
		i++;
	}
	for (j = i; hi != NULL && j < o->nt; j++) {
		size_t n = o->terms[j].len < hilen ? o->terms[j].len : hilen;
		int c = memcmp(o->terms[j].t, hi, n);

		if (c > 0 || (c == 0 && o->terms[j].len >= hilen))
			break;
	}
	if (hi == NULL)
		j = o->nt;
	*a = i;
	*b = j;
}

static void
check_range(struct lb_segment *sg, const struct oracle *o, const uint8_t *lo, size_t lolen,
    const uint8_t *hi, size_t hilen)
{
	struct walk wk = { sg, o->terms, 0, 0, 0, 0, { NULL, 0, 0 } };

	or_range(o, lo, lolen, hi, hilen, &wk.next, &wk.end);
	assert_ok(lb_segment_terms(sg, lo, lolen, hi, hilen, walk_fn, &wk));
	assert_int_equal(wk.next, wk.end);
	lb_postings_free(&wk.p);
}

static void
check_prefix(struct lb_segment *sg, const struct oracle *o, const uint8_t *pre, size_t len)
{
	struct walk	 wk = { sg, o->terms, 0, 0, 0, 0, { NULL, 0, 0 } };
	size_t		 i;

	for (i = 0; i < o->nt; i++)
		if (o->terms[i].len >= len && memcmp(o->terms[i].t, pre, len) >= 0)
			break;
	wk.next = i;
	while (i < o->nt && o->terms[i].len >= len && memcmp(o->terms[i].t, pre, len) == 0)
		i++;
	wk.end = i;
	assert_ok(lb_segment_prefix(sg, pre, len, walk_fn, &wk));
	assert_int_equal(wk.next, wk.end);
	lb_postings_free(&wk.p);
}

/* Every oracle term looks up to exactly its ids; the full walk matches; absent terms miss. */
static void
check_all(struct lb_segment *sg, const struct oracle *o)
{
	struct lb_postings	 p = { NULL, 0, 0 };
	struct lb_seginfo	 si;
	uint8_t			 miss[LB_SEG_TERM_MAX + 1];
	char			 why[256];

	lb_segment_info(sg, &si);
	assert_int_equal(si.nterms, o->nt);
	for (size_t i = 0; i < o->nt; i++) {
		const struct oterm *t = &o->terms[i];

		assert_ok(lb_segment_lookup(sg, t->t, t->len, &p));
		assert_int_equal(p.n, t->n);
		assert_memory_equal(p.ids, t->ids, t->n * sizeof(uint64_t));
		/* The term plus one byte and minus its last byte are absent (or another term). */
		memcpy(miss, t->t, t->len);
		miss[t->len] = 0x7f;
		if (i + 1 >= o->nt || o->terms[i + 1].len != t->len + 1 ||
		    memcmp(o->terms[i + 1].t, miss, t->len + 1) != 0)
			assert_int_equal(lb_segment_lookup(sg, miss, t->len + 1, &p),
			    LB_ENOTFOUND);
	}
	assert_int_equal(lb_segment_lookup(sg, (const uint8_t *)"", 0, &p), LB_ENOTFOUND);
	assert_int_equal(lb_segment_lookup(sg, (const uint8_t *)"\x00", 1, &p), LB_ENOTFOUND);
	assert_int_equal(lb_segment_lookup(sg, (const uint8_t *)"\xff\xff", 2, &p),
	    LB_ENOTFOUND);
	lb_postings_free(&p);
	check_range(sg, o, NULL, 0, NULL, 0);
	assert_ok(lb_segment_verify(sg, why, sizeof(why)));
}

/* ---------------------------------------------------------------- tests */

static void
t_oracle(void **state)
{
	struct lb_tokconf	 tc;
	struct oracle		 o;
	struct lb_segment	*sg;
	struct lb_seginfo	 si;
	struct tmsg		*msgs;
	char			 dir[256], path[300];
	size_t			 n = 4000;
	uint64_t		 seed = 12345;

	(void)state;
	lb_tokconf_default(&tc);
	t_mkdtemp(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/a.seg", dir);
	msgs = gen_msgs(7, n, 1000);
	or_build(&o, &tc, msgs, n);
	build(&tc, msgs, n, path);
	assert_ok(lb_segment_open(path, &sg));
	lb_segment_info(sg, &si);
	assert_int_equal(si.first_id, 1000);
	assert_int_equal(si.last_id, msgs[n - 1].m.id);
	assert_int_equal(si.count, n);
	assert_true(si.tmin == msgs[0].m.received && si.tmax == msgs[n - 1].m.received);
	check_all(sg, &o);
	/* Prefixes: every namespace, a few text prefixes, structured-data keys, everything. */
	for (int ns = 0; ns <= 9; ns++) {
		uint8_t b = (uint8_t)ns;

		check_prefix(sg, &o, &b, 1);
	}
	check_prefix(sg, &o, (const uint8_t *)"\x01" "co", 3);
	check_prefix(sg, &o, (const uint8_t *)"\x01" "1", 2);
	check_prefix(sg, &o, (const uint8_t *)"\x01" "LLL", 4);
	check_prefix(sg, &o, (const uint8_t *)"\x01" "lll", 4);
	check_prefix(sg, &o, (const uint8_t *)"\x08" "ex@1.user", 11);
	check_prefix(sg, &o, (const uint8_t *)"\x02" "web-01", 7);
	check_prefix(sg, &o, (const uint8_t *)"\xff", 1);
	check_prefix(sg, &o, (const uint8_t *)"\x01\xff\xff", 3);
	check_prefix(sg, &o, (const uint8_t *)"", 0);
	/* Ranges between random oracle terms and random strings. */
	for (int k = 0; k < 300; k++) {
		const struct oterm	*a = &o.terms[t_rnd(&seed) % o.nt];
		const struct oterm	*b = &o.terms[t_rnd(&seed) % o.nt];
		uint8_t			 r[3] = { (uint8_t)(t_rnd(&seed) % 10),
		    (uint8_t)('0' + t_rnd(&seed) % 75), (uint8_t)t_rnd(&seed) };

		check_range(sg, &o, a->t, a->len, b->t, b->len);
		check_range(sg, &o, r, 1 + t_rnd(&seed) % 3, NULL, 0);
		check_range(sg, &o, NULL, 0, r, 1 + t_rnd(&seed) % 3);
		check_range(sg, &o, a->t, a->len - 1 + t_rnd(&seed) % 2, r, 2);
	}
	lb_segment_close(sg);
	or_free(&o);
	free(msgs);
	t_rmtree(dir);
}

static void
t_merge(void **state)
{
	struct lb_tokconf	 tc;
	struct oracle		 o;
	struct lb_segment	*in[5], *sg, *one;
	struct lb_seginfo	 a, b;
	struct tmsg		*msgs;
	char			 dir[256], path[300];
	size_t			 n = 3000, cut[6] = { 0, 400, 401, 1500, 2200, 3000 };
	size_t			 la, lb;
	uint8_t			*fa, *fb;
	int			 order[5] = { 3, 0, 4, 2, 1 };

	(void)state;
	lb_tokconf_default(&tc);
	t_mkdtemp(dir, sizeof(dir));
	msgs = gen_msgs(99, n, 1);
	or_build_cuts(&o, &tc, msgs, cut, 5);
	for (int i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "%s/in%d.seg", dir, i);
		build(&tc, msgs + cut[i], cut[i + 1] - cut[i], path);
	}
	/* Inputs in any order: the merge sorts them by first id. */
	for (int i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "%s/in%d.seg", dir, order[i]);
		assert_ok(lb_segment_open(path, &in[i]));
	}
	snprintf(path, sizeof(path), "%s/merged.seg", dir);
	assert_ok(lb_segment_merge(in, 5, path));
	assert_ok(lb_segment_open(path, &sg));
	check_all(sg, &o);
	lb_segment_close(sg);
	/* A tier's merge (faster dictionary compression) holds the same. */
	snprintf(path, sizeof(path), "%s/tier.seg", dir);
	assert_ok(lb_segment_merge_tier(in, 5, path));
	assert_ok(lb_segment_open(path, &sg));
	check_all(sg, &o);
	lb_segment_close(sg);
	snprintf(path, sizeof(path), "%s/merged.seg", dir);
	assert_ok(lb_segment_open(path, &sg));
	/*
	 * The encoding is canonical: merging in two steps, the first a tier's, gives the same
	 * file, byte for byte. (A one-pass file differs in its templates: a template of one
	 * message in each of two inputs is in their LB_NS_NOTPL lists, and a merge keeps it
	 * there.)
	 */
	snprintf(path, sizeof(path), "%s/ab.seg", dir);
	{
		struct lb_segment *first[2] = { in[1], in[4] };	/* inputs 0 and 1 */

		assert_ok(lb_segment_merge_tier(first, 2, path));
	}
	assert_ok(lb_segment_open(path, &one));
	{
		struct lb_segment *rest[4] = { one, in[3], in[0], in[2] };	/* 0-1, 2, 3, 4 */

		snprintf(path, sizeof(path), "%s/two.seg", dir);
		assert_ok(lb_segment_merge(rest, 4, path));
	}
	lb_segment_close(one);
	assert_ok(lb_segment_open(path, &one));
	lb_segment_info(sg, &a);
	lb_segment_info(one, &b);
	assert_memory_equal(&a, &b, sizeof(a));
	snprintf(path, sizeof(path), "%s/merged.seg", dir);
	fa = t_read_file(path, &la);
	snprintf(path, sizeof(path), "%s/two.seg", dir);
	fb = t_read_file(path, &lb);
	assert_int_equal(la, lb);
	assert_memory_equal(fa, fb, la);
	free(fa);
	free(fb);
	/* Overlapping id ranges are refused. */
	snprintf(path, sizeof(path), "%s/bad.seg", dir);
	{
		struct lb_segment *two[2] = { in[0], in[0] };

		assert_int_equal(lb_segment_merge(two, 2, path), EINVAL);
		assert_int_equal(lb_segment_merge(two, 0, path), EINVAL);
	}
	assert_int_equal(access(path, F_OK), -1);
	for (int i = 0; i < 5; i++)
		lb_segment_close(in[i]);
	lb_segment_close(sg);
	lb_segment_close(one);
	or_free(&o);
	free(msgs);
	t_rmtree(dir);
}

/* Opens a damaged copy: every answer must be an error or the original's answer. */
static int
damaged_check(const char *path, const struct oracle *o)
{
	struct lb_segment	*sg;
	struct lb_postings	 p = { NULL, 0, 0 };
	struct walk		 wk;
	char			 why[256];
	int			 rc, vrc;

	if (lb_segment_open(path, &sg) != 0)
		return (1);
	vrc = lb_segment_verify(sg, why, sizeof(why));
	for (size_t i = 0; i < o->nt; i++) {
		const struct oterm *t = &o->terms[i];

		rc = lb_segment_lookup(sg, t->t, t->len, &p);
		if (rc == 0) {
			assert_int_equal(p.n, t->n);
			assert_memory_equal(p.ids, t->ids, t->n * sizeof(uint64_t));
		}
	}
	rc = lb_segment_lookup(sg, (const uint8_t *)"\x01nosuchterm", 11, &p);
	assert_int_not_equal(rc, 0);
	memset(&wk, 0, sizeof(wk));
	wk.sg = sg;
	wk.want = o->terms;
	wk.end = o->nt;
	wk.lenient = 1;
	rc = lb_segment_terms(sg, NULL, 0, NULL, 0, walk_fn, &wk);
	assert_false(wk.bad);
	/* The term blob is built only from blocks that check out; a scan through it too. */
	if (lb_segment_blob(sg, SIZE_MAX) == 0) {
		wk.next = 0;
		wk.end = o->nt;
		rc = lb_segment_scan(sg, (const uint8_t *)"", 0, 0, (const uint8_t *)"*", 1,
		    walk_fn, &wk);
		assert_false(wk.bad);
		assert_true(rc != 0 || wk.next == wk.end);
	}
	lb_postings_free(&wk.p);
	lb_postings_free(&p);
	lb_segment_close(sg);
	return (vrc != 0);
}

static void
t_damage(void **state)
{
	struct lb_tokconf	 tc;
	struct oracle		 o;
	struct lb_segment	*sg;
	struct tmsg		*msgs;
	char			 dir[256], path[300], bad[300];
	size_t			 n = 140, len;
	uint8_t			*orig;

	(void)state;
	lb_tokconf_default(&tc);
	t_mkdtemp(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/a.seg", dir);
	snprintf(bad, sizeof(bad), "%s/bad.seg", dir);
	msgs = gen_msgs(3, n, 77);
	for (size_t i = 0; i < n; i++) {
		strcpy(msgs[i].host, "Dense");
		msgs[i].m.host = (struct lb_slice){ (const uint8_t *)msgs[i].host, 5 };
	}
	or_build(&o, &tc, msgs, n);
	build(&tc, msgs, n, path);
	orig = t_read_file(path, &len);
	assert_true(len > 600);
	/* Some lists are long enough to be bit-packed and to carry their own CRC. */
	{
		size_t i;

		for (i = 0; i < o.nt && o.terms[i].n < 128; i++)
			;
		assert_true(i < o.nt);
	}
	/* Every truncation fails to open. */
	for (size_t k = 0; k < len; k++) {
		t_write_file(bad, orig, k);
		assert_int_not_equal(lb_segment_open(bad, &sg), 0);
	}
	/*
	 * Every single-byte change (the low bit, the high bit or all bits, in turn) is caught
	 * by open or verify and never misleads a lookup or a walk.
	 */
	for (size_t k = 0; k < len; k++) {
		static const uint8_t x[] = { 0x01, 0x80, 0xff };
		uint8_t f = x[k % 3];

		orig[k] ^= f;
		t_write_file(bad, orig, len);
		if (!damaged_check(bad, &o))
			fail_msg("byte %zu ^ %02x not detected", k, f);
		orig[k] ^= f;
	}
	/* Not a segment at all. */
	t_write_file(bad, (const uint8_t *)"hello, world", 12);
	assert_int_equal(lb_segment_open(bad, &sg), LB_EFORMAT);
	t_write_file(bad, (const uint8_t *)"", 0);
	assert_int_equal(lb_segment_open(bad, &sg), LB_EFORMAT);
	assert_int_equal(lb_segment_open("/nonexistent/x.seg", &sg), ENOENT);
	free(orig);
	or_free(&o);
	free(msgs);
	t_rmtree(dir);
}

/* ---------------------------------------------------------------- wildcard scans */

/* What a scan reported: term bytes, cookie, df, in order. */
struct shit {
	uint8_t		 t[64];
	size_t		 len;
	uint64_t	 cookie;
	uint32_t	 df;
};

struct shits {
	struct shit	*h;
	size_t		 n, cap;
	/* filter mode (the oracle): */
	const uint8_t	*glob;
	size_t		 globlen, skip;
};

static int
shit_add(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct shits *s = arg;

	if (s->glob != NULL && (len < s->skip ||
	    !lb_glob_match(s->glob, s->globlen, term + s->skip, len - s->skip)))
		return (0);
	T_GROW(s->h, s->n, s->cap, 64);
	assert_true(len <= sizeof(s->h[0].t));
	memcpy(s->h[s->n].t, term, len);
	s->h[s->n].len = len;
	s->h[s->n].cookie = cookie;
	s->h[s->n].df = df;
	s->n++;
	return (0);
}

static void
shits_equal(const struct shits *a, const struct shits *b, const char *what)
{
	if (a->n != b->n)
		fail_msg("%s: %zu terms, want %zu", what, b->n, a->n);
	for (size_t i = 0; i < a->n; i++)
		if (a->h[i].len != b->h[i].len || memcmp(a->h[i].t, b->h[i].t, a->h[i].len) != 0 ||
		    a->h[i].cookie != b->h[i].cookie || a->h[i].df != b->h[i].df)
			fail_msg("%s: term %zu differs", what, i);
}

/*
 * The blob scan gives exactly what the streaming scan gives and what a filtered prefix walk
 * gives, on random dictionaries over a small alphabet (NUL, high bytes, the glob's own
 * metacharacters) where literal runs often straddle two terms.
 */
static void
t_scan(void **state)
{
	static const uint8_t alpha[] = { 0x00, 'a', 'b', 'p', 'l', 0x80, 0xff, '*', '?', '\\' };
	static const uint8_t nss[] = { LB_NS_TEXT, LB_NS_HOST, LB_NS_SD };
	struct lb_segw		*w;
	struct lb_segment	*sg;
	struct lb_postings	 p = { NULL, 0, 0 }, q = { NULL, 0, 0 };
	struct shits		 want = { 0 }, str = { 0 }, blob = { 0 };
	char			 dir[256], path[300];
	uint8_t			 term[16], glob[24], pre[4];
	uint64_t		 seed = 0x5eed5ca9ULL;
	size_t			 need, size;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/s.seg", dir);
	for (int round = 0; round < 6; round++) {
		size_t nterms = round == 0 ? 3 : 400 + t_rnd(&seed) % 4000;

		assert_ok(lb_segw_new(&w));
		for (size_t i = 0; i < nterms; i++) {
			size_t len = 2 + t_rnd(&seed) % (round % 2 ? 3 : 10);

			term[0] = nss[t_rnd(&seed) % 3];
			for (size_t k = 1; k < len; k++)
				term[k] = alpha[t_rnd(&seed) % sizeof(alpha)];
			/* ids ascend per term: one id per add, ids ascending overall. */
			assert_ok(lb_segw_add_term(w, term, len, i + 1));
		}
		assert_ok(lb_segw_write(w, path));
		lb_segw_free(w);
		assert_ok(lb_segment_open(path, &sg));
		/* The budget: too small is LB_ETOOBIG and teaches the size needed. */
		assert_int_equal(lb_segment_blob_size(sg, &need), 0);
		assert_int_equal(need, 0);
		assert_int_equal(lb_segment_blob(sg, 16), LB_ETOOBIG);
		assert_int_equal(lb_segment_blob_size(sg, &need), 0);
		assert_true(need > 16);
		assert_int_equal(lb_segment_blob(sg, need - 1), LB_ETOOBIG);
		for (int pat = 0; pat < 300; pat++) {
			size_t gl = 1 + t_rnd(&seed) % 8, plen = t_rnd(&seed) % 3, skip;

			for (size_t k = 0; k < gl; k++) {
				uint64_t r = t_rnd(&seed) % 16;

				glob[k] = r < 3 ? '*' : r < 5 ? '?' :
				    r == 5 ? nss[t_rnd(&seed) % 3] : alpha[t_rnd(&seed) % sizeof(alpha)];
				if (glob[k] == '\\' && k + 1 < gl)
					glob[++k] = alpha[t_rnd(&seed) % sizeof(alpha)];
			}
			if (pat % 5 == 0) {	/* a literal that straddles: "*lp*" over "..l" "p.." */
				gl = 4;
				memcpy(glob, "*lp*", 4);
				glob[1] = alpha[t_rnd(&seed) % 6];
				glob[2] = alpha[t_rnd(&seed) % 6];
			}
			pre[0] = nss[t_rnd(&seed) % 3];
			for (size_t k = 1; k < plen; k++)
				pre[k] = alpha[t_rnd(&seed) % sizeof(alpha)];
			skip = plen == 0 ? 0 : 1 + t_rnd(&seed) % plen;
			if (plen == 0)
				skip = 0;
			want.n = str.n = blob.n = 0;
			want.glob = glob;
			want.globlen = gl;
			want.skip = skip;
			assert_ok(lb_segment_prefix(sg, pre, plen, shit_add, &want));
			lb_segment_blob_free(sg);
			assert_ok(lb_segment_scan(sg, pre, plen, skip, glob, gl, shit_add, &str));
			assert_ok(lb_segment_blob(sg, need));
			assert_int_equal(lb_segment_blob_size(sg, &size), need);
			assert_int_equal(size, need);
			assert_ok(lb_segment_scan(sg, pre, plen, skip, glob, gl, shit_add, &blob));
			shits_equal(&want, &str, "streaming scan");
			shits_equal(&want, &blob, "blob scan");
			/* The cookies give the terms' lists. */
			for (size_t i = 0; i < blob.n && i < 5; i++) {
				p.n = q.n = 0;
				assert_ok(lb_segment_postings(sg, blob.h[i].cookie, &p));
				assert_ok(lb_segment_lookup(sg, blob.h[i].t, blob.h[i].len, &q));
				assert_int_equal(p.n, blob.h[i].df);
				assert_int_equal(p.n, q.n);
				assert_memory_equal(p.ids, q.ids, p.n * sizeof(uint64_t));
			}
		}
		/* A prefix longer than a term, an empty range, skip past the prefix. */
		blob.n = 0;
		assert_ok(lb_segment_scan(sg, (const uint8_t *)"\x09", 1, 1,
		    (const uint8_t *)"*", 1, shit_add, &blob));
		assert_int_equal(blob.n, 0);
		assert_int_equal(lb_segment_scan(sg, (const uint8_t *)"\x01", 1, 2,
		    (const uint8_t *)"*", 1, shit_add, &blob), EINVAL);
		lb_segment_close(sg);
	}
	free(want.h);
	free(str.h);
	free(blob.h);
	lb_postings_free(&p);
	lb_postings_free(&q);
	t_rmtree(dir);
}

static int
shit_cmp(const void *a, const void *b)
{
	const struct shit	*x = a, *y = b;
	size_t			 n = x->len < y->len ? x->len : y->len;
	int			 c = memcmp(x->t, y->t, n);

	return (c != 0 ? c : (x->len > y->len) - (x->len < y->len));
}

/*
 * The builder writes its terms in byte order whatever order they came in: random terms that
 * share long prefixes (past the 16 bytes its sort keys hold, with NULs and 0xff where a short
 * key is padded), added at random, ascending and descending, some more than once; the walk of
 * the written dictionary is qsort's order of the distinct terms, each with its count.
 */
static void
t_term_order(void **state)
{
	static const uint8_t	 alpha[] = { 0x00, 'a', 0xff };
	static const char	 base[] = "abcdefghijklmnopqrstuvw";
	struct lb_segw		*w;
	struct lb_segment	*sg;
	struct shits		 got = { 0 };
	struct shit		*in, *want;
	char			 dir[256], path[300];
	uint64_t		 seed = 0x0bd3e5ULL;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/o.seg", dir);
	for (int round = 0; round < 9; round++) {
		size_t	 n = round == 0 ? 17 : 100 + t_rnd(&seed) % 30000, nw = 0;

		assert_non_null(in = calloc(n, sizeof(*in)));
		assert_non_null(want = calloc(n, sizeof(*want)));
		for (size_t i = 0; i < n; i++) {
			size_t	 p = t_rnd(&seed) % (sizeof(base) - 1), r = t_rnd(&seed) % 12;

			if (i > 0 && t_rnd(&seed) % 8 == 0) {	/* a term again */
				in[i] = in[t_rnd(&seed) % i];
				continue;
			}
			in[i].t[0] = t_rnd(&seed) % 2 ? LB_NS_TEXT : LB_NS_HOST;
			memcpy(in[i].t + 1, base, p);
			for (size_t k = 0; k < r; k++)
				in[i].t[1 + p + k] = alpha[t_rnd(&seed) % sizeof(alpha)];
			in[i].len = 1 + p + r;
		}
		if (round % 3 != 0)
			qsort(in, n, sizeof(*in), shit_cmp);
		if (round % 3 == 2)
			for (size_t i = 0; i < n / 2; i++) {
				struct shit x = in[i];

				in[i] = in[n - 1 - i];
				in[n - 1 - i] = x;
			}
		assert_ok(lb_segw_new(&w));
		for (size_t i = 0; i < n; i++)
			assert_ok(lb_segw_add_term(w, in[i].t, in[i].len, i + 1));
		assert_ok(lb_segw_write(w, path));
		lb_segw_free(w);
		qsort(in, n, sizeof(*in), shit_cmp);
		for (size_t i = 0; i < n; i++) {
			if (nw > 0 && shit_cmp(&want[nw - 1], &in[i]) == 0) {
				want[nw - 1].df++;
				continue;
			}
			want[nw] = in[i];
			want[nw++].df = 1;
		}
		assert_ok(lb_segment_open(path, &sg));
		got.n = 0;
		assert_ok(lb_segment_prefix(sg, (const uint8_t *)"", 0, shit_add, &got));
		assert_int_equal(got.n, nw);
		for (size_t i = 0; i < nw; i++) {
			assert_int_equal(got.h[i].len, want[i].len);
			assert_memory_equal(got.h[i].t, want[i].t, want[i].len);
			assert_int_equal(got.h[i].df, want[i].df);
		}
		lb_segment_close(sg);
		free(in);
		free(want);
	}
	free(got.h);
	t_rmtree(dir);
}

/* Terms added in batches (lb_segw_terms_add, lb_segw_add_terms) give the same file as one by one. */
static void
t_batches(void **state)
{
	struct lb_tokconf	 tc;
	struct lb_segw		*w;
	struct lb_segw_terms	*b;
	struct tmsg		*msgs;
	struct lb_msg		 m;
	char			 dir[256], pa[300], pb[300];
	uint8_t			*fa, *fb;
	size_t			 n = 3000, la, lb, i, k;
	uint64_t		 count, last;

	(void)state;
	lb_tokconf_default(&tc);
	t_mkdtemp(dir, sizeof(dir));
	snprintf(pa, sizeof(pa), "%s/a.seg", dir);
	snprintf(pb, sizeof(pb), "%s/b.seg", dir);
	msgs = gen_msgs(99, n, 500);
	build(&tc, msgs, n, pa);
	assert_ok(lb_segw_new(&w));
	assert_ok(lb_segw_terms_new(&b));
	for (i = 0; i < n; i += k) {
		lb_segw_terms_clear(b);
		for (k = 0; k < 1 + i % 700 && i + k < n; k++)
			assert_ok(lb_segw_terms_add(b, &tc, &msgs[i + k].m));
		assert_int_equal(lb_segw_terms_count(b), k);
		assert_true(lb_segw_terms_size(b) > 0);
		assert_ok(lb_segw_add_terms(w, b));
	}
	assert_ok(lb_segw_write(w, pb));
	/* A batch whose second message does not grow the ids: the first is indexed, not it. */
	lb_segw_terms_clear(b);
	m = msgs[0].m;
	assert_ok(lb_segw_terms_add(b, &tc, &m));
	assert_ok(lb_segw_terms_add(b, &tc, &m));
	assert_int_equal(lb_segw_add_terms(w, b), EINVAL);
	lb_segw_stats(w, &count, NULL, &last, NULL, NULL);
	assert_int_equal(count, 1);
	assert_int_equal(last, m.id);
	lb_segw_terms_free(b);
	lb_segw_free(w);
	fa = t_read_file(pa, &la);
	fb = t_read_file(pb, &lb);
	assert_int_equal(la, lb);
	assert_memory_equal(fa, fb, la);
	free(fa);
	free(fb);
	free(msgs);
	t_rmtree(dir);
}

static void
t_builder_rules(void **state)
{
	struct lb_tokconf	 tc;
	struct lb_segw		*w;
	struct lb_segment	*sg;
	struct lb_postings	 p = { NULL, 0, 0 };
	struct lb_msg		 m;
	char			 dir[256], path[300];
	uint64_t		 count, first, last;
	int64_t			 tmin, tmax;
	const char		*sd = "[ex@1 k=\"x\\\"y \\\\z \\]w q\\n\" e=\"\"][b c=\"V\"]";
	size_t			 m0;

	(void)state;
	assert_ok(lb_tokconf_set(&tc, "", 0));	/* whitespace only */
	t_mkdtemp(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/r.seg", dir);
	assert_ok(lb_segw_new(&w));
	assert_int_equal(lb_segw_write(w, path), EINVAL);
	m0 = lb_segw_mem(w);
	memset(&m, 0, sizeof(m));
	m.id = 10;
	m.received = 5;
	m.facility = 3;
	m.severity = LB_NOVALUE;
	m.message = (struct lb_slice){ (const uint8_t *)"A a A b", 7 };
	m.host = (struct lb_slice){ (const uint8_t *)"Host", 4 };
	m.sd = (struct lb_slice){ (const uint8_t *)sd, strlen(sd) };
	assert_ok(lb_segw_add(w, &tc, &m));
	/* Ids must grow. */
	assert_int_equal(lb_segw_add(w, &tc, &m), EINVAL);
	m.id = 12;
	m.received = 3;
	m.message = (struct lb_slice){ (const uint8_t *)"b", 1 };
	m.sd = (struct lb_slice){ (const uint8_t *)"[bad", 4 };
	assert_ok(lb_segw_add(w, &tc, &m));
	assert_ok(lb_segw_add_term(w, (const uint8_t *)"\x01zz", 3, 11));
	assert_int_equal(lb_segw_add_term(w, (const uint8_t *)"\x01zz", 3, 9), EINVAL);
	assert_int_equal(lb_segw_add_term(w, (const uint8_t *)"", 0, 20), EINVAL);
	assert_true(lb_segw_mem(w) > m0);
	lb_segw_stats(w, &count, &first, &last, &tmin, &tmax);
	assert_int_equal(count, 2);
	assert_int_equal(first, 10);
	assert_int_equal(last, 12);
	assert_true(tmin == 3 && tmax == 5);
	m0 = lb_segw_mem(w);
	assert_ok(lb_segw_write(w, path));
	/* The term and id memory is given back; the table and term array stay for reuse. */
	assert_true(lb_segw_mem(w) < m0);
	/* Written: the builder is empty again. */
	lb_segw_stats(w, &count, &first, &last, &tmin, &tmax);
	assert_int_equal(count, 0);
	assert_true(tmin == LB_NOTIME);
	assert_int_equal(lb_segw_write(w, path), EINVAL);
	assert_ok(lb_segment_open(path, &sg));
	/* "a" three times in message 10: recorded once. */
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x01" "a", 2, &p));
	assert_int_equal(p.n, 1);
	assert_int_equal(p.ids[0], 10);
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x01" "b", 2, &p));
	assert_int_equal(p.n, 2);
	assert_true(p.ids[0] == 10 && p.ids[1] == 12);
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x01" "zz", 3, &p));
	assert_true(p.n == 1 && p.ids[0] == 11);
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x02" "host", 5, &p));
	assert_int_equal(p.n, 2);
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x06\x03", 2, &p));
	assert_int_equal(p.n, 2);
	assert_int_equal(lb_segment_lookup(sg, (const uint8_t *)"\x07\xff", 2, &p),
	    LB_ENOTFOUND);
	/* Empty fields make no term. */
	assert_int_equal(lb_segment_lookup(sg, (const uint8_t *)"\x03", 1, &p), LB_ENOTFOUND);
	/* Structured data: escapes undone, names kept as received, value tokens folded. */
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x08" "ex@1.k\0x\"y", 11, &p));
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x08" "ex@1.k\0\\z", 10, &p));
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x08" "ex@1.k\0]w", 10, &p));
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x08" "ex@1.k\0q\\n", 11, &p));
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x08" "b.c\0v", 6, &p));
	assert_int_equal(p.n, 1);
	assert_int_equal(lb_segment_lookup(sg, (const uint8_t *)"\x08" "b.c\0V", 6, &p),
	    LB_ENOTFOUND);
	assert_int_equal(lb_segment_postings(sg, (uint64_t)1 << 40, &p), EINVAL);
	lb_segment_close(sg);
	lb_postings_free(&p);
	lb_segw_free(w);
	lb_segw_free(NULL);
	lb_segment_close(NULL);
	t_rmtree(dir);
}

/* Lists long enough for their own CRC, many blocks, long shared prefixes. */
static void
t_big_lists(void **state)
{
	struct lb_segw		*w;
	struct lb_segment	*sg;
	struct lb_postings	 p = { NULL, 0, 0 };
	uint8_t			 term[LB_SEG_TERM_MAX];
	char			 dir[256], path[300], why[200];
	struct lb_seginfo	 si;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/b.seg", dir);
	assert_ok(lb_segw_new(&w));
	memset(term, 'p', sizeof(term));
	term[0] = LB_NS_TEXT;
	for (uint64_t id = 1; id <= 20000; id++) {
		assert_ok(lb_segw_add_term(w, (const uint8_t *)"\x01" "every", 6, id));
		if (id % 7 == 0)
			assert_ok(lb_segw_add_term(w, (const uint8_t *)"\x01" "sev", 4,
			    id * 1000));
		snprintf((char *)term + 900, 20, "%08llu", (unsigned long long)id);
		assert_ok(lb_segw_add_term(w, term, 908, id));
	}
	assert_int_equal(lb_segw_add_term(w, term, LB_SEG_TERM_MAX + 1, 1), LB_ETOOBIG);
	assert_ok(lb_segw_add_term(w, term, LB_SEG_TERM_MAX, 5));
	assert_ok(lb_segw_write(w, path));
	assert_ok(lb_segment_open(path, &sg));
	lb_segment_info(sg, &si);
	assert_int_equal(si.nterms, 20003);
	assert_int_equal(si.first_id, 1);
	assert_int_equal(si.last_id, 19999 * 1000);
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x01" "every", 6, &p));
	assert_int_equal(p.n, 20000);
	for (size_t i = 0; i < p.n; i++)
		assert_int_equal(p.ids[i], i + 1);
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x01" "sev", 4, &p));
	assert_int_equal(p.n, 20000 / 7);
	snprintf((char *)term + 900, 20, "%08llu", 12345ULL);
	assert_ok(lb_segment_lookup(sg, term, 908, &p));
	assert_true(p.n == 1 && p.ids[0] == 12345);
	snprintf((char *)term + 900, 20, "%08llu", 20000ULL);
	assert_ok(lb_segment_lookup(sg, term, LB_SEG_TERM_MAX, &p));
	assert_true(p.n == 1 && p.ids[0] == 5);
	assert_ok(lb_segment_verify(sg, why, sizeof(why)));
	lb_segment_close(sg);
	lb_postings_free(&p);
	lb_segw_free(w);
	t_rmtree(dir);
}

/* The worked example of FORMAT.md §4.6, byte for byte. */
static void
t_golden(void **state)
{
	static const uint8_t	 want[] = {
		0x4c, 0x42, 0x53, 0x45, 0x47, 0x0d, 0x0a, 0x1a, 0x03, 0x00, 0x00, 0x00,
		0x01, 0x00, 0x00, 0x00, 0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x15, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x03, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x87, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2d, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x16, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
		0xe0, 0x2a, 0x7f, 0xdd, 0x6e, 0x59, 0x94, 0xf5, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00,
		0xe6, 0x49, 0x8f, 0xae,
		0x00, 0x01, 0xac, 0x02, 0xad, 0x02, 0x01,
		0x1b,
		0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x1b, 0xd9, 0x00, 0x00, 0x03, 0x00, 0xe0,
		0x2a, 0x7f, 0xdd, 0x00, 0x06, 0x01, 0x65, 0x72, 0x72, 0x6f, 0x72, 0x03,
		0x04, 0x06, 0x01, 0x73, 0x01, 0x02, 0x00, 0x02, 0x07, 0x03, 0x01, 0x01,
		0x62, 0x99, 0xe6, 0xad,
		0x03, 0x75, 0x97, 0x8e,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x06, 0x00, 0x00, 0x00, 0x01, 0x65, 0x72, 0x72, 0x6f, 0x72,
	};
	struct lb_segw		*w;
	char			 dir[256], path[300];
	uint8_t			*got;
	size_t			 len;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%016llx-%016llx%s", dir, 1000ULL, 1301ULL,
	    LB_SEG_SUFFIX);
	assert_ok(lb_segw_new(&w));
	assert_ok(lb_segw_add_term(w, (const uint8_t *)"\x01" "error", 6, 1000));
	assert_ok(lb_segw_add_term(w, (const uint8_t *)"\x01" "error", 6, 1001));
	assert_ok(lb_segw_add_term(w, (const uint8_t *)"\x01" "errors", 7, 1301));
	assert_ok(lb_segw_add_term(w, (const uint8_t *)"\x01" "error", 6, 1301));
	assert_ok(lb_segw_add_term(w, (const uint8_t *)"\x07\x03", 2, 1001));
	assert_ok(lb_segw_write(w, path));
	got = t_read_file(path, &len);
	assert_int_equal(len, sizeof(want));
	assert_memory_equal(got, want, len);
	free(got);
	lb_segw_free(w);
	t_rmtree(dir);
}

/*
 * A message with no token still makes a term: its text's template, or (alone in its segment)
 * the LB_NS_NOTPL list. A segment with messages but no term at all (a store written before
 * templates, where a text had no token) is read and merges like any other.
 */
/* A segment's bytes from memory, as an archive gives them: counts what it was asked. */
struct memsrc {
	const uint8_t	*b;
	size_t		 len;
	uint64_t	 fills, bytes;
	uint64_t	 fail_after;	/* fills before every later one fails (0: never) */
	int		 done;
};

static int
memsrc_fill(void *arg, uint64_t off, uint64_t len, uint8_t *dst)
{
	struct memsrc *m = arg;

	assert_true(off % 4096 == 0 && off + len <= m->len);
	assert_true(len % 4096 == 0 || off + len == m->len);
	if (m->fail_after != 0 && m->fills >= m->fail_after)
		return (LB_EARCHIVE);
	m->fills++;
	m->bytes += len;
	memcpy(dst, m->b + off, (size_t)len);
	return (0);
}

static void
memsrc_done(void *arg)
{
	((struct memsrc *)arg)->done++;
}

/*
 * A segment opened from a source (lb_segment_open_src) answers every lookup, prefix and walk
 * as the file does (the oracle), reads only the header and block index at open, and a source
 * that fails gives its error, never an answer from bytes it did not fill.
 */
static void
t_remote(void **state)
{
	struct lb_tokconf	 tc;
	struct oracle		 o;
	struct lb_segment	*sg;
	struct lb_segsrc	 src;
	struct memsrc		 m;
	struct lb_postings	 p = { NULL, 0, 0 };
	struct tmsg		*msgs;
	char			 dir[256], path[300], why[100];
	size_t			 n = 4000, len;
	uint8_t			*b;
	int			 rc, failed = 0;

	(void)state;
	lb_tokconf_default(&tc);
	t_mkdtemp(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/a.seg", dir);
	msgs = gen_msgs(9, n, 1000);
	or_build(&o, &tc, msgs, n);
	build(&tc, msgs, n, path);
	b = t_read_file(path, &len);
	assert_true(len > 8 * 4096);
	memset(&m, 0, sizeof(m));
	m.b = b;
	m.len = len;
	src = (struct lb_segsrc){ &m, len, 4096, memsrc_fill, memsrc_done };
	assert_ok(lb_segment_open_src(&src, &sg));
	assert_true(m.bytes < len / 2);		/* the header and the block index only */
	check_all(sg, &o);
	check_prefix(sg, &o, (const uint8_t *)"\x01" "co", 3);
	check_prefix(sg, &o, (const uint8_t *)"", 0);
	assert_true(m.bytes <= len);		/* each piece filled once */
	assert_ok(lb_segment_verify(sg, why, sizeof(why)));
	lb_segment_close(sg);
	assert_int_equal(m.done, 1);

	/* A source that fails after open: every read that needs a new piece fails with it. */
	memset(&m, 0, sizeof(m));
	m.b = b;
	m.len = len;
	assert_ok(lb_segment_open_src(&src, &sg));
	m.fail_after = m.fills;
	for (size_t i = 0; i < o.nt; i++) {
		rc = lb_segment_lookup(sg, o.terms[i].t, o.terms[i].len, &p);
		assert_true(rc == 0 || rc == LB_EARCHIVE);
		if (rc == LB_EARCHIVE)
			failed++;
		else
			assert_int_equal(p.n, o.terms[i].n);
	}
	assert_true(failed > 0);
	lb_segment_close(sg);
	/* Failing at open: the caller keeps the source. */
	memset(&m, 0, sizeof(m));
	m.b = b;
	m.len = len;
	m.fail_after = 1;
	assert_int_equal(lb_segment_open_src(&src, &sg), LB_EARCHIVE);
	assert_int_equal(m.done, 0);
	lb_postings_free(&p);
	free(b);
	or_free(&o);
	free(msgs);
	t_rmtree(dir);
}

static void
t_no_terms(void **state)
{
	static const uint8_t	 notpl[1] = { LB_NS_NOTPL };
	struct lb_tokconf	 tc;
	struct lb_segw		*w;
	struct lb_segout	*so;
	struct lb_segment	*sg, *in[2];
	struct lb_postings	 p = { NULL, 0, 0 };
	struct lb_seginfo	 si;
	struct lb_msg		 m;
	char			 dir[256], a[300], b[300], c[300], d[300], why[100];

	(void)state;
	lb_tokconf_default(&tc);
	t_mkdtemp(dir, sizeof(dir));
	snprintf(a, sizeof(a), "%s/a.seg", dir);
	snprintf(b, sizeof(b), "%s/b.seg", dir);
	snprintf(c, sizeof(c), "%s/c.seg", dir);
	snprintf(d, sizeof(d), "%s/d.seg", dir);
	assert_ok(lb_segw_new(&w));
	memset(&m, 0, sizeof(m));
	m.id = 7;
	m.received = 70;
	m.timestamp = LB_NOTIME;
	m.facility = m.severity = LB_NOVALUE;
	m.message = (struct lb_slice){ (const uint8_t *)" ::: ", 5 };
	assert_ok(lb_segw_add(w, &tc, &m));
	assert_ok(lb_segw_write(w, d));
	assert_ok(lb_segment_open(d, &sg));
	lb_segment_info(sg, &si);
	assert_true(si.nterms == 1 && si.count == 1);
	assert_ok(lb_segment_lookup(sg, notpl, 1, &p));
	assert_true(p.n == 1 && p.ids[0] == 7);
	lb_segment_close(sg);
	memset(&si, 0, sizeof(si));
	si.first_id = si.last_id = 7;
	si.count = 1;
	si.tmin = si.tmax = 70;
	assert_ok(lb_segout_begin(a, &si, &so));
	assert_ok(lb_segout_finish(so));
	m.id = 9;
	m.received = 90;
	m.message = (struct lb_slice){ (const uint8_t *)"x", 1 };
	assert_ok(lb_segw_add(w, &tc, &m));
	assert_ok(lb_segw_write(w, b));
	assert_ok(lb_segment_open(a, &in[0]));
	assert_ok(lb_segment_open(b, &in[1]));
	lb_segment_info(in[0], &si);
	assert_true(si.nterms == 0 && si.count == 1 && si.size == LB_SEG_HDR_SIZE);
	assert_int_equal(lb_segment_lookup(in[0], (const uint8_t *)"\x01x", 2, &p),
	    LB_ENOTFOUND);
	assert_ok(lb_segment_verify(in[0], why, sizeof(why)));
	assert_ok(lb_segment_merge(in, 2, c));
	assert_ok(lb_segment_open(c, &sg));
	lb_segment_info(sg, &si);
	assert_true(si.first_id == 7 && si.last_id == 9 && si.count == 2 && si.nterms == 2);
	assert_true(si.tmin == 70 && si.tmax == 90);
	assert_ok(lb_segment_lookup(sg, (const uint8_t *)"\x01x", 2, &p));
	assert_true(p.n == 1 && p.ids[0] == 9);
	assert_ok(lb_segment_lookup(sg, notpl, 1, &p));
	assert_true(p.n == 1 && p.ids[0] == 9);
	lb_segment_close(sg);
	lb_segment_close(in[0]);
	lb_segment_close(in[1]);
	lb_postings_free(&p);
	lb_segw_free(w);
	t_rmtree(dir);
}

/* Rewrites the header of the segment at path to format version v (its CRC recomputed). */
static void
set_version(const char *path, uint32_t v)
{
	size_t	 len;
	uint8_t	*b = t_read_file(path, &len);

	assert_true(len >= LB_SEG_HDR_SIZE);
	lb_put32(b + LB_SEG_H_VERSION, v);
	lb_put32(b + LB_SEG_H_CRC, lb_crc32(b, LB_SEG_H_CRC));
	t_write_file(path, b, len);
	free(b);
}

/*
 * Versions: a segment is written at 3; 2 (no forms) is read, 1 and 4 are refused; merged with
 * a version 2 input the output is version 2 (its text terms may lack forms), else 3.
 */
static void
t_versions(void **state)
{
	struct lb_tokconf	 tc;
	struct lb_segment	*in[2], *sg;
	struct lb_seginfo	 si;
	struct tmsg		*msgs;
	char			 dir[256], a[300], b[300], out[300];

	(void)state;
	lb_tokconf_default(&tc);
	t_mkdtemp(dir, sizeof(dir));
	msgs = gen_msgs(5, 200, 1);
	snprintf(a, sizeof(a), "%s/a.seg", dir);
	snprintf(b, sizeof(b), "%s/b.seg", dir);
	snprintf(out, sizeof(out), "%s/m.seg", dir);
	build(&tc, msgs, 100, a);
	build(&tc, msgs + 100, 100, b);
	assert_ok(lb_segment_open(a, &sg));
	lb_segment_info(sg, &si);
	assert_int_equal(si.version, 3);
	lb_segment_close(sg);
	for (uint32_t v = 1; v <= 4; v += 3) {
		set_version(a, v);
		assert_int_equal(lb_segment_open(a, &sg), LB_EFORMAT);
	}
	set_version(a, 3);
	t_seg_to_v2(a);
	assert_ok(lb_segment_open(a, &in[0]));
	assert_ok(lb_segment_verify(in[0], NULL, 0));
	assert_ok(lb_segment_open(b, &in[1]));
	assert_ok(lb_segment_merge(in, 2, out));
	assert_ok(lb_segment_open(out, &sg));
	lb_segment_info(sg, &si);
	assert_int_equal(si.version, 2);
	assert_int_equal(si.count, 200);
	assert_ok(lb_segment_verify(sg, NULL, 0));
	lb_segment_close(sg);
	lb_segment_close(in[0]);
	build(&tc, msgs, 100, a);
	assert_ok(lb_segment_open(a, &in[0]));
	assert_ok(lb_segment_merge(in, 2, out));
	assert_ok(lb_segment_open(out, &sg));
	lb_segment_info(sg, &si);
	assert_int_equal(si.version, 3);
	assert_ok(lb_segment_verify(sg, NULL, 0));
	lb_segment_close(sg);
	lb_segment_close(in[0]);
	lb_segment_close(in[1]);
	free(msgs);
	t_rmtree(dir);
}

T_MAIN(
	cmocka_unit_test(t_golden),
	cmocka_unit_test(t_builder_rules),
	cmocka_unit_test(t_batches),
	cmocka_unit_test(t_oracle),
	cmocka_unit_test(t_remote),
	cmocka_unit_test(t_merge),
	cmocka_unit_test(t_big_lists),
	cmocka_unit_test(t_no_terms),
	cmocka_unit_test(t_damage),
	cmocka_unit_test(t_scan),
	cmocka_unit_test(t_term_order),
	cmocka_unit_test(t_versions))
