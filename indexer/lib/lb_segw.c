/*
 * lb_segw.c — the in-memory index of one interval (struct lb_segw): every term of every message
 * added, each with the ids that contain it, until lb_segw_write() hands the terms in sorted
 * order to the segment writer in lb_segment.c. It owns the term rules (which bytes of a message
 * become which terms, FORMAT.md §4) and the memory layout; it does not know the file format.
 *
 * The one idea: nothing is allocated per token. Term bytes and id lists live in 1 MiB slabs
 * addressed by 32-bit references; a term is found through an open-addressing hash table, and
 * its ids after the first are appended as delta varints to a chain of chunks (8, 16, ... 1024
 * bytes, the last 4 bytes of each holding the reference of the next). A term that occurs
 * again in the same message is recognised by its last id and not recorded twice. Message text
 * is cut into tokens here, by the rules of lb_tokenize() (the tests hold the two to the same
 * output). Adding is two steps so that they can run in two threads: lb_segw_terms_add() cuts,
 * folds and hashes every term of a message into a batch (struct lb_segw_terms), and
 * lb_segw_add_terms() only inserts the batch's ready terms, prefetching the hash-table slots
 * and terms of the records ahead so that their cache misses overlap. Long lists are
 * bit-packed only when written.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_postings.h"
#include "lb_segout.h"

#define SLAB_SHIFT	20
#define SLAB_SIZE	(1u << SLAB_SHIFT)
#define SLAB_MAX	4096		/* 32-bit references: 4096 slabs of 1 MiB */
#define CHUNK_FIRST	8		/* bytes of a term's first chunk, link included */
#define CHUNK_SHIFTS	7		/* chunks grow to CHUNK_FIRST << 7 = 1 KiB */
#define TAB_MIN		1024
#define KEY_INLINE	17		/* term bytes kept in the term (one cache line) */
#define PF_SLOT		24		/* records ahead whose table slot is prefetched */
#define PF_TERM		12		/* records ahead whose term is prefetched */
#define PF_WRITE	8		/* terms ahead whose key and first ids are prefetched */

/* A term of a batch, ready to insert. */
struct sw_rec {
	uint32_t	 hash;
	uint32_t	 off;		/* in kbuf */
	uint32_t	 len;
	uint32_t	 msg;		/* index in msgs */
};

/* A message of a batch. */
struct sw_bmsg {
	uint64_t	 id;
	int64_t		 received;
};

struct lb_segw_terms {
	struct sw_rec	*recs;
	uint32_t	 nrec, reccap;
	struct sw_bmsg	*msgs;
	uint32_t	 nmsg, msgcap;
	uint8_t		*kbuf;		/* the term bytes */
	size_t		 klen, kcap;
	uint8_t		*sdbuf;		/* an unescaped structured-data value */
	size_t		 sdcap;
	size_t		 keypre;	/* bytes of key before the token (tokenizer callback) */
	uint8_t		 key[LB_SEG_TERM_MAX];	/* an SD term's prefix */
};

struct sw_term {
	uint64_t	 first;		/* first id */
	uint64_t	 last;		/* last id, to drop repeats within a message */
	uint32_t	 key;		/* reference of the term bytes */
	uint32_t	 head;		/* reference of the first chunk (df >= 2) */
	uint32_t	 cur;		/* reference where the next delta byte goes */
	uint32_t	 end;		/* reference of the current chunk's link word */
	uint32_t	 df;		/* ids recorded */
	uint32_t	 plen;		/* delta bytes in the chunks */
	uint16_t	 klen;		/* term bytes */
	uint8_t		 cshift;	/* current chunk is CHUNK_FIRST << cshift bytes */
	uint8_t		 kin[KEY_INLINE];	/* the first term bytes, to compare in-line */
} __attribute__((aligned(64)));

struct sw_slot {
	uint32_t	 hash;
	uint32_t	 idx;		/* term index + 1; 0: empty */
};

struct lb_segw {
	uint8_t		**slabs;
	uint32_t	 nslabs, slabcap;
	uint32_t	 used;		/* bytes used in the last slab */
	struct sw_term	*terms;
	uint32_t	 nterms, termcap;
	struct sw_slot	*tab;
	uint32_t	 mask;		/* table slots - 1 */
	uint64_t	 count;		/* messages added */
	uint64_t	 first_id, last_id;
	int		 have_id;	/* first_id/last_id are set */
	int64_t		 tmin, tmax;
	struct lb_segw_terms *one;	/* lb_segw_add's batch of one message */
};

static inline uint8_t *
sw_ptr(const struct lb_segw *w, uint32_t ref)
{
	return (w->slabs[ref >> SLAB_SHIFT] + (ref & (SLAB_SIZE - 1)));
}

