/*
 * t_syslog.c — syslog header parsing and RFC 6587 framing (FORMAT.md §7). A table of messages,
 * every field checked: the RFC 5424 examples from the RFC, RFC 3164 as devices send it, PRI
 * edges, bad time stamps, year inference, limits. Then framing: partial frames, every split
 * of a multi-frame stream, malformed and oversize counts.
 */
#include <errno.h>
#include <time.h>

#include "t_helper.h"
#include "lb_format.h"

#define US	1000000LL
#define BOM	"\xef\xbb\xbf"

/* 2024-06-15T12:00:00Z, the default receive time. */
#define RECV	(1718452800LL * US)

struct pcase {
	const char	*in;
	size_t		 inlen;		/* 0: strlen(in) */
	int64_t		 received;	/* 0: RECV */
	uint16_t	 flags;
	int		 fac, sev;
	const char	*utc;		/* "YYYY-MM-DD hh:mm:ss" UTC, NULL: LB_NOTIME */
	int		 usec;
	int		 tzoff;
	const char	*host, *prog, *pid, *msgid, *sd, *msg;
	size_t		 msglen;	/* 0: strlen(msg) */
};

#define R5	LB_MSG_RFC5424
#define R3	LB_MSG_RFC3164
#define NH	LB_MSG_NOHEADER
#define BT	LB_MSG_BADTIME

