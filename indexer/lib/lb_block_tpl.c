/*
 * lb_block_tpl.c — message bodies as templates and typed variables, for LB_BLK_TPL blocks
 * (FORMAT.md §3.2; lb_block.c builds and reads the payload around them).
 *
 * One pass over a body turns it into a template: the body's bytes with each variable replaced
 * by a placeholder byte, the variables going to their own streams:
 *   - a dotted IPv4 address in canonical form (each part 0..255 without a leading zero, not
 *     inside a longer dotted run or a word) -> TPL_IP, its 4 bytes;
 *   - a run of 6 or more lowercase hex digits, at least one a digit and one a letter, that is a
 *     whole word (no letter or digit either side) -> TPL_HEX, its length and its nibbles;
 *   - a run of decimal digits, 19 at most (a longer run is several): without a leading zero (or
 *     a lone 0) -> TPL_NUM, its value as a varint; with one -> TPL_NUM0, its width (a byte) and
 *     its value;
 * and a body byte that is itself a placeholder or the escape is written TPL_ESC, byte. Every
 * variable's text is exactly what the decoder formats back from its value, so any body (binary,
 * NULs, invalid UTF-8, empty) comes back byte for byte. Nothing is allocated per body: the
 * streams and the scratch grow, amortised, and the template table is reused block after block.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "logbox.h"
#include "lb_block_int.h"

/* One template of the encoder's block table: its bytes in the T_TEXT stream. */
struct tent {
	uint32_t	 hash;
	uint32_t	 off, len;	/* the template's bytes in T_TEXT */
	uint32_t	 code1;		/* its code + 1; 0: a free slot */
};

#define TAB_BITS_MIN	10	/* the table's first size; it doubles at half full */

struct lb_tpl {
	struct tent	*tab;		/* encoder: open-addressed, 2^bits, this block's templates */
	unsigned	 bits;
	uint32_t	 ntpl;
	uint8_t		*tb;		/* encoder: the template being built */
	size_t		 tcap;
	const uint8_t	**dp;		/* decoder: the block's templates met so far */
	uint32_t	*dl;
	uint8_t		*dg;		/* decoder: each template's last length varint size */
	uint8_t		*body;		/* decoder: a body rebuilt aside (when the guess fails) */
	size_t		 bodycap;
	size_t		 dcap;
	uint64_t	 dn, dcnt;
};

/* Character classes. */
#define C_DIG	1	/* 0-9 */
#define C_HEXL	2	/* a-f */
#define C_ALNUM	4	/* 0-9 A-Z a-z */
#define C_PH	8	/* a placeholder byte or the escape */

static const uint8_t cls[256] = {
	[0x11] = C_PH, [0x12] = C_PH, [0x13] = C_PH, [0x14] = C_PH, [0x15] = C_PH,
	['0'] = 5, ['1'] = 5, ['2'] = 5, ['3'] = 5, ['4'] = 5,
	['5'] = 5, ['6'] = 5, ['7'] = 5, ['8'] = 5, ['9'] = 5,
	['a'] = 6, ['b'] = 6, ['c'] = 6, ['d'] = 6, ['e'] = 6, ['f'] = 6,
	['g'] = 4, ['h'] = 4, ['i'] = 4, ['j'] = 4, ['k'] = 4, ['l'] = 4, ['m'] = 4,
	['n'] = 4, ['o'] = 4, ['p'] = 4, ['q'] = 4, ['r'] = 4, ['s'] = 4, ['t'] = 4,
	['u'] = 4, ['v'] = 4, ['w'] = 4, ['x'] = 4, ['y'] = 4, ['z'] = 4,
	['A'] = 4, ['B'] = 4, ['C'] = 4, ['D'] = 4, ['E'] = 4, ['F'] = 4, ['G'] = 4,
	['H'] = 4, ['I'] = 4, ['J'] = 4, ['K'] = 4, ['L'] = 4, ['M'] = 4, ['N'] = 4,
	['O'] = 4, ['P'] = 4, ['Q'] = 4, ['R'] = 4, ['S'] = 4, ['T'] = 4, ['U'] = 4,
	['V'] = 4, ['W'] = 4, ['X'] = 4, ['Y'] = 4, ['Z'] = 4,
};

