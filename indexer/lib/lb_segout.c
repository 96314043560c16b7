/*
 * lb_segout.c — the segment file writer (FORMAT.md §4): a stream of terms in ascending order,
 * each with its id list, turned into the postings section, compressed dictionary blocks
 * (zstd; raw DEFLATE in a version 2 segment, a merge of older ones), the block index and the header, then made durable. lb_segw_write() (a flushed interval) and
 * lb_segment_merge() (merged segments) feed it; lb_segment.c reads what it writes.
 *
 * The one idea: memory stays bounded whatever the segment's size. Id lists go straight to the
 * file, dictionary blocks to an unlinked scratch file that is copied in behind the postings at
 * the end, and only the block index (an entry and the first term of each block) is held. The
 * header is written last and the file renamed into place only after an fsync.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_postings.h"
#include "lb_segout.h"
#include "lb_block.h"

#define OBUF_SIZE	(256 * 1024)
#define BLK_HDR_MAX	(2 * LB_VARINT_MAX + 4)
#define ENTRY_MAX	(4 * LB_VARINT_MAX + LB_SEG_TERM_MAX + 4)
#define ZLEVEL		6	/* DEFLATE level of version 2 dictionaries (merges of older segments) */
#define DICT_ZSTD_LEVEL	5	/* zstd level of dictionary blocks: FORMAT.md §4.10 for the numbers */
#define DICT_ZSTD_FRESH	1	/* ... of an interval's segment, which merges rewrite (§4.10) */

#if BLK_HDR_MAX + LB_SEG_BLOCK_BYTES - 1 + ENTRY_MAX > LB_SEG_BLOCK_RAW_MAX
#error "a full dictionary block must fit LB_SEG_BLOCK_RAW_MAX"
#endif

/* A buffered output stream that counts and checksums what goes through it. */
struct obuf {
	int		 fd;
	uint8_t		*buf;
	size_t		 n;
	uint64_t	 total;		/* bytes written through the stream */
	uint32_t	 crc;		/* CRC of those bytes */
};

static int
ob_flush(struct obuf *o)
{
	int rc;

	if (o->n > 0 && (rc = lb_write_all(o->fd, o->buf, o->n)) != 0)
		return (rc);
	o->n = 0;
	return (0);
}

static int
ob_write(struct obuf *o, const void *p, size_t len)
{
	int rc;

	o->crc = lb_crc32_update(o->crc, p, len);
	o->total += len;
	if (o->n + len > OBUF_SIZE) {
		if ((rc = ob_flush(o)) != 0)
			return (rc);
		if (len >= OBUF_SIZE)
			return (lb_write_all(o->fd, p, len));
	}
	memcpy(o->buf + o->n, p, len);
	o->n += len;
	return (0);
}

struct lb_segout {
	char		 path[PATH_MAX];
	char		 tmp[PATH_MAX];
	int		 fd;		/* path.tmp: header, postings, then the rest */
	int		 dfd;		/* unlinked scratch file: the dictionary */
	struct obuf	 post, dict;
	struct lb_seginfo info;	/* the header's ids, count and times */
	uint64_t	 nterms;
	uint8_t		 blk[LB_SEG_BLOCK_BYTES + ENTRY_MAX];	/* entries of the open block */
	size_t		 blen;
	uint32_t	 bn;		/* terms in the open block */
	uint64_t	 bpoff;		/* postings offset of its first term */
	uint32_t	 bsmall;	/* CRC of its short id lists */
	uint8_t		 prev[LB_SEG_TERM_MAX];
	size_t		 prevlen;
	uint8_t		*idx;		/* block index entries */
	size_t		 idxlen, idxcap;
	uint8_t		*keys;		/* first term of each block */
	size_t		 keyslen, keyscap;
	uint32_t	 nblocks;
	uint64_t	 lstart;	/* postings offset of the list being written */
	uint32_t	 lcrc;		/* its CRC so far */
	uint8_t		 lhead[LB_SEG_BIGLIST];	/* its first bytes (the block's short CRC) */
	struct lb_penc	 enc;		/* lb_segout_ids() */
	uint8_t		 encbuf[LB_PENC_OUT];
	uint32_t	 version;	/* of the file: LB_SEG_VERSION, or _NOFORMS (merges) */
	struct lb_bcodec *zc;		/* zstd of each dictionary block (version 3) */
	int		 zlevel;	/* its level */
	z_stream	 zs;		/* raw deflate of each dictionary block (version 2) */
	int		 zinit;
	uint8_t		 raw[BLK_HDR_MAX + LB_SEG_BLOCK_BYTES + ENTRY_MAX];
	uint8_t		*zbuf;		/* LB_VARINT_MAX + the codec's bound for raw + 4 */
	size_t		 zcap;
};