static const struct pcase cases[] = {
	/* RFC 5424 section 6.5, examples 1-4. */
	{ "<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - "
	    BOM "'su root' failed for lonvick on /dev/pts/8", 0, 0, R5, 4, 2,
	    "2003-10-11 22:14:15", 3000, 0, "mymachine.example.com", "su", "", "ID47", "",
	    BOM "'su root' failed for lonvick on /dev/pts/8", 0 },
	{ "<165>1 2003-08-24T05:14:15.000003-07:00 192.0.2.1 myproc 8710 - - "
	    "%% It's time to make the do-nuts.", 0, 0, R5, 20, 5,
	    "2003-08-24 12:14:15", 3, -420, "192.0.2.1", "myproc", "8710", "", "",
	    "%% It's time to make the do-nuts.", 0 },
	{ "<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 "
	    "[exampleSDID@32473 iut=\"3\" eventSource=\"Application\" eventID=\"1011\"] "
	    BOM "An application event log entry...", 0, 0, R5, 20, 5,
	    "2003-10-11 22:14:15", 3000, 0, "mymachine.example.com", "evntslog", "", "ID47",
	    "[exampleSDID@32473 iut=\"3\" eventSource=\"Application\" eventID=\"1011\"]",
	    BOM "An application event log entry...", 0 },
	{ "<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 "
	    "[exampleSDID@32473 iut=\"3\" eventSource=\"Application\" eventID=\"1011\"]"
	    "[examplePriority@32473 class=\"high\"]", 0, 0, R5, 20, 5,
	    "2003-10-11 22:14:15", 3000, 0, "mymachine.example.com", "evntslog", "", "ID47",
	    "[exampleSDID@32473 iut=\"3\" eventSource=\"Application\" eventID=\"1011\"]"
	    "[examplePriority@32473 class=\"high\"]", "", 0 },
	/* RFC 5424: escapes kept raw, offsets, nil values, short headers. */
	{ "<14>1 2024-01-02T03:04:05+05:30 h a 1 m [x@1 a=\"q\\\"b\\\\c\\]d\" e=\"\"] msg",
	    0, 0, R5, 1, 6, "2024-01-01 21:34:05", 0, 330, "h", "a", "1", "m",
	    "[x@1 a=\"q\\\"b\\\\c\\]d\" e=\"\"]", "msg", 0 },
	{ "<14>1 - - - - - - msg", 0, 0, R5, 1, 6, NULL, 0, 0, "", "", "", "", "", "msg", 0 },
	{ "<14>1 - - - - - -", 0, 0, R5, 1, 6, NULL, 0, 0, "", "", "", "", "", "", 0 },
	{ "<14>1 - - - - - -  two spaces", 0, 0, R5, 1, 6, NULL, 0, 0, "", "", "", "", "",
	    " two spaces", 0 },
	{ "<14>1 2024-01-02T03:04:05Z host", 0, 0, R5, 1, 6, "2024-01-02 03:04:05", 0, 0,
	    "host", "", "", "", "", "", 0 },
	{ "<14>1 ", 0, 0, R5, 1, 6, NULL, 0, 0, "", "", "", "", "", "", 0 },
	{ "<14>1 2024-01-02t03:04:05.5z h a - - - m", 0, 0, R5, 1, 6,
	    "2024-01-02 03:04:05", 500000, 0, "h", "a", "", "", "", "m", 0 },
	{ "<14>1 2024-01-02T03:04:05.123456789+0100 h a - - - m", 0, 0, R5, 1, 6,
	    "2024-01-02 02:04:05", 123456, 60, "h", "a", "", "", "", "m", 0 },
	{ "<14>1 2016-12-31T23:59:60Z h a - - - leap", 0, 0, R5, 1, 6,
	    "2017-01-01 00:00:00", 0, 0, "h", "a", "", "", "", "leap", 0 },
	/* RFC 5424 bad time stamps: flagged, the rest parsed. */
	{ "<14>1 2024-13-02T03:04:05Z host app 12 ID - msg", 0, 0, R5 | BT, 1, 6, NULL, 0, 0,
	    "host", "app", "12", "ID", "", "msg", 0 },
	{ "<14>1 2024-01-02T03:04:05 host app - - - no zone", 0, 0, R5 | BT, 1, 6, NULL, 0, 0,
	    "host", "app", "", "", "", "no zone", 0 },
	{ "<14>1 2023-02-29T00:00:00Z h a - - - m", 0, 0, R5 | BT, 1, 6, NULL, 0, 0,
	    "h", "a", "", "", "", "m", 0 },
	{ "<14>1 2024-01-02T03:04:05.1234567890Z h a - - - m", 0, 0, R5 | BT, 1, 6, NULL, 0, 0,
	    "h", "a", "", "", "", "m", 0 },
	{ "<14>1 2024-01-02T03:04:05.Z h a - - - m", 0, 0, R5 | BT, 1, 6, NULL, 0, 0,
	    "h", "a", "", "", "", "m", 0 },
	{ "<14>1 2024-01-02T03:04:05+24:00 h a - - - m", 0, 0, R5 | BT, 1, 6, NULL, 0, 0,
	    "h", "a", "", "", "", "m", 0 },
	{ "<14>1 yesterday h a - - - m", 0, 0, R5 | BT, 1, 6, NULL, 0, 0,
	    "h", "a", "", "", "", "m", 0 },
	/* RFC 5424 structured data that is not: the rest is the message. */
	{ "<14>1 - h a - - [bad msg", 0, 0, R5, 1, 6, NULL, 0, 0, "h", "a", "", "", "",
	    "[bad msg", 0 },
	{ "<14>1 - h a - - [x@1]msg", 0, 0, R5, 1, 6, NULL, 0, 0, "h", "a", "", "", "",
	    "[x@1]msg", 0 },
	{ "<14>1 - h a - - [x@1 a=b] m", 0, 0, R5, 1, 6, NULL, 0, 0, "h", "a", "", "", "",
	    "[x@1 a=b] m", 0 },
	{ "<14>1 - h a - - -x m", 0, 0, R5, 1, 6, NULL, 0, 0, "h", "a", "", "", "", "-x m", 0 },
	{ "<14>1 - h a - - [x@1 a=\"unterminated\\\"] m", 0, 0, R5, 1, 6, NULL, 0, 0,
	    "h", "a", "", "", "", "[x@1 a=\"unterminated\\\"] m", 0 },
	/* Tolerated: an unescaped "]" inside a quoted value. */
	{ "<14>1 - h a - - [x@1 a=\"b]c\"] m", 0, 0, R5, 1, 6, NULL, 0, 0, "h", "a", "", "",
	    "[x@1 a=\"b]c\"]", "m", 0 },
	/* Embedded LF, NUL and non-UTF-8 kept; the trailing CR LF dropped. */
	{ "<14>1 - h a - - - a\nb\0c\xff\r\n", 26, 0, R5, 1, 6, NULL, 0, 0, "h", "a", "", "", "",
	    "a\nb\0c\xff", 6 },

	/* RFC 3164 section 5.4 examples. */
	{ "<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on /dev/pts/8", 0, 0,
	    R3, 4, 2, "2024-10-11 22:14:15", 0, 0, "mymachine", "su", "", "", "",
	    "'su root' failed for lonvick on /dev/pts/8", 0 },
	{ "<13>Feb  5 17:32:18 10.0.0.99 Use the BFG!", 0, 0, R3, 1, 5, "2024-02-05 17:32:18",
	    0, 0, "10.0.0.99", "", "", "", "", "Use the BFG!", 0 },
	{ "<165>Aug 24 05:34:00 CST 1987 mymachine myproc[10]: %% It's time to make the do-nuts.",
	    0, 0, R3, 20, 5, "2024-08-24 05:34:00", 0, 0, "CST", "", "", "", "",
	    "1987 mymachine myproc[10]: %% It's time to make the do-nuts.", 0 },
	{ "<0>1990 Oct 22 10:52:01 TZ-6 scapegoat.dmz.example.org 10.1.2.3 sched[0]: That's too "
	    "early for breakfast.", 0, 0, R3, 0, 0, NULL, 0, 0, "", "", "", "", "",
	    "1990 Oct 22 10:52:01 TZ-6 scapegoat.dmz.example.org 10.1.2.3 sched[0]: That's too "
	    "early for breakfast.", 0 },
	/* RFC 3164 as seen in the wild. */
	{ "<86>Jun 14 15:16:01 combo sshd(pam_unix)[19939]: authentication failure; logname=",
	    0, 0, R3, 10, 6, "2024-06-14 15:16:01", 0, 0, "combo", "sshd(pam_unix)", "19939",
	    "", "", "authentication failure; logname=", 0 },
	{ "<13>Feb 5 17:32:18 host prog: unpadded day", 0, 0, R3, 1, 5, "2024-02-05 17:32:18",
	    0, 0, "host", "prog", "", "", "", "unpadded day", 0 },
	{ "<13>2024-02-29T10:00:00.5+01:00 host prog[77]: iso", 0, 0, R3, 1, 5,
	    "2024-02-29 09:00:00", 500000, 60, "host", "prog", "77", "", "", "iso", 0 },
	{ "<13>Jan  2 03:04:05 sshd[123]: no host", 0, 0, R3, 1, 5, "2024-01-02 03:04:05", 0, 0,
	    "", "sshd", "123", "", "", "no host", 0 },
	{ "<13>Jan  2 03:04:05 kernel: no host, no pid", 0, 0, R3, 1, 5, "2024-01-02 03:04:05",
	    0, 0, "", "kernel", "", "", "", "no host, no pid", 0 },
	{ "<13>Jan  2 03:04:05 host kernel: boot", 0, 0, R3, 1, 5, "2024-01-02 03:04:05", 0, 0,
	    "host", "kernel", "", "", "", "boot", 0 },
	{ "<13>Jan  2 03:04:05 host postfix/smtpd[9]:no space", 0, 0, R3, 1, 5,
	    "2024-01-02 03:04:05", 0, 0, "host", "postfix/smtpd", "9", "", "", "no space", 0 },
	{ "<13>Jan  2 03:04:05 host prog[]: empty pid", 0, 0, R3, 1, 5, "2024-01-02 03:04:05",
	    0, 0, "host", "prog", "", "", "", "empty pid", 0 },
	{ "<13>Jan  2 03:04:05 host prog:", 0, 0, R3, 1, 5, "2024-01-02 03:04:05", 0, 0,
	    "host", "prog", "", "", "", "", 0 },
	{ "<13>Jan  2 03:04:05 host", 0, 0, R3, 1, 5, "2024-01-02 03:04:05", 0, 0,
	    "host", "", "", "", "", "", 0 },
	{ "<13>Jan  2 03:04:05", 0, 0, R3, 1, 5, "2024-01-02 03:04:05", 0, 0,
	    "", "", "", "", "", "", 0 },
	{ "<13>Jan  2 03:04:05 fe80::1 prog: v6 host", 0, 0, R3, 1, 5, "2024-01-02 03:04:05",
	    0, 0, "fe80::1", "prog", "", "", "", "v6 host", 0 },
	{ "<13>Jan  2 03:04:05 host a:b c", 0, 0, R3, 1, 5, "2024-01-02 03:04:05", 0, 0,
	    "host", "", "", "", "", "a:b c", 0 },
	{ "<13>Jan  2 03:04:05 host prog[1 2]: x", 0, 0, R3, 1, 5, "2024-01-02 03:04:05", 0, 0,
	    "host", "", "", "", "", "prog[1 2]: x", 0 },
	{ "<13>jan  2 03:04:05 host p: lower-case month", 0, 0, R3, 1, 5, "2024-01-02 03:04:05",
	    0, 0, "host", "p", "", "", "", "lower-case month", 0 },
	{ "<13>Mar  1 10:00:00.123 h p: frac", 0, 0, R3, 1, 5, "2024-03-01 10:00:00", 123000, 0,
	    "h", "p", "", "", "", "frac", 0 },
	{ "<13>Mar  1 2023 10:00:00 h p: with year", 0, 0, R3, 1, 5, "2023-03-01 10:00:00", 0, 0,
	    "h", "p", "", "", "", "with year", 0 },
	{ "<13>sshd[1]: no time stamp", 0, 0, R3, 1, 5, NULL, 0, 0, "", "sshd", "1", "", "",
	    "no time stamp", 0 },
	{ "<13>hello world", 0, 0, R3, 1, 5, NULL, 0, 0, "", "", "", "", "", "hello world", 0 },
	{ "<13>", 0, 0, R3, 1, 5, NULL, 0, 0, "", "", "", "", "", "", 0 },
	{ "<13>2 - - - - - - not version 1", 0, 0, R3, 1, 5, NULL, 0, 0, "", "", "", "", "",
	    "2 - - - - - - not version 1", 0 },
	/* No PRI at all: a time stamp makes it RFC 3164 with user.notice. */
	{ "Jan  2 03:04:05 host cron[9]: no pri", 0, 0, R3, 1, 5, "2024-01-02 03:04:05", 0, 0,
	    "host", "cron", "9", "", "", "no pri", 0 },
	{ "2024-01-02T03:04:05Z host cron: no pri, iso", 0, 0, R3, 1, 5, "2024-01-02 03:04:05",
	    0, 0, "host", "cron", "", "", "", "no pri, iso", 0 },
	/* RFC 3164 bad time stamps: flagged, the rest parsed. */
	{ "<13>Jan 32 03:04:05 host prog: m", 0, 0, R3 | BT, 1, 5, NULL, 0, 0, "host", "prog",
	    "", "", "", "m", 0 },
	{ "<13>Jan  2 25:04:05 host prog: m", 0, 0, R3 | BT, 1, 5, NULL, 0, 0, "host", "prog",
	    "", "", "", "m", 0 },
	{ "<13>2024-02-30T10:00:00Z host prog: m", 0, 0, R3 | BT, 1, 5, NULL, 0, 0, "host",
	    "prog", "", "", "", "m", 0 },
	{ "Jan 32 03:04:05 host prog: m", 0, 0, R3 | BT, 1, 5, NULL, 0, 0, "host", "prog",
	    "", "", "", "m", 0 },
	/* Year inference: the year closest to the receive time. */
	{ "<13>Jan  1 00:00:01 h p: new year", 0, 1735689540LL * US /* 2024-12-31 23:59 */,
	    R3, 1, 5, "2025-01-01 00:00:01", 0, 0, "h", "p", "", "", "", "new year", 0 },
	{ "<13>Dec 31 23:59:59 h p: old year", 0, 1735689660LL * US /* 2025-01-01 00:01 */,
	    R3, 1, 5, "2024-12-31 23:59:59", 0, 0, "h", "p", "", "", "", "old year", 0 },
	{ "<13>Feb 29 10:00:00 h p: leap", 0, 1740787200LL * US /* 2025-03-01 */,
	    R3, 1, 5, "2024-02-29 10:00:00", 0, 0, "h", "p", "", "", "", "leap", 0 },
	{ "<13>Feb 29 10:00:00 h p: no leap", 0, 1780272000LL * US /* 2026-06-01 */,
	    R3 | BT, 1, 5, NULL, 0, 0, "h", "p", "", "", "", "no leap", 0 },

	/* PRI edges. */
	{ "<0>1 - h - - - - m", 0, 0, R5, 0, 0, NULL, 0, 0, "h", "", "", "", "", "m", 0 },
	{ "<191>Jan  2 03:04:05 h p: m", 0, 0, R3, 23, 7, "2024-01-02 03:04:05", 0, 0,
	    "h", "p", "", "", "", "m", 0 },
	{ "<013>1 - h - - - - m", 0, 0, R5, 1, 5, NULL, 0, 0, "h", "", "", "", "", "m", 0 },
	{ "<192>Jan  2 03:04:05 h p: m", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "",
	    "<192>Jan  2 03:04:05 h p: m", 0 },
	{ "<13 Jan  2 03:04:05 h p: m", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "",
	    "<13 Jan  2 03:04:05 h p: m", 0 },
	{ "<13", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "", "<13", 0 },
	{ "<>1 - - - - - - m", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "",
	    "<>1 - - - - - - m", 0 },
	{ "<0013>1 - - - - - - m", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "",
	    "<0013>1 - - - - - - m", 0 },
	{ "<-1>m", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "", "<-1>m", 0 },
	/* No header. */
	{ "just some text", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "", "just some text", 0 },
	{ "", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "", "", 0 },
	{ "\n", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "", "", 0 },
	{ "abc\r\n", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "", "abc", 0 },
	{ "abc\r", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "", "abc", 0 },
	{ "abc\n\n", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "", "abc\n", 0 },
	{ "Jan  2 03:04 short time", 0, 0, NH, 1, 5, NULL, 0, 0, "", "", "", "", "",
	    "Jan  2 03:04 short time", 0 },
};

