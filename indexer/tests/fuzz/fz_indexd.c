/*
 * fz_indexd.c — random frames and messages through indexd's own FIFO input path: the bytes go
 * into a pipe that fifo_init() reads as its FIFO, and fifo_resume() runs the very code indexd
 * runs on it (tee, frame decoding, logspace routing, the intent record, appends through the
 * store, quarantine, commit, consume). indexd's sources are linked in with main() renamed away
 * (Makefile), so nothing is copied. Asserts that indexd never holds on per-message input, never
 * crashes, stores every valid frame whose message the store can take (receive time up to
 * LB_RECEIVED_MAX) and quarantines exactly the others.
 *
 * The first byte picks the mode: raw (the rest is the byte stream, as a collector would write
 * it; at most the logspaces "main", "a", "b", so that stores do not pile up), or messages (the
 * rest is cut at 0xff bytes into messages whose header fields, oversized as the first byte of
 * each says, are encoded as frames with lb_frame_encode, some with a receive time past
 * LB_RECEIVED_MAX); in that mode every stored message is read back and checked to be cut and
 * flagged as FORMAT.md §2 says.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "lb_util.h"
#include "fz_indexd_env.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define T0		(1795359974LL * 1000000)
#define BAD_RTIME	(LB_RECEIVED_MAX + 1000000)
#define ENC_MAX		(900 * 1024)	/* bytes encoded in message mode (the pipe holds 1 MiB) */

static int		 wfd = -1;

/* indexd's start-up with the FIFO input on a pipe (main.c does the same). */
static void
setup(void)
{
	int		 p[2];

	fz_indexd_start("fz_indexd");
	assert(pipe2(p, O_CLOEXEC) == 0);
	wfd = p[1];
	(void)fcntl(wfd, F_SETPIPE_SZ, IX_PIPE_SIZE);
	assert(fifo_init(&env, p[0], 1) == 0);
	assert(env.fifo.view_max >= ENC_MAX + 70000);
	fifo_recover(&env);
}

/* What batch_build() will make of buf: the valid frames up to the first incomplete or
 * too big one. -1 when a frame names a logspace this target does not allow. */
static int
oracle(const uint8_t *buf, size_t len, uint64_t *good, uint64_t *bad)
{
	struct lb_frame	 f;
	const char	*why;
	size_t		 pos = 0, need;
	int		 rc;

	*good = *bad = 0;
	while (pos < len) {
		rc = lb_frame_decode(buf + pos, len - pos, LB_FRAME_MAX, &f, &need, &why);
		if (rc == EAGAIN || rc == LB_ETOOBIG)
			break;
		if (rc != 0) {
			pos += lb_frame_resync(buf + pos, len - pos, 1);
			continue;
		}
		pos += f.size;
		if (!lb_logspace_name_ok(f.ls.p, f.ls.len, &why))
			continue;
		if (!((f.ls.len == 4 && memcmp(f.ls.p, "main", 4) == 0) ||
		    (f.ls.len == 1 && (f.ls.p[0] == 'a' || f.ls.p[0] == 'b'))))
			return (-1);
		if (f.msg.received > LB_RECEIVED_MAX)
			(*bad)++;
		else
			(*good)++;
	}
	return (0);
}

