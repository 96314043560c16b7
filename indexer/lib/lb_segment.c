/*
 * lb_segment.c — reading segment files (FORMAT.md §4): the reader (mmap, binary search of the
 * block index, prefix-compressed dictionary blocks, delta-coded id lists), wildcard scans, full
 * verification, and the merge (which feeds lb_segout.c, the writer). It does not know how
 * terms are made from messages (lb_segw.c) or what a query is.
 *
 * The one idea: nothing read from the file is trusted. Open checks the header and the block
 * index (both small, both checksummed); a dictionary block is checked against its CRC before
 * any byte of it is used, and an id list against the CRC its block holds for it, so a damaged
 * file gives LB_ECORRUPT and never a wrong answer or a read out of bounds.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "logbox.h"
#include "lb_format.h"
#include "lb_block.h"
#include "lb_util.h"
#include "lb_postings.h"
#include "lb_segout.h"



/* ---------------------------------------------------------------- reader */

/* Where one term's id list is, as its dictionary entry says. */
struct blkent {
	uint32_t	 df;
	uint64_t	 lpoff, plen;	/* offset in the postings section, bytes */
	uint32_t	 lcrc;		/* the list's CRC when plen >= LB_SEG_BIGLIST */
};

struct lb_segment {
	uint8_t		*map;
	size_t		 size;
	uint64_t	 first_id, last_id, count, nterms;
	int64_t		 tmin, tmax;
	uint32_t	 version;
	uint32_t	 flags;		/* LB_SEG_F_* */
	const uint8_t	*post;		/* postings section */
	uint64_t	 postlen;
	const uint8_t	*dict;		/* dictionary section */
	uint64_t	 dictlen;
	const uint8_t	*idx;		/* block index entries */
	uint32_t	 nblocks;
	const uint8_t	*keys;		/* block index keys */
	uint64_t	 keyslen;
	uint32_t	 postcrc;
	struct inflate_state *zs;	/* version 2: raw inflate of dictionary blocks (ISA-L) */
	struct lb_bcodec *zd;		/* version 3: zstd of dictionary blocks (lb_block.c) */
	uint64_t	 cbi;		/* block whose entries cent holds (checked), or UINT64_MAX */
	uint32_t	 cn;
	struct blkent	 cent[LB_SEG_BLOCK_TERMS];
	/* The term blob (lb_segment_blob): every term back to back, for wildcard scans. */
	uint8_t		*bterms;	/* NULL: not built */
	uint32_t	*boff;		/* nterms + 1 offsets into bterms */
	uint32_t	*bfirst;	/* nblocks + 1: index of each block's first term */
	size_t		 bsize;		/* bytes the three take */
	size_t		 bneed;		/* bytes a blob would take once known (0: not yet) */
	/* A remote segment (lb_segment_open_src): map is anonymous memory filled piece by piece. */
	struct lb_segsrc src;
	uint8_t		*have;		/* one bit a piece: filled */
	int		 remote;
	int		 ferr;		/* the first fill error (sticky) */
};

/*
 * Makes bytes [p, p + len) of a remote segment's map hold the file's bytes: the pieces not
 * filled yet are asked of the source in runs. Nothing to do for a local file.
 */
static int
seg_need(struct lb_segment *sg, const uint8_t *p, uint64_t len)
{
	uint64_t	 off, a, b, i, j, ps;
	int		 rc;

	if (!sg->remote || len == 0)
		return (0);
	if (sg->ferr != 0)
		return (sg->ferr);
	off = (uint64_t)(p - sg->map);
	if (off > sg->size || len > sg->size - off)
		return (LB_ECORRUPT);
	ps = sg->src.piece;
	a = off / ps;
	b = (off + len - 1) / ps;
	for (i = a; i <= b; i = j) {
		if (sg->have[i / 8] & (1u << (i % 8))) {
			j = i + 1;
			continue;
		}
		for (j = i + 1; j <= b && !(sg->have[j / 8] & (1u << (j % 8))); j++)
			;
		uint64_t from = i * ps, to = j * ps > sg->size ? sg->size : j * ps;

		if ((rc = sg->src.fill(sg->src.arg, from, to - from, sg->map + from)) != 0) {
			if (rc != ENOMEM)
				sg->ferr = rc;
			return (rc);
		}
		for (uint64_t k = i; k < j; k++)
			sg->have[k / 8] |= (uint8_t)(1u << (k % 8));
	}
	return (0);
}

/* A walk through one dictionary block, inflated into raw. */
struct blkcur {
	const struct lb_segment *sg;
	uint8_t		 raw[LB_SEG_BLOCK_RAW_MAX];
	uint64_t	 bi;		/* block number */
	const uint8_t	*p, *end;	/* entries not read yet; end is the block's CRC */
	uint32_t	 n, i;		/* terms in the block, entries read */
	uint64_t	 poff;		/* postings offset of the next entry */
	uint32_t	 small;		/* the block's CRC of its short lists */
	uint8_t		 term[LB_SEG_TERM_MAX];	/* the current entry */
	size_t		 tlen;
	uint32_t	 df;
	uint64_t	 lpoff, plen;	/* its id list in the postings section */
	uint32_t	 lcrc;		/* the list's CRC when plen >= LB_SEG_BIGLIST */
};

static inline const uint8_t *
idx_key(const struct lb_segment *sg, uint64_t bi, size_t *len)
{
	const uint8_t *e = sg->idx + bi * LB_SEG_IDX_ENTRY;

	*len = lb_get32(e + 12);
	return (sg->keys + lb_get32(e + 8));
}

static inline uint64_t
idx_off(const struct lb_segment *sg, uint64_t bi)
{
	return (bi == sg->nblocks ? sg->dictlen : lb_get64(sg->idx + bi * LB_SEG_IDX_ENTRY));
}

