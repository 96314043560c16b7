/*
 * lb_block.h — the message block codec (FORMAT.md §3.2): how a sealed block's raw payload is
 * compressed, and how a stored payload is turned back into exactly raw_len bytes, by the
 * block header's method. lb_msgfile.c asks it. It knows the record layout (FORMAT.md §3.3)
 * only to split records into columns and join them again; nothing of files or ids.
 */
#ifndef LB_BLOCK_H
#define LB_BLOCK_H

#include <stddef.h>
#include <stdint.h>

struct lb_msgfile;

/*
 * A codec's scratch (compressor and decompressor contexts, allocated on first use). One per
 * thread: the writer's compressor thread has one, every lb_msgfile one for its reads.
 * NULL is an empty codec; lb_block_free(NULL) does nothing.
 */
struct lb_bcodec;
void	lb_block_free(struct lb_bcodec *c);

/* 1 when a reader knows method (LB_BLK_STORED, _DEFLATE, _ZSTD, _COLS or _TPL), else 0. */
int	lb_block_method_ok(unsigned method);

/*
 * Compresses src[0..raw) with method (LB_BLK_DEFLATE, LB_BLK_ZSTD, LB_BLK_COLS or LB_BLK_TPL:
 * then src is records) into dst, which has room for raw - 1 bytes: the payload must come out
 * smaller. Columns or templates that do not come out smaller (or records that do not split)
 * fall back to one zstd frame. When nothing does (or raw < 2), the block is stored: src is
 * copied to dst (room for raw bytes then). *used is the method written.
 * *comp is the payload length. 0, or ENOMEM / EINVAL (an unknown method).
 */
int	lb_block_compress(struct lb_bcodec **c, unsigned method, const uint8_t *src, size_t raw,
	    uint8_t *dst, size_t *comp, uint8_t *used);

/*
 * Decompresses the payload src[0..comp) of a block of method into exactly dst[0..raw). A
 * payload that does not decode, that holds anything but what the method allows (FORMAT.md
 * §3.2), or whose size is not exactly raw is LB_ECORRUPT; nothing is written past dst + raw.
 * 0, LB_ECORRUPT or ENOMEM.
 */
int	lb_block_decompress(struct lb_bcodec **c, unsigned method, const uint8_t *src, size_t comp,
	    uint8_t *dst, size_t raw);

/*
 * One zstd frame of src[0..raw) at level, as a LB_BLK_ZSTD payload is (content size and
 * checksum in the frame), into dst[0..cap): the segment writer's dictionary blocks (FORMAT.md
 * §4.4). cap >= lb_zstd_bound(raw) always fits. *comp is the frame's length. 0, ENOMEM, or
 * EINVAL (it did not fit, or a bad level).
 */
size_t	lb_zstd_bound(size_t raw);
int	lb_zstd_frame(struct lb_bcodec **c, int level, const uint8_t *src, size_t raw,
	    uint8_t *dst, size_t cap, size_t *comp);

/*
 * Reads such a frame src[0..comp) into exactly dst[0..raw) under the rules of a LB_BLK_ZSTD
 * payload (FORMAT.md §3.2), except that the frame may be longer than raw (a small block).
 * 0, LB_ECORRUPT or ENOMEM.
 */
int	lb_zstd_unframe(struct lb_bcodec **c, const uint8_t *src, size_t comp, uint8_t *dst,
	    size_t raw);

/*
 * The writer's method for the blocks it seals from now on (lb_msgfile.c): WRITE_METHOD of
 * lb_msgfile.c unless set. LB_BLK_DEFLATE is kept to write stores as logbox wrote them before
 * zstd (tests, and measurements); LB_BLK_STORED stores every block as is. 0 or EINVAL (a
 * reader, or an unknown method).
 */
int	lb_msgfile_set_method(struct lb_msgfile *mf, unsigned method);

#endif /* LB_BLOCK_H */
