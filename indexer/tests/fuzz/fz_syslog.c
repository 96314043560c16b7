/*
 * fz_syslog.c — arbitrary bytes through lb_syslog_frame_next() (both framings, eof 0 and 1,
 * a small and a large limit) and every frame through lb_syslog_parse(). Checks that frames and every
 * slice stay inside the input, that each call makes progress, and the lb_msg invariants.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "logbox.h"
#include "lb_format.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
in_range(const struct lb_slice *s, const uint8_t *lo, const uint8_t *hi)
{
	assert(s->p != NULL || s->len == 0);
	if (s->len > 0)
		assert(s->p >= lo && s->p + s->len <= hi);
}

static void
check_msg(const uint8_t *p, size_t len, int64_t received)
{
	struct lb_msg	 m;
	size_t		 e = len;
	int		 kind;

	if (e > 0 && p[e - 1] == '\n')
		e--;
	if (e > 0 && p[e - 1] == '\r')
		e--;
	memset(&m, 0xa5, sizeof(m));
	lb_syslog_parse(p, len, received, &m);
	in_range(&m.host, p, p + len);
	in_range(&m.program, p, p + len);
	in_range(&m.pid, p, p + len);
	in_range(&m.msgid, p, p + len);
	in_range(&m.sd, p, p + len);
	in_range(&m.message, p, p + len);
	assert(m.host.len <= LB_FIELD_MAX && m.program.len <= LB_FIELD_MAX);
	assert(m.pid.len <= LB_FIELD_MAX && m.msgid.len <= LB_FIELD_MAX);
	assert(m.sd.len <= LB_SD_MAX && m.message.len <= LB_MSG_MAX);
	assert(m.id == 0 && m.received == received);
	assert(m.facility <= 23 && m.severity <= 7);
	kind = m.flags & (LB_MSG_RFC5424 | LB_MSG_RFC3164 | LB_MSG_NOHEADER);
	assert(kind == LB_MSG_RFC5424 || kind == LB_MSG_RFC3164 || kind == LB_MSG_NOHEADER);
	assert((m.flags & ~(LB_MSG_RFC5424 | LB_MSG_RFC3164 | LB_MSG_NOHEADER |
	    LB_MSG_TRUNCATED | LB_MSG_BADTIME | LB_MSG_FIELDCUT)) == 0);
	assert(((m.flags & LB_MSG_TRUNCATED) != 0) == (m.message.len == LB_MSG_MAX &&
	    m.message.p + m.message.len < p + e));
	if (m.flags & LB_MSG_BADTIME)
		assert(m.timestamp == LB_NOTIME && m.tzoff == 0);
	assert(m.tzoff > -24 * 60 && m.tzoff < 24 * 60);
	if (kind == LB_MSG_NOHEADER) {
		assert(m.facility == 1 && m.severity == 5 && m.flags == LB_MSG_NOHEADER);
		assert(m.timestamp == LB_NOTIME);
		assert(m.host.len + m.program.len + m.pid.len + m.msgid.len + m.sd.len == 0);
		assert(m.message.p == p || m.message.len == 0);
	}
	if (kind != LB_MSG_RFC5424)
		assert(m.msgid.len == 0 && m.sd.len == 0);
	/* The message is the tail of the input (minus the line end), possibly cut. */
	if (!(m.flags & LB_MSG_TRUNCATED) && m.message.len > 0) {
		assert(m.message.p + m.message.len == p + e);
	}
}

static void
walk(int framing, const uint8_t *data, size_t size, int eof, size_t max, int64_t received)
{
	struct lb_slice	 f;
	size_t		 off = 0, used;
	const uint8_t	*nl;
	int		 rc;

	while (off <= size) {
		used = (size_t)-1;
		rc = lb_syslog_frame_next(framing, data + off, size - off, eof, max, &f, &used);
		if (rc == 0) {
			assert(used > 0 && used <= size - off);
			in_range(&f, data + off, data + off + used);
			assert(f.len <= max);
			check_msg(f.p, f.len, received);
			off += used;
		} else if (rc == LB_ETOOBIG) {
			assert(used <= size - off);
			if (used == 0)
				break;
			off += used;
		} else if (rc == LB_EPARSE) {
			assert(framing == LB_FRAMING_OCTET);
			nl = memchr(data + off, '\n', size - off);
			if (nl == NULL)
				break;
			off = (size_t)(nl - data) + 1;
		} else {
			assert(rc == EAGAIN);
			break;
		}
	}
}

/*
 * The frames of data[0..size) when all of it is there at once, and when it arrives one byte at
 * a time, must be the same, and end with the same return.
 */
static void
split_same(int framing, const uint8_t *data, size_t size, size_t max)
{
	struct lb_slice	 f, g;
	size_t		 off = 0, off2 = 0, avail = 0, used, used2;
	int		 rc, rc2;

	for (;;) {
		rc = lb_syslog_frame_next(framing, data + off, size - off, 1, max, &f, &used);
		for (;;) {
			rc2 = lb_syslog_frame_next(framing, data + off2, avail - off2,
			    avail == size, max, &g, &used2);
			if (rc2 != EAGAIN || avail == size)
				break;
			avail++;
		}
		assert(rc == rc2);
		if (rc != 0)
			return;
		assert(used == used2 && f.p == g.p && f.len == g.len);
		off += used;
		off2 += used2;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int64_t		 received = 1700000000LL * 1000000;

	if (size > 0)
		received += (int64_t)data[0] * 86400 * 1000000 * 7;
	check_msg(data, size, received);
	check_msg(data, size, LB_NOTIME);
	for (int framing = 0; framing < 2; framing++)
		for (int eof = 0; eof < 2; eof++) {
			walk(framing, data, size, eof, 64, received);
			walk(framing, data, size, eof, LB_MSG_MAX, received);
		}
	if (size <= 4096)
		for (int framing = 0; framing < 2; framing++) {
			split_same(framing, data, size, 16);
			split_same(framing, data, size, LB_MSG_MAX);
		}
	return (0);
}
