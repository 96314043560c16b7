/*
 * fz_msgfile.c — the message file readers on arbitrary bytes. An input is
 * [u8 flags][u16 LE n][n bytes of "messages"][the rest: "messages.wal"] (n is clamped to the
 * input). With flags bit 0 the harness first rewrites every checksum it can find (file
 * headers, block headers and payloads, WAL frames) so that the fuzzer also reaches the
 * decompressor and the record decoder behind them.
 * Both files are written into a scratch directory; a reader opens them and gets every id it
 * says it has, then verifies; then a writer recovers them, reads everything back, appends one
 * message and reads it back. Nothing may crash, leak, or hand back a message that differs
 * from the one appended.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"

#define MAX_GETS	20000

static char	 dir[256];

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Makes every checksum of messages m[0..ml) and WAL w[0..wl) match what it covers. */
static void
fix_crcs(uint8_t *m, size_t ml, uint8_t *w, size_t wl)
{
	size_t	 off;

	if (ml >= LB_FHDR_SIZE)
		lb_put32(m + LB_FHDR_CRC, lb_crc32(m, LB_FHDR_CRC));
	for (off = LB_FHDR_SIZE; off + LB_BHDR_SIZE <= ml; ) {
		uint32_t comp = lb_get32(m + off + LB_BHDR_COMP_LEN);

		if (comp > ml - off - LB_BHDR_SIZE)
			break;
		lb_put32(m + off + LB_BHDR_PAYLOAD_CRC, lb_crc32(m + off + LB_BHDR_SIZE, comp));
		lb_put32(m + off + LB_BHDR_CRC, lb_crc32(m + off, LB_BHDR_CRC));
		off += LB_BHDR_SIZE + comp;
	}
	if (wl >= LB_FHDR_SIZE)
		lb_put32(w + LB_FHDR_CRC, lb_crc32(w, LB_FHDR_CRC));
	for (off = LB_FHDR_SIZE; off + LB_WREC_HDR <= wl; ) {
		uint32_t blen = lb_get32(w + off);

		if (blen > wl - off - LB_WREC_HDR)
			break;
		lb_put32(w + off + 4, lb_crc32(w + off + LB_WREC_HDR, blen));
		off += LB_WREC_HDR + blen;
	}
}

static void
put(const char *name, const uint8_t *p, size_t len)
{
	char	 path[512];
	int	 fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) == -1)
		abort();
	if (len > 0 && write(fd, p, len) != (ssize_t)len)
		abort();
	close(fd);
}

static void
read_all(struct lb_msgfile *mf)
{
	struct lb_msg	 m;
	uint64_t	 first, next, disk, raw;
	char		 why[200];
	int		 rc;

	lb_msgfile_range(mf, &first, &next);
	if (next < first)
		abort();
	for (uint64_t id = first; id < next && id - first < MAX_GETS; id++) {
		rc = lb_msgfile_get(mf, id, &m);
		if (rc == 0 && (m.id != id || m.message.len > LB_MSG_MAX ||
		    m.host.len > LB_FIELD_MAX || m.sd.len > LB_SD_MAX ||
		    m.peer.len > LB_FIELD_MAX || (m.flags & LB_MSG_PEER)))
			abort();
		if (rc != 0 && rc != LB_ECORRUPT && rc != LB_ENOTFOUND)
			abort();
	}
	if (first > 0 && lb_msgfile_get(mf, first - 1, &m) != LB_ENOTFOUND)
		abort();
	(void)lb_msgfile_verify(mf, why, sizeof(why));
	lb_msgfile_sizes(mf, &disk, &raw);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lb_msgfile	*mf;
	struct lb_msg		 m, got;
	uint64_t		 first, next;
	size_t			 n;
	uint8_t			*buf, flags;
	char			 path[512];

	if (dir[0] == '\0') {
		struct stat	 st;
		const char	*t = stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp";

		snprintf(dir, sizeof(dir), "%s/fz_msgfile.XXXXXX", t);
		if (mkdtemp(dir) == NULL)
			abort();
	}
	if (size < 3)
		return (0);
	flags = data[0];
	n = (size_t)(data[1] | data[2] << 8);
	data += 3;
	size -= 3;
	if (n > size)
		n = size;
	if ((buf = malloc(size + 1)) == NULL)
		return (0);
	memcpy(buf, data, size);
	if (flags & 1)
		fix_crcs(buf, n, buf + n, size - n);
	put(LB_FILE_MESSAGES, buf, n);
	put(LB_FILE_WAL, buf + n, size - n);
	free(buf);
	snprintf(path, sizeof(path), "%s/%s.tmp", dir, LB_FILE_WAL);
	unlink(path);

	if (lb_msgfile_open(dir, LB_RDONLY, 0, &mf) == 0) {
		read_all(mf);
		lb_msgfile_close(mf);
	}
	if (lb_msgfile_open(dir, LB_RDWR, 1, &mf) == 0) {
		read_all(mf);
		lb_msgfile_range(mf, &first, &next);
		memset(&m, 0, sizeof(m));
		m.id = next;
		m.received = 1;
		m.timestamp = LB_NOTIME;
		m.host = (struct lb_slice){ (const uint8_t *)"h", 1 };
		m.message = (struct lb_slice){ (const uint8_t *)"x\0y", 3 };
		if (next % 3 != 0)	/* with a peer, and without */
			m.peer = (struct lb_slice){ (const uint8_t *)"10.0.0.7", 8 };
		if (lb_msgfile_append(mf, &m) == 0) {
			if (lb_msgfile_get(mf, next, &got) != 0 || got.id != next ||
			    got.message.len != 3 || memcmp(got.message.p, "x\0y", 3) != 0 ||
			    got.host.len != 1 || got.received != 1 || got.timestamp != LB_NOTIME ||
			    got.peer.len != m.peer.len || got.flags != 0 ||
			    (m.peer.len > 0 && memcmp(got.peer.p, "10.0.0.7", 8) != 0))
				abort();
			if (lb_msgfile_commit(mf, 0) != 0)
				abort();
			if (next % 2 == 0 && lb_msgfile_seal(mf) == 0 &&
			    (lb_msgfile_get(mf, next, &got) != 0 || got.message.len != 3))
				abort();
		}
		lb_msgfile_close(mf);
	}
	return (0);
}