static int64_t
utc_us(const char *s, int usec)
{
	struct tm	 tm;
	char		*e;

	memset(&tm, 0, sizeof(tm));
	e = strptime(s, "%Y-%m-%d %H:%M:%S", &tm);
	assert_non_null(e);
	assert_int_equal(*e, '\0');
	return ((int64_t)timegm(&tm) * US + usec);
}

static void
assert_slice(const struct lb_slice *s, const char *want, size_t wantlen, const uint8_t *buf,
    size_t buflen, const char *what, int i)
{
	if (s->len != wantlen || (wantlen > 0 && memcmp(s->p, want, wantlen) != 0)) {
		print_error("case %d: %s is \"%.*s\" (%zu), want \"%s\"\n", i, what, (int)s->len,
		    (const char *)s->p, s->len, want);
		fail();
	}
	if (s->len > 0)
		assert_true(s->p >= buf && s->p + s->len <= buf + buflen);
}

static void
t_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct pcase	*c = &cases[i];
		size_t			 len = c->inlen ? c->inlen : strlen(c->in);
		int64_t			 recv = c->received ? c->received : RECV;
		const uint8_t		*buf = (const uint8_t *)c->in;
		struct lb_msg		 m;
		int			 n = (int)i;

		memset(&m, 0x5a, sizeof(m));
		lb_syslog_parse(buf, len, recv, &m);
		if (m.flags != c->flags)
			print_error("case %d: flags %#x want %#x: %s\n", n, m.flags, c->flags,
			    c->in);
		assert_int_equal(m.flags, c->flags);
		assert_int_equal(m.id, 0);
		assert_int_equal(m.received, recv);
		assert_int_equal(m.facility, c->fac);
		assert_int_equal(m.severity, c->sev);
		if (c->utc == NULL)
			assert_true(m.timestamp == LB_NOTIME);
		else {
			if (m.timestamp != utc_us(c->utc, c->usec))
				print_error("case %d: time %lld want %lld\n", n,
				    (long long)m.timestamp, (long long)utc_us(c->utc, c->usec));
			assert_true(m.timestamp == utc_us(c->utc, c->usec));
		}
		assert_int_equal(m.tzoff, c->tzoff);
		assert_slice(&m.host, c->host, strlen(c->host), buf, len, "host", n);
		assert_slice(&m.program, c->prog, strlen(c->prog), buf, len, "program", n);
		assert_slice(&m.pid, c->pid, strlen(c->pid), buf, len, "pid", n);
		assert_slice(&m.msgid, c->msgid, strlen(c->msgid), buf, len, "msgid", n);
		assert_slice(&m.sd, c->sd, strlen(c->sd), buf, len, "sd", n);
		assert_slice(&m.message, c->msg, c->msglen ? c->msglen : strlen(c->msg), buf, len,
		    "message", n);
	}
}

