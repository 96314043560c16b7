/*
 * fz_segment.c — arbitrary bytes as a .seg file: open, verify, look up terms (fixed ones, ones
 * taken from the input, every term the dictionary walk yields), walk prefixes and ranges and
 * decode every id list. Whatever the bytes, the reader must return codes, not crash, leak or
 * loop; a file that verifies must also merge into a file that verifies. When the first input
 * byte is odd, the rest is written with its checksums recomputed (header, block index, each
 * dictionary block — decompressed, its short-list and list CRCs fixed, compressed again as
 * the header's version has it: zstd, or raw DEFLATE at version 2 — and postings), so that
 * mutations reach the structural checks behind the CRCs instead of stopping at them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_block.h"

struct fz {
	struct lb_segment	*sg;
	struct lb_postings	 p;
	uint64_t		 seen;
};

static int
fz_term(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct fz	*f = arg;
	int		 rc;

	f->p.n = 0;
	rc = lb_segment_postings(f->sg, cookie, &f->p);
	if (rc == 0 && f->p.n != df)
		abort();
	f->p.n = 0;
	if (f->seen % 16 == 0 && lb_segment_lookup(f->sg, term, len, &f->p) == 0 && rc == 0 &&
	    f->p.n != df)
		abort();
	return (++f->seen > 100000);
}

static int
fz_count(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	(void)term; (void)len; (void)cookie; (void)df;
	return (++*(uint64_t *)arg > 100000);
}

/* Recomputes the short-list CRC and the long lists' CRCs inside one inflated block. */
static void
fix_block(uint8_t *p, size_t len, const uint8_t *post, uint64_t postlen)
{
	uint8_t		*q = p, *sp;
	uint64_t	 n, poff, df, plen, sh, sl;
	uint32_t	 small = 0;
	size_t		 k;

	if ((k = lb_varint_get(q, len, &n)) == 0)
		return;
	q += k;
	if ((k = lb_varint_get(q, len - (size_t)(q - p), &poff)) == 0 ||
	    len - (size_t)(q - p) < k + 4)
		return;
	sp = q + k;
	q = sp + 4;
	for (uint64_t e = 0; e < n && e < LB_SEG_BLOCK_TERMS + 8; e++) {
		if ((k = lb_varint_get(q, len - (size_t)(q - p), &sh)) == 0)
			break;
		q += k;
		if ((k = lb_varint_get(q, len - (size_t)(q - p), &sl)) == 0 ||
		    sl > len - (size_t)(q - p) - k)
			break;
		q += k + sl;
		if ((k = lb_varint_get(q, len - (size_t)(q - p), &df)) == 0)
			break;
		q += k;
		if ((k = lb_varint_get(q, len - (size_t)(q - p), &plen)) == 0)
			break;
		q += k;
		if (poff > postlen || plen > postlen - poff)
			break;
		if (plen >= LB_SEG_BIGLIST) {
			if (len - (size_t)(q - p) < 4)
				break;
			lb_put32(q, lb_crc32(post + poff, (size_t)plen));
			q += 4;
		} else
			small = (uint32_t)crc32(small, post + poff, (uInt)plen);
		poff += plen;
	}
	lb_put32(sp, small);
}

/*
 * Best effort: recompute what checksums the damaged layout still lets us find. When the
 * block index tiles the dictionary, each block is inflated, its inner CRCs fixed, deflated
 * again and the file rebuilt around the new block lengths; *bp and *sizep are replaced.
 */
