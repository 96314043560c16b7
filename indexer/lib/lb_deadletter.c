/*
 * lb_deadletter.c — the dead-letter file (FORMAT.md §12): where a writer sets aside a message
 * that can never be stored (lb_errclass() says LB_ERRC_MESSAGE), with the reason, the time,
 * the logspace and the raw frame bytes, so that reading can go on with the next message and
 * nothing is silently lost. It owns the file's format, appending (one write(2) per record,
 * fdatasync'ed: quarantines are rare) and reading; indexd writes <data>/indexd/deadletter,
 * `logbox deadletter` reads it. A record torn by a kill is cut off when a writer opens the file
 * and stops a reader (LB_ECORRUPT) without hiding the records before it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"

struct lb_dl {
	int		 fd;
	int		 mode;		/* LB_RDONLY or LB_RDWR */
	uint64_t	 off;		/* reader: next record; writer: end of the good records */
	uint8_t		*buf;		/* reader: the last record read */
	size_t		 cap;
};

static void
fhdr_put(uint8_t *h)
{
	memset(h, 0, LB_DL_FHDR_SIZE);
	lb_put32(h + LB_DL_FHDR_MAGIC, LB_DL_MAGIC);
	lb_put32(h + LB_DL_FHDR_VERSION, LB_DL_VERSION);
	lb_put32(h + LB_DL_FHDR_CRC, lb_crc32(h, LB_DL_FHDR_CRC));
}

static int
fhdr_check(const uint8_t *h)
{
	if (lb_get32(h + LB_DL_FHDR_MAGIC) != LB_DL_MAGIC ||
	    lb_get32(h + LB_DL_FHDR_CRC) != lb_crc32(h, LB_DL_FHDR_CRC))
		return (LB_EFORMAT);
	if (lb_get32(h + LB_DL_FHDR_VERSION) != LB_DL_VERSION)
		return (LB_EFORMAT);
	return (0);
}

void
lb_dl_close(struct lb_dl *dl)
{
	if (dl == NULL)
		return;
	if (dl->fd != -1)
		close(dl->fd);
	free(dl->buf);
	free(dl);
}

/* Reads the record at dl->off into dl->buf: its body length, or an error (LB_ENOTFOUND: end). */
static int
rec_load(struct lb_dl *dl, uint64_t size, size_t *bodylen)
{
	uint8_t	 h[LB_DL_RHDR_SIZE];
	size_t	 n;
	int	 rc;

	if (dl->off == size)
		return (LB_ENOTFOUND);
	if (size - dl->off < LB_DL_RHDR_SIZE)
		return (LB_ECORRUPT);
	if ((rc = lb_pread_all(dl->fd, h, sizeof(h), dl->off)) != 0)
		return (rc);
	n = lb_get32(h + LB_DL_RHDR_LEN);
	if (lb_get32(h + LB_DL_RHDR_MAGIC) != LB_DL_REC_MAGIC || n < LB_DL_BODY_MIN ||
	    n > LB_DL_BODY_MAX || size - dl->off - LB_DL_RHDR_SIZE < n)
		return (LB_ECORRUPT);
	if (n > dl->cap) {
		uint8_t *nb;

		if ((nb = realloc(dl->buf, n)) == NULL)
			return (ENOMEM);
		dl->buf = nb;
		dl->cap = n;
	}
	if ((rc = lb_pread_all(dl->fd, dl->buf, n, dl->off + LB_DL_RHDR_SIZE)) != 0)
		return (rc);
	if (lb_crc32(dl->buf, n) != lb_get32(h + LB_DL_RHDR_CRC))
		return (LB_ECORRUPT);
	*bodylen = n;
	return (0);
}

int
lb_dl_open(const char *path, int mode, struct lb_dl **out)
{
	struct lb_dl	*dl;
	uint8_t		 h[LB_DL_FHDR_SIZE];
	off_t		 size;
	size_t		 n;
	int		 rc;

	if ((dl = calloc(1, sizeof(*dl))) == NULL)
		return (errno);
	dl->mode = mode;
	dl->fd = open(path, mode == LB_RDWR ? O_RDWR | O_CREAT | O_CLOEXEC :
	    O_RDONLY | O_CLOEXEC, 0640);
	if (dl->fd == -1) {
		rc = errno == ENOENT ? LB_ENOTFOUND : errno;
		goto fail;
	}
	if ((size = lseek(dl->fd, 0, SEEK_END)) == -1) {
		rc = errno;
		goto fail;
	}
	if (size < LB_DL_FHDR_SIZE && mode == LB_RDWR) {
		/* New (or torn while being created): a header, made durable. */
		fhdr_put(h);
		if (ftruncate(dl->fd, 0) == -1 || pwrite(dl->fd, h, sizeof(h), 0) !=
		    (ssize_t)sizeof(h) || fdatasync(dl->fd) == -1) {
			rc = errno ? errno : EIO;
			goto fail;
		}
		size = LB_DL_FHDR_SIZE;
	} else {
		if (size < LB_DL_FHDR_SIZE) {
			rc = LB_EFORMAT;
			goto fail;
		}
		if ((rc = lb_pread_all(dl->fd, h, sizeof(h), 0)) != 0 ||
		    (rc = fhdr_check(h)) != 0)
			goto fail;
	}
	dl->off = LB_DL_FHDR_SIZE;
	if (mode == LB_RDWR) {
		/* Find the end of the good records; cut a torn or damaged tail. */
		while ((rc = rec_load(dl, (uint64_t)size, &n)) == 0)
			dl->off += LB_DL_RHDR_SIZE + n;
		if (rc != LB_ENOTFOUND && rc != LB_ECORRUPT)
			goto fail;
		if (dl->off != (uint64_t)size && (ftruncate(dl->fd, (off_t)dl->off) == -1 ||
		    fdatasync(dl->fd) == -1)) {
			rc = errno;
			goto fail;
		}
	}
	*out = dl;
	return (0);
 fail:
	lb_dl_close(dl);
	return (rc);
}

