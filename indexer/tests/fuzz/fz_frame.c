/*
 * fz_frame.c — arbitrary bytes through lb_frame_decode() with resynchronisation, as indexd reads
 * a stream. Checks that every slice stays inside the input, that each step makes progress, that
 * a decoded frame's invariants hold, and that re-encoding a decoded frame and decoding it again
 * gives the same fields (the encoder and decoder agree).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "logbox.h"
#include "lb_format.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
in_range(const struct lb_slice *s, const uint8_t *lo, const uint8_t *hi)
{
	if (s->len > 0)
		assert(s->p >= lo && s->p + s->len <= hi);
}

static void
same(const struct lb_slice *a, const struct lb_slice *b)
{
	assert(a->len == b->len);
	assert(a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

static void
check(const struct lb_frame *f, const uint8_t *lo, const uint8_t *hi)
{
	struct lb_frame	 g;
	uint8_t		*buf = NULL;
	size_t		 len = 0, cap = 0, need;
	const char	*why;
	struct lb_msg	 m = f->msg;

	in_range(&f->ls, lo, hi);
	in_range(&f->msg.host, lo, hi);
	in_range(&f->msg.program, lo, hi);
	in_range(&f->msg.pid, lo, hi);
	in_range(&f->msg.msgid, lo, hi);
	in_range(&f->msg.sd, lo, hi);
	in_range(&f->msg.message, lo, hi);
	assert(f->ls.len >= 1 && f->ls.len <= LB_NAME_MAX);
	assert(f->msg.message.len <= LB_MSG_MAX);
	assert(f->hdr <= LB_FRAME_HDR_MAX && f->hdr < f->size);
	assert((f->msg.facility == LB_NOVALUE) == (f->msg.severity == LB_NOVALUE));
	assert(f->msg.facility == LB_NOVALUE || (f->msg.facility <= 23 && f->msg.severity <= 7));

	char ls[LB_NAME_MAX + 1];
	memcpy(ls, f->ls.p, f->ls.len);
	ls[f->ls.len] = '\0';
	assert(lb_frame_encode(&m, ls, &buf, &len, &cap) == 0);
	assert(lb_frame_decode(buf, len, LB_FRAME_MAX, &g, &need, &why) == 0);
	assert(g.size == len);
	assert(g.msg.received == m.received && g.msg.timestamp == m.timestamp);
	assert(g.msg.tzoff == m.tzoff && g.msg.facility == m.facility);
	assert(g.msg.severity == m.severity);
	assert(g.msg.flags == (m.flags & ~LB_MSG_TRUNCATED));
	same(&g.ls, &f->ls);
	same(&g.msg.host, &m.host);
	same(&g.msg.program, &m.program);
	same(&g.msg.pid, &m.pid);
	same(&g.msg.msgid, &m.msgid);
	same(&g.msg.sd, &m.sd);
	same(&g.msg.message, &m.message);
	free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t		 off = 0, max = size > 0 && (data[0] & 1) ? 64 : LB_FRAME_MAX;

	while (off < size) {
		struct lb_frame	 f;
		const char	*why = NULL;
		size_t		 need = 0, next;
		int		 rc;

		rc = lb_frame_decode(data + off, size - off, max, &f, &need, &why);
		if (rc == 0) {
			assert(f.size <= size - off);
			check(&f, data + off, data + size);
			off += f.size;
		} else if (rc == EAGAIN) {
			assert(need == 0 || need > size - off);
			break;
		} else if (rc == LB_ETOOBIG) {
			assert(need > max);
			off += need < size - off ? need : size - off;
		} else {
			assert(rc == LB_EPARSE && why != NULL);
			next = lb_frame_resync(data, size, off + 1);
			assert(next > off && next <= size);
			off = next;
		}
	}
	return (0);
}
