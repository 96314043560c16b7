/*
 * lb_block.c — the message block codec (FORMAT.md §3.2, lb_block.h). Today's writer method is
 * zstd (one frame at ZSTD_LEVEL with its content size and checksum, nothing else); raw DEFLATE (ISA-L level
 * 1) is what logbox wrote before, read forever and still writable for tests; a block that
 * does not come out smaller is stored. A reader dispatches on the header's method.
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
#include "lb_util.h"

#ifndef ZSTD_LEVEL
#define ZSTD_LEVEL	3	/* zstd level of the writer: FORMAT.md §3.8 for the numbers */
#endif
#define DEFLATE_LEVEL	1	/* ISA-L level of the DEFLATE writer (before zstd) */

struct lb_bcodec {
	ZSTD_CCtx		*zc;
	ZSTD_DCtx		*zd;
	struct inflate_state	*zi;	/* ISA-L inflate scratch */
	uint8_t			*lvlbuf;	/* ISA-L deflate's working memory */
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
	return (method == LB_BLK_STORED || method == LB_BLK_DEFLATE || method == LB_BLK_ZSTD);
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

/* One zstd frame with its content size into dst[0..cap): its length, or 0 when it does not fit. */
static int
zstd_into(struct lb_bcodec *c, const uint8_t *src, size_t raw, uint8_t *dst, size_t cap,
    size_t *out)
{
	size_t	 r;

	*out = 0;
	if (c->zc == NULL) {
		if ((c->zc = ZSTD_createCCtx()) == NULL)
			return (ENOMEM);
		if (ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_compressionLevel,
		    ZSTD_LEVEL)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_contentSizeFlag, 1)) ||
		    ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_checksumFlag, 1)))
			return (EINVAL);
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

int
lb_block_compress(struct lb_bcodec **c, unsigned method, const uint8_t *src, size_t raw,
    uint8_t *dst, size_t *comp, uint8_t *used)
{
	size_t	 n = 0;
	int	 rc;

	if (method != LB_BLK_STORED && method != LB_BLK_DEFLATE && method != LB_BLK_ZSTD)
		return (EINVAL);
	if ((rc = codec(c)) != 0)
		return (rc);
	if (raw >= 2 && raw <= LB_BLOCK_RAW_MAX) {
		if (method == LB_BLK_DEFLATE)
			rc = deflate_into(*c, src, raw, dst, raw - 1, &n);
		else if (method == LB_BLK_ZSTD)
			rc = zstd_into(*c, src, raw, dst, raw - 1, &n);
		if (rc != 0)
			return (rc);
	}
	if (n > 0 && n < raw) {
		*comp = n;
		*used = (uint8_t)method;
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
#define ZSTD_WINDOW_LOG_MAX	20		/* a frame's window: 1 MiB (LB_BLOCK_RAW_MAX) at most */

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
	return (unzstd(*c, src, comp, dst, raw));
}
