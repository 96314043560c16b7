/*
 * lb_block.c — the message block codec (FORMAT.md §3.2, lb_block.h). Columns: the records
 * split into streams (times, meta, dictionary codes of host, program, pid, msgid and peer, the
 * dictionary, sd, body lengths, bodies), each stored or one zstd frame at ZSTD_LEVEL.
 * Templates: the same header streams, and the bodies as per-block templates and typed
 * variables (lb_block_tpl.c) in place of body lengths and bodies. A block the columns or
 * templates do not shrink is one zstd frame of the records (its content size and checksum,
 * nothing else); raw DEFLATE (ISA-L level 1) is what logbox wrote before, read forever and
 * still writable for tests; a block that nothing shrinks is stored. A reader dispatches on
 * the header's method.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <isa-l/igzip_lib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_block.h"
#include "lb_block_int.h"
#include "lb_util.h"

#ifndef ZSTD_LEVEL
#define ZSTD_LEVEL	3	/* zstd level of the writer: FORMAT.md §3.8 for the numbers */
#endif
#define DEFLATE_LEVEL	1	/* ISA-L level of the DEFLATE writer (before zstd) */

/*
 * The streams of a columns block (FORMAT.md §3.2), in payload order: S_TIME..S_BODY. A
 * templates block has S_TIME..S_SD, then the template streams S_TPL + T_CODE..T_HEX in place
 * of S_BLEN and S_BODY.
 */
enum { S_TIME, S_META, S_HOST, S_PROG, S_PID, S_MSGID, S_PEER, S_DICT, S_SD, S_BLEN, S_BODY,
	S_TPL, NSTREAM = S_TPL + NTSTREAM };
#define NDICT		5		/* coded fields: host, program, pid, msgid, peer */
#define NHEAD		(S_SD + 1)	/* the streams both layouts share */
#define NCOLS		(S_BODY + 1)	/* streams of a columns payload */
#define NTPLS		(NHEAD + NTSTREAM)	/* streams of a templates payload */

/* One dictionary entry of the columns encoder: a field's span in the raw records. */
struct dent {
	uint32_t	 stamp;		/* == the codec's stamp: in use for this block */
	uint32_t	 off, len;	/* the span (length varint + bytes) in the records */
	uint32_t	 code;
	uint8_t		 field;
};

struct lb_bcodec {
	ZSTD_CCtx		*zc;
	int			 zlevel;	/* zc's level; 0: not set yet (zstd's default) */
	ZSTD_DCtx		*zd;
	struct inflate_state	*zi;	/* ISA-L inflate scratch */
	uint8_t			*lvlbuf;	/* ISA-L deflate's working memory */
	struct bbuf		 st[NSTREAM];	/* columns, templates: the streams, raw */
	struct bbuf		 zs[NSTREAM];	/* the streams as written (zstd frames or copies) */
	uint8_t			 zmode[NSTREAM];
	struct lb_tpl		*tpl;		/* templates: the bodies' codec */
	struct dent		*dict;		/* columns encoder: open-addressed, 2^dbits */
	unsigned		 dbits;
	uint32_t		 stamp;
	const uint8_t		**dp;		/* columns decoder: the dictionary's spans */
	uint32_t		*dl;
	size_t			 dcap;
};

void
lb_block_free(struct lb_bcodec *c)
{
	if (c == NULL)
		return;
	ZSTD_freeCCtx(c->zc);
	ZSTD_freeDCtx(c->zd);
	free(c->zi);
	free(c->lvlbuf);
	for (int i = 0; i < NSTREAM; i++) {
		free(c->st[i].p);
		free(c->zs[i].p);
	}
	lb_tpl_free(c->tpl);
	free(c->dict);
	free(c->dp);
	free(c->dl);
	free(c);
}

static int
codec(struct lb_bcodec **c)
{
	if (*c == NULL && (*c = calloc(1, sizeof(**c))) == NULL)
		return (ENOMEM);
	return (0);
}

int
lb_block_method_ok(unsigned method)
{
	return (method == LB_BLK_STORED || method == LB_BLK_DEFLATE || method == LB_BLK_ZSTD ||
	    method == LB_BLK_COLS || method == LB_BLK_TPL);
}