static void
fix_crcs(uint8_t **bp, size_t *sizep)
{
	static uint8_t	 raw[LB_SEG_BLOCK_RAW_MAX];
	static struct lb_bcodec *zc;	/* kept across inputs */
	int		 v3;
	uint8_t		*b = *bp, *o = NULL, *z;
	size_t		 size = *sizep, on = 0, cap;
	uint64_t	 postlen, dictoff, dictlen, idxoff, idxlen, nb, rl;
	z_stream	 zs;
	size_t		 k;

	if (size < LB_SEG_HDR_SIZE)
		return;
	v3 = lb_get32(b + LB_SEG_H_VERSION) != LB_SEG_VERSION_NOFORMS;
	postlen = lb_get64(b + LB_SEG_H_POSTLEN);
	dictoff = lb_get64(b + LB_SEG_H_DICTOFF);
	dictlen = lb_get64(b + LB_SEG_H_DICTLEN);
	idxoff = lb_get64(b + LB_SEG_H_IDXOFF);
	idxlen = lb_get64(b + LB_SEG_H_IDXLEN);
	nb = lb_get32(b + LB_SEG_H_NBLOCKS);
	if (!(postlen <= size - LB_SEG_HDR_SIZE && dictoff == LB_SEG_HDR_SIZE + postlen &&
	    dictlen <= size - dictoff && idxoff == dictoff + dictlen &&
	    idxlen <= size - idxoff && nb * LB_SEG_IDX_ENTRY <= idxlen && nb < 4096))
		goto header;
	for (uint64_t i = 0; i < nb; i++) {
		uint64_t off = lb_get64(b + idxoff + i * LB_SEG_IDX_ENTRY);
		uint64_t end = i + 1 < nb ? lb_get64(b + idxoff + (i + 1) * LB_SEG_IDX_ENTRY) :
		    dictlen;

		if ((i == 0 && off != 0) || off >= end || end > dictlen)
			goto header;
	}
	cap = size + nb * (LB_VARINT_MAX + LB_SEG_BLOCK_RAW_MAX + 64 + 4);
	if ((o = malloc(cap)) == NULL)
		goto header;
	memcpy(o, b, (size_t)dictoff);
	on = (size_t)dictoff;
	for (uint64_t i = 0; i < nb; i++) {
		uint64_t off = lb_get64(b + idxoff + i * LB_SEG_IDX_ENTRY);
		uint64_t end = i + 1 < nb ? lb_get64(b + idxoff + (i + 1) * LB_SEG_IDX_ENTRY) :
		    dictlen;
		uint8_t	*p = b + dictoff + off;
		size_t	 len = (size_t)(end - off), start = on;
		int	 ok = 0;

		lb_put64(b + idxoff + i * LB_SEG_IDX_ENTRY, on - dictoff);
		if (len > 5 && (k = lb_varint_get(p, len - 4, &rl)) != 0 && rl > 0 &&
		    rl <= sizeof(raw) && v3)
			ok = lb_zstd_unframe(&zc, p + k, len - 4 - k, raw, (size_t)rl) == 0;
		else if (len > 5 && (k = lb_varint_get(p, len - 4, &rl)) != 0 && rl > 0 &&
		    rl <= sizeof(raw)) {
			memset(&zs, 0, sizeof(zs));
			if (inflateInit2(&zs, -15) == Z_OK) {
				zs.next_in = p + k;
				zs.avail_in = (uInt)(len - 4 - k);
				zs.next_out = raw;
				zs.avail_out = (uInt)rl;
				ok = inflate(&zs, Z_FINISH) == Z_STREAM_END && zs.avail_out == 0;
				inflateEnd(&zs);
			}
		}
		if (ok) {
			fix_block(raw, (size_t)rl, b + LB_SEG_HDR_SIZE, postlen);
			on += lb_varint_put(o + on, rl);
			z = o + on;
			memset(&zs, 0, sizeof(zs));
			if (v3) {
				size_t	 comp;

				ok = lb_zstd_frame(&zc, 5, raw, (size_t)rl, z, cap - on - 4,
				    &comp) == 0;
				on += ok ? comp : 0;
			} else if (deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
				ok = 0;
			else {
				zs.next_in = raw;
				zs.avail_in = (uInt)rl;
				zs.next_out = z;
				zs.avail_out = (uInt)(cap - on - 4);
				ok = deflate(&zs, Z_FINISH) == Z_STREAM_END;
				on += zs.total_out;
				deflateEnd(&zs);
			}
			if (!ok)
				on = start;
		}
		if (!ok) {
			memcpy(o + on, p, len - 4);
			on += len - 4;
		}
		lb_put32(o + on, lb_crc32(o + start, on - start));
		on += 4;
	}
	idxoff = on;
	memcpy(o + on, b + dictoff + dictlen, size - (size_t)(dictoff + dictlen));
	on += size - (size_t)(dictoff + dictlen);
	lb_put64(o + LB_SEG_H_DICTLEN, idxoff - dictoff);
	lb_put64(o + LB_SEG_H_IDXOFF, idxoff);
	lb_put32(o + LB_SEG_H_IDXCRC, lb_crc32(o + idxoff, (size_t)idxlen));
	lb_put32(o + LB_SEG_H_POSTCRC, lb_crc32(o + LB_SEG_HDR_SIZE, (size_t)postlen));
	free(b);
	*bp = b = o;
	*sizep = size = on;
 header:
	lb_put32(b + LB_SEG_H_CRC, lb_crc32(b, LB_SEG_H_CRC));
}

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char	*fixed[] = { "\x01" "error", "\x01" "a", "\x02" "web-01",
	    "\x06\x03", "\x07\x06", "\x08" "ex@1.user\0" "bob", "" };
	char			 path[64], out[80];
	struct fz		 f;
	struct lb_seginfo	 si;
	char			 why[200];
	uint64_t		 n = 0;
	FILE			*fp;
	int			 ok;

	snprintf(path, sizeof(path), "/tmp/fz_segment.%d.seg", (int)getpid());
	snprintf(out, sizeof(out), "%s.merged", path);
	if ((fp = fopen(path, "wb")) == NULL)
		return (0);
	if (size > 0 && (data[0] & 1)) {
		uint8_t *b = malloc(size);

		if (b == NULL) {
			fclose(fp);
			return (0);
		}
		size_t	 bn = size - 1;

		memcpy(b, data + 1, bn);
		fix_crcs(&b, &bn);
		if (bn > 0 && fwrite(b, 1, bn, fp) != bn) {
			free(b);
			fclose(fp);
			return (0);
		}
		free(b);
	} else if (size > 0 && fwrite(data, 1, size, fp) != size) {
		fclose(fp);
		return (0);
	}
	fclose(fp);
	memset(&f, 0, sizeof(f));
	if (lb_segment_open(path, &f.sg) != 0)
		goto done;
	lb_segment_info(f.sg, &si);
	ok = lb_segment_verify(f.sg, why, sizeof(why)) == 0;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		size_t len = i == 5 ? 14 : strlen(fixed[i]);

		(void)lb_segment_lookup(f.sg, (const uint8_t *)fixed[i], len, &f.p);
	}
	for (size_t i = 1; i <= 16 && i <= size; i++) {
		(void)lb_segment_lookup(f.sg, data + size - i, i, &f.p);
		(void)lb_segment_prefix(f.sg, data + size - i, i < 3 ? i : 3, fz_count, &n);
	}
	if (size > 4)
		(void)lb_segment_terms(f.sg, data, 2, data + 2, 2, fz_count, &n);
	(void)lb_segment_terms(f.sg, NULL, 0, NULL, 0, fz_term, &f);
	(void)lb_segment_postings(f.sg, UINT64_MAX, &f.p);
	(void)lb_segment_postings(f.sg, 0, &f.p);
	if (ok) {
		struct lb_segment *m;

		if (lb_segment_merge(&f.sg, 1, out) != 0)
			abort();
		if (lb_segment_open(out, &m) != 0 || lb_segment_verify(m, why, sizeof(why)) != 0)
			abort();
		lb_segment_close(m);
		unlink(out);
	}
	lb_segment_close(f.sg);
 done:
	lb_postings_free(&f.p);
	unlink(path);
	return (0);
}