static int
sw_alloc(struct lb_segw *w, uint32_t n, uint32_t *ref)
{
	uint8_t	**s;

	if (w->nslabs == 0 || w->used + n > SLAB_SIZE) {
		if (w->nslabs == SLAB_MAX)
			return (ENOMEM);
		if (w->nslabs == w->slabcap) {
			uint32_t cap = w->slabcap ? w->slabcap * 2 : 16;

			if ((s = realloc(w->slabs, cap * sizeof(*s))) == NULL)
				return (ENOMEM);
			w->slabs = s;
			w->slabcap = cap;
		}
		if ((w->slabs[w->nslabs] = malloc(SLAB_SIZE)) == NULL)
			return (ENOMEM);
		w->nslabs++;
		w->used = 0;
	}
	*ref = (w->nslabs - 1) << SLAB_SHIFT | w->used;
	w->used += n;
	return (0);
}

static inline uint32_t
sw_hash(const uint8_t *p, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ n, v;

	while (n >= 8) {
		memcpy(&v, p, 8);
		h = (h ^ v) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
		p += 8;
		n -= 8;
	}
	v = 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	h = (h ^ v) * 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 29;
	return ((uint32_t)(h ^ h >> 32));
}

static int
sw_grow_table(struct lb_segw *w)
{
	struct sw_slot	*t;
	uint32_t	 size = (w->mask + 1) * 2, m = size - 1;

	if (size == 0 || (t = calloc(size, sizeof(*t))) == NULL)
		return (ENOMEM);
	for (uint32_t i = 0; i <= w->mask; i++) {
		uint32_t j;

		if (w->tab[i].idx == 0)
			continue;
		for (j = w->tab[i].hash & m; t[j].idx != 0; j = (j + 1) & m)
			;
		t[j] = w->tab[i];
	}
	free(w->tab);
	w->tab = t;
	w->mask = m;
	return (0);
}

/* Appends delta v to t's chunk chain. */
static int
sw_append(struct lb_segw *w, struct sw_term *t, uint64_t v)
{
	uint8_t		 buf[LB_VARINT_MAX];
	uint32_t	 n, ref, size;
	int		 rc;

	if (t->df == 1) {
		if ((rc = sw_alloc(w, CHUNK_FIRST, &ref)) != 0)
			return (rc);
		t->head = t->cur = ref;
		t->end = ref + CHUNK_FIRST - 4;
		t->cshift = 0;
	}
	if (t->end - t->cur >= LB_VARINT_MAX) {
		n = (uint32_t)lb_varint_put(sw_ptr(w, t->cur), v);
		t->cur += n;
	} else {
		n = (uint32_t)lb_varint_put(buf, v);
		for (uint32_t i = 0; i < n; i++) {
			if (t->cur == t->end) {
				if (t->cshift < CHUNK_SHIFTS)
					t->cshift++;
				size = CHUNK_FIRST << t->cshift;
				if ((rc = sw_alloc(w, size, &ref)) != 0)
					return (rc);
				lb_put32(sw_ptr(w, t->end), ref);
				t->cur = ref;
				t->end = ref + size - 4;
			}
			*sw_ptr(w, t->cur) = buf[i];
			t->cur++;
		}
	}
	t->plen += n;
	return (0);
}

/* Records that term key[0..len) occurs in id. */
static inline int
sw_same(const struct lb_segw *w, const struct sw_term *t, const uint8_t *key, size_t len)
{
	if (t->klen != len)
		return (0);
	if (len <= KEY_INLINE) {
		for (size_t i = 0; i < len; i++)
			if (t->kin[i] != key[i])
				return (0);
		return (1);
	}
	return (memcmp(t->kin, key, KEY_INLINE) == 0 &&
	    memcmp(sw_ptr(w, t->key) + KEY_INLINE, key + KEY_INLINE, len - KEY_INLINE) == 0);
}

static int
sw_add_h(struct lb_segw *w, const uint8_t *key, size_t len, uint32_t h, uint64_t id)
{
	struct sw_term	*t;
	uint32_t	 i, ref;
	int		 rc;

	for (i = h & w->mask; w->tab[i].idx != 0; i = (i + 1) & w->mask) {
		if (w->tab[i].hash != h)
			continue;
		t = &w->terms[w->tab[i].idx - 1];
		if (!sw_same(w, t, key, len))
			continue;
		if (id <= t->last)
			return (id == t->last ? 0 : EINVAL);
		if ((rc = sw_append(w, t, id - t->last)) != 0)
			return (rc);
		t->last = id;
		t->df++;
		return (0);
	}
	if (w->nterms >= (w->mask + 1) / 2) {
		if ((rc = sw_grow_table(w)) != 0)
			return (rc);
		for (i = h & w->mask; w->tab[i].idx != 0; i = (i + 1) & w->mask)
			;
	}
	if (w->nterms == w->termcap) {
		uint32_t	 cap = w->termcap * 2;
		void		*nt;

		if (cap <= w->termcap || cap > UINT32_MAX / 2)
			return (ENOMEM);
		if (posix_memalign(&nt, 64, (size_t)cap * sizeof(*t)) != 0)
			return (ENOMEM);
		memcpy(nt, w->terms, (size_t)w->nterms * sizeof(*t));
		free(w->terms);
		w->terms = nt;
		w->termcap = cap;
	}
	if ((rc = sw_alloc(w, (uint32_t)len, &ref)) != 0)
		return (rc);
	memcpy(sw_ptr(w, ref), key, len);
	t = &w->terms[w->nterms];
	memset(t, 0, sizeof(*t));
	t->first = t->last = id;
	t->key = ref;
	t->klen = (uint16_t)len;
	memcpy(t->kin, key, len < KEY_INLINE ? len : KEY_INLINE);
	t->df = 1;
	w->tab[i].hash = h;
	w->tab[i].idx = ++w->nterms;
	return (0);
}