/* DEFLATE into dst[0..cap): the stream length, or 0 when it does not fit. */
static int
deflate_into(struct lb_bcodec *c, const uint8_t *src, size_t raw, uint8_t *dst, size_t cap,
    size_t *out)
{
	struct isal_zstream	 zs;

	*out = 0;
	if (c->lvlbuf == NULL && (c->lvlbuf = malloc(ISAL_DEF_LVL1_DEFAULT)) == NULL)
		return (ENOMEM);
	/* ISA-L writes a plain raw DEFLATE stream that any inflate reads (zlib's included). */
	isal_deflate_stateless_init(&zs);
	zs.level = DEFLATE_LEVEL;
	zs.level_buf = c->lvlbuf;
	zs.level_buf_size = ISAL_DEF_LVL1_DEFAULT;
	zs.gzip_flag = IGZIP_DEFLATE;
	zs.end_of_stream = 1;
	zs.flush = NO_FLUSH;
	zs.next_in = (uint8_t *)(uintptr_t)src;
	zs.avail_in = (uint32_t)raw;
	zs.next_out = dst;
	zs.avail_out = (uint32_t)cap;
	if (isal_deflate_stateless(&zs) == COMP_OK && zs.avail_in == 0)
		*out = zs.total_out;
	return (0);
}

/*
 * One zstd frame at level with its content size and checksum into dst[0..cap): its length, or
 * 0 when it does not fit.
 */
static int
zstd_level_into(struct lb_bcodec *c, int level, const uint8_t *src, size_t raw, uint8_t *dst,
    size_t cap, size_t *out)
{
	size_t	 r;

	*out = 0;
	if (c->zc == NULL) {
		if ((c->zc = ZSTD_createCCtx()) == NULL)
			return (ENOMEM);
		if (ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_contentSizeFlag, 1)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_checksumFlag, 1)))
			return (EINVAL);
	}
	if (level != c->zlevel) {
		if (ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_compressionLevel, level)))
			return (EINVAL);
		c->zlevel = level;
	}
	r = ZSTD_compress2(c->zc, dst, cap, src, raw);
	if (ZSTD_isError(r)) {
		/* dst too small means: not worth it. Anything else would be a bug or no memory. */
		if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
			return (ENOMEM);
		(void)ZSTD_CCtx_reset(c->zc, ZSTD_reset_session_only);
		return (0);
	}
	*out = r;
	return (0);
}

/* One zstd frame at the message blocks' level (ZSTD_LEVEL). */
static int
zstd_into(struct lb_bcodec *c, const uint8_t *src, size_t raw, uint8_t *dst, size_t cap,
    size_t *out)
{
	return (zstd_level_into(c, ZSTD_LEVEL, src, raw, dst, cap, out));
}

size_t
lb_zstd_bound(size_t raw)
{
	return (ZSTD_compressBound(raw));
}

int
lb_zstd_frame(struct lb_bcodec **c, int level, const uint8_t *src, size_t raw, uint8_t *dst,
    size_t cap, size_t *comp)
{
	int	 rc;

	if ((rc = codec(c)) != 0)
		return (rc);
	if ((rc = zstd_level_into(*c, level, src, raw, dst, cap, comp)) != 0)
		return (rc);
	return (*comp == 0 ? EINVAL : 0);
}

#define COLS_MIN_ZSTD	32	/* a stream shorter than this is stored as is */

static uint32_t
span_hash(const uint8_t *p, size_t n, unsigned field)
{
	uint32_t	 h = 2166136261u ^ field;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return (h);
}

/* The code of field's span r[off..off+len) in this block; a new one also goes to S_DICT. */
static int
dict_code(struct lb_bcodec *c, const uint8_t *r, uint32_t off, uint32_t len, unsigned field,
    uint32_t *ncode, struct bbuf *codes)
{
	uint32_t	 mask = (1u << c->dbits) - 1, i;
	struct dent	*e;
	int		 rc;

	for (i = span_hash(r + off, len, field) & mask;; i = (i + 1) & mask) {
		e = &c->dict[i];
		if (e->stamp != c->stamp)
			break;
		if (e->field == field && e->len == len && memcmp(r + e->off, r + off, len) == 0)
			return (bb_var(codes, e->code));
	}
	e->stamp = c->stamp;
	e->off = off;
	e->len = len;
	e->field = (uint8_t)field;
	e->code = ncode[field]++;
	if ((rc = bb_put(&c->st[S_DICT], r + off, len)) != 0)
		return (rc);
	return (bb_var(codes, e->code));
}