int
lb_dl_append(struct lb_dl *dl, const struct lb_dlrec *r)
{
	uint8_t	*b, *p;
	size_t	 inl = r->input.len, why = r->reason.len, n;
	int	 rc;

	if (dl->mode != LB_RDWR)
		return (EBADF);
	if (inl > 0xffff)
		inl = 0xffff;
	if (why > 0xffff)
		why = 0xffff;
	n = LB_DL_BODY_MIN + inl + why + r->frame.len;
	if (r->frame.len > LB_DL_FRAME_MAX || strlen(r->ls) > LB_NAME_MAX)
		return (LB_ETOOBIG);
	if ((b = malloc(LB_DL_RHDR_SIZE + n)) == NULL)
		return (errno);
	p = b + LB_DL_RHDR_SIZE;
	lb_put64(p, (uint64_t)r->when);
	lb_put64(p + 8, (uint64_t)r->received);
	lb_put32(p + 16, (uint32_t)r->code);
	lb_put64(p + 20, r->batch);
	lb_put32(p + 28, r->batch_crc);
	lb_put32(p + 32, r->index);
	memset(p + 36, 0, LB_NAME_MAX);
	memcpy(p + 36, r->ls, strlen(r->ls));
	p += 36 + LB_NAME_MAX;
	p[0] = (uint8_t)inl;
	p[1] = (uint8_t)(inl >> 8);
	memcpy(p + 2, r->input.p, inl);
	p += 2 + inl;
	p[0] = (uint8_t)why;
	p[1] = (uint8_t)(why >> 8);
	memcpy(p + 2, r->reason.p, why);
	p += 2 + why;
	lb_put32(p, (uint32_t)r->frame.len);
	if (r->frame.len > 0)
		memcpy(p + 4, r->frame.p, r->frame.len);
	lb_put32(b + LB_DL_RHDR_MAGIC, LB_DL_REC_MAGIC);
	lb_put32(b + LB_DL_RHDR_LEN, (uint32_t)n);
	lb_put32(b + LB_DL_RHDR_CRC, lb_crc32(b + LB_DL_RHDR_SIZE, n));
	/* One pwrite at the end of the good records: a kill leaves it whole or torn (cut off). */
	if (pwrite(dl->fd, b, LB_DL_RHDR_SIZE + n, (off_t)dl->off) !=
	    (ssize_t)(LB_DL_RHDR_SIZE + n))
		rc = errno ? errno : ENOSPC;
	else if (fdatasync(dl->fd) == -1)
		rc = errno;
	else {
		dl->off += LB_DL_RHDR_SIZE + n;
		rc = 0;
	}
	free(b);
	return (rc);
}

int
lb_dl_next(struct lb_dl *dl, struct lb_dlrec *r)
{
	const uint8_t	*p;
	off_t		 size;
	size_t		 n, k;
	int		 rc;

	if ((size = lseek(dl->fd, 0, SEEK_END)) == -1)
		return (errno);
	if ((rc = rec_load(dl, (uint64_t)size, &n)) != 0)
		return (rc);
	p = dl->buf;
	memset(r, 0, sizeof(*r));
	r->when = (int64_t)lb_get64(p);
	r->received = (int64_t)lb_get64(p + 8);
	r->code = (int32_t)lb_get32(p + 16);
	r->batch = lb_get64(p + 20);
	r->batch_crc = lb_get32(p + 28);
	r->index = lb_get32(p + 32);
	memcpy(r->ls, p + 36, LB_NAME_MAX);
	r->ls[LB_NAME_MAX] = '\0';
	k = 36 + LB_NAME_MAX;
	r->input.len = (size_t)p[k] | (size_t)p[k + 1] << 8;
	r->input.p = p + k + 2;
	k += 2 + r->input.len;
	if (k + 2 > n)
		return (LB_ECORRUPT);
	r->reason.len = (size_t)p[k] | (size_t)p[k + 1] << 8;
	r->reason.p = p + k + 2;
	k += 2 + r->reason.len;
	if (k + 4 > n || lb_get32(p + k) != n - k - 4)
		return (LB_ECORRUPT);
	r->frame.len = n - k - 4;
	r->frame.p = p + k + 4;
	r->offset = dl->off;
	dl->off += LB_DL_RHDR_SIZE + n;
	return (0);
}