/* Messages over LB_MSG_MAX are cut and flagged; fields over their limits are cut. */
static void
t_limits(void **state)
{
	size_t		 big = LB_MSG_MAX + 100, hdr, len;
	uint8_t		*buf;
	struct lb_msg	 m;
	char		 h[400];

	(void)state;
	assert_non_null(buf = malloc(big + 1000));

	/* Exactly LB_MSG_MAX message bytes (plus a newline): not cut. */
	hdr = (size_t)sprintf((char *)buf, "<13>1 - h a - - - ");
	memset(buf + hdr, 'x', LB_MSG_MAX);
	buf[hdr + LB_MSG_MAX] = '\n';
	lb_syslog_parse(buf, hdr + LB_MSG_MAX + 1, RECV, &m);
	assert_int_equal(m.flags, LB_MSG_RFC5424);
	assert_int_equal(m.message.len, LB_MSG_MAX);

	/* One more: cut. */
	memset(buf + hdr, 'x', LB_MSG_MAX + 1);
	lb_syslog_parse(buf, hdr + LB_MSG_MAX + 1, RECV, &m);
	assert_int_equal(m.flags, LB_MSG_RFC5424 | LB_MSG_TRUNCATED);
	assert_int_equal(m.message.len, LB_MSG_MAX);
	assert_ptr_equal(m.message.p, buf + hdr);

	/* No header, too long. */
	memset(buf, 'y', big);
	lb_syslog_parse(buf, big, RECV, &m);
	assert_int_equal(m.flags, LB_MSG_NOHEADER | LB_MSG_TRUNCATED);
	assert_int_equal(m.message.len, LB_MSG_MAX);

	/* RFC 5424 fields are cut at LB_FIELD_MAX and flagged. */
	memset(h, 'h', 300);
	h[300] = '\0';
	len = (size_t)sprintf((char *)buf, "<13>1 - %s %s %s %s - m", h, h, h, h);
	lb_syslog_parse(buf, len, RECV, &m);
	assert_int_equal(m.flags, LB_MSG_RFC5424 | LB_MSG_FIELDCUT);
	assert_int_equal(m.host.len, LB_FIELD_MAX);
	assert_int_equal(m.program.len, LB_FIELD_MAX);
	assert_int_equal(m.pid.len, LB_FIELD_MAX);
	assert_int_equal(m.msgid.len, LB_FIELD_MAX);
	assert_ptr_equal(m.program.p, buf + 8 + 301);
	assert_int_equal(m.message.len, 1);

	/* RFC 3164: a long host is cut; a "tag" over LB_FIELD_MAX is message text. */
	len = (size_t)sprintf((char *)buf, "<13>Jan  2 03:04:05 %s %s: m", h, h);
	lb_syslog_parse(buf, len, RECV, &m);
	assert_int_equal(m.flags, LB_MSG_RFC3164 | LB_MSG_FIELDCUT);
	assert_int_equal(m.host.len, LB_FIELD_MAX);
	assert_int_equal(m.program.len, 0);
	assert_int_equal(m.message.len, 303);
	memset(h, 'p', LB_FIELD_MAX);
	h[LB_FIELD_MAX] = '\0';
	len = (size_t)sprintf((char *)buf, "<13>Jan  2 03:04:05 host %s[%s]: m", h, h);
	lb_syslog_parse(buf, len, RECV, &m);
	assert_int_equal(m.program.len, LB_FIELD_MAX);
	assert_int_equal(m.pid.len, LB_FIELD_MAX);
	assert_int_equal(m.flags, LB_MSG_RFC3164);	/* at the limit: nothing cut */
	assert_int_equal(m.message.len, 1);

	/* SD over LB_SD_MAX: whole elements that fit, else LB_SD_MAX raw bytes. */
	hdr = (size_t)sprintf((char *)buf, "<13>1 - h a - - [a@1 v=\"");
	memset(buf + hdr, 'v', 10000);
	len = hdr + 10000;
	len += (size_t)sprintf((char *)buf + len, "\"][b@1 v=\"");
	memset(buf + len, 'w', 10000);
	len += 10000;
	len += (size_t)sprintf((char *)buf + len, "\"] msg");
	lb_syslog_parse(buf, len, RECV, &m);
	assert_int_equal(m.flags, LB_MSG_RFC5424 | LB_MSG_FIELDCUT);
	assert_int_equal(m.sd.len, 8 + 10000 + 2);
	assert_int_equal(m.sd.p[m.sd.len - 1], ']');
	assert_int_equal(m.message.len, 3);

	hdr = (size_t)sprintf((char *)buf, "<13>1 - h a - - [a@1 v=\"");
	memset(buf + hdr, 'v', LB_SD_MAX);
	len = hdr + LB_SD_MAX;
	len += (size_t)sprintf((char *)buf + len, "\"] msg");
	lb_syslog_parse(buf, len, RECV, &m);
	assert_int_equal(m.sd.len, LB_SD_MAX);
	assert_true(m.flags & LB_MSG_FIELDCUT);
	assert_int_equal(m.message.len, 3);
	free(buf);
}