#define W_COLS	1	/* split the bodies into S_BLEN and S_BODY */
#define W_TPL	2	/* split the bodies into templates and variables (S_TPL...) */
#ifndef TPL_WAYS
#define TPL_WAYS	W_TPL	/* LB_BLK_TPL: templates only (W_COLS | W_TPL: the smaller) */
#endif

/*
 * Splits the records r[0..raw) into the header streams, and the bodies as ways asks (W_COLS,
 * W_TPL or both). 0, or 1 when the records do not parse (then the block is not written as
 * columns), or ENOMEM.
 */
static int
cols_split(struct lb_bcodec *c, const uint8_t *r, size_t raw, uint64_t *nrec, unsigned ways)
{
	uint32_t	 ncode[NDICT] = { 0 };
	uint64_t	 v, flags, n = 0;
	size_t		 o = 0, k, want = (raw / LB_REC_MIN + 1) * NDICT * 2;
	int		 rc;

	for (int i = 0; i < NSTREAM; i++)
		c->st[i].len = 0;
	if ((ways & W_TPL) && (rc = lb_tpl_begin(&c->tpl)) != 0)
		return (rc);
	if (c->dict == NULL || ((size_t)1 << c->dbits) < want) {
		free(c->dict);
		for (c->dbits = 10; ((size_t)1 << c->dbits) < want; c->dbits++)
			;
		if ((c->dict = calloc((size_t)1 << c->dbits, sizeof(*c->dict))) == NULL)
			return (ENOMEM);
		c->stamp = 0;
	}
	if (++c->stamp == 0) {
		memset(c->dict, 0, ((size_t)1 << c->dbits) * sizeof(*c->dict));
		c->stamp = 1;
	}
#define VAR()	do { if ((k = lb_varint_get(r + o, raw - o, &v)) == 0) return (1); } while (0)
#define SPAN()	do { VAR(); if (v > raw - o - k) return (1); } while (0)
	while (o < raw) {
		for (int t = 0; t < 3; t++) {	/* received, timestamp, tzoff */
			VAR();
			if ((rc = bb_put(&c->st[S_TIME], r + o, k)) != 0)
				return (rc);
			o += k;
		}
		if (raw - o < 2)
			return (1);
		if ((rc = bb_put(&c->st[S_META], r + o, 2)) != 0)	/* facility, severity */
			return (rc);
		o += 2;
		VAR();
		flags = v;
		if ((rc = bb_put(&c->st[S_META], r + o, k)) != 0)
			return (rc);
		o += k;
		for (unsigned f = 0; f < 4; f++) {	/* host, program, pid, msgid */
			SPAN();
			if ((rc = dict_code(c, r, (uint32_t)o, (uint32_t)(k + v), f, ncode,
			    &c->st[S_HOST + f])) != 0)
				return (rc);
			o += k + v;
		}
		SPAN();
		if ((rc = bb_put(&c->st[S_SD], r + o, k + v)) != 0)
			return (rc);
		o += k + v;
		SPAN();
		if ((ways & W_COLS) && ((rc = bb_put(&c->st[S_BLEN], r + o, k)) != 0 ||
		    (rc = bb_put(&c->st[S_BODY], r + o + k, v)) != 0))
			return (rc);
		if ((ways & W_TPL) &&
		    (rc = lb_tpl_put(c->tpl, r + o + k, (size_t)v, &c->st[S_TPL])) != 0)
			return (rc);
		o += k + v;
		if (flags & LB_MSG_PEER) {
			SPAN();
			if ((rc = dict_code(c, r, (uint32_t)o, (uint32_t)(k + v), 4, ncode,
			    &c->st[S_PEER])) != 0)
				return (rc);
			o += k + v;
		}
		n++;
	}
#undef SPAN
#undef VAR
	*nrec = n;
	return (0);
}

/* The streams of each layout, in payload order. */
static const uint8_t cols_ids[NCOLS] = { S_TIME, S_META, S_HOST, S_PROG, S_PID, S_MSGID, S_PEER,
	S_DICT, S_SD, S_BLEN, S_BODY };
static const uint8_t tpl_ids[NTPLS] = { S_TIME, S_META, S_HOST, S_PROG, S_PID, S_MSGID, S_PEER,
	S_DICT, S_SD, S_TPL + T_CODE, S_TPL + T_TEXT, S_TPL + T_NUM, S_TPL + T_NUM0,
	S_TPL + T_IP, S_TPL + T_HEX };