#define NUM_DIGITS_MAX	19	/* 10^19 - 1 fits 64 bits */

static const uint64_t pow10[NUM_DIGITS_MAX + 1] = {
	1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL,
	100000000ULL, 1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL,
	10000000000000ULL, 100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL,
	100000000000000000ULL, 1000000000000000000ULL, 10000000000000000000ULL,
};

void
lb_tpl_free(struct lb_tpl *t)
{
	if (t == NULL)
		return;
	free(t->tab);
	free(t->tb);
	free(t->dp);
	free(t->dl);
	free(t->dg);
	free(t->body);
	free(t);
}

static int
tpl(struct lb_tpl **t)
{
	if (*t == NULL && (*t = calloc(1, sizeof(**t))) == NULL)
		return (ENOMEM);
	return (0);
}

int
lb_tpl_begin(struct lb_tpl **tp)
{
	struct lb_tpl	*t;
	int		 rc;

	if ((rc = tpl(tp)) != 0)
		return (rc);
	t = *tp;
	if (t->tab == NULL) {
		t->bits = TAB_BITS_MIN;
		if ((t->tab = calloc((size_t)1 << t->bits, sizeof(*t->tab))) == NULL)
			return (ENOMEM);
	} else
		memset(t->tab, 0, ((size_t)1 << t->bits) * sizeof(*t->tab));
	t->ntpl = 0;
	return (0);
}

/* The table twice as large, its entries moved. 0 or ENOMEM. */
static int
tab_grow(struct lb_tpl *t)
{
	struct tent	*nt;
	uint32_t	 mask = (2u << t->bits) - 1;

	if ((nt = calloc((size_t)2 << t->bits, sizeof(*nt))) == NULL)
		return (ENOMEM);
	for (size_t i = 0; i < ((size_t)1 << t->bits); i++) {
		uint32_t	 j;

		if (t->tab[i].code1 == 0)
			continue;
		for (j = t->tab[i].hash & mask; nt[j].code1 != 0; j = (j + 1) & mask)
			;
		nt[j] = t->tab[i];
	}
	free(t->tab);
	t->tab = nt;
	t->bits++;
	return (0);
}

static uint32_t
thash(const uint8_t *p, size_t n)
{
	uint64_t	 h = 0x9e3779b97f4a7c15ULL ^ n, w;
	size_t		 i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
	}
	w = 0;
	memcpy(&w, p + i, n - i);
	h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
	return ((uint32_t)(h ^ (h >> 29)));
}

/* Lowercase hex digit value (the caller knows it is one). */
static inline unsigned
nib(uint8_t c)
{
	return (c <= '9' ? (unsigned)(c - '0') : (unsigned)(c - 'a' + 10));
}

