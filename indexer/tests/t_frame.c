/*
 * t_frame.c — the hand-off frame (FORMAT.md §11): a frame as syslog-ng's template writes it,
 * encode → decode round trips of awkward messages (LF, NUL, non-UTF-8, empty and absent
 * fields, negative and fractional times), every split of a stream, each malformed header the
 * decoder must refuse (with its reason), truncation at LB_MSG_MAX, frames over the caller's
 * limit, and resynchronisation.
 */
#include <errno.h>
#include <stdlib.h>

#include "t_helper.h"
#include "lb_format.h"

static struct lb_slice
sl(const char *s, size_t n)
{
	struct lb_slice	 x = { (const uint8_t *)s, n };

	return (x);
}

static void
assert_slice(struct lb_slice a, const char *s, size_t n)
{
	assert_int_equal(a.len, n);
	if (n > 0)
		assert_memory_equal(a.p, s, n);
}

/* A frame exactly as the collector's template writes it (captured from syslog-ng 3.38). */
static void
t_syslog_ng(void **state)
{
	static const char fr[] =
	    "LB1 1795359974.984039 1065903255.003000 +02:00 165 5 4 21 8 0 4 53 34\n"
	    "mainmymachine.example.comevntslogID47"
	    "[exampleSDID@32473 iut=\"3\" eventSource=\"Application\"]"
	    "An app\nli\0cation event \xff log entry\n";
	struct lb_frame	 f;
	const char	*why = NULL;
	size_t		 need;

	(void)state;
	assert_ok(lb_frame_decode((const uint8_t *)fr, sizeof(fr) - 1, LB_FRAME_MAX, &f, &need,
	    &why));
	assert_int_equal(f.size, sizeof(fr) - 1);
	assert_int_equal(f.msg.received, 1795359974984039LL);
	assert_int_equal(f.msg.timestamp, 1065903255003000LL);
	assert_int_equal(f.msg.tzoff, 120);
	assert_int_equal(f.msg.facility, 20);
	assert_int_equal(f.msg.severity, 5);
	assert_int_equal(f.msg.flags, LB_MSG_RFC5424);
	assert_slice(f.ls, "main", 4);
	assert_slice(f.msg.host, "mymachine.example.com", 21);
	assert_slice(f.msg.program, "evntslog", 8);
	assert_slice(f.msg.pid, "", 0);
	assert_slice(f.msg.msgid, "ID47", 4);
	assert_int_equal(f.msg.sd.len, 53);
	assert_slice(f.msg.message, "An app\nli\0cation event \xff log entry", 34);
}

static void
roundtrip(const struct lb_msg *m, const char *ls)
{
	uint8_t		*buf = NULL;
	size_t		 len = 0, cap = 0, need;
	struct lb_frame	 f;
	const char	*why = NULL;

	assert_ok(lb_frame_encode(m, ls, &buf, &len, &cap));
	assert_ok(lb_frame_decode(buf, len, LB_FRAME_MAX, &f, &need, &why));
	assert_int_equal(f.size, len);
	assert_int_equal(f.msg.received, m->received);
	assert_int_equal(f.msg.timestamp, m->timestamp);
	assert_int_equal(f.msg.tzoff, m->tzoff);
	assert_int_equal(f.msg.facility, m->facility);
	assert_int_equal(f.msg.severity, m->severity);
	assert_int_equal(f.msg.flags, m->flags);
	assert_slice(f.ls, ls, strlen(ls));
	assert_slice(f.msg.host, (const char *)m->host.p, m->host.len);
	assert_slice(f.msg.program, (const char *)m->program.p, m->program.len);
	assert_slice(f.msg.pid, (const char *)m->pid.p, m->pid.len);
	assert_slice(f.msg.msgid, (const char *)m->msgid.p, m->msgid.len);
	assert_slice(f.msg.sd, (const char *)m->sd.p, m->sd.len);
	assert_slice(f.msg.message, (const char *)m->message.p, m->message.len);
	/* Every proper prefix is incomplete, never malformed. */
	for (size_t k = 0; k < len; k++)
		assert_int_equal(lb_frame_decode(buf, k, LB_FRAME_MAX, &f, &need, &why), EAGAIN);
	free(buf);
}

static void
t_roundtrip(void **state)
{
	struct lb_msg	 m;

	(void)state;
	memset(&m, 0, sizeof(m));
	m.received = 1718452800123456LL;
	m.timestamp = 1718452799000001LL;
	m.tzoff = -330;
	m.facility = 4;
	m.severity = 2;
	m.flags = LB_MSG_RFC3164;
	m.host = sl("fw-01", 5);
	m.program = sl("sshd", 4);
	m.pid = sl("4711", 4);
	m.message = sl("Failed password\nfor \0root \xc3\x28 from 10.0.0.1", 42);
	roundtrip(&m, "main");

	memset(&m, 0, sizeof(m));
	m.received = 0;
	m.timestamp = LB_NOTIME;
	m.facility = LB_NOVALUE;
	m.severity = LB_NOVALUE;
	m.flags = LB_MSG_NOHEADER;
	roundtrip(&m, "a");		/* every field empty */

	m.timestamp = -1500000;		/* 1969-12-31T23:59:58.5Z */
	m.tzoff = 23 * 60 + 59;
	m.facility = 23;
	m.severity = 7;
	m.flags = LB_MSG_RFC5424;
	m.sd = sl("[a@1 b=\"c\"]", 11);
	m.msgid = sl("ID47", 4);
	roundtrip(&m, "secure_logs-2");
}