/* Stream i as written: one zstd frame in zs[i] when it is smaller, else stored as is. */
static int
zstream(struct lb_bcodec *c, int i)
{
	struct bbuf	*b = &c->st[i], *z = &c->zs[i];
	size_t		 zl;
	int		 rc;

	c->zmode[i] = LB_BLK_STORED;
	z->len = 0;
	if (b->len >= COLS_MIN_ZSTD) {
		if ((rc = lb_grow(&z->p, &z->cap, b->len, 1)) != 0)
			return (rc);
		if ((rc = zstd_into(c, b->p, b->len, z->p, b->len - 1, &zl)) != 0)
			return (rc);
		if (zl > 0) {
			c->zmode[i] = LB_BLK_ZSTD;
			z->len = zl;
		}
	}
	return (0);
}

static size_t
zlen(const struct lb_bcodec *c, int i)
{
	return (c->zmode[i] == LB_BLK_ZSTD ? c->zs[i].len : c->st[i].len);
}

/* The payload's length with the streams ids[0..ns) (and a header of h0 bytes before the table). */
static size_t
layout_len(const struct lb_bcodec *c, const uint8_t *ids, int ns, size_t h0)
{
	uint8_t	 t[LB_VARINT_MAX];
	size_t	 total = h0;

	for (int j = 0; j < ns; j++)
		total += 1 + lb_varint_put(t, zlen(c, ids[j])) + zlen(c, ids[j]);
	return (total);
}

/*
 * The columns (ways W_COLS) or templates (W_TPL) payload of src[0..raw) into dst[0..cap), or
 * with both the smaller of the two: its length in *out, or 0 when it does not fit; its
 * method in *method.
 */
static int
split_into(struct lb_bcodec *c, unsigned ways, const uint8_t *src, size_t raw, uint8_t *dst,
    size_t cap, size_t *out, uint8_t *method)
{
	const uint8_t	*ids;
	size_t		 h, lc = SIZE_MAX, lt = SIZE_MAX, total;
	uint64_t	 n;
	int		 rc, ns;

	*out = 0;
	if ((rc = cols_split(c, src, raw, &n, ways)) != 0)
		return (rc == 1 ? 0 : rc);
	for (int i = 0; i < NSTREAM; i++)
		if ((i < NHEAD || (i < S_TPL ? (ways & W_COLS) : (ways & W_TPL))) &&
		    (rc = zstream(c, i)) != 0)
			return (rc);
	h = lb_varint_put(dst, n) + 4;	/* cap >= 1 + 4: the records are 12 bytes or more */
	if (ways & W_COLS)
		lc = layout_len(c, cols_ids, NCOLS, h);
	if (ways & W_TPL)
		lt = layout_len(c, tpl_ids, NTPLS, h);
	if (lt < lc) {
		ids = tpl_ids;
		ns = NTPLS;
		*method = LB_BLK_TPL;
		total = lt;
	} else {
		ids = cols_ids;
		ns = NCOLS;
		*method = LB_BLK_COLS;
		total = lc;
	}
	if (total > cap)
		return (0);
	lb_put32(dst + h - 4, lb_crc32(src, raw));
	for (int j = 0; j < ns; j++) {
		dst[h++] = c->zmode[ids[j]];
		h += lb_varint_put(dst + h, zlen(c, ids[j]));
	}
	for (int j = 0; j < ns; j++) {	/* the streams, back to back */
		int	 i = ids[j];

		if (zlen(c, i) > 0)
			memcpy(dst + h, c->zmode[i] == LB_BLK_ZSTD ? c->zs[i].p : c->st[i].p,
			    zlen(c, i));
		h += zlen(c, i);
	}
	*out = h;
	return (0);
}