int
lb_tpl_put(struct lb_tpl *t, const uint8_t *p, size_t n, struct bbuf *st)
{
	struct bbuf	*num = &st[T_NUM], *num0 = &st[T_NUM0], *ip = &st[T_IP], *hex = &st[T_HEX];
	struct tent	*e;
	uint32_t	 mask, i32, hash;
	size_t		 i = 0, o = 0;
	uint8_t		*tb;
	int		 rc;

	/* Every variable's column bytes are at most its text's length; the template twice. */
	if ((rc = lb_grow(&t->tb, &t->tcap, 2 * n + 1, 1)) != 0 ||
	    (rc = bb_room(num, n)) != 0 || (rc = bb_room(num0, n)) != 0 ||
	    (rc = bb_room(ip, n)) != 0 || (rc = bb_room(hex, n)) != 0)
		return (rc);
	tb = t->tb;
	while (i < n) {
		uint8_t	 c = p[i], k = cls[c];
		int	 atstart = i == 0 || !(cls[p[i - 1]] & C_ALNUM);

		if (!(k & (C_DIG | C_PH)) && !((k & C_HEXL) && atstart)) {
			/* A run of plain bytes: up to a digit, a placeholder byte, or a letter a-f
			 * that starts a word. */
			do {
				tb[o++] = c;
				if (++i == n)
					break;
				atstart = !(k & C_ALNUM);
				c = p[i];
				k = cls[c];
			} while (!(k & (C_DIG | C_PH)) && !((k & C_HEXL) && atstart));
			continue;
		}
		if (k & C_PH) {
			tb[o++] = TPL_ESC;
			tb[o++] = c;
			i++;
			continue;
		}
		if (atstart && (k & C_DIG)) {	/* a dotted IPv4 address */
			size_t	 j = i;
			unsigned q[4], part;

			for (part = 0; part < 4; part++) {
				size_t	 s = j;
				unsigned v = 0;

				while (j < n && j - s < 3 && (cls[p[j]] & C_DIG))
					v = v * 10 + (p[j++] - '0');
				if (j == s || v > 255 || (j - s > 1 && p[s] == '0'))
					break;
				q[part] = v;
				if (part < 3) {
					if (j >= n || p[j] != '.')
						break;
					j++;
				}
			}
			if (part == 4 && (j == n || !(cls[p[j]] & C_ALNUM)) &&
			    !(j + 1 < n && p[j] == '.' && (cls[p[j + 1]] & C_DIG))) {
				for (part = 0; part < 4; part++)
					ip->p[ip->len++] = (uint8_t)q[part];
				tb[o++] = TPL_IP;
				i = j;
				continue;
			}
		}
		if (atstart && (k & (C_DIG | C_HEXL))) {	/* a hex word */
			size_t	 j = i;
			uint8_t	 seen = 0;

			while (j < n && (cls[p[j]] & (C_DIG | C_HEXL))) {
				seen |= cls[p[j]];
				j++;
			}
			if (j - i >= 6 && (seen & C_DIG) && (seen & C_HEXL) &&
			    (j == n || !(cls[p[j]] & C_ALNUM))) {
				hex->len += lb_varint_put(hex->p + hex->len, j - i);
				for (size_t h = i; h < j; h += 2)
					hex->p[hex->len++] = (uint8_t)(nib(p[h]) << 4 |
					    (h + 1 < j ? nib(p[h + 1]) : 0));
				tb[o++] = TPL_HEX;
				i = j;
				continue;
			}
		}
		if (k & C_DIG) {	/* a decimal run, 19 digits at most */
			size_t	 j = i;
			uint64_t v = 0;

			while (j < n && j - i < NUM_DIGITS_MAX && (cls[p[j]] & C_DIG))
				v = v * 10 + (uint64_t)(p[j++] - '0');
			if (p[i] != '0' || j - i == 1) {
				num->len += lb_varint_put(num->p + num->len, v);
				tb[o++] = TPL_NUM;
			} else {
				num0->p[num0->len++] = (uint8_t)(j - i);
				num0->len += lb_varint_put(num0->p + num0->len, v);
				tb[o++] = TPL_NUM0;
			}
			i = j;
			continue;
		}
		tb[o++] = c;	/* a letter a-f that does not start a hex word */
		i++;
	}

	/* The template's code: one met before in this block, or the next, its bytes in T_TEXT. */
	if ((size_t)t->ntpl + 1 > ((size_t)1 << t->bits) / 2 && (rc = tab_grow(t)) != 0)
		return (rc);
	mask = (1u << t->bits) - 1;
	hash = thash(tb, o);
	for (i32 = hash & mask;; i32 = (i32 + 1) & mask) {
		e = &t->tab[i32];
		if (e->code1 == 0)
			break;
		if (e->hash == hash && e->len == o && memcmp(st[T_TEXT].p + e->off, tb, o) == 0)
			return (bb_var(&st[T_CODE], e->code1 - 1));
	}
	if ((rc = bb_var(&st[T_TEXT], o)) != 0)
		return (rc);
	e->hash = hash;
	e->off = (uint32_t)st[T_TEXT].len;
	e->len = (uint32_t)o;
	e->code1 = ++t->ntpl;
	if ((rc = bb_put(&st[T_TEXT], tb, o)) != 0)
		return (rc);
	return (bb_var(&st[T_CODE], e->code1 - 1));
}