/* The last block whose first term is <= term, or -1. */
static int64_t
idx_find(const struct lb_segment *sg, const uint8_t *term, size_t len)
{
	uint64_t	 lo = 0, hi = sg->nblocks, mid;
	const uint8_t	*k;
	size_t		 klen;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		k = idx_key(sg, mid, &klen);
		if (lb_term_cmp(k, klen, term, len) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return ((int64_t)lo - 1);
}

/*
 * Checks block bi's CRC, then decompresses it into c->raw: one zstd frame (version 2: a raw
 * DEFLATE stream) that must end exactly at the CRC and give exactly raw_len bytes.
 */
static int
blk_inflate(struct lb_segment *sg, uint64_t bi, struct blkcur *c, uint64_t *rawlen)
{
	const uint8_t	*b;
	uint64_t	 off = idx_off(sg, bi), len = idx_off(sg, bi + 1) - off, v;
	size_t		 k;
	int		 rc;

	b = sg->dict + off;
	if (len < 1 + 1 + 4)
		return (LB_ECORRUPT);
	if ((rc = seg_need(sg, b, len)) != 0)
		return (rc);
	len -= 4;
	if (lb_crc32_update(0, b, (size_t)len) != lb_get32(b + len))
		return (LB_ECORRUPT);
	if ((k = lb_varint_get(b, (size_t)len, &v)) == 0 || v == 0 ||
	    v > LB_SEG_BLOCK_RAW_MAX || k >= len || len - k > UINT_MAX)
		return (LB_ECORRUPT);
	if (sg->version == LB_SEG_VERSION_NOFORMS)
		rc = lb_inflate_raw(&sg->zs, b + k, (size_t)(len - k), c->raw, (size_t)v);
	else
		rc = lb_zstd_unframe(&sg->zd, b + k, (size_t)(len - k), c->raw, (size_t)v);
	if (rc != 0)
		return (rc);
	*rawlen = v;
	return (0);
}

static int
blk_open(struct lb_segment *sg, uint64_t bi, struct blkcur *c)
{
	const uint8_t	*b = c->raw;
	uint64_t	 len, v;
	size_t		 k;
	int		 rc;

	if ((rc = blk_inflate(sg, bi, c, &len)) != 0)
		return (rc);
	if (len < 1 + 1 + 4 + 5)
		return (LB_ECORRUPT);
	c->sg = sg;
	c->bi = bi;
	c->end = b + len;
	if ((k = lb_varint_get(b, (size_t)len, &v)) == 0 || v == 0 || v > LB_SEG_BLOCK_TERMS)
		return (LB_ECORRUPT);
	c->n = (uint32_t)v;
	b += k;
	if ((k = lb_varint_get(b, (size_t)(c->end - b), &v)) == 0 || v > sg->postlen)
		return (LB_ECORRUPT);
	c->poff = v;
	b += k;
	if (c->end - b < 4)
		return (LB_ECORRUPT);
	c->small = lb_get32(b);
	c->p = b + 4;
	c->i = 0;
	c->tlen = 0;
	return (0);
}

/* Reads the next entry: 0, 1 at the end of the block, or LB_ECORRUPT. */
static int
blk_next(struct blkcur *c)
{
	const struct lb_segment	*sg = c->sg;
	uint64_t		 shared, sfx, df, plen;
	size_t			 k;

	if (c->i == c->n)
		return (c->p == c->end ? 1 : LB_ECORRUPT);
	if ((k = lb_varint_get(c->p, (size_t)(c->end - c->p), &shared)) == 0)
		return (LB_ECORRUPT);
	c->p += k;
	if ((k = lb_varint_get(c->p, (size_t)(c->end - c->p), &sfx)) == 0)
		return (LB_ECORRUPT);
	c->p += k;
	if (shared > c->tlen || (c->i == 0 && shared != 0) || sfx == 0 ||
	    sfx > LB_SEG_TERM_MAX - shared || sfx > (uint64_t)(c->end - c->p))
		return (LB_ECORRUPT);
	/*
	 * Terms ascend: the suffix must sort after the previous term's rest. The writer shares
	 * the longest prefix, so the first byte nearly always decides (a term that only extends
	 * the previous one is greater).
	 */
	if (c->i > 0 && shared < c->tlen && (c->p[0] < c->term[shared] ||
	    (c->p[0] == c->term[shared] && lb_term_cmp(c->p, (size_t)sfx, c->term + shared,
	    c->tlen - (size_t)shared) <= 0)))
		return (LB_ECORRUPT);
	memcpy(c->term + shared, c->p, (size_t)sfx);
	c->tlen = (size_t)(shared + sfx);
	c->p += sfx;
	if (c->i == 0) {
		const uint8_t	*key;
		size_t		 klen;

		key = idx_key(sg, c->bi, &klen);
		if (lb_term_cmp(key, klen, c->term, c->tlen) != 0)
			return (LB_ECORRUPT);
	}
	if ((k = lb_varint_get(c->p, (size_t)(c->end - c->p), &df)) == 0 || df == 0 ||
	    df > UINT32_MAX)
		return (LB_ECORRUPT);
	c->p += k;
	if ((k = lb_varint_get(c->p, (size_t)(c->end - c->p), &plen)) == 0 || plen == 0 ||
	    plen > sg->postlen - c->poff || df / LB_PACK_IDS > plen ||
	    (df < LB_PACK_IDS && df > plen))
		return (LB_ECORRUPT);
	c->p += k;
	if (plen >= LB_SEG_BIGLIST) {
		if (c->end - c->p < 4)
			return (LB_ECORRUPT);
		c->lcrc = lb_get32(c->p);
		c->p += 4;
	}
	c->df = (uint32_t)df;
	c->lpoff = c->poff;
	c->plen = plen;
	c->poff += plen;
	c->i++;
	return (0);
}

/*
 * Walks all of block bi, checks the CRC of its short lists, and finds the entry equal to
 * term (term != NULL) or number ei. 0, LB_ENOTFOUND or LB_ECORRUPT. A block that checks out
 * is remembered in sg->cent, so that lb_segment_postings() on the terms of the block a walk
 * is in costs no second pass.
 */
static int
blk_find(struct lb_segment *sg, uint64_t bi, const uint8_t *term, size_t len,
    uint32_t ei, struct blkent *out)
{
	struct blkcur	 c;
	uint32_t	 small = 0;
	uint64_t	 run = 0, runlen = 0;	/* short lists back to back, not summed yet */
	int		 rc, found = 0;

	sg->cbi = UINT64_MAX;
	if ((rc = blk_open(sg, bi, &c)) != 0)
		return (rc);
	while ((rc = blk_next(&c)) == 0) {
		struct blkent *e = &sg->cent[c.i - 1];

		e->df = c.df;
		e->lpoff = c.lpoff;
		e->plen = c.plen;
		e->lcrc = c.lcrc;
		if (c.plen < LB_SEG_BIGLIST) {
			if (runlen > 0 && run + runlen != c.lpoff) {
				if ((rc = seg_need(sg, sg->post + run, runlen)) != 0)
					return (rc);
				small = lb_crc32_update(small, sg->post + run, (size_t)runlen);
				runlen = 0;
			}
			if (runlen == 0)
				run = c.lpoff;
			runlen += c.plen;
		}
		if (!found && (term != NULL ? lb_term_cmp(c.term, c.tlen, term, len) == 0 :
		    c.i - 1 == ei)) {
			found = 1;
			*out = *e;
		}
	}
	if (rc != 1)
		return (rc);
	if (runlen > 0) {
		if ((rc = seg_need(sg, sg->post + run, runlen)) != 0)
			return (rc);
		small = lb_crc32_update(small, sg->post + run, (size_t)runlen);
	}
	if (small != c.small)
		return (LB_ECORRUPT);
	sg->cbi = bi;
	sg->cn = c.n;
	return (found ? 0 : LB_ENOTFOUND);
}

/* Checks a list's own CRC (long lists) and appends its ids to *out. */
static int
seg_list(struct lb_segment *sg, const struct blkent *e, struct lb_postings *out)
{
	const uint8_t	*p = sg->post + e->lpoff;
	int		 rc;

	if ((rc = seg_need(sg, p, e->plen)) != 0)
		return (rc);

	if (e->plen >= LB_SEG_BIGLIST && lb_crc32_update(0, p, (size_t)e->plen) != e->lcrc)
		return (LB_ECORRUPT);
	return (lb_postings_decode(p, (size_t)e->plen, sg->first_id, sg->last_id, e->df, out));
}

void
lb_segment_close(struct lb_segment *sg)
{
	if (sg == NULL)
		return;
	if (sg->map != NULL)
		munmap(sg->map, sg->size);
	if (sg->remote && sg->src.done != NULL)
		sg->src.done(sg->src.arg);
	free(sg->have);
	lb_segment_blob_free(sg);
	free(sg->zs);
	lb_block_free(sg->zd);
	free(sg);
}

/* Checks the header and the block index of the mapped file. */
static int
seg_check(struct lb_segment *sg)
{
	const uint8_t	*h = sg->map;
	uint64_t	 dictoff, idxoff, idxlen, ents;
	const uint8_t	*pk = NULL, *k;
	size_t		 pklen = 0, klen;
	int		 rc;

	if ((rc = seg_need(sg, h, sg->size < LB_SEG_HDR_SIZE ? sg->size : LB_SEG_HDR_SIZE)) != 0)
		return (rc);

	if (sg->size < LB_SEG_MAGIC_LEN || memcmp(h, LB_SEG_MAGIC, LB_SEG_MAGIC_LEN) != 0)
		return (LB_EFORMAT);
	if (sg->size < LB_SEG_HDR_SIZE)
		return (LB_ECORRUPT);
	if (lb_crc32(h, LB_SEG_H_CRC) != lb_get32(h + LB_SEG_H_CRC))
		return (LB_ECORRUPT);
	sg->version = lb_get32(h + LB_SEG_H_VERSION);
	if (sg->version != LB_SEG_VERSION && sg->version != LB_SEG_VERSION_NOFORMS)
		return (LB_EFORMAT);
	sg->flags = lb_get32(h + LB_SEG_H_FLAGS);
	if ((sg->flags & ~(uint32_t)LB_SEG_F_EVTIME) != 0 || lb_get64(h + LB_SEG_H_RESERVED) != 0)
		return (LB_EFORMAT);
	sg->first_id = lb_get64(h + LB_SEG_H_FIRST);
	sg->last_id = lb_get64(h + LB_SEG_H_LAST);
	sg->count = lb_get64(h + LB_SEG_H_COUNT);
	sg->tmin = (int64_t)lb_get64(h + LB_SEG_H_TMIN);
	sg->tmax = (int64_t)lb_get64(h + LB_SEG_H_TMAX);
	sg->nterms = lb_get64(h + LB_SEG_H_NTERMS);
	sg->postlen = lb_get64(h + LB_SEG_H_POSTLEN);
	dictoff = lb_get64(h + LB_SEG_H_DICTOFF);
	sg->dictlen = lb_get64(h + LB_SEG_H_DICTLEN);
	idxoff = lb_get64(h + LB_SEG_H_IDXOFF);
	idxlen = lb_get64(h + LB_SEG_H_IDXLEN);
	sg->nblocks = lb_get32(h + LB_SEG_H_NBLOCKS);
	sg->postcrc = lb_get32(h + LB_SEG_H_POSTCRC);
	if (sg->first_id > sg->last_id)
		return (LB_ECORRUPT);
	if (sg->postlen > sg->size - LB_SEG_HDR_SIZE || dictoff != LB_SEG_HDR_SIZE + sg->postlen ||
	    sg->dictlen > sg->size - dictoff || idxoff != dictoff + sg->dictlen ||
	    idxlen != sg->size - idxoff)
		return (LB_ECORRUPT);
	ents = (uint64_t)sg->nblocks * LB_SEG_IDX_ENTRY;
	if (ents > idxlen || sg->nblocks > sg->nterms || sg->nterms > sg->postlen ||
	    (sg->nterms == 0) != (sg->nblocks == 0) || (sg->nterms == 0 && sg->dictlen != 0))
		return (LB_ECORRUPT);
	if ((rc = seg_need(sg, h + idxoff, idxlen)) != 0)
		return (rc);
	if (lb_crc32(h + idxoff, (size_t)idxlen) != lb_get32(h + LB_SEG_H_IDXCRC))
		return (LB_ECORRUPT);
	sg->post = h + LB_SEG_HDR_SIZE;
	sg->dict = h + dictoff;
	sg->idx = h + idxoff;
	sg->keys = sg->idx + ents;
	sg->keyslen = idxlen - ents;
	for (uint64_t bi = 0; bi < sg->nblocks; bi++) {
		const uint8_t	*e = sg->idx + bi * LB_SEG_IDX_ENTRY;
		uint64_t	 off = lb_get64(e), koff = lb_get32(e + 8);

		klen = lb_get32(e + 12);
		if ((bi == 0 && off != 0) || off >= sg->dictlen ||
		    (bi > 0 && off <= idx_off(sg, bi - 1)))
			return (LB_ECORRUPT);
		if (klen == 0 || klen > LB_SEG_TERM_MAX || koff > sg->keyslen ||
		    klen > sg->keyslen - koff)
			return (LB_ECORRUPT);
		k = sg->keys + koff;
		if (pk != NULL && lb_term_cmp(pk, pklen, k, klen) >= 0)
			return (LB_ECORRUPT);
		pk = k;
		pklen = klen;
	}
	return (0);
}

int
lb_segment_open(const char *path, struct lb_segment **out)
{
	struct lb_segment	*sg;
	struct stat		 st;
	void			*m;
	int			 fd, rc;

	if ((sg = calloc(1, sizeof(*sg))) == NULL)
		return (ENOMEM);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1) {
		rc = errno;
		goto fail;
	}
	if (fstat(fd, &st) == -1) {
		rc = errno;
		close(fd);
		goto fail;
	}
	if (st.st_size < LB_SEG_MAGIC_LEN) {
		close(fd);
		rc = LB_EFORMAT;
		goto fail;
	}
	if ((uint64_t)st.st_size > SIZE_MAX) {
		close(fd);
		rc = LB_ETOOBIG;
		goto fail;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	rc = errno;
	close(fd);
	if (m == MAP_FAILED)
		goto fail;
	sg->map = m;
	sg->size = (size_t)st.st_size;
	sg->cbi = UINT64_MAX;
	if ((rc = seg_check(sg)) != 0)
		goto fail;
	*out = sg;
	return (0);
 fail:
	lb_segment_close(sg);
	return (rc);
}

int
lb_segment_open_src(const struct lb_segsrc *src, struct lb_segment **out)
{
	struct lb_segment	*sg;
	uint64_t		 np;
	void			*m;
	int			 rc;

	if (src->size < LB_SEG_MAGIC_LEN)
		return (LB_EFORMAT);
	if (src->size > SIZE_MAX / 2 || src->piece == 0)
		return (LB_ETOOBIG);
	if ((sg = calloc(1, sizeof(*sg))) == NULL)
		return (ENOMEM);
	np = (src->size + src->piece - 1) / src->piece;
	if ((sg->have = calloc((size_t)(np + 7) / 8, 1)) == NULL) {
		free(sg);
		return (ENOMEM);
	}
	/* Pages are taken only as pieces are filled. */
	m = mmap(NULL, (size_t)src->size, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		rc = errno;
		free(sg->have);
		free(sg);
		return (rc);
	}
	sg->map = m;
	sg->size = (size_t)src->size;
	sg->cbi = UINT64_MAX;
	sg->src = *src;
	sg->remote = 1;
	if ((rc = seg_check(sg)) != 0) {
		sg->remote = 0;		/* (the caller keeps src) */
		lb_segment_close(sg);
		return (rc);
	}
	*out = sg;
	return (0);
}

uint64_t
lb_segment_resident(const struct lb_segment *sg)
{
	uint64_t n = 0, np;

	if (!sg->remote)
		return (0);
	np = (sg->size + sg->src.piece - 1) / sg->src.piece;
	for (uint64_t i = 0; i < np; i++)
		if (sg->have[i / 8] & (1u << (i % 8)))
			n++;
	return (n * sg->src.piece);
}

void
lb_segment_info(const struct lb_segment *sg, struct lb_seginfo *si)
{
	memset(si, 0, sizeof(*si));	/* (the padding too: callers compare whole structs) */
	si->first_id = sg->first_id;
	si->last_id = sg->last_id;
	si->count = sg->count;
	si->tmin = sg->tmin;
	si->tmax = sg->tmax;
	si->nterms = sg->nterms;
	si->size = sg->size;
	si->version = sg->version;
	si->noevtime = !(sg->flags & LB_SEG_F_EVTIME);
}

int
lb_segment_lookup(struct lb_segment *sg, const uint8_t *term, size_t len,
    struct lb_postings *out)
{
	struct blkent	 e;
	int64_t		 bi;
	int		 rc;

	out->n = 0;
	if ((bi = idx_find(sg, term, len)) < 0)
		return (LB_ENOTFOUND);
	if ((rc = blk_find(sg, (uint64_t)bi, term, len, 0, &e)) != 0)
		return (rc);
	return (seg_list(sg, &e, out));
}

int
lb_segment_terms(struct lb_segment *sg, const uint8_t *lo, size_t lolen, const uint8_t *hi,
    size_t hilen, lb_term_fn fn, void *arg)
{
	struct blkcur	 c;
	uint64_t	 bi = 0;
	int64_t		 b;
	int		 rc;

	if (lo != NULL && (b = idx_find(sg, lo, lolen)) > 0)
		bi = (uint64_t)b;
	for (; bi < sg->nblocks; bi++) {
		if ((rc = blk_open(sg, bi, &c)) != 0)
			return (rc);
		while ((rc = blk_next(&c)) == 0) {
			if (lo != NULL) {
				if (lb_term_cmp(c.term, c.tlen, lo, lolen) < 0)
					continue;
				lo = NULL;	/* (terms ascend: every next one is past lo too) */
			}
			if (hi != NULL && (hilen == 0 || c.term[0] >= hi[0]) &&
			    lb_term_cmp(c.term, c.tlen, hi, hilen) >= 0)
				return (0);
			if ((rc = fn(arg, c.term, c.tlen, bi << LB_SEG_COOKIE_SHIFT | (c.i - 1), c.df)) != 0)
				return (rc);
		}
		if (rc != 1)
			return (rc);
	}
	return (0);
}

int
lb_segment_prefix(struct lb_segment *sg, const uint8_t *prefix, size_t len, lb_term_fn fn,
    void *arg)
{
	uint8_t	hi[LB_SEG_TERM_MAX];
	size_t	hilen = len;

	if (len == 0)
		return (lb_segment_terms(sg, NULL, 0, NULL, 0, fn, arg));
	if (len > LB_SEG_TERM_MAX)
		return (0);
	/* The first byte string after every string that starts with prefix. */
	memcpy(hi, prefix, len);
	while (hilen > 0 && hi[hilen - 1] == 0xff)
		hilen--;
	if (hilen == 0)
		return (lb_segment_terms(sg, prefix, len, NULL, 0, fn, arg));
	hi[hilen - 1]++;
	return (lb_segment_terms(sg, prefix, len, hi, hilen, fn, arg));
}

/* ---------------------------------------------------------------- wildcard scans */

/*
 * The term blob: the dictionary's terms back to back (bterms), where term t is
 * bterms[boff[t] .. boff[t + 1]), and bfirst[b] the index of block b's first term, so that a
 * term found in the blob gets its cookie (block, entry) without a walk. It is built by one
 * full, checked walk of the dictionary; a wildcard scan is then a memmem() over the range's
 * bytes for the pattern's longest literal run, and the dictionary block of a term that
 * matches is inflated (and checked) only to give its df and id list.
 */

void
lb_segment_blob_free(struct lb_segment *sg)
{
	if (sg == NULL)
		return;
	free(sg->bterms);
	free(sg->boff);
	free(sg->bfirst);
	sg->bterms = NULL;
	sg->boff = NULL;
	sg->bfirst = NULL;
	sg->bsize = 0;
}

size_t
lb_segment_blob_size(const struct lb_segment *sg, size_t *need)
{
	if (need != NULL)
		*need = sg->bterms != NULL ? sg->bsize : sg->bneed;
	return (sg->bsize);
}

int
lb_segment_blob(struct lb_segment *sg, size_t max)
{
	struct blkcur	 c;
	uint8_t		*t = NULL, *nt;
	uint32_t	*off = NULL, *first = NULL;
	size_t		 len = 0, cap = 0, fixed, room;
	uint64_t	 n = 0;
	int		 rc, over = 0;

	if (sg->bterms != NULL)
		return (0);
	if (sg->nterms == 0)
		return (EINVAL);
	if (sg->bneed > max || sg->nterms >= UINT32_MAX)
		return (LB_ETOOBIG);
	fixed = (size_t)(sg->nterms + 1) * 4 + ((size_t)sg->nblocks + 1) * 4;
	if (fixed > max)
		over = 1;
	room = over ? 0 : max - fixed;
	if (!over && ((off = malloc((size_t)(sg->nterms + 1) * 4)) == NULL ||
	    (first = malloc(((size_t)sg->nblocks + 1) * 4)) == NULL)) {
		rc = ENOMEM;
		goto fail;
	}
	for (uint64_t bi = 0; bi < sg->nblocks; bi++) {
		if ((rc = blk_open(sg, bi, &c)) != 0)
			goto fail;
		if (!over)
			first[bi] = (uint32_t)n;
		while ((rc = blk_next(&c)) == 0) {
			if (n >= sg->nterms) {
				rc = LB_ECORRUPT;
				goto fail;
			}
			if (!over && (c.tlen > room - len || len + c.tlen > UINT32_MAX)) {
				/* Too big: only count what it would take. */
				over = 1;
				free(t);
				t = NULL;
			}
			if (!over) {
				if (len + c.tlen > cap) {
					size_t nc = cap ? cap * 2 : (size_t)sg->nterms * 8;

					if (nc < len + c.tlen)
						nc = len + c.tlen;
					if (nc > room)
						nc = room;
					if ((nt = realloc(t, nc)) == NULL) {
						rc = ENOMEM;
						goto fail;
					}
					t = nt;
					cap = nc;
				}
				memcpy(t + len, c.term, c.tlen);
				off[n] = (uint32_t)len;
			}
			len += c.tlen;
			n++;
		}
		if (rc != 1)
			goto fail;
	}
	if (n != sg->nterms) {
		rc = LB_ECORRUPT;
		goto fail;
	}
	sg->bneed = len > UINT32_MAX ? SIZE_MAX : fixed + len;
	if (over || len > UINT32_MAX) {
		rc = LB_ETOOBIG;
		goto fail;
	}
	off[n] = (uint32_t)len;
	first[sg->nblocks] = (uint32_t)n;
	if ((nt = realloc(t, len)) != NULL)
		t = nt;
	sg->bterms = t;
	sg->boff = off;
	sg->bfirst = first;
	sg->bsize = fixed + len;
	return (0);
 fail:
	free(t);
	free(off);
	free(first);
	return (rc);
}

/* The longest run of literal bytes of glob (unescaped, cut at LB_SEG_TERM_MAX) into lit. */
static size_t
glob_lit(const uint8_t *g, size_t n, uint8_t *lit)
{
	uint8_t	 run[LB_SEG_TERM_MAX];
	size_t	 i = 0, cur = 0, best = 0;
	uint8_t	 ch;

	for (;;) {
		if (i == n || g[i] == '*' || g[i] == '?') {
			if (cur > best) {
				memcpy(lit, run, cur);
				best = cur;
			}
			cur = 0;
			if (i == n)
				return (best);
			i++;
			continue;
		}
		ch = g[i];
		if (ch == '\\' && i + 1 < n)
			ch = g[++i];
		i++;
		if (cur < sizeof(run))
			run[cur++] = ch;
	}
}

/* Bytes a match of glob has at least; *star 0 when it has exactly that many. */
static size_t
glob_minlen(const uint8_t *g, size_t n, int *star)
{
	size_t i = 0, m = 0;

	*star = 0;
	while (i < n) {
		if (g[i] == '*')
			*star = 1;
		else
			m++;
		i += g[i] == '\\' && i + 1 < n ? 2 : 1;
	}
	return (m);
}

/* 1 when s[0..n) holds lit[0..litlen) (litlen > 0). Terms are short: memchr, then memcmp. */
static int
holds(const uint8_t *s, size_t n, const uint8_t *lit, size_t litlen)
{
	const uint8_t *p = s, *last;

	if (n < litlen)
		return (0);
	last = s + n - litlen;
	while (p <= last && (p = memchr(p, lit[0], (size_t)(last - p) + 1)) != NULL) {
		if (memcmp(p + 1, lit + 1, litlen - 1) == 0)
			return (1);
		p++;
	}
	return (0);
}

struct scan {
	const uint8_t	*glob;
	size_t		 globlen, skip;
	size_t		 minlen;	/* bytes a match has at least (after skip) */
	int		 star;		/* 0: exactly minlen */
	uint8_t		 lit[LB_SEG_TERM_MAX];
	size_t		 litlen;
	lb_term_fn	 fn;
	void		*arg;
};

/* The length test of a term's bytes after skip. */
static inline int
len_ok(const struct scan *s, size_t n)
{
	return (s->star ? n >= s->minlen : n == s->minlen);
}

static int
scan_term(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct scan *s = arg;

	if (len < s->skip || !len_ok(s, len - s->skip) || (s->litlen > 0 && !holds(term + s->skip, len - s->skip, s->lit,
	    s->litlen)) || !lb_glob_match(s->glob, s->globlen, term + s->skip, len - s->skip))
		return (0);
	return (s->fn(s->arg, term, len, cookie, df));
}

static inline int
bl_cmp(const struct lb_segment *sg, uint64_t t, const uint8_t *key, size_t klen)
{
	return (lb_term_cmp(sg->bterms + sg->boff[t], sg->boff[t + 1] - sg->boff[t], key, klen));
}

/* The largest i in [lo, hi) with off[i] <= at (off[lo] <= at), galloping from lo. */
static uint64_t
bl_at(const uint32_t *off, uint64_t lo, uint64_t hi, uint64_t at)
{
	uint64_t step = 1, top, mid;

	while (lo + step < hi && off[lo + step] <= at) {
		lo += step;
		step *= 2;
	}
	top = lo + step < hi ? lo + step : hi;
	while (top - lo > 1) {
		mid = lo + (top - lo) / 2;
		if (off[mid] <= at)
			lo = mid;
		else
			top = mid;
	}
	return (lo);
}

/* Calls fn for blob term t, with its cookie and df (from its block, inflated and checked). */
static int
bl_emit(struct lb_segment *sg, uint64_t t, uint64_t *bi, const struct scan *s)
{
	struct blkent	 e;
	uint64_t	 ei;
	int		 rc;

	*bi = bl_at(sg->bfirst, *bi, sg->nblocks, t);
	ei = t - sg->bfirst[*bi];
	if (sg->cbi == *bi) {
		if (ei >= sg->cn)
			return (LB_ECORRUPT);
		e = sg->cent[ei];
	} else if ((rc = blk_find(sg, *bi, NULL, 0, (uint32_t)ei, &e)) != 0)
		return (rc == LB_ENOTFOUND ? LB_ECORRUPT : rc);
	return (s->fn(s->arg, sg->bterms + sg->boff[t], sg->boff[t + 1] - sg->boff[t],
	    *bi << LB_SEG_COOKIE_SHIFT | ei, e.df));
}

/*
 * memmem() for the blob: 16 positions at a time, those where both the literal's first and
 * last bytes are in place are compared in full (twice as fast as glibc's on term bytes).
 */
static const uint8_t *
lit_find(const uint8_t *h, size_t n, const uint8_t *lit, size_t len)
{
#ifdef __SSE2__
	if (len >= 2 && n >= len + 15) {
		const __m128i	 f = _mm_set1_epi8((char)lit[0]);
		const __m128i	 l = _mm_set1_epi8((char)lit[len - 1]);
		size_t		 i;

		for (i = 0; i + len + 15 <= n; i += 16) {
			__m128i		 a = _mm_loadu_si128((const __m128i *)(h + i));
			__m128i		 b = _mm_loadu_si128((const __m128i *)(h + i + len - 1));
			unsigned	 m = (unsigned)_mm_movemask_epi8(_mm_and_si128(
			    _mm_cmpeq_epi8(a, f), _mm_cmpeq_epi8(b, l)));

			while (m != 0) {
				size_t k = i + (size_t)__builtin_ctz(m);

				if (memcmp(h + k + 1, lit + 1, len - 2) == 0)
					return (h + k);
				m &= m - 1;
			}
		}
		h += i;
		n -= i;
	}
#endif
	return (memmem(h, n, lit, len));
}

static int
bl_scan(struct lb_segment *sg, const uint8_t *prefix, size_t len, const struct scan *s)
{
	const uint8_t	*base = sg->bterms, *p, *end, *h;
	uint64_t	 a, b, mid, t, bi = 0, at;
	size_t		 tl;
	int		 rc;

	/* [a, b): the terms that start with prefix. */
	for (a = 0, b = sg->nterms; a < b; ) {
		mid = a + (b - a) / 2;
		if (bl_cmp(sg, mid, prefix, len) < 0)
			a = mid + 1;
		else
			b = mid;
	}
	for (b = sg->nterms, t = a; t < b; ) {
		mid = t + (b - t) / 2;
		if (sg->boff[mid + 1] - sg->boff[mid] >= len &&
		    memcmp(base + sg->boff[mid], prefix, len) == 0)
			t = mid + 1;
		else
			b = mid;
	}
	if (s->litlen == 0) {
		for (t = a; t < b; t++) {
			tl = sg->boff[t + 1] - sg->boff[t];
			if (len_ok(s, tl - s->skip) && lb_glob_match(s->glob, s->globlen, base + sg->boff[t] + s->skip,
			    tl - s->skip) && (rc = bl_emit(sg, t, &bi, s)) != 0)
				return (rc);
		}
		return (0);
	}
	p = base + sg->boff[a];
	end = base + sg->boff[b];
	t = a;
	while (p < end && (size_t)(end - p) >= s->litlen &&
	    (h = lit_find(p, (size_t)(end - p), s->lit, s->litlen)) != NULL) {
		at = (uint64_t)(h - base);
		t = bl_at(sg->boff, t, b, at);
		/* A run that crosses into the next term is no match of this one. */
		if (at + s->litlen <= sg->boff[t + 1]) {
			tl = sg->boff[t + 1] - sg->boff[t];
			if (lb_glob_match(s->glob, s->globlen, base + sg->boff[t] + s->skip,
			    tl - s->skip) && (rc = bl_emit(sg, t, &bi, s)) != 0)
				return (rc);
		}
		p = base + sg->boff[++t];
	}
	return (0);
}

int
lb_segment_scan(struct lb_segment *sg, const uint8_t *prefix, size_t len, size_t skip,
    const uint8_t *glob, size_t globlen, lb_term_fn fn, void *arg)
{
	struct scan	s;

	if (skip > len)
		return (EINVAL);
	if (len > LB_SEG_TERM_MAX || sg->nterms == 0)
		return (0);
	s.glob = glob;
	s.globlen = globlen;
	s.skip = skip;
	s.litlen = glob_lit(glob, globlen, s.lit);
	s.minlen = glob_minlen(glob, globlen, &s.star);
	s.fn = fn;
	s.arg = arg;
	if (sg->bterms != NULL)
		return (bl_scan(sg, prefix, len, &s));
	return (lb_segment_prefix(sg, prefix, len, scan_term, &s));
}

int
lb_segment_postings(struct lb_segment *sg, uint64_t cookie, struct lb_postings *out)
{
	struct blkent	 e;
	uint64_t	 bi = cookie >> LB_SEG_COOKIE_SHIFT;
	uint64_t	 ei = cookie & ((1ULL << LB_SEG_COOKIE_SHIFT) - 1);
	int		 rc;

	if (bi >= sg->nblocks)
		return (EINVAL);
	if (bi == sg->cbi) {
		if (ei >= sg->cn)
			return (EINVAL);
		e = sg->cent[ei];
	} else if (ei >= LB_SEG_BLOCK_TERMS)
		return (EINVAL);
	else if ((rc = blk_find(sg, bi, NULL, 0, (uint32_t)ei, &e)) != 0)
		return (rc == LB_ENOTFOUND ? EINVAL : rc);
	return (seg_list(sg, &e, out));
}

int
lb_segment_verify(struct lb_segment *sg, char *why, size_t whylen)
{
	struct lb_postings	 p = { NULL, 0, 0 };
	struct blkcur		 c;
	const uint8_t		*k;
	uint8_t			 last[LB_SEG_TERM_MAX];
	size_t			 lastlen = 0, klen;
	uint64_t		 poff = 0, nterms = 0;
	unsigned long long	 at = 0;
	const char		*what;
	uint32_t		 small;
	int			 rc = LB_ECORRUPT;

	if ((rc = seg_need(sg, sg->map, sg->size)) != 0)
		return (rc);
	rc = LB_ECORRUPT;

	if (lb_crc32_update(0, sg->post, (size_t)sg->postlen) != sg->postcrc) {
		what = "postings section CRC mismatch (section at offset %llu)";
		at = LB_SEG_HDR_SIZE;
		goto fail;
	}
	for (uint64_t bi = 0; bi < sg->nblocks; bi++) {
		at = (unsigned long long)(sg->dict - sg->map + idx_off(sg, bi));
		k = idx_key(sg, bi, &klen);
		if (bi > 0 && lb_term_cmp(last, lastlen, k, klen) >= 0) {
			what = "dictionary block at offset %llu out of order";
			goto fail;
		}
		if ((rc = blk_open(sg, bi, &c)) != 0) {
			what = "dictionary block at offset %llu: bad CRC or header";
			goto fail;
		}
		if (c.poff != poff) {
			rc = LB_ECORRUPT;
			what = "dictionary block at offset %llu: id lists not contiguous";
			goto fail;
		}
		small = 0;
		while ((rc = blk_next(&c)) == 0) {
			struct blkent e = { c.df, c.lpoff, c.plen, c.lcrc };

			if (c.plen < LB_SEG_BIGLIST)
				small = lb_crc32_update(small, sg->post + c.lpoff, (size_t)c.plen);
			p.n = 0;
			if ((rc = seg_list(sg, &e, &p)) != 0) {
				what = "id list at offset %llu is damaged";
				at = (unsigned long long)(LB_SEG_HDR_SIZE + c.lpoff);
				goto fail;
			}
			nterms++;
		}
		if (rc != 1 || small != c.small) {
			rc = LB_ECORRUPT;
			what = "dictionary block at offset %llu: bad entry or short-list CRC";
			goto fail;
		}
		poff = c.poff;
		memcpy(last, c.term, c.tlen);
		lastlen = c.tlen;
	}
	rc = LB_ECORRUPT;
	if (poff != sg->postlen) {
		what = "postings section: %llu bytes no term uses";
		at = (unsigned long long)(sg->postlen - poff);
		goto fail;
	}
	if (nterms != sg->nterms) {
		what = "header says %llu terms, the dictionary holds another number";
		at = (unsigned long long)sg->nterms;
		goto fail;
	}
	lb_postings_free(&p);
	return (0);
 fail:
	lb_postings_free(&p);
	if (why != NULL && whylen > 0)
		snprintf(why, whylen, what, at);
	return (rc);
}

/* ---------------------------------------------------------------- merge */

/* One input of a merge: a dictionary walk whose current entry is the input's next term. */
struct mcur {
	struct lb_segment	*sg;
	struct blkcur		 c;
	uint64_t		 bi;
	int			 done;
};

/* Moves to the next term, opening (and fully checking) the next block when needed. */
static int
mc_next(struct mcur *m)
{
	struct blkent	 e;
	int		 rc;

	for (;;) {
		if (m->bi < m->sg->nblocks && m->c.sg != NULL) {
			if ((rc = blk_next(&m->c)) == 0)
				return (0);
			if (rc != 1)
				return (rc);
			m->bi++;
		}
		if (m->bi >= m->sg->nblocks) {
			m->done = 1;
			return (0);
		}
		rc = blk_find(m->sg, m->bi, NULL, 0, UINT32_MAX, &e);
		if (rc != LB_ENOTFOUND)
			return (rc == 0 ? LB_ECORRUPT : rc);
		if ((rc = blk_open(m->sg, m->bi, &m->c)) != 0)
			return (rc);
	}
}

static int
sg_cmp_first(const void *a, const void *b)
{
	const struct lb_segment *x = *(struct lb_segment *const *)a;
	const struct lb_segment *y = *(struct lb_segment *const *)b;

	return (x->first_id < y->first_id ? -1 : x->first_id > y->first_id);
}

static int
merge_into(struct lb_segment **in, int n, const char *path, int tier)
{
	struct lb_segment	**s = NULL;
	struct mcur		 *mc = NULL;
	struct lb_segout	 *so = NULL;
	struct lb_seginfo	  info;
	struct lb_postings	  p = { NULL, 0, 0 };
	int			  rc, i, lo;

	if (n < 1)
		return (EINVAL);
	if ((s = malloc((size_t)n * sizeof(*s))) == NULL ||
	    (mc = calloc((size_t)n, sizeof(*mc))) == NULL) {
		rc = ENOMEM;
		goto fail;
	}
	memcpy(s, in, (size_t)n * sizeof(*s));
	qsort(s, (size_t)n, sizeof(*s), sg_cmp_first);
	memset(&info, 0, sizeof(info));
	info.first_id = s[0]->first_id;
	info.last_id = s[n - 1]->last_id;
	info.count = 0;
	info.tmin = info.tmax = LB_NOTIME;
	/* Merged with a segment without forms, the text terms of the others say too much. */
	info.version = LB_SEG_VERSION;
	for (i = 0; i < n; i++) {
		if (s[i]->version < info.version)
			info.version = s[i]->version;
		/* (Event-time terms only when every part has them.) */
		if (!(s[i]->flags & LB_SEG_F_EVTIME))
			info.noevtime = 1;
		if (i > 0 && s[i]->first_id <= s[i - 1]->last_id) {
			rc = EINVAL;
			goto fail;
		}
		info.count += s[i]->count;
		if (s[i]->tmin != LB_NOTIME && (info.tmin == LB_NOTIME || s[i]->tmin < info.tmin))
			info.tmin = s[i]->tmin;
		if (s[i]->tmax != LB_NOTIME && (info.tmax == LB_NOTIME || s[i]->tmax > info.tmax))
			info.tmax = s[i]->tmax;
		mc[i].sg = s[i];
		if ((rc = mc_next(&mc[i])) != 0)
			goto fail;
	}
	if ((rc = lb_segout_begin(path, &info, &so)) != 0)
		goto fail;
	if (tier)
		lb_segout_fresh(so);
	for (;;) {
		/* The smallest current term; inputs holding it are taken in id order. */
		for (lo = -1, i = 0; i < n; i++)
			if (!mc[i].done && (lo == -1 || lb_term_cmp(mc[i].c.term, mc[i].c.tlen,
			    mc[lo].c.term, mc[lo].c.tlen) < 0))
				lo = i;
		if (lo == -1)
			break;
		for (i = lo; i < n; i++) {
			struct blkent e = { mc[i].c.df, mc[i].c.lpoff, mc[i].c.plen, mc[i].c.lcrc };

			if (mc[i].done || lb_term_cmp(mc[i].c.term, mc[i].c.tlen, mc[lo].c.term,
			    mc[lo].c.tlen) != 0)
				continue;
			p.n = 0;
			if ((rc = seg_list(mc[i].sg, &e, &p)) != 0 ||
			    (rc = lb_segout_ids(so, p.ids, p.n)) != 0)
				goto fail;
		}
		if ((rc = lb_segout_ids_end(so, mc[lo].c.term, mc[lo].c.tlen)) != 0)
			goto fail;
		/* Advance every input that held the term (lo last: the others compare to it). */
		for (i = n - 1; i >= lo; i--) {
			if (mc[i].done || (i != lo && lb_term_cmp(mc[i].c.term, mc[i].c.tlen,
			    mc[lo].c.term, mc[lo].c.tlen) != 0))
				continue;
			if ((rc = mc_next(&mc[i])) != 0)
				goto fail;
		}
	}
	rc = lb_segout_finish(so);
	so = NULL;
	if (rc != 0)
		goto fail;
	lb_postings_free(&p);
	free(mc);
	free(s);
	return (0);
 fail:
	lb_segout_abort(so);
	lb_postings_free(&p);
	free(mc);
	free(s);
	return (rc);
}

int
lb_segment_merge(struct lb_segment **in, int n, const char *path)
{
	return (merge_into(in, n, path, 0));
}

int
lb_segment_merge_tier(struct lb_segment **in, int n, const char *path)
{
	return (merge_into(in, n, path, 1));
}