int
lb_block_compress(struct lb_bcodec **c, unsigned method, const uint8_t *src, size_t raw,
    uint8_t *dst, size_t *comp, uint8_t *used)
{
	size_t	 n = 0;
	int	 rc;

	uint8_t	 m = (uint8_t)method;

	if (method != LB_BLK_STORED && method != LB_BLK_DEFLATE && method != LB_BLK_ZSTD &&
	    method != LB_BLK_COLS && method != LB_BLK_TPL)
		return (EINVAL);
	if ((rc = codec(c)) != 0)
		return (rc);
	if (raw >= 2 && raw <= LB_BLOCK_RAW_MAX) {
		if (method == LB_BLK_DEFLATE)
			rc = deflate_into(*c, src, raw, dst, raw - 1, &n);
		else if (method == LB_BLK_ZSTD)
			rc = zstd_into(*c, src, raw, dst, raw - 1, &n);
		else if ((method == LB_BLK_COLS || method == LB_BLK_TPL) &&
		    (rc = split_into(*c, method == LB_BLK_COLS ? W_COLS : TPL_WAYS, src, raw, dst,
		    raw - 1, &n, &m)) == 0 && n == 0) {
			/* Records that do not split, or columns no smaller: one zstd frame. */
			m = LB_BLK_ZSTD;
			rc = zstd_into(*c, src, raw, dst, raw - 1, &n);
		}
		if (rc != 0)
			return (rc);
	}
	if (n > 0 && n < raw) {
		*comp = n;
		*used = m;
	} else {
		memcpy(dst, src, raw);
		*comp = raw;
		*used = LB_BLK_STORED;
	}
	return (0);
}

#define ZSTD_FRAME_MAGIC	0xfd2fb528U	/* RFC 8878 §3.1.1, little-endian */
/* Frame_Header_Descriptor (RFC 8878 §3.1.1.1.1), the byte after the magic */
#define ZSTD_FHD_DICTID		0x03		/* Dictionary_ID_flag: must be 0 */
#define ZSTD_FHD_CHECKSUM	0x04		/* Content_Checksum_flag: must be set */
#define ZSTD_FHD_RESERVED	0x08		/* must be 0 */
#define ZSTD_FHD_SINGLE		0x20		/* Single_Segment_flag: no Window_Descriptor */
#define ZSTD_WINDOW_LOG_MAX	20		/* a frame's window: at most 1 MiB */

/*
 * A zstd payload is exactly one frame (RFC 8878) whose header states a content size equal to
 * raw and a content checksum, and nothing after it: no skippable frames, no second frame. The
 * size is checked before anything is decompressed, and the frame must then give exactly that
 * many bytes with a matching checksum (which zstd checks). The payload CRC covers the stored
 * bytes; the frame checksum covers what they decode to.
 */
static int
unzstd(struct lb_bcodec *c, const uint8_t *src, size_t comp, uint8_t *dst, size_t raw)
{
	unsigned long long	 fcs;
	size_t			 r;

	if (comp < 6 || lb_get32(src) != ZSTD_FRAME_MAGIC || !(src[4] & ZSTD_FHD_CHECKSUM) ||
	    (src[4] & (ZSTD_FHD_DICTID | ZSTD_FHD_RESERVED)) != 0)
		return (LB_ECORRUPT);
	if (!(src[4] & ZSTD_FHD_SINGLE)) {
		/* Window_Descriptor: 2^(10 + Exponent) + Mantissa eighths of that. */
		unsigned	 wlog = 10u + (src[5] >> 3), mant = src[5] & 7u;

		if (wlog > ZSTD_WINDOW_LOG_MAX || (wlog == ZSTD_WINDOW_LOG_MAX && mant != 0))
			return (LB_ECORRUPT);
	}
	fcs = ZSTD_getFrameContentSize(src, comp);
	if (fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs == ZSTD_CONTENTSIZE_ERROR || fcs != raw)
		return (LB_ECORRUPT);
	r = ZSTD_findFrameCompressedSize(src, comp);
	if (ZSTD_isError(r) || r != comp)
		return (LB_ECORRUPT);
	if (c->zd == NULL) {
		if ((c->zd = ZSTD_createDCtx()) == NULL)
			return (ENOMEM);
		/* A writer's frame needs at most the block's size as window (1 MiB at most). */
		if (ZSTD_isError(ZSTD_DCtx_setParameter(c->zd, ZSTD_d_windowLogMax,
		    ZSTD_WINDOW_LOG_MAX)))
			return (EINVAL);
	}
	r = ZSTD_decompressDCtx(c->zd, dst, raw, src, comp);
	if (ZSTD_isError(r)) {
		if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation)
			return (ENOMEM);
		return (LB_ECORRUPT);
	}
	return (r == raw ? 0 : LB_ECORRUPT);
}