int
lb_tpl_dbegin(struct lb_tpl **tp, uint64_t n)
{
	struct lb_tpl	*t;
	int		 rc;

	if ((rc = tpl(tp)) != 0)
		return (rc);
	t = *tp;
	if (t->dcap < n) {
		free(t->dp);
		free(t->dl);
		free(t->dg);
		t->dcap = 0;
		t->dl = NULL;
		t->dg = NULL;
		if ((t->dp = malloc(n * sizeof(*t->dp))) == NULL ||
		    (t->dl = malloc(n * sizeof(*t->dl))) == NULL ||
		    (t->dg = malloc(n * sizeof(*t->dg))) == NULL)
			return (ENOMEM);
		t->dcap = n;
	}
	t->dn = n;
	t->dcnt = 0;
	return (0);
}

/* The bytes of v as a varint. */
static inline size_t
vlen(uint64_t v)
{
	size_t	 n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return (n);
}

/* The varint at s's cursor. 0 or LB_ECORRUPT. */
static inline int
rs_var(struct rs *s, uint64_t *v)
{
	size_t	 k = lb_varint_get(s->p + s->at, s->len - s->at, v);

	if (k == 0)
		return (LB_ECORRUPT);
	s->at += k;
	return (0);
}

static const char dig2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

/* v in decimal, zero-padded to width w, at out[*o..cap). */
static inline int
put_dec(uint64_t v, unsigned w, uint8_t *out, size_t *o, size_t cap)
{
	/* The digits of v < 10^19 (the callers see to it): from its bit length, then exactly. */
	unsigned t = ((64u - (unsigned)__builtin_clzll(v | 1)) * 1233u) >> 12;
	unsigned nd = t + 1 - (v < pow10[t]), k;
	uint8_t	*q;

	nd = nd == 0 ? 1 : nd;
	k = nd > w ? nd : w;
	if (k > cap - *o)
		return (LB_ECORRUPT);
	q = out + *o + k;	/* the digits, written from the last */
	while (v >= 100) {
		unsigned r = (unsigned)(v % 100);

		v /= 100;
		q -= 2;
		memcpy(q, dig2 + 2 * r, 2);
	}
	if (v >= 10) {
		q -= 2;
		memcpy(q, dig2 + 2 * v, 2);
	} else
		*--q = (uint8_t)('0' + v);
	while (q > out + *o)
		*--q = '0';
	*o += k;
	return (0);
}

/* The first placeholder or escape in p[i..n), or n. */
static inline size_t
next_ph(const uint8_t *p, size_t i, size_t n)
{
#ifdef __SSE2__
	const __m128i	 base = _mm_set1_epi8(TPL_NUM), span = _mm_set1_epi8(TPL_ESC - TPL_NUM);

	for (; i + 16 <= n; i += 16) {
		__m128i	 x = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + i)),
		    base);
		unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(x, span), x));

		if (m != 0)
			return (i + (size_t)__builtin_ctz(m));
	}
#endif
	while (i < n && (uint8_t)(p[i] - TPL_NUM) > TPL_ESC - TPL_NUM)
		i++;
	return (i);
}