/* Three frames: every split point decodes the same frames, in order, with nothing left. */
static void
t_splits(void **state)
{
	uint8_t		*buf = NULL;
	size_t		 len = 0, cap = 0;
	struct lb_msg	 m;

	(void)state;
	memset(&m, 0, sizeof(m));
	m.timestamp = LB_NOTIME;
	m.facility = 1;
	m.severity = 5;
	m.flags = LB_MSG_RFC3164;
	for (int i = 0; i < 3; i++) {
		char	 text[32];

		m.received = 1000000LL * (i + 1);
		snprintf(text, sizeof(text), "message %d LB1 inside", i);
		m.message = sl(text, strlen(text));
		assert_ok(lb_frame_encode(&m, i == 1 ? "other" : "main", &buf, &len, &cap));
	}
	for (size_t cut = 0; cut <= len; cut++) {
		size_t	 off = 0, avail = cut, need;
		int	 got = 0;

		for (;;) {
			struct lb_frame	 f;
			const char	*why = NULL;
			int		 rc;

			rc = lb_frame_decode(buf + off, avail - off, LB_FRAME_MAX, &f, &need, &why);
			if (rc == EAGAIN) {
				if (avail == len)
					fail_msg("EAGAIN with the whole stream at %zu", off);
				avail = len;	/* the rest arrives */
				continue;
			}
			assert_ok(rc);
			assert_int_equal(f.msg.received, 1000000LL * (got + 1));
			got++;
			off += f.size;
			if (off == len)
				break;
		}
		assert_int_equal(got, 3);
	}
	free(buf);
}

static void
t_malformed(void **state)
{
	static const struct {
		const char	*in;
		const char	*why;
	} bad[] = {
		{ "LB2 1 - - - - 4 0 0 0 0 0 0\nmain\n", "no frame magic" },
		{ "xLB1 1 - - - - 4 0 0 0 0 0 0\nmain\n", "no frame magic" },
		{ "LB1 1 - - - - 4 0 0 0 0 0 0 \nmain\n", "extra header fields" },
		{ "LB1 1 - - - - 4 0 0 0 0 0 0 0\nmain\n", "extra header fields" },
		{ "LB1 1  - - - 4 0 0 0 0 0 0\nmain\n", "missing time stamp" },
		{ "LB1 -1 - - - - 4 0 0 0 0 0 0\nmain\n", "bad receive time" },
		{ "LB1 1. - - - - 4 0 0 0 0 0 0\nmain\n", "bad receive time" },
		{ "LB1 1.1234567890 - - - - 4 0 0 0 0 0 0\nmain\n", "bad receive time" },
		{ "LB1 1 1:2 - - - 4 0 0 0 0 0 0\nmain\n", "bad time stamp" },
		{ "LB1 1 - +24:00 - - 4 0 0 0 0 0 0\nmain\n", "bad UTC offset" },
		{ "LB1 1 - +0100 - - 4 0 0 0 0 0 0\nmain\n", "bad UTC offset" },
		{ "LB1 1 - - 192 - 4 0 0 0 0 0 0\nmain\n", "bad PRI" },
		{ "LB1 1 - - 013 - 4 0 0 0 0 0 0\nmain\n", "bad PRI" },
		{ "LB1 1 - - - 4 4 0 0 0 0 0 0\nmain\n", "bad header format" },
		{ "LB1 1 - - - - 04 0 0 0 0 0 0\nmain\n", "bad length" },
		{ "LB1 1 - - - - 4 0 0 0 0 0\nmain\n", "bad length" },
		{ "LB1 1 - - - - 0 0 0 0 0 0 0\n\n", "empty logspace name" },
		{ "LB1 1 - - - - 65 0 0 0 0 0 0\n", "length over its limit" },
		{ "LB1 1 - - - - 4 4097 0 0 0 0 0\n", "length over its limit" },
		{ "LB1 1 - - - - 4 0 0 0 0 0 99999999999\n", "bad length" },
		{ "LB1 1 - - - - 4 0 0 0 0 0 0\nMain\n", "bad logspace name" },
		{ "LB1 1 - - - - 4 0 0 0 0 0 0\nm/in\n", "bad logspace name" },
		{ "LB1 1 - - - - 4 0 0 0 0 0 1\nmainxy", "no LF after the payload" },
		{ "LB1 1 - - x - 4 0 0 0 0 0 0\nmain\n", "bad byte in header" },
		{ "LB1 1 - - - - 4 0 0 0 0 0 0", NULL },	/* incomplete: EAGAIN */
	};
	char	 longhdr[LB_FRAME_HDR_MAX + 8];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct lb_frame	 f;
		const char	*why = NULL;
		size_t		 need;
		int		 rc;

		rc = lb_frame_decode((const uint8_t *)bad[i].in, strlen(bad[i].in), LB_FRAME_MAX,
		    &f, &need, &why);
		if (bad[i].why == NULL) {
			assert_int_equal(rc, EAGAIN);
			continue;
		}
		if (rc != LB_EPARSE || strcmp(why, bad[i].why) != 0)
			fail_msg("case %zu (%s): rc %d why %s", i, bad[i].in, rc,
			    why ? why : "(null)");
	}
	memset(longhdr, '1', sizeof(longhdr));
	memcpy(longhdr, "LB1 ", 4);
	{
		struct lb_frame	 f;
		const char	*why = NULL;
		size_t		 need;

		assert_int_equal(lb_frame_decode((const uint8_t *)longhdr, sizeof(longhdr),
		    LB_FRAME_MAX, &f, &need, &why), LB_EPARSE);
		assert_string_equal(why, "header line too long");
		assert_int_equal(lb_frame_decode((const uint8_t *)longhdr, 100, LB_FRAME_MAX, &f,
		    &need, &why), EAGAIN);
	}
}