/* ------------------------------------------------------------------ framing */

struct fr {
	size_t	 off[16];	/* offset of each frame in the stream */
	size_t	 len[16];
	int	 n;
	int	 last;		/* the return that ended the walk */
};

/* lb_syslog_frame_next() over a C string's bytes. */
static int
frame_next(int framing, const char *s, size_t len, int eof, size_t max, struct lb_slice *f,
    size_t *used)
{
	return (lb_syslog_frame_next(framing, (const uint8_t *)s, len, eof, max, f, used));
}

/*
 * Walks stream[0..len) with the bytes arriving step bytes at a time (step 0: all at once,
 * with the first arrival of split bytes), the way a reader loop would.
 */
static struct fr
walk(int framing, const char *stream, size_t len, size_t split, size_t step, size_t max)
{
	const uint8_t	*s = (const uint8_t *)stream;
	struct fr	 r;
	struct lb_slice	 f;
	size_t		 off = 0, avail = split, used;
	int		 rc;

	memset(&r, 0, sizeof(r));
	for (;;) {
		rc = lb_syslog_frame_next(framing, s + off, avail - off, avail == len, max, &f,
		    &used);
		if (rc == 0) {
			assert_true(r.n < 16);
			assert_true(used > 0 && used <= avail - off);
			assert_true(f.p >= s + off && f.p + f.len <= s + off + used);
			r.off[r.n] = (size_t)(f.p - s);
			r.len[r.n] = f.len;
			r.n++;
			off += used;
			continue;
		}
		if (rc == EAGAIN && avail < len) {
			avail = step == 0 ? len : (avail + step > len ? len : avail + step);
			continue;
		}
		r.last = rc;
		return (r);
	}
}