/* Copies the varint at s's cursor to dst[*o..raw), value in *v. 0 or LB_ECORRUPT. */
static int
cp_var(struct rs *s, uint8_t *dst, size_t *o, size_t raw, uint64_t *v)
{
	size_t	 k = lb_varint_get(s->p + s->at, s->len - s->at, v);

	if (k == 0 || k > raw - *o)
		return (LB_ECORRUPT);
	memcpy(dst + *o, s->p + s->at, k);
	*o += k;
	s->at += k;
	return (0);
}

/* Copies n bytes at s's cursor to dst[*o..raw). */
static int
cp_bytes(struct rs *s, uint64_t n, uint8_t *dst, size_t *o, size_t raw)
{
	if (n > s->len - s->at || n > raw - *o)
		return (LB_ECORRUPT);
	if (n > 0)
		memcpy(dst + *o, s->p + s->at, n);
	*o += n;
	s->at += n;
	return (0);
}

/*
 * A dictionary-coded field: the code at codes' cursor names a span seen before, or (== the
 * count so far) the next span of S_DICT. Copies the span to dst.
 */
static int
cp_field(struct lb_bcodec *c, struct rs *codes, struct rs *dict, unsigned f, uint32_t *cnt,
    uint64_t n, uint8_t *dst, size_t *o, size_t raw)
{
	const uint8_t	*p;
	uint64_t	 code, v;
	size_t		 k, i;

	if ((k = lb_varint_get(codes->p + codes->at, codes->len - codes->at, &code)) == 0)
		return (LB_ECORRUPT);
	codes->at += k;
	if (code > cnt[f] || (code == cnt[f] && cnt[f] >= n))
		return (LB_ECORRUPT);
	i = (size_t)f * (size_t)n + (size_t)code;
	if (code == cnt[f]) {
		p = dict->p + dict->at;
		if ((k = lb_varint_get(p, dict->len - dict->at, &v)) == 0 ||
		    v > dict->len - dict->at - k)
			return (LB_ECORRUPT);
		c->dp[i] = p;
		c->dl[i] = (uint32_t)(k + v);
		dict->at += k + (size_t)v;
		cnt[f]++;
	}
	if (c->dl[i] > raw - *o)
		return (LB_ECORRUPT);
	memcpy(dst + *o, c->dp[i], c->dl[i]);
	*o += c->dl[i];
	return (0);
}

/*
 * A columns payload (FORMAT.md §3.2) back into exactly raw bytes of records: the stream
 * table, each stream stored or one zstd frame (the rules of unzstd, its size at most
 * 2 * raw + 64), the records rebuilt in order; every stream must be used up exactly.
 */
