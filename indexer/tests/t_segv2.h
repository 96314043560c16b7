/*
 * t_segv2.h — turns a segment file as this logbox writes it (version 3) into one as logbox
 * wrote them before issue 18 (version 2, FORMAT.md §9): the same terms and lists, each
 * dictionary block re-compressed from its zstd frame to raw DEFLATE (zlib level 6, as the old
 * writer did), the block index, the offsets and the CRCs rebuilt. The terms are kept as they
 * are, forms included: a version 2 reader takes them as terms like any other.
 * Kept for the tests that read version 2 segments (t_segment, t_eval).
 */
#ifndef T_SEGV2_H
#define T_SEGV2_H

#include <zlib.h>

#include "lb_format.h"
#include "lb_util.h"
#include "lb_block.h"
#include "t_helper.h"

static inline void
t_seg_to_v2(const char *path)
{
	size_t			 len, olen = 0, rawlen = 0;
	uint8_t			*b = t_read_file(path, &len), *o, *raw, *ent;
	uint64_t		 dict_off, dict_len, idx_off, idx_len, nb;
	struct lb_bcodec	*zc = NULL;

	assert_true(len >= LB_SEG_HDR_SIZE);
	assert_int_equal(lb_get32(b + LB_SEG_H_VERSION), LB_SEG_VERSION);
	dict_off = lb_get64(b + LB_SEG_H_DICTOFF);
	dict_len = lb_get64(b + LB_SEG_H_DICTLEN);
	idx_off = lb_get64(b + LB_SEG_H_IDXOFF);
	idx_len = lb_get64(b + LB_SEG_H_IDXLEN);
	nb = lb_get32(b + LB_SEG_H_NBLOCKS);
	assert_true(idx_off + idx_len == len && dict_off + dict_len == idx_off);
	/* DEFLATE of a 10 KiB block never grows it by more than a few hundred bytes. */
	o = malloc(len + nb * 1024 + 64);
	raw = malloc(LB_SEG_BLOCK_RAW_MAX);
	ent = malloc(idx_len);
	assert_true(o != NULL && raw != NULL && ent != NULL);
	memcpy(o, b, dict_off);
	olen = dict_off;
	memcpy(ent, b + idx_off, idx_len);
	for (uint64_t i = 0; i < nb; i++) {
		uint64_t	 s = dict_off + lb_get64(b + idx_off + LB_SEG_IDX_ENTRY * i);
		uint64_t	 e = i + 1 < nb ? dict_off + lb_get64(b + idx_off + LB_SEG_IDX_ENTRY * (i + 1)) :
				     idx_off;
		uint64_t	 v;
		size_t		 k = lb_varint_get(b + s, (size_t)(e - s), &v), start = olen;
		z_stream	 zs;

		assert_true(k > 0 && v <= LB_SEG_BLOCK_RAW_MAX);
		rawlen = (size_t)v;
		assert_ok(lb_zstd_unframe(&zc, b + s + k, (size_t)(e - s - k - 4), raw, rawlen));
		lb_put64(ent + LB_SEG_IDX_ENTRY * i, olen - dict_off);
		olen += lb_varint_put(o + olen, v);
		memset(&zs, 0, sizeof(zs));
		assert_int_equal(deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
		zs.next_in = raw;
		zs.avail_in = (uInt)rawlen;
		zs.next_out = o + olen;
		zs.avail_out = (uInt)(nb * 1024 + 64 + len - olen);
		assert_int_equal(deflate(&zs, Z_FINISH), Z_STREAM_END);
		olen += zs.total_out;
		deflateEnd(&zs);
		lb_put32(o + olen, lb_crc32(o + start, olen - start));
		olen += 4;
	}
	lb_put64(o + LB_SEG_H_DICTLEN, olen - dict_off);
	lb_put64(o + LB_SEG_H_IDXOFF, olen);
	memcpy(o + olen, ent, idx_len);
	lb_put32(o + LB_SEG_H_IDXCRC, lb_crc32(ent, idx_len));
	olen += idx_len;
	lb_put32(o + LB_SEG_H_VERSION, LB_SEG_VERSION_NOFORMS);
	lb_put32(o + LB_SEG_H_CRC, lb_crc32(o, LB_SEG_H_CRC));
	t_write_file(path, o, olen);
	lb_block_free(zc);
	free(ent);
	free(raw);
	free(o);
	free(b);
}

#endif /* T_SEGV2_H */