void
lb_segout_fresh(struct lb_segout *so)
{
	so->zlevel = DICT_ZSTD_FRESH;
}

void
lb_segout_abort(struct lb_segout *so)
{
	if (so == NULL)
		return;
	if (so->fd != -1) {
		close(so->fd);
		unlink(so->tmp);
	}
	if (so->dfd != -1)
		close(so->dfd);
	if (so->zinit)
		deflateEnd(&so->zs);
	lb_block_free(so->zc);
	free(so->zbuf);
	free(so->post.buf);
	free(so->dict.buf);
	free(so->idx);
	free(so->keys);
	free(so);
}

int
lb_segout_begin(const char *path, const struct lb_seginfo *info, struct lb_segout **out)
{
	struct lb_segout	*so;
	uint8_t			 hdr[LB_SEG_HDR_SIZE];
	char			 dtmp[PATH_MAX];
	int			 rc;

	if (info->first_id > info->last_id)
		return (EINVAL);
	if ((so = calloc(1, sizeof(*so))) == NULL)
		return (ENOMEM);
	so->fd = so->dfd = -1;
	so->info = *info;
	lb_penc_init(&so->enc, info->first_id);
	if ((rc = lb_path(so->path, sizeof(so->path), "%s", path)) != 0 ||
	    (rc = lb_path(so->tmp, sizeof(so->tmp), "%s.tmp", path)) != 0 ||
	    (rc = lb_path(dtmp, sizeof(dtmp), "%s.dict.tmp", path)) != 0)
		goto fail;
	if ((so->post.buf = malloc(OBUF_SIZE)) == NULL ||
	    (so->dict.buf = malloc(OBUF_SIZE)) == NULL) {
		rc = ENOMEM;
		goto fail;
	}
	if ((so->fd = open(so->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0640)) == -1) {
		rc = errno;
		goto fail;
	}
	if ((so->dfd = open(dtmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) == -1) {
		rc = errno;
		goto fail;
	}
	unlink(dtmp);
	so->post.fd = so->fd;
	so->dict.fd = so->dfd;
	so->version = info->version ? info->version : LB_SEG_VERSION;
	so->zlevel = DICT_ZSTD_LEVEL;
	if (so->version == LB_SEG_VERSION_NOFORMS) {
		if (deflateInit2(&so->zs, ZLEVEL, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
			rc = ENOMEM;
			goto fail;
		}
		so->zinit = 1;
		so->zcap = LB_VARINT_MAX + deflateBound(&so->zs, sizeof(so->raw)) + 4;
	} else if (so->version == LB_SEG_VERSION)
		so->zcap = LB_VARINT_MAX + lb_zstd_bound(sizeof(so->raw)) + 4;
	else {
		rc = EINVAL;
		goto fail;
	}
	if ((so->zbuf = malloc(so->zcap)) == NULL) {
		rc = ENOMEM;
		goto fail;
	}
	/* The header is written last; reserve its place. */
	memset(hdr, 0, sizeof(hdr));
	if ((rc = lb_write_all(so->fd, hdr, sizeof(hdr))) != 0)
		goto fail;
	*out = so;
	return (0);
 fail:
	lb_segout_abort(so);
	return (rc);
}

/*
 * Writes the open block: its raw bytes (n, post_off, short_crc, entries) compressed, framed as
 * varint raw_len | one zstd frame (version 2: a raw DEFLATE stream) | CRC of both.
 */
static int
so_flush_block(struct lb_segout *so)
{
	size_t		 hn, zn;
	int		 rc;

	hn = lb_varint_put(so->raw, so->bn);
	hn += lb_varint_put(so->raw + hn, so->bpoff);
	lb_put32(so->raw + hn, so->bsmall);
	hn += 4;
	memcpy(so->raw + hn, so->blk, so->blen);
	hn += so->blen;
	zn = lb_varint_put(so->zbuf, hn);
	if (so->version == LB_SEG_VERSION) {
		size_t	 comp;

		if ((rc = lb_zstd_frame(&so->zc, so->zlevel, so->raw, hn, so->zbuf + zn,
		    so->zcap - zn - 4, &comp)) != 0)
			return (rc == EINVAL ? EIO : rc);
		zn += comp;
	} else {
		if (deflateReset(&so->zs) != Z_OK)
			return (EIO);
		so->zs.next_in = so->raw;
		so->zs.avail_in = (uInt)hn;
		so->zs.next_out = so->zbuf + zn;
		so->zs.avail_out = (uInt)(so->zcap - zn - 4);
		if (deflate(&so->zs, Z_FINISH) != Z_STREAM_END)
			return (EIO);
		zn += so->zs.total_out;
	}
	lb_put32(so->zbuf + zn, lb_crc32_update(0, so->zbuf, zn));
	zn += 4;
	if ((rc = ob_write(&so->dict, so->zbuf, zn)) != 0)
		return (rc);
	so->bn = 0;
	so->blen = 0;
	so->nblocks++;
	return (0);
}

/* Appends bytes to the list being written. */
static int
so_list_bytes(struct lb_segout *so, const uint8_t *p, size_t n)
{
	uint64_t	 have = so->post.total - so->lstart;

	if (have < LB_SEG_BIGLIST)
		memcpy(so->lhead + have, p, n < LB_SEG_BIGLIST - have ? n : LB_SEG_BIGLIST - have);
	so->lcrc = lb_crc32_update(so->lcrc, p, n);
	return (ob_write(&so->post, p, n));
}

/* Adds the dictionary entry of the list just written. */
static int
so_entry(struct lb_segout *so, const uint8_t *term, size_t len, uint64_t df)
{
	size_t		 shared = 0, n;
	uint64_t	 listlen = so->post.total - so->lstart;
	uint8_t		*e;
	int		 rc;

	if (len == 0 || len > LB_SEG_TERM_MAX || df == 0 || listlen == 0)
		return (EINVAL);
	if (df > UINT32_MAX)
		return (LB_ETOOBIG);
	if (so->nterms > 0 && lb_term_cmp(so->prev, so->prevlen, term, len) >= 0)
		return (EINVAL);
	if (so->bn == 0) {
		if (so->nblocks == UINT32_MAX || so->keyslen + len > UINT32_MAX)
			return (LB_ETOOBIG);
		if ((rc = lb_grow(&so->idx, &so->idxcap, so->idxlen + LB_SEG_IDX_ENTRY, 1)) != 0 ||
		    (rc = lb_grow(&so->keys, &so->keyscap, so->keyslen + len, 1)) != 0)
			return (rc);
		lb_put64(so->idx + so->idxlen, so->dict.total);
		lb_put32(so->idx + so->idxlen + 8, (uint32_t)so->keyslen);
		lb_put32(so->idx + so->idxlen + 12, (uint32_t)len);
		so->idxlen += LB_SEG_IDX_ENTRY;
		memcpy(so->keys + so->keyslen, term, len);
		so->keyslen += len;
		so->bpoff = so->lstart;
		so->bsmall = 0;
	} else {
		n = so->prevlen < len ? so->prevlen : len;
		while (shared < n && so->prev[shared] == term[shared])
			shared++;
	}
	e = so->blk + so->blen;
	n = lb_varint_put(e, shared);
	n += lb_varint_put(e + n, len - shared);
	memcpy(e + n, term + shared, len - shared);
	n += len - shared;
	n += lb_varint_put(e + n, df);
	n += lb_varint_put(e + n, listlen);
	if (listlen >= LB_SEG_BIGLIST) {
		lb_put32(e + n, so->lcrc);
		n += 4;
	} else
		so->bsmall = lb_crc32_update(so->bsmall, so->lhead, (size_t)listlen);
	so->blen += n;
	memcpy(so->prev, term, len);
	so->prevlen = len;
	so->bn++;
	so->nterms++;
	/* The next list starts here. */
	so->lstart = so->post.total;
	so->lcrc = 0;
	lb_penc_init(&so->enc, so->info.first_id);
	if (so->bn == LB_SEG_BLOCK_TERMS || so->blen >= LB_SEG_BLOCK_BYTES)
		return (so_flush_block(so));
	return (0);
}

int
lb_segout_term(struct lb_segout *so, const uint8_t *term, size_t len, uint64_t df,
    const uint8_t *list, size_t listlen)
{
	int rc;

	if (so->post.total != so->lstart || so->enc.n != 0)
		return (EINVAL);
	if ((rc = so_list_bytes(so, list, listlen)) != 0)
		return (rc);
	return (so_entry(so, term, len, df));
}

int
lb_segout_ids(struct lb_segout *so, const uint64_t *ids, size_t n)
{
	size_t	k;
	int	rc;

	for (size_t i = 0; i < n; i++) {
		if (ids[i] < so->info.first_id || ids[i] > so->info.last_id ||
		    (so->enc.n > 0 && ids[i] <= (so->enc.np > 0 ?
		    so->enc.pend[so->enc.np - 1] : so->enc.prev)))
			return (EINVAL);
		if ((k = lb_penc_add(&so->enc, ids[i], so->encbuf)) > 0 &&
		    (rc = so_list_bytes(so, so->encbuf, k)) != 0)
			return (rc);
	}
	return (0);
}

int
lb_segout_ids_end(struct lb_segout *so, const uint8_t *term, size_t len)
{
	size_t	k;
	int	rc;

	if ((k = lb_penc_finish(&so->enc, so->encbuf)) > 0 &&
	    (rc = so_list_bytes(so, so->encbuf, k)) != 0)
		return (rc);
	return (so_entry(so, term, len, so->enc.n));
}

/* Copies the dictionary scratch file to the end of the segment. */
static int
so_copy_dict(struct lb_segout *so)
{
	uint8_t		*buf = so->dict.buf;
	uint64_t	 off = 0;
	size_t		 n;
	int		 rc;

	while (off < so->dict.total) {
		n = so->dict.total - off > OBUF_SIZE ? OBUF_SIZE : (size_t)(so->dict.total - off);
		if ((rc = lb_pread_all(so->dfd, buf, n, off)) != 0 ||
		    (rc = lb_write_all(so->fd, buf, n)) != 0)
			return (rc);
		off += n;
	}
	return (0);
}

int
lb_segout_finish(struct lb_segout *so)
{
	uint8_t		 hdr[LB_SEG_HDR_SIZE];
	char		 dir[PATH_MAX], *slash;
	uint64_t	 dictoff, idxoff;
	uint32_t	 idxcrc;
	int		 rc;

	if (so->bn > 0 && (rc = so_flush_block(so)) != 0)
		goto fail;
	if ((rc = ob_flush(&so->post)) != 0 || (rc = ob_flush(&so->dict)) != 0 ||
	    (rc = so_copy_dict(so)) != 0)
		goto fail;
	idxcrc = lb_crc32_update(lb_crc32_update(0, so->idx, so->idxlen), so->keys, so->keyslen);
	if ((so->idxlen > 0 && (rc = lb_write_all(so->fd, so->idx, so->idxlen)) != 0) ||
	    (so->keyslen > 0 && (rc = lb_write_all(so->fd, so->keys, so->keyslen)) != 0))
		goto fail;
	dictoff = LB_SEG_HDR_SIZE + so->post.total;
	idxoff = dictoff + so->dict.total;
	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, LB_SEG_MAGIC, LB_SEG_MAGIC_LEN);
	lb_put32(hdr + LB_SEG_H_VERSION, so->version);
	lb_put32(hdr + LB_SEG_H_FLAGS, so->info.noevtime ? 0 : LB_SEG_F_EVTIME);
	lb_put64(hdr + LB_SEG_H_FIRST, so->info.first_id);
	lb_put64(hdr + LB_SEG_H_LAST, so->info.last_id);
	lb_put64(hdr + LB_SEG_H_COUNT, so->info.count);
	lb_put64(hdr + LB_SEG_H_TMIN, (uint64_t)so->info.tmin);
	lb_put64(hdr + LB_SEG_H_TMAX, (uint64_t)so->info.tmax);
	lb_put64(hdr + LB_SEG_H_NTERMS, so->nterms);
	lb_put64(hdr + LB_SEG_H_POSTLEN, so->post.total);
	lb_put64(hdr + LB_SEG_H_DICTOFF, dictoff);
	lb_put64(hdr + LB_SEG_H_DICTLEN, so->dict.total);
	lb_put64(hdr + LB_SEG_H_IDXOFF, idxoff);
	lb_put64(hdr + LB_SEG_H_IDXLEN, so->idxlen + so->keyslen);
	lb_put32(hdr + LB_SEG_H_NBLOCKS, so->nblocks);
	lb_put32(hdr + LB_SEG_H_POSTCRC, so->post.crc);
	lb_put32(hdr + LB_SEG_H_IDXCRC, idxcrc);
	lb_put32(hdr + LB_SEG_H_CRC, lb_crc32(hdr, LB_SEG_H_CRC));
	if (pwrite(so->fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr)) {
		rc = errno ? errno : EIO;
		goto fail;
	}
	if (fsync(so->fd) == -1 || rename(so->tmp, so->path) == -1) {
		rc = errno;
		goto fail;
	}
	close(so->fd);
	so->fd = -1;
	memcpy(dir, so->path, sizeof(dir));
	if ((slash = strrchr(dir, '/')) == NULL)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	rc = lb_fsync_dir(dir);
	lb_segout_abort(so);
	return (rc);
 fail:
	lb_segout_abort(so);
	return (rc);
}