/* A message over LB_MSG_MAX is cut and flagged; a frame over max is LB_ETOOBIG with its size. */
static void
t_limits(void **state)
{
	size_t		 mlen = LB_MSG_MAX + 1000, need;
	uint8_t		*msg, *buf = NULL;
	size_t		 len = 0, cap = 0;
	struct lb_msg	 m;
	struct lb_frame	 f;
	const char	*why = NULL;

	(void)state;
	assert_non_null(msg = malloc(mlen));
	memset(msg, 'x', mlen);
	memset(&m, 0, sizeof(m));
	m.timestamp = LB_NOTIME;
	m.facility = 0;
	m.severity = 0;
	m.flags = LB_MSG_RFC3164;
	m.host = sl("h", 1);
	m.message.p = msg;
	m.message.len = mlen;
	assert_ok(lb_frame_encode(&m, "main", &buf, &len, &cap));
	assert_ok(lb_frame_decode(buf, len, LB_FRAME_MAX, &f, &need, &why));
	assert_int_equal(f.size, len);
	assert_int_equal(f.msg.message.len, LB_MSG_MAX);
	assert_true(f.msg.flags & LB_MSG_TRUNCATED);
	assert_slice(f.msg.host, "h", 1);

	/* Over the caller's limit: the size, and what buf holds of the fields. */
	assert_int_equal(lb_frame_decode(buf, 4096, 1024, &f, &need, &why), LB_ETOOBIG);
	assert_int_equal(need, len);
	assert_slice(f.ls, "main", 4);
	assert_slice(f.msg.host, "h", 1);
	assert_int_equal(f.msg.message.len, 4096 - f.hdr - 5);
	assert_true(f.msg.flags & LB_MSG_TRUNCATED);
	/* The header alone is enough to know. */
	assert_int_equal(lb_frame_decode(buf, f.hdr, 1024, &f, &need, &why), LB_ETOOBIG);
	assert_int_equal(need, len);

	/* The encoder refuses what a frame cannot carry. */
	m.message.len = 10;
	m.host.len = LB_FRAME_FIELD_MAX + 1;
	m.host.p = msg;
	assert_int_equal(lb_frame_encode(&m, "main", &buf, &len, &cap), EINVAL);
	m.host.len = 1;
	assert_int_equal(lb_frame_encode(&m, "Main", &buf, &len, &cap), EINVAL);
	assert_int_equal(lb_frame_encode(&m, "", &buf, &len, &cap), EINVAL);
	m.facility = 24;
	assert_int_equal(lb_frame_encode(&m, "main", &buf, &len, &cap), EINVAL);
	free(buf);
	free(msg);
}

static void
t_resync(void **state)
{
	static const char s[] = "garbageLB1 1 - - - - 4 0 0 0 0 0 0\nmain\nxxLB";

	(void)state;
	assert_int_equal(lb_frame_resync((const uint8_t *)s, sizeof(s) - 1, 0), 7);
	assert_int_equal(lb_frame_resync((const uint8_t *)s, sizeof(s) - 1, 7), 7);
	/* From 8 on, only the partial magic at the end remains. */
	assert_int_equal(lb_frame_resync((const uint8_t *)s, sizeof(s) - 1, 8), sizeof(s) - 3);
	assert_int_equal(lb_frame_resync((const uint8_t *)s, 5, 1), 5);
	assert_int_equal(lb_frame_resync((const uint8_t *)s, sizeof(s) - 1, sizeof(s)),
	    sizeof(s) - 1);
}

T_MAIN(
	cmocka_unit_test(t_syslog_ng),
	cmocka_unit_test(t_roundtrip),
	cmocka_unit_test(t_splits),
	cmocka_unit_test(t_malformed),
	cmocka_unit_test(t_limits),
	cmocka_unit_test(t_resync))