/* Writes buf into the pipe and lets indexd's FIFO code take it; then drops what is left. */
static void
feed(const uint8_t *buf, size_t len)
{
	uint8_t	 junk[65536];
	ssize_t	 n;
	size_t	 off = 0;
	uint64_t before;
	int	 fl;

	while (off < len) {
		n = write(wfd, buf + off, len - off);
		assert(n > 0);
		off += (size_t)n;
	}
	do {
		before = env.fifo.in->in_bytes;
		assert(fifo_resume(&env) == 0);
		assert(env.holding[0] == '\0');
	} while (env.fifo.in->in_bytes != before);
	/* An incomplete frame, or one being streamed, at the end: start the next input clean. */
	fl = fcntl(env.fifo.in->in_fd, F_GETFL);
	assert(fcntl(env.fifo.in->in_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	while ((n = read(env.fifo.in->in_fd, junk, sizeof(junk))) > 0)
		;
	bigframe_reset(&env.fifo.big);
	env.fifo.big_pending = 0;
}

/* Message mode: frames for the messages in data, with their expected flags. */
static size_t
encode(const uint8_t *data, size_t size, uint8_t **buf, uint64_t *good, uint64_t *bad,
    uint8_t *cutm, size_t *nm, uint8_t *cuta, size_t *na)
{
	static uint8_t	 fill[70000];
	size_t		 len = 0, cap = 0, pos = 0, k = 0;

	memset(fill, 'F', sizeof(fill));
	*good = *bad = 0;
	*nm = *na = 0;
	while (pos < size && len < ENC_MAX) {
		const uint8_t	*end = memchr(data + pos, 0xff, size - pos);
		size_t		 n = (end != NULL ? (size_t)(end - data) : size) - pos;
		const uint8_t	*p = data + pos;
		uint8_t		 how = n > 0 ? p[0] : 0;
		struct lb_msg	 m;
		struct lb_slice	*fld[5];
		const size_t	 big[5] = { 4096, 4096, 4096, 4096, 65536 };
		const size_t	 lim[5] = { LB_FIELD_MAX, LB_FIELD_MAX, LB_FIELD_MAX, LB_FIELD_MAX,
				    LB_SD_MAX };
		int		 cut = 0;

		memset(&m, 0, sizeof(m));
		m.received = (how & 0x80) ? BAD_RTIME : T0 + (int64_t)k;
		m.timestamp = LB_NOTIME;
		m.facility = m.severity = LB_NOVALUE;
		fld[0] = &m.host;
		fld[1] = &m.program;
		fld[2] = &m.pid;
		fld[3] = &m.msgid;
		fld[4] = &m.sd;
		if (n > 1)
			memcpy(fill, p + 1, n - 1 < 64 ? n - 1 : 64);
		for (int i = 0; i < 5; i++) {
			if (how & (1u << i)) {
				/* Oversized, up to a frame's largest: the limit +1 .. +4096. */
				fld[i]->p = fill;
				fld[i]->len = lim[i] + 1 + (n * 131 + (size_t)i) % (big[i] - lim[i]);
				cut = 1;
			} else {
				fld[i]->p = p;
				fld[i]->len = n < 8 ? n : 8;
			}
		}
		m.message.p = p;
		m.message.len = n;
		if (lb_frame_encode(&m, (how & 0x40) ? "a" : "main", buf, &len, &cap) == 0) {
			if (how & 0x80)
				(*bad)++;
			else {
				(*good)++;
				if (how & 0x40)
					cuta[(*na)++] = (uint8_t)cut;
				else
					cutm[(*nm)++] = (uint8_t)cut;
			}
		}
		k++;
		pos += n + 1;
	}
	return (len);
}

static struct lspace *
lsp(const char *name)
{
	for (size_t i = 0; i < env.nls; i++)
		if (strcmp(env.ls[i]->name, name) == 0)
			return (env.ls[i]);
	return (NULL);
}

/* The n messages of l from id first on: within the limits, flagged as cut[] says. */
static void
readback(struct lspace *l, uint64_t first, const uint8_t *cut, size_t n)
{
	struct lb_msg	m;

	assert(n == 0 || (l != NULL && l->next_id == first + n));
	for (size_t i = 0; i < n; i++) {
		assert(lb_store_get(l->st, first + i, &m) == 0);
		assert(m.host.len <= LB_FIELD_MAX && m.program.len <= LB_FIELD_MAX);
		assert(m.pid.len <= LB_FIELD_MAX && m.msgid.len <= LB_FIELD_MAX);
		assert(m.sd.len <= LB_SD_MAX && m.message.len <= LB_MSG_MAX);
		assert(!!(m.flags & LB_MSG_FIELDCUT) == cut[i]);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t	 cutm[70000], cuta[70000];
	uint8_t		*buf = NULL;
	uint64_t	 good, bad, stored0, quar0, main0, a0;
	struct lspace	*l;
	size_t		 len, nm, na;

	if (env.base_ev == NULL)
		setup();
	if (size == 0)
		return (0);
	stored0 = env.stored;
	quar0 = env.quarantined;
	/* (A logspace not open yet is new in this fresh directory: its first id is 1.) */
	main0 = (l = lsp("main")) != NULL ? l->next_id : 1;
	a0 = (l = lsp("a")) != NULL ? l->next_id : 1;
	if (data[0] & 1) {
		if (oracle(data + 1, size - 1, &good, &bad) != 0)
			return (0);
		feed(data + 1, size - 1);
		assert(env.stored - stored0 == good);
		assert(env.quarantined - quar0 == bad);
		return (0);
	}
	len = encode(data + 1, size - 1, &buf, &good, &bad, cutm, &nm, cuta, &na);
	feed(buf, len);
	free(buf);
	assert(env.stored - stored0 == good);
	assert(env.quarantined - quar0 == bad);
	readback(lsp("main"), main0, cutm, nm);
	readback(lsp("a"), a0, cuta, na);
	return (0);
}
