/*
 * lb_util.c — the helpers behind lb_util.h. Nothing here knows a file format; it only grows
 * arrays and makes writes whole and durable and paths safe.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <isa-l/crc.h>
#include <isa-l/igzip_lib.h>

#include "logbox.h"
#include "lb_util.h"

uint32_t
lb_crc32(const void *p, size_t len)
{
	/* ISA-L's CRC-32: the same polynomial and values as zlib's crc32(), several times faster. */
	return (crc32_gzip_refl(0, p, len));
}

uint32_t
lb_crc32_update(uint32_t crc, const void *p, size_t len)
{
	return (crc32_gzip_refl(crc, p, len));
}

int
lb_grow(void *pp, size_t *cap, size_t need, size_t elem)
{
	void	*p;
	size_t	 n = *cap ? *cap : 64;

	if (need <= *cap)
		return (0);
	while (n < need)
		n *= 2;
	if ((p = realloc(*(void **)pp, n * elem)) == NULL)
		return (ENOMEM);
	*(void **)pp = p;
	*cap = n;
	return (0);
}

int
lb_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		if ((n = pwrite(fd, p, len, (off_t)off)) == -1) {
			if (errno == EINTR)
				continue;
			return (errno);
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return (0);
}

int
lb_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t	*p = buf;
	ssize_t		 n;

	while (len > 0) {
		if ((n = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			return (errno);
		}
		p += n;
		len -= (size_t)n;
	}
	return (0);
}

int
lb_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t	*p = buf;
	ssize_t	 n;

	while (len > 0) {
		if ((n = pread(fd, p, len, (off_t)off)) == -1) {
			if (errno == EINTR)
				continue;
			return (errno);
		}
		if (n == 0)
			return (LB_ECORRUPT);
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return (0);
}

int
lb_fsync_dir(const char *dir)
{
	int fd, rc = 0;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1)
		return (errno);
	if (fsync(fd) == -1)
		rc = errno;
	close(fd);
	return (rc);
}

int
lb_mkdirs(const char *path)
{
	char	 buf[4096];
	size_t	 len = strlen(path);

	if (len == 0 || len >= sizeof(buf))
		return (ENAMETOOLONG);
	memcpy(buf, path, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0750) == -1 && errno != EEXIST)
			return (errno);
		buf[i] = path[i];
	}
	return (0);
}

int
lb_path(char *buf, size_t len, const char *fmt, ...)
{
	va_list	ap;
	int	n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len)
		return (ENAMETOOLONG);
	return (0);
}

void
lb_setwhy(char *why, size_t len, const char *fmt, ...)
{
	va_list	ap;

	if (why == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

int
lb_inflate_raw(struct inflate_state **state, const uint8_t *src, size_t srclen, uint8_t *dst,
    size_t dstlen)
{
	struct inflate_state	*st = *state;

	if (srclen > UINT32_MAX || dstlen > UINT32_MAX)
		return (LB_ECORRUPT);
	if (st == NULL && (st = *state = malloc(sizeof(*st))) == NULL)
		return (ENOMEM);
	isal_inflate_init(st);
	st->crc_flag = ISAL_DEFLATE;
	st->next_in = (uint8_t *)(uintptr_t)src;
	st->avail_in = (uint32_t)srclen;
	st->next_out = dst;
	st->avail_out = (uint32_t)dstlen;
	if (isal_inflate_stateless(st) != ISAL_DECOMP_OK || st->avail_in != 0 ||
	    st->avail_out != 0)
		return (LB_ECORRUPT);
	return (0);
}