static inline int
sw_add(struct lb_segw *w, const uint8_t *key, size_t len, uint64_t id)
{
	return (sw_add_h(w, key, len, sw_hash(key, len), id));
}

/* ---------------------------------------------------------------- batches of ready terms */

int
lb_segw_terms_new(struct lb_segw_terms **out)
{
	struct lb_segw_terms *b;

	if ((b = calloc(1, sizeof(*b))) == NULL)
		return (ENOMEM);
	*out = b;
	return (0);
}

void
lb_segw_terms_free(struct lb_segw_terms *b)
{
	if (b == NULL)
		return;
	free(b->recs);
	free(b->msgs);
	free(b->kbuf);
	free(b->sdbuf);
	free(b);
}

void
lb_segw_terms_clear(struct lb_segw_terms *b)
{
	b->nrec = 0;
	b->nmsg = 0;
	b->klen = 0;
}

uint32_t
lb_segw_terms_count(const struct lb_segw_terms *b)
{
	return (b->nmsg);
}

size_t
lb_segw_terms_size(const struct lb_segw_terms *b)
{
	return (b->klen + (size_t)b->nrec * sizeof(*b->recs));
}

/* Room for nrec more records and nbytes more term bytes. */
static int
st_reserve(struct lb_segw_terms *b, size_t nrec, size_t nbytes)
{
	if (nrec > UINT32_MAX - b->nrec)
		return (ENOMEM);
	if (b->nrec + nrec > b->reccap) {
		size_t	 cap = b->reccap ? b->reccap : 1024;
		void	*p;

		while (cap < b->nrec + nrec)
			cap *= 2;
		if (cap > UINT32_MAX ||
		    (p = realloc(b->recs, cap * sizeof(*b->recs))) == NULL)
			return (ENOMEM);
		b->recs = p;
		b->reccap = (uint32_t)cap;
	}
	if (b->klen + nbytes > b->kcap) {
		size_t	 cap = b->kcap ? b->kcap : 64 * 1024;
		void	*p;

		while (cap < b->klen + nbytes)
			cap *= 2;
		if (cap > UINT32_MAX || (p = realloc(b->kbuf, cap)) == NULL)
			return (ENOMEM);
		b->kbuf = p;
		b->kcap = cap;
	}
	return (0);
}

/* Records the len term bytes just written at kbuf + klen (room was reserved). */
static inline void
st_push(struct lb_segw_terms *b, size_t len)
{
	struct sw_rec *r = &b->recs[b->nrec++];

	r->hash = sw_hash(b->kbuf + b->klen, len);
	r->off = (uint32_t)b->klen;
	r->len = (uint32_t)len;
	r->msg = b->nmsg;
	b->klen += len;
}

/* lb_token_forms callback: a form of the token just pushed, as a text term. */
static int
st_form(void *arg, const uint8_t *form, size_t len, size_t at, int flags)
{
	struct lb_segw_terms	*b = arg;
	uint8_t			*k = b->kbuf + b->klen;

	(void)at;
	(void)flags;
	k[0] = LB_NS_TEXT;
	memcpy(k + 1, form, len);
	st_push(b, len + 1);
	return (0);
}

/*
 * The message text: the tokens of lb_tokenize() (same delimiters, folding and cut; the
 * tests hold the two to the same output), built in place with their namespace byte, each
 * followed by its forms (lb_token_forms: only a token holding ASCII punctuation has any). A
 * token of n >= 1 bytes takes at least n bytes of text plus a delimiter (but the last) and
 * gives n + 1 term bytes, so len bytes of text give at most (len + 1) / 2 tokens and len + 1
 * term bytes: reserved first. Its forms are at most 2 + (n + 1) / 2 terms of at most 2 (n + 1)
 * bytes in all (the stripped form, then parts that with their separators fit in it): reserved
 * before they are made, with what the rest of the text may still need.
 */