static void
assert_frames(int framing, const char *stream, size_t len, size_t max, int nwant,
    const char **want, const size_t *wantlen)
{
	struct fr	 ref, r;

	ref = walk(framing, stream, len, len, 0, max);
	assert_int_equal(ref.n, nwant);
	assert_int_equal(ref.last, EAGAIN);
	for (int i = 0; i < nwant; i++) {
		assert_int_equal(ref.len[i], wantlen != NULL ? wantlen[i] : strlen(want[i]));
		assert_memory_equal(stream + ref.off[i], want[i], ref.len[i]);
	}
	/* Split at every byte boundary, and byte by byte: the same frames. */
	for (size_t k = 0; k <= len; k++) {
		r = walk(framing, stream, len, k, 0, max);
		assert_int_equal(r.n, ref.n);
		assert_int_equal(r.last, ref.last);
		assert_memory_equal(r.off, ref.off, sizeof(r.off));
		assert_memory_equal(r.len, ref.len, sizeof(r.len));
	}
	r = walk(framing, stream, len, 0, 1, max);
	assert_int_equal(r.n, ref.n);
	assert_memory_equal(r.off, ref.off, sizeof(r.off));
	assert_memory_equal(r.len, ref.len, sizeof(r.len));
}

static void
t_frame_line(void **state)
{
	const char	 s[] = "<13>a b\r\n\nsecond\nthird has \0 a NUL\nlast, unterminated";
	const char	*want[] = { "<13>a b\r", "", "second", "third has \0 a NUL",
	    "last, unterminated" };
	const size_t	 wantlen[] = { 8, 0, 6, 17, 18 };
	struct lb_slice	 f;
	size_t		 used;

	(void)state;
	assert_frames(LB_FRAMING_LINE, s, sizeof(s) - 1, 1000, 5, want, wantlen);

	/* Partial: EAGAIN without eof, a frame with eof; nothing at all is EAGAIN. */
	assert_int_equal(frame_next(LB_FRAMING_LINE, "abc", 3, 0, 100, &f,
	    &used), EAGAIN);
	assert_ok(frame_next(LB_FRAMING_LINE, "abc", 3, 1, 100, &f, &used));
	assert_int_equal(f.len, 3);
	assert_int_equal(used, 3);
	assert_int_equal(frame_next(LB_FRAMING_LINE, "", 0, 1, 100, &f,
	    &used), EAGAIN);

	/* Over max: skip the whole line when it is there, else used 0. */
	used = 99;
	assert_int_equal(frame_next(LB_FRAMING_LINE, "abcd\nx", 6, 0, 3, &f,
	    &used), LB_ETOOBIG);
	assert_int_equal(used, 5);
	used = 99;
	assert_int_equal(frame_next(LB_FRAMING_LINE, "abcd", 4, 0, 3, &f,
	    &used), LB_ETOOBIG);
	assert_int_equal(used, 0);
	assert_int_equal(frame_next(LB_FRAMING_LINE, "abcd", 4, 1, 3, &f,
	    &used), LB_ETOOBIG);
	assert_int_equal(used, 4);
	assert_ok(frame_next(LB_FRAMING_LINE, "abc\n", 4, 0, 3, &f, &used));
	assert_int_equal(f.len, 3);
	assert_int_equal(frame_next(7, "abc\n", 4, 0, 3, &f, &used), EINVAL);
}

