/*
 * state.c — the intent record in <data>/indexd/state (FORMAT.md §11.3). It owns the bytes of
 * the record and nothing of the protocol around it (fifo.c). The file has a fixed size and is
 * rewritten in place with one pwrite(2) per change: the record says "the first m bytes of the
 * FIFO, with this checksum, are being stored; these logspaces had these next ids before". A
 * kill -9 cannot tear one pwrite of a page-cache file; a power cut can, and the checksum then
 * makes the record read as "no batch in progress" — after a power cut the FIFO's bytes are gone
 * anyway.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "indexd.h"
#include "lb_util.h"

/* zlib's crc32() continues a CRC (lb_crc32 is the same function from 0). */
static uint32_t
crc32_more(uint32_t crc, const uint8_t *p, size_t len)
{
	return ((uint32_t)crc32(crc, p, (uInt)len));
}

/* Writes all len bytes of p at off (retrying short writes and EINTR); 0 or an errno. */
int
pwrite_all(int fd, const uint8_t *p, size_t len, off_t off)
{
	ssize_t n;

	while (len > 0) {
		if ((n = pwrite(fd, p, len, off)) == -1) {
			if (errno == EINTR)
				continue;
			return (errno);
		}
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return (0);
}

/* Opens (creating, at full size) <data>/indexd/state. */
int
state_open(const char *data, int *fdp)
{
	char		path[PATH_MAX];
	struct ix_intent it;
	off_t		size;
	int		fd, rc;

	if ((rc = lb_path(path, sizeof(path), "%s/indexd/state", data)) != 0)
		return (rc);
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640)) == -1)
		return (errno);
	if ((size = lseek(fd, 0, SEEK_END)) == -1) {
		rc = errno;
		close(fd);
		return (rc);
	}
	if (size < IX_STATE_SIZE) {
		/* A new file: write an empty record at full size, so later pwrites never allocate. */
		memset(&it, 0, sizeof(it));
		if (size == 0 && (rc = state_write(fd, &it)) != 0) {
			close(fd);
			return (rc);
		}
		if (ftruncate(fd, IX_STATE_SIZE) == -1 || fsync(fd) == -1) {
			rc = errno;
			close(fd);
			return (rc);
		}
	}
	*fdp = fd;
	return (0);
}

/*
 * Reads the record into *it. LB_ECORRUPT for a bad checksum, LB_EFORMAT for another magic or
 * version; the caller then treats the file as holding no batch.
 */
int
state_read(int fd, struct ix_intent *it)
{
	uint8_t		 b[IX_STATE_SIZE];
	struct ix_intent t;
	size_t		 n;
	uint32_t	 crc;
	int		 rc;

	memset(b, 0, sizeof(b));
	if ((rc = lb_pread_all(fd, b, IX_STATE_HDR, 0)) != 0)
		return (rc);
	if (memcmp(b, IX_STATE_MAGIC, 8) != 0 || lb_get32(b + 8) != IX_STATE_VERSION)
		return (LB_EFORMAT);
	n = lb_get32(b + 12);
	if (n > IX_STATE_LS)
		return (LB_ECORRUPT);
	if (n > 0 && (rc = lb_pread_all(fd, b + IX_STATE_HDR, n * IX_STATE_ENTRY,
	    IX_STATE_HDR)) != 0)
		return (rc);
	crc = lb_crc32(b, IX_STATE_HDR - 4);
	if (n > 0)
		crc = crc32_more(crc, b + IX_STATE_HDR, n * IX_STATE_ENTRY);
	if (crc != lb_get32(b + IX_STATE_HDR - 4))
		return (LB_ECORRUPT);
	memset(&t, 0, sizeof(t));
	t.nls = (uint32_t)n;
	t.seq = lb_get64(b + 16);
	t.m = lb_get32(b + 24);
	t.crc = lb_get32(b + 28);
	memcpy(t.head, b + 32, IX_STATE_HEAD);
	if (t.m > IX_VIEW_MAX)
		return (LB_ECORRUPT);
	for (size_t i = 0; i < n; i++) {
		const uint8_t *e = b + IX_STATE_HDR + i * IX_STATE_ENTRY;

		if (e[LB_NAME_MAX] != 0 || e[0] == 0)
			return (LB_ECORRUPT);
		memcpy(t.ls[i].name, e, LB_NAME_MAX);
		t.ls[i].name[LB_NAME_MAX] = '\0';
		t.ls[i].before = lb_get64(e + LB_NAME_MAX + 8);
	}
	*it = t;
	return (0);
}

/* Writes *it with one pwrite: the header and the nls entries (the rest of the file stays). */
int
state_write(int fd, const struct ix_intent *it)
{
	uint8_t		b[IX_STATE_SIZE];
	size_t		n = it->nls, len;
	uint32_t	crc;

	if (n > IX_STATE_LS)
		return (EINVAL);
	len = IX_STATE_HDR + n * IX_STATE_ENTRY;
	memset(b, 0, len);
	memcpy(b, IX_STATE_MAGIC, 8);
	lb_put32(b + 8, IX_STATE_VERSION);
	lb_put32(b + 12, (uint32_t)n);
	lb_put64(b + 16, it->seq);
	lb_put32(b + 24, it->m);
	lb_put32(b + 28, it->crc);
	memcpy(b + 32, it->head, IX_STATE_HEAD);
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = b + IX_STATE_HDR + i * IX_STATE_ENTRY;

		memcpy(e, it->ls[i].name, strnlen(it->ls[i].name, LB_NAME_MAX));
		lb_put64(e + LB_NAME_MAX + 8, it->ls[i].before);
	}
	crc = lb_crc32(b, IX_STATE_HDR - 4);
	if (n > 0)
		crc = crc32_more(crc, b + IX_STATE_HDR, n * IX_STATE_ENTRY);
	lb_put32(b + IX_STATE_HDR - 4, crc);
	return (pwrite_all(fd, b, len, 0));
}