static int
st_text(struct lb_segw_terms *b, const struct lb_tokconf *tc, const uint8_t *buf, size_t len)
{
	const uint8_t	*delim = tc->delim;
	uint8_t		 tok[LB_TOKEN_MAX];
	size_t		 i = 0, n;
	uint8_t		*k;
	int		 rc, punct;

	if ((rc = st_reserve(b, (len + 1) / 2, len + 1)) != 0)
		return (rc);
	while (i < len) {
		while (i < len && delim[buf[i]])
			i++;
		if (i == len)
			break;
		k = b->kbuf + b->klen;
		k[0] = LB_NS_TEXT;
		n = 0;
		punct = 0;
		while (i < len && !delim[buf[i]]) {
			if (n < LB_TOKEN_MAX) {
				uint8_t c = buf[i];

				punct |= lb_form_punct[c];
				k[++n] = (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
			}
			i++;
		}
		st_push(b, n + 1);
		if (!punct)
			continue;
		memcpy(tok, k + 1, n);
		if ((rc = st_reserve(b, 2 + (n + 1) / 2 + (len - i + 1) / 2,
		    2 * (n + 1) + len - i + 1)) != 0)
			return (rc);
		(void)lb_token_forms(tok, n, st_form, b);
	}
	return (0);
}

/* A header field: its whole value, ASCII-folded, cut at LB_TOKEN_MAX; nothing when empty. */
static void
st_field(struct lb_segw_terms *b, uint8_t ns, const struct lb_slice *s)
{
	size_t	 n = s->len < LB_TOKEN_MAX ? s->len : LB_TOKEN_MAX;
	uint8_t	*k = b->kbuf + b->klen;

	if (n == 0)
		return;
	k[0] = ns;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s->p[i];

		k[i + 1] = (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
	}
	st_push(b, n + 1);
}

static void
st_byte(struct lb_segw_terms *b, uint8_t ns, uint8_t v)
{
	uint8_t	*k = b->kbuf + b->klen;

	if (v == LB_NOVALUE)
		return;
	k[0] = ns;
	k[1] = v;
	st_push(b, 2);
}

/* Tokenizer callback: b->key[0..keypre) is the term's prefix, the token follows. */
static int
st_token(void *arg, const uint8_t *tok, size_t len, uint32_t pos, size_t off)
{
	struct lb_segw_terms	*b = arg;
	uint8_t			*k;
	int			 rc;

	(void)pos;
	(void)off;
	if ((rc = st_reserve(b, 1, b->keypre + len)) != 0)
		return (rc);
	k = b->kbuf + b->klen;
	memcpy(k, b->key, b->keypre);
	memcpy(k + b->keypre, tok, len);
	st_push(b, b->keypre + len);
	return (0);
}

/*
 * Structured data: [id name="value" ...]... Each token of each (unescaped) value becomes
 * LB_NS_SD "<id>.<name>" 0x00 <token>. Parsing stops at the first malformed byte; what was
 * indexed before it stays.
 */
static int
st_sd(struct lb_segw_terms *b, const struct lb_tokconf *tc, const uint8_t *s, size_t n)
{
	size_t	 i = 0, id, idlen, name, namelen, vl;
	int	 rc;

	if (n > b->sdcap) {
		uint8_t *p;

		if ((p = realloc(b->sdbuf, n)) == NULL)
			return (ENOMEM);
		b->sdbuf = p;
		b->sdcap = n;
	}
	while (i < n && s[i] == '[') {
		id = ++i;
		while (i < n && s[i] != ' ' && s[i] != ']' && s[i] != '=' && s[i] != '"')
			i++;
		if ((idlen = i - id) == 0)
			return (0);
		for (;;) {
			if (i < n && s[i] == ']') {
				i++;
				break;
			}
			if (i >= n || s[i] != ' ')
				return (0);
			while (i < n && s[i] == ' ')
				i++;
			name = i;
			while (i < n && s[i] != ' ' && s[i] != ']' && s[i] != '=' && s[i] != '"')
				i++;
			namelen = i - name;
			if (namelen == 0 || i + 1 >= n || s[i] != '=' || s[i + 1] != '"')
				return (0);
			i += 2;
			for (vl = 0; i < n && s[i] != '"'; vl++) {
				if (s[i] == '\\' && i + 1 < n &&
				    (s[i + 1] == '"' || s[i + 1] == '\\' || s[i + 1] == ']'))
					i++;
				b->sdbuf[vl] = s[i++];
			}
			if (i >= n)
				return (0);
			i++;
			if (3 + idlen + namelen + LB_TOKEN_MAX > LB_SEG_TERM_MAX)
				continue;
			b->key[0] = LB_NS_SD;
			memcpy(b->key + 1, s + id, idlen);
			b->key[1 + idlen] = '.';
			memcpy(b->key + 2 + idlen, s + name, namelen);
			b->key[2 + idlen + namelen] = 0x00;
			b->keypre = 3 + idlen + namelen;
			if ((rc = lb_tokenize(tc, b->sdbuf, vl, st_token, b)) != 0)
				return (rc);
		}
	}
	return (0);
}

/*
 * The text's template term (LB_NS_TPL + lb_text_template), or LB_NS_NOTPL alone for a text
 * without one. lb_segw_write() moves a template fewer than LB_SEG_TPL_MIN messages have to
 * LB_NS_NOTPL.
 */
static int
st_template(struct lb_segw_terms *b, const uint8_t *text, size_t len)
{
	size_t	 n;
	uint8_t	*k;
	int	 rc;

	if ((rc = st_reserve(b, 1, LB_SEG_TERM_MAX)) != 0)
		return (rc);
	k = b->kbuf + b->klen;
	if (lb_text_template(text, len, k + 1, LB_SEG_TERM_MAX - 1, &n)) {
		k[0] = LB_NS_TPL;
		st_push(b, n + 1);
	} else {
		k[0] = LB_NS_NOTPL;
		st_push(b, 1);
	}
	return (0);
}

int
lb_segw_terms_add(struct lb_segw_terms *b, const struct lb_tokconf *tc, const struct lb_msg *m)
{
	uint32_t	 nrec = b->nrec;
	size_t		 klen = b->klen;
	int		 rc;

	if (b->nmsg == b->msgcap) {
		uint32_t	 cap = b->msgcap ? b->msgcap * 2 : 64;
		void		*p;

		if (cap <= b->msgcap ||
		    (p = realloc(b->msgs, (size_t)cap * sizeof(*b->msgs))) == NULL)
			return (ENOMEM);
		b->msgs = p;
		b->msgcap = cap;
	}
	if ((rc = st_text(b, tc, m->message.p, m->message.len)) != 0 ||
	    (rc = st_reserve(b, 8, 5 * (LB_TOKEN_MAX + 1) + 4 + LB_EVTIME_TERM_LEN)) != 0)
		goto fail;
	st_field(b, LB_NS_HOST, &m->host);
	st_field(b, LB_NS_PROGRAM, &m->program);
	st_field(b, LB_NS_PID, &m->pid);
	st_field(b, LB_NS_MSGID, &m->msgid);
	st_field(b, LB_NS_PEER, &m->peer);
	st_byte(b, LB_NS_FACILITY, m->facility);
	st_byte(b, LB_NS_SEVERITY, m->severity);
	if (m->timestamp != LB_NOTIME) {
		lb_evtime_term(lb_evtime_of(m->timestamp), b->kbuf + b->klen);
		st_push(b, LB_EVTIME_TERM_LEN);
	}
	if ((rc = st_sd(b, tc, m->sd.p, m->sd.len)) != 0 ||
	    (rc = st_template(b, m->message.p, m->message.len)) != 0)
		goto fail;
	b->msgs[b->nmsg].id = m->id;
	b->msgs[b->nmsg].received = m->received;
	b->nmsg++;
	return (0);
 fail:
	b->nrec = nrec;
	b->klen = klen;
	return (rc);
}

/* ---------------------------------------------------------------- adding */

int
lb_segw_new(struct lb_segw **out)
{
	struct lb_segw	*w;
	void		*tp;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		return (ENOMEM);
	w->termcap = TAB_MIN / 2;
	w->mask = TAB_MIN - 1;
	w->tmin = w->tmax = LB_NOTIME;
	if (posix_memalign(&tp, 64, w->termcap * sizeof(*w->terms)) != 0)
		tp = NULL;
	w->terms = tp;
	if (w->terms == NULL ||
	    (w->tab = calloc(TAB_MIN, sizeof(*w->tab))) == NULL) {
		lb_segw_free(w);
		return (ENOMEM);
	}
	*out = w;
	return (0);
}

/* Forgets every term and message; keeps the table and term array for the next interval. */
static void
sw_reset(struct lb_segw *w)
{
	for (uint32_t i = 0; i < w->nslabs; i++)
		free(w->slabs[i]);
	w->nslabs = 0;
	w->used = 0;
	w->nterms = 0;
	memset(w->tab, 0, ((size_t)w->mask + 1) * sizeof(*w->tab));
	w->count = 0;
	w->first_id = w->last_id = 0;
	w->have_id = 0;
	w->tmin = w->tmax = LB_NOTIME;
}

void
lb_segw_free(struct lb_segw *w)
{
	if (w == NULL)
		return;
	for (uint32_t i = 0; i < w->nslabs; i++)
		free(w->slabs[i]);
	free(w->slabs);
	free(w->terms);
	free(w->tab);
	lb_segw_terms_free(w->one);
	free(w);
}

static void
sw_note_id(struct lb_segw *w, uint64_t id)
{
	if (!w->have_id) {
		w->first_id = w->last_id = id;
		w->have_id = 1;
	} else if (id < w->first_id)
		w->first_id = id;
	else if (id > w->last_id)
		w->last_id = id;
}

int
lb_segw_add_term(struct lb_segw *w, const uint8_t *term, size_t len, uint64_t id)
{
	int	rc;

	if (len == 0)
		return (EINVAL);
	if (len > LB_SEG_TERM_MAX)
		return (LB_ETOOBIG);
	if ((rc = sw_add(w, term, len, id)) != 0)
		return (rc);
	sw_note_id(w, id);
	return (0);
}

/*
 * Inserts the batch's records, in order. While record k is inserted, the table slot of record
 * k + PF_SLOT and the term that slot points at for record k + PF_TERM (its slot fetched a
 * while ago) are on their way into the cache. Messages count once all their terms are in; a
 * message whose id is not above every id before it stops the batch there with EINVAL.
 */
int
lb_segw_add_terms(struct lb_segw *w, const struct lb_segw_terms *b)
{
	const struct sw_rec	*r = b->recs;
	uint64_t		 prev = w->last_id;
	uint32_t		 nmsg, nrec;
	int			 have = w->have_id, err = 0, rc;

	for (nmsg = 0; nmsg < b->nmsg; nmsg++) {
		if (have && b->msgs[nmsg].id <= prev) {
			err = EINVAL;
			break;
		}
		prev = b->msgs[nmsg].id;
		have = 1;
	}
	for (nrec = 0; nrec < b->nrec && r[nrec].msg < nmsg; nrec++)
		;
	for (uint32_t k = 0; k < PF_SLOT && k < nrec; k++)
		__builtin_prefetch(&w->tab[r[k].hash & w->mask]);
	for (uint32_t k = 0; k < nrec; k++) {
		if (k + PF_SLOT < nrec)
			__builtin_prefetch(&w->tab[r[k + PF_SLOT].hash & w->mask]);
		if (k + PF_TERM < nrec) {
			uint32_t idx = w->tab[r[k + PF_TERM].hash & w->mask].idx;

			if (idx != 0)
				__builtin_prefetch(&w->terms[idx - 1], 1);
		}
		if ((rc = sw_add_h(w, b->kbuf + r[k].off, r[k].len, r[k].hash,
		    b->msgs[r[k].msg].id)) != 0)
			return (rc);
	}
	for (uint32_t i = 0; i < nmsg; i++) {
		int64_t t = b->msgs[i].received;

		sw_note_id(w, b->msgs[i].id);
		w->count++;
		if (t != LB_NOTIME) {
			if (w->tmin == LB_NOTIME || t < w->tmin)
				w->tmin = t;
			if (w->tmax == LB_NOTIME || t > w->tmax)
				w->tmax = t;
		}
	}
	return (err);
}

int
lb_segw_add(struct lb_segw *w, const struct lb_tokconf *tc, const struct lb_msg *m)
{
	int	rc;

	if (w->have_id && m->id <= w->last_id)
		return (EINVAL);
	if (w->one == NULL && (rc = lb_segw_terms_new(&w->one)) != 0)
		return (rc);
	lb_segw_terms_clear(w->one);
	if ((rc = lb_segw_terms_add(w->one, tc, m)) != 0)
		return (rc);
	return (lb_segw_add_terms(w, w->one));
}

size_t
lb_segw_mem(const struct lb_segw *w)
{
	return (sizeof(*w) + (size_t)w->nslabs * SLAB_SIZE +
	    (size_t)w->slabcap * sizeof(*w->slabs) +
	    (size_t)w->termcap * sizeof(*w->terms) +
	    ((size_t)w->mask + 1) * sizeof(*w->tab));
}

void
lb_segw_stats(const struct lb_segw *w, uint64_t *count, uint64_t *first_id, uint64_t *last_id,
    int64_t *tmin, int64_t *tmax)
{
	if (count != NULL)
		*count = w->count;
	if (first_id != NULL)
		*first_id = w->first_id;
	if (last_id != NULL)
		*last_id = w->last_id;
	if (tmin != NULL)
		*tmin = w->tmin;
	if (tmax != NULL)
		*tmax = w->tmax;
}

/*
 * Sort key: the first 16 term bytes as two big-endian words (so integer order is byte order,
 * short keys padded with zeros), then the rest and the length. Sorted in place by an
 * introsort with the comparison inlined: terms are distinct, and the words alone order
 * nearly all of them, so the term bytes are rarely read.
 */
struct sw_sortent {
	uint64_t	 a, b;
	uint32_t	 idx;
};

#define SORT_INSERTION	16	/* runs this short are insertion-sorted */

static inline uint64_t
sw_word(const uint8_t *k, size_t len)
{
	uint64_t	 v = 0;

	if (len >= 8) {
		memcpy(&v, k, 8);
		return (__builtin_bswap64(v));
	}
	for (size_t j = 0; j < 8; j++)
		v = v << 8 | (j < len ? k[j] : 0);
	return (v);
}

/* x < y: the words, then the bytes after the 16th, then the lengths. */
static inline int
sw_less(const struct lb_segw *w, const struct sw_sortent *x, const struct sw_sortent *y)
{
	const struct sw_term	*s, *t;
	size_t			 n;
	int			 c;

	if (x->a != y->a)
		return (x->a < y->a);
	if (x->b != y->b)
		return (x->b < y->b);
	s = &w->terms[x->idx];
	t = &w->terms[y->idx];
	n = s->klen < t->klen ? s->klen : t->klen;
	if (n > 16 && (c = memcmp(sw_ptr(w, s->key) + 16, sw_ptr(w, t->key) + 16, n - 16)) != 0)
		return (c < 0);
	return (s->klen < t->klen);
}

static inline void
sw_swap(struct sw_sortent *x, struct sw_sortent *y)
{
	struct sw_sortent t = *x;

	*x = *y;
	*y = t;
}

static void
sw_sift(const struct lb_segw *w, struct sw_sortent *v, size_t i, size_t n)
{
	for (size_t c; (c = 2 * i + 1) < n; i = c) {
		if (c + 1 < n && sw_less(w, &v[c], &v[c + 1]))
			c++;
		if (!sw_less(w, &v[i], &v[c]))
			return;
		sw_swap(&v[i], &v[c]);
	}
}

/* Quicksort (median of three, Hoare), heapsort past depth, insertion sort for short runs. */
static void
sw_sort(const struct lb_segw *w, struct sw_sortent *v, size_t n, unsigned depth)
{
	while (n > SORT_INSERTION) {
		struct sw_sortent	 p;
		size_t			 i = 0, j = n - 1, m = n / 2;

		if (depth-- == 0) {
			for (size_t k = n / 2; k-- > 0;)
				sw_sift(w, v, k, n);
			for (size_t k = n - 1; k > 0; k--) {
				sw_swap(&v[0], &v[k]);
				sw_sift(w, v, 0, k);
			}
			return;
		}
		if (sw_less(w, &v[m], &v[0]))
			sw_swap(&v[m], &v[0]);
		if (sw_less(w, &v[n - 1], &v[m])) {
			sw_swap(&v[n - 1], &v[m]);
			if (sw_less(w, &v[m], &v[0]))
				sw_swap(&v[m], &v[0]);
		}
		p = v[m];	/* v[0] <= p <= v[n - 1]: both scans stop inside */
		for (;;) {
			do
				i++;
			while (sw_less(w, &v[i], &p));
			do
				j--;
			while (sw_less(w, &p, &v[j]));
			if (i >= j)
				break;
			sw_swap(&v[i], &v[j]);
		}
		/* v[0..i) <= p <= v[i..n), both parts non-empty: recurse into the smaller */
		if (i < n - i) {
			sw_sort(w, v, i, depth);
			v += i;
			n -= i;
		} else {
			sw_sort(w, v + i, n - i, depth);
			n = i;
		}
	}
	for (size_t i = 1; i < n; i++) {
		struct sw_sortent	 x = v[i];
		size_t			 j = i;

		for (; j > 0 && sw_less(w, &x, &v[j - 1]); j--)
			v[j] = v[j - 1];
		v[j] = x;
	}
}

/*
 * Hands a long list to the writer as ids (it stores them bit-packed): the builder's varint
 * gaps in list[0..len), decoded a batch at a time.
 */
static int
sw_stream(struct lb_segout *so, const uint8_t *list, size_t len, uint64_t base)
{
	uint64_t	 batch[256], v, id = base;
	size_t		 k, off = 0, nb = 0;
	int		 rc;

	while (off < len) {
		if ((k = lb_varint_get(list + off, len - off, &v)) == 0)
			return (EINVAL);
		off += k;
		id += v;
		batch[nb++] = id;
		if (nb == sizeof(batch) / sizeof(batch[0])) {
			if ((rc = lb_segout_ids(so, batch, nb)) != 0)
				return (rc);
			nb = 0;
		}
	}
	return (lb_segout_ids(so, batch, nb));
}

/* The list of term t as the writer keeps it: first - first_id, then the gaps (varints). */
static size_t
sw_list(const struct lb_segw *w, const struct sw_term *t, uint8_t *list)
{
	size_t		 n, left = t->plen, size = CHUNK_FIRST, take;
	uint32_t	 ref = t->head, shift = 0;

	n = lb_varint_put(list, t->first - w->first_id);
	while (left > 0) {
		take = size - 4 < left ? size - 4 : left;
		memcpy(list + n, sw_ptr(w, ref), take);
		n += take;
		left -= take;
		if (left > 0) {
			ref = lb_get32(sw_ptr(w, ref + (uint32_t)size - 4));
			if (shift < CHUNK_SHIFTS)
				shift++;
			size = (size_t)CHUNK_FIRST << shift;
		}
	}
	return (n);
}

/* Appends the ids of term t to ids[*n..]. */
static int
sw_ids(const struct lb_segw *w, const struct sw_term *t, uint8_t *list, uint64_t *ids,
    size_t *n)
{
	size_t		 len = sw_list(w, t, list), off = 0, k;
	uint64_t	 id = w->first_id, v;

	while (off < len) {
		if ((k = lb_varint_get(list + off, len - off, &v)) == 0)
			return (EINVAL);
		off += k;
		id += v;
		ids[(*n)++] = id;
	}
	return (0);
}

static int
cmp_id(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

/*
 * The LB_NS_NOTPL term: the ids of its list (t, or none) and solo[0..nsolo), the messages of
 * templates too few messages have; the two never share an id.
 */
static int
sw_notpl(struct lb_segout *so, const struct lb_segw *w, const struct sw_term *t, uint8_t *list,
    uint64_t *solo, size_t nsolo)
{
	static const uint8_t	 key[1] = { LB_NS_NOTPL };
	uint64_t		 batch[256], id = w->first_id, v;
	size_t			 len = t != NULL ? sw_list(w, t, list) : 0, off = 0, k, j = 0;
	size_t			 nb = 0;
	int			 rc, have = 0;

	if (nsolo > 1)
		qsort(solo, nsolo, sizeof(*solo), cmp_id);
	for (;;) {
		if (!have && off < len) {
			if ((k = lb_varint_get(list + off, len - off, &v)) == 0)
				return (EINVAL);
			off += k;
			id += v;
			have = 1;
		}
		if (have && (j == nsolo || id < solo[j])) {
			batch[nb++] = id;
			have = 0;
		} else if (j < nsolo)
			batch[nb++] = solo[j++];
		else
			break;
		if (nb == sizeof(batch) / sizeof(batch[0])) {
			if ((rc = lb_segout_ids(so, batch, nb)) != 0)
				return (rc);
			nb = 0;
		}
	}
	if ((rc = lb_segout_ids(so, batch, nb)) != 0)
		return (rc);
	return (lb_segout_ids_end(so, key, sizeof(key)));
}

/*
 * Terms in key order, each list handed to the writer. A template term (LB_NS_TPL) of fewer
 * than LB_SEG_TPL_MIN messages is not written: its ids go to the LB_NS_NOTPL list, written
 * where that key sorts.
 */
int
lb_segw_write(struct lb_segw *w, const char *path)
{
	struct sw_sortent	*ord = NULL;
	struct lb_segout	*so = NULL;
	struct lb_seginfo	 info;
	const struct sw_term	*notpl = NULL;
	uint8_t			*list = NULL;
	uint64_t		*solo = NULL;
	size_t			 maxp = 0, nsolo = 0, solocap = 0;
	int			 rc, notpl_done = 0;

	if (w->count == 0 && w->nterms == 0)
		return (EINVAL);
	if ((ord = malloc(((size_t)w->nterms + 1) * sizeof(*ord))) == NULL)
		return (ENOMEM);
	for (uint32_t i = 0; i < w->nterms; i++) {
		const struct sw_term	*t = &w->terms[i];
		const uint8_t		*k = sw_ptr(w, t->key);

		ord[i].a = sw_word(k, t->klen);
		ord[i].b = t->klen > 8 ? sw_word(k + 8, t->klen - 8u) : 0;
		ord[i].idx = i;
		if (t->plen > maxp)
			maxp = t->plen;
		if (k[0] == LB_NS_TPL && t->df < LB_SEG_TPL_MIN)
			solocap += t->df;
		if (k[0] == LB_NS_NOTPL && t->klen == 1)
			notpl = t;
	}
	sw_sort(w, ord, w->nterms, 2 * (64 - (unsigned)__builtin_clzll((uint64_t)w->nterms | 1)));
	if ((list = malloc(maxp + LB_VARINT_MAX)) == NULL ||
	    (solocap > 0 && (solo = malloc(solocap * sizeof(*solo))) == NULL)) {
		rc = ENOMEM;
		goto fail;
	}
	memset(&info, 0, sizeof(info));
	info.first_id = w->first_id;
	info.last_id = w->last_id;
	info.count = w->count;
	info.tmin = w->tmin;
	info.tmax = w->tmax;
	if ((rc = lb_segout_begin(path, &info, &so)) != 0)
		goto fail;
	lb_segout_fresh(so);
	for (uint32_t i = 0; i < w->nterms; i++) {
		const struct sw_term	*t = &w->terms[ord[i].idx];
		const uint8_t		*k = sw_ptr(w, t->key);
		size_t			 n;

		/* Terms are visited in key order, not where they are: fetch ahead. */
		if (i + 2 * PF_WRITE < w->nterms)
			__builtin_prefetch(&w->terms[ord[i + 2 * PF_WRITE].idx]);
		if (i + PF_WRITE < w->nterms) {
			const struct sw_term *u = &w->terms[ord[i + PF_WRITE].idx];

			__builtin_prefetch(sw_ptr(w, u->key));
			if (u->df > 1)
				__builtin_prefetch(sw_ptr(w, u->head));
		}
		if (k[0] == LB_NS_TPL && t->df < LB_SEG_TPL_MIN) {
			if ((rc = sw_ids(w, t, list, solo, &nsolo)) != 0)
				goto fail;
			continue;
		}
		/* LB_NS_NOTPL alone sorts after every template and before any longer key. */
		if (!notpl_done && (nsolo > 0 || notpl != NULL) && (k[0] > LB_NS_NOTPL ||
		    (k[0] == LB_NS_NOTPL && t->klen >= 1))) {
			if ((rc = sw_notpl(so, w, notpl, list, solo, nsolo)) != 0)
				goto fail;
			notpl_done = 1;
			if (t == notpl)
				continue;
		}
		n = sw_list(w, t, list);
		if (t->df < LB_PACK_IDS)
			rc = lb_segout_term(so, k, t->klen, t->df, list, n);
		else if ((rc = sw_stream(so, list, n, w->first_id)) == 0)
			rc = lb_segout_ids_end(so, k, t->klen);
		if (rc != 0)
			goto fail;
	}
	if (!notpl_done && (nsolo > 0 || notpl != NULL) &&
	    (rc = sw_notpl(so, w, notpl, list, solo, nsolo)) != 0)
		goto fail;
	rc = lb_segout_finish(so);
	so = NULL;
	if (rc != 0)
		goto fail;
	free(solo);
	free(list);
	free(ord);
	sw_reset(w);
	return (0);
 fail:
	lb_segout_abort(so);
	free(solo);
	free(list);
	free(ord);
	return (rc);
}