static void
t_frame_octet(void **state)
{
	const char	 s[] = "5 hello11 <13>1 - - -\n\n3 a\nb1  1 x";
	const char	*want[] = { "hello", "<13>1 - - -", "a\nb", " ", "x" };
	struct lb_slice	 f;
	size_t		 used;

	(void)state;
	assert_frames(LB_FRAMING_OCTET, s, sizeof(s) - 1, 1000, 5, want, NULL);

	/* A partial count or frame: EAGAIN, or LB_EPARSE at eof. */
	assert_int_equal(frame_next(LB_FRAMING_OCTET, "12", 2, 0, 100, &f,
	    &used), EAGAIN);
	assert_int_equal(frame_next(LB_FRAMING_OCTET, "12 abc", 6, 0, 100, &f,
	    &used), EAGAIN);
	assert_int_equal(frame_next(LB_FRAMING_OCTET, "12 abc", 6, 1, 100, &f,
	    &used), LB_EPARSE);
	assert_int_equal(frame_next(LB_FRAMING_OCTET, "\r\n", 2, 1, 100, &f,
	    &used), EAGAIN);
	assert_int_equal(frame_next(LB_FRAMING_OCTET, "1234567890", 10, 0,
	    UINT32_MAX, &f, &used), EAGAIN);

	/* Malformed counts. */
	static const char *bad[] = { "0 x", "05 hello", "abc", "12x ab", "-1 x", " 5 hello",
	    "12345678901 x", "<13>1 - - - - - - x", "5\thello" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		used = 77;
		assert_int_equal(frame_next(LB_FRAMING_OCTET, bad[i],
		    strlen(bad[i]), 0, 100, &f, &used), LB_EPARSE);
		assert_int_equal(used, 77);
	}

	/* Over max: the whole frame's size when it is all there, else 0. */
	used = 77;
	assert_int_equal(frame_next(LB_FRAMING_OCTET, "10 0123456789rest", 17,
	    0, 5, &f, &used), LB_ETOOBIG);
	assert_int_equal(used, 13);
	used = 77;
	assert_int_equal(frame_next(LB_FRAMING_OCTET, "10 0123", 7, 0, 5, &f,
	    &used), LB_ETOOBIG);
	assert_int_equal(used, 0);
	used = 77;
	assert_int_equal(frame_next(LB_FRAMING_OCTET, "9999999999 x", 12, 0,
	    LB_MSG_MAX, &f, &used), LB_ETOOBIG);
	assert_int_equal(used, 0);
	assert_ok(frame_next(LB_FRAMING_OCTET, "5 01234", 7, 0, 5, &f, &used));
	assert_int_equal(f.len, 5);
	assert_int_equal(used, 7);
}