static int
uncols(struct lb_bcodec *c, unsigned method, const uint8_t *src, size_t comp, uint8_t *dst,
    size_t raw)
{
	struct rs	 s[NSTREAM];
	uint8_t		 mode[NSTREAM];
	uint64_t	 n, v, flags, len[NSTREAM];
	uint32_t	 cnt[NDICT] = { 0 }, crc;
	size_t		 o = 0, k, pos, limit = 2 * raw + 64;
	const uint8_t	*ids = method == LB_BLK_TPL ? tpl_ids : cols_ids;
	int		 rc, ns = method == LB_BLK_TPL ? NTPLS : NCOLS, tpl = method == LB_BLK_TPL;

	if ((k = lb_varint_get(src, comp, &n)) == 0 || n == 0 || n > raw / LB_REC_MIN ||
	    comp - k < 4)
		return (LB_ECORRUPT);
	crc = lb_get32(src + k);
	pos = k + 4;
	for (int j = 0; j < ns; j++) {
		int	 i = ids[j];

		if (pos >= comp)
			return (LB_ECORRUPT);
		mode[i] = src[pos++];
		if ((mode[i] != LB_BLK_STORED && mode[i] != LB_BLK_ZSTD) ||
		    (k = lb_varint_get(src + pos, comp - pos, &len[i])) == 0)
			return (LB_ECORRUPT);
		pos += k;
	}
	for (int j = 0; j < ns; j++) {
		unsigned long long	 fcs;
		int			 i = ids[j];

		if (len[i] > comp - pos)
			return (LB_ECORRUPT);
		s[i].at = 0;
		if (mode[i] == LB_BLK_STORED) {
			s[i].p = src + pos;
			s[i].len = (size_t)len[i];
		} else {
			fcs = ZSTD_getFrameContentSize(src + pos, (size_t)len[i]);
			if (fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs == ZSTD_CONTENTSIZE_ERROR ||
			    fcs > limit)
				return (LB_ECORRUPT);
			if ((rc = lb_grow(&c->st[i].p, &c->st[i].cap, (size_t)fcs + 1, 1)) != 0)
				return (rc);
			if ((rc = unzstd(c, src + pos, (size_t)len[i], c->st[i].p,
			    (size_t)fcs)) != 0)
				return (rc);
			s[i].p = c->st[i].p;
			s[i].len = (size_t)fcs;
		}
		pos += (size_t)len[i];
	}
	if (pos != comp)
		return (LB_ECORRUPT);
	if (c->dcap < n * NDICT) {
		free(c->dp);
		free(c->dl);
		c->dcap = 0;
		if ((c->dp = malloc(n * NDICT * sizeof(*c->dp))) == NULL ||
		    (c->dl = malloc(n * NDICT * sizeof(*c->dl))) == NULL)
			return (ENOMEM);
		c->dcap = n * NDICT;
	}
	if (tpl && (rc = lb_tpl_dbegin(&c->tpl, n)) != 0)
		return (rc);
	for (uint64_t r = 0; r < n; r++) {
		for (int t = 0; t < 3; t++)
			if ((rc = cp_var(&s[S_TIME], dst, &o, raw, &v)) != 0)
				return (rc);
		if ((rc = cp_bytes(&s[S_META], 2, dst, &o, raw)) != 0 ||
		    (rc = cp_var(&s[S_META], dst, &o, raw, &flags)) != 0)
			return (rc);
		for (unsigned f = 0; f < 4; f++)
			if ((rc = cp_field(c, &s[S_HOST + f], &s[S_DICT], f, cnt, n, dst, &o,
			    raw)) != 0)
				return (rc);
		if ((rc = cp_var(&s[S_SD], dst, &o, raw, &v)) != 0 ||
		    (rc = cp_bytes(&s[S_SD], v, dst, &o, raw)) != 0)
			return (rc);
		if (tpl) {	/* the body, rebuilt from its template and variables */
			size_t	 used;

			if ((rc = lb_tpl_body(c->tpl, &s[S_TPL], dst + o, raw - o, &used)) != 0)
				return (rc);
			o += used;
		} else if ((rc = cp_var(&s[S_BLEN], dst, &o, raw, &v)) != 0 ||
		    (rc = cp_bytes(&s[S_BODY], v, dst, &o, raw)) != 0)
			return (rc);
		if ((flags & LB_MSG_PEER) &&
		    (rc = cp_field(c, &s[S_PEER], &s[S_DICT], 4, cnt, n, dst, &o, raw)) != 0)
			return (rc);
	}
	for (int j = 0; j < ns; j++)
		if (s[ids[j]].at != s[ids[j]].len)
			return (LB_ECORRUPT);
	/* The records as rebuilt: what the writer split (stored streams have no checksum). */
	return (o == raw && lb_crc32(dst, raw) == crc ? 0 : LB_ECORRUPT);
}

int
lb_zstd_unframe(struct lb_bcodec **c, const uint8_t *src, size_t comp, uint8_t *dst, size_t raw)
{
	int	 rc;

	if (comp == 0 || raw == 0 || raw > LB_BLOCK_RAW_MAX)
		return (LB_ECORRUPT);
	if ((rc = codec(c)) != 0)
		return (rc);
	return (unzstd(*c, src, comp, dst, raw));
}

int
lb_block_decompress(struct lb_bcodec **c, unsigned method, const uint8_t *src, size_t comp,
    uint8_t *dst, size_t raw)
{
	int	 rc;

	if (comp == 0 || comp > raw || raw > LB_BLOCK_RAW_MAX || !lb_block_method_ok(method))
		return (LB_ECORRUPT);
	if (method == LB_BLK_STORED) {
		if (comp != raw)
			return (LB_ECORRUPT);
		memcpy(dst, src, raw);
		return (0);
	}
	if ((rc = codec(c)) != 0)
		return (rc);
	if (method == LB_BLK_DEFLATE)
		return (lb_inflate_raw(&(*c)->zi, src, comp, dst, raw));
	if (method == LB_BLK_COLS || method == LB_BLK_TPL)
		return (uncols(*c, method, src, comp, dst, raw));
	return (unzstd(*c, src, comp, dst, raw));
}