/* Template code's body from the variable streams' cursors into out[0..cap), its length in *len. */
static int
render(struct lb_tpl *t, uint64_t code, struct rs *s, uint8_t *out, size_t cap, size_t *len)
{
	static const char hexd[16] = "0123456789abcdef";
	const uint8_t	*tp = t->dp[code];
	uint64_t	 v;
	size_t		 tl = t->dl[code], i = 0, o = 0;
	int		 rc;

	while (i < tl) {
		size_t	 j = next_ph(tp, i, tl);

		if (j - i > cap - o)
			return (LB_ECORRUPT);
		if (j - i <= 16 && tl - i >= 16 && cap - o >= 16)
			memcpy(out + o, tp + i, 16);	/* a short run: one 16-byte move */
		else
			memcpy(out + o, tp + i, j - i);
		o += j - i;
		if ((i = j) == tl)
			break;
		switch (tp[i++]) {
		case TPL_NUM:
			if ((rc = rs_var(&s[T_NUM], &v)) != 0)
				return (rc);
			if (v >= pow10[NUM_DIGITS_MAX] || (rc = put_dec(v, 1, out, &o, cap)) != 0)
				return (LB_ECORRUPT);
			break;
		case TPL_NUM0: {
			struct rs	*x = &s[T_NUM0];
			unsigned	 w;

			if (x->at >= x->len)
				return (LB_ECORRUPT);
			w = x->p[x->at++];
			if (w < 2 || w > NUM_DIGITS_MAX || (rc = rs_var(x, &v)) != 0 ||
			    v >= pow10[w - 1] || (rc = put_dec(v, w, out, &o, cap)) != 0)
				return (LB_ECORRUPT);	/* a leading zero: v < 10^(w-1) */
			break;
		}
		case TPL_IP: {
			struct rs	*x = &s[T_IP];

			if (x->len - x->at < 4)
				return (LB_ECORRUPT);
			for (int q = 0; q < 4; q++) {
				if (q > 0) {
					if (o == cap)
						return (LB_ECORRUPT);
					out[o++] = '.';
				}
				if (put_dec(x->p[x->at++], 1, out, &o, cap) != 0)
					return (LB_ECORRUPT);
			}
			break;
		}
		case TPL_HEX: {
			struct rs	*x = &s[T_HEX];

			if ((rc = rs_var(x, &v)) != 0 || v < 6 || v > cap - o ||
			    (v + 1) / 2 > x->len - x->at)
				return (LB_ECORRUPT);
			for (size_t h = 0; h < v; h++) {
				uint8_t	 b = x->p[x->at + h / 2];

				out[o++] = (uint8_t)hexd[h & 1 ? b & 15 : b >> 4];
			}
			x->at += (size_t)(v + 1) / 2;
			break;
		}
		default:	/* TPL_ESC: the next byte as is */
			if (i == tl || o == cap)
				return (LB_ECORRUPT);
			out[o++] = tp[i++];
			break;
		}
	}
	*len = o;
	return (0);
}

int
lb_tpl_body(struct lb_tpl *t, struct rs *s, uint8_t *dst, size_t room, size_t *used)
{
	uint64_t	 code, v;
	size_t		 at[NTSTREAM], bl, vk, g;
	int		 rc;

	if ((rc = rs_var(&s[T_CODE], &code)) != 0)
		return (rc);
	if (code > t->dcnt || (code == t->dcnt && t->dcnt >= t->dn))
		return (LB_ECORRUPT);
	if (code == t->dcnt) {	/* a new template */
		struct rs	*x = &s[T_TEXT];

		if ((rc = rs_var(x, &v)) != 0 || v > x->len - x->at)
			return (LB_ECORRUPT);
		t->dp[code] = x->p + x->at;
		t->dl[code] = (uint32_t)v;
		t->dg[code] = (uint8_t)vlen(v);
		x->at += (size_t)v;
		t->dcnt++;
	}
	/*
	 * The body goes right after its length varint, whose size is guessed (that of the body
	 * before with the same template) and put right after; when the guess leaves too little
	 * room, the body is rebuilt aside from the same cursors.
	 */
	for (int k = T_NUM; k < NTSTREAM; k++)
		at[k] = s[k].at;
	g = t->dg[code];
	if (g >= room || (rc = render(t, code, s, dst + g, room - g, &bl)) != 0) {
		for (int k = T_NUM; k < NTSTREAM; k++)
			s[k].at = at[k];
		if ((rc = lb_grow(&t->body, &t->bodycap, room, 1)) != 0 ||
		    (rc = render(t, code, s, t->body, room, &bl)) != 0)
			return (rc);
		g = 0;
	}
	if ((vk = vlen(bl)) + bl > room)
		return (LB_ECORRUPT);
	if (g == 0)
		memcpy(dst + vk, t->body, bl);
	else if (vk != g)
		memmove(dst + vk, dst + g, bl);
	(void)lb_varint_put(dst, bl);
	t->dg[code] = (uint8_t)vk;
	*used = vk + bl;
	return (0);
}