/* Every frame of an octet-counted RFC 5424 stream parses back to the same fields. */
static void
t_frame_and_parse(void **state)
{
	const char	*msgs[] = {
		"<86>1 2017-12-10T06:55:46Z LabSZ sshd 24200 - [loghub@32473 sys=\"OpenSSH\" "
		    "line=\"1\"] Dec 10 06:55:46 LabSZ sshd[24200]: Invalid user webmaster",
		"<86>Jun 14 15:16:02 combo sshd(pam_unix)[19937]: check pass; user unknown",
		"plain\nwith a newline",
	};
	char		 stream[1024];
	size_t		 len = 0, off = 0, used;
	struct lb_slice	 f;
	struct lb_msg	 m;

	(void)state;
	for (int i = 0; i < 3; i++)
		len += (size_t)sprintf(stream + len, "%zu %s", strlen(msgs[i]), msgs[i]);
	for (int i = 0; i < 3; i++) {
		assert_ok(frame_next(LB_FRAMING_OCTET, stream + off, len - off, 0,
		    LB_MSG_MAX, &f, &used));
		off += used;
		lb_syslog_parse(f.p, f.len, RECV, &m);
		assert_int_equal(m.message.p + m.message.len, f.p + f.len);
		if (i == 0) {
			assert_int_equal(m.flags, LB_MSG_RFC5424);
			assert_memory_equal(m.host.p, "LabSZ", 5);
			assert_memory_equal(m.sd.p, "[loghub@32473", 13);
		} else if (i == 1) {
			assert_int_equal(m.flags, LB_MSG_RFC3164);
			assert_memory_equal(m.pid.p, "19937", 5);
		} else
			assert_int_equal(m.flags, LB_MSG_NOHEADER);
	}
	assert_int_equal(off, len);
}

T_MAIN(
	cmocka_unit_test(t_table),
	cmocka_unit_test(t_limits),
	cmocka_unit_test(t_frame_line),
	cmocka_unit_test(t_frame_octet),
	cmocka_unit_test(t_frame_and_parse))
