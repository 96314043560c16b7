/*
 * lb_frame.c — the hand-off frame between the collector (syslog-ng) and indexd (FORMAT.md §11):
 * decoding with every check a reader makes, resynchronisation after damage, and an encoder
 * for tests, benchmarks and tools. The decoder never reads past the buffer it is given and
 * never allocates; slices in the decoded frame point into that buffer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"

#define MAGIC_LEN	4
#define NLEN		7	/* ls host prog pid msgid sd msg */
#define SEC_DIGITS	12	/* seconds: up to 999,999,999,999 (year 33658) */

static const size_t len_max[NLEN] = {
	LB_NAME_MAX, LB_FRAME_FIELD_MAX, LB_FRAME_FIELD_MAX, LB_FRAME_FIELD_MAX,
	LB_FRAME_FIELD_MAX, LB_FRAME_SD_MAX, LB_FRAME_MSG_MAX
};

static int
is_digit(uint8_t c)
{
	return (c >= '0' && c <= '9');
}

/* The next space-separated field of the header line h[*pos..end); 0 when there is none. */
static int
next_field(const uint8_t *h, size_t end, size_t *pos, const uint8_t **f, size_t *flen)
{
	size_t	 i = *pos, s;

	if (i >= end)
		return (0);
	s = i;
	while (i < end && h[i] != ' ')
		i++;
	if (i == s)
		return (0);
	*f = h + s;
	*flen = i - s;
	*pos = i < end ? i + 1 : i;
	return (1);
}

/* [-]seconds[.fraction] into microseconds (a fraction past 6 digits is cut). */
static int
parse_time(const uint8_t *p, size_t n, int neg_ok, int64_t *us)
{
	size_t	 i = 0, s;
	int64_t	 sec = 0, frac = 0;
	int	 neg = 0, fd = 0;

	if (n > 0 && p[0] == '-') {
		if (!neg_ok)
			return (0);
		neg = 1;
		i = 1;
	}
	s = i;
	while (i < n && is_digit(p[i]) && i - s < SEC_DIGITS)
		sec = sec * 10 + (p[i++] - '0');
	if (i == s)
		return (0);
	if (i < n) {
		if (p[i++] != '.' || i == n)
			return (0);
		for (; i < n; i++, fd++) {
			if (!is_digit(p[i]) || fd >= 9)
				return (0);
			if (fd < 6)
				frac = frac * 10 + (p[i] - '0');
		}
		for (; fd < 6; fd++)
			frac *= 10;
	}
	*us = sec * 1000000 + frac;
	if (neg)
		*us = -*us;
	return (1);
}

/* "+HH:MM" / "-HH:MM" into minutes east of UTC. */
static int
parse_tzoff(const uint8_t *p, size_t n, int16_t *min)
{
	int	 hh, mm;

	if (n != 6 || (p[0] != '+' && p[0] != '-') || !is_digit(p[1]) || !is_digit(p[2]) ||
	    p[3] != ':' || !is_digit(p[4]) || !is_digit(p[5]))
		return (0);
	hh = (p[1] - '0') * 10 + (p[2] - '0');
	mm = (p[4] - '0') * 10 + (p[5] - '0');
	if (hh > 23 || mm > 59)
		return (0);
	*min = (int16_t)((p[0] == '-' ? -1 : 1) * (hh * 60 + mm));
	return (1);
}

static int
is_dash(const uint8_t *p, size_t n)
{
	return (n == 1 && p[0] == '-');
}

/* A byte a header line may hold. */
static int
hdr_byte(uint8_t c)
{
	return (is_digit(c) || c == ' ' || c == '.' || c == '-' || c == '+' || c == ':');
}

/*
 * A logspace name of the right form. A reserved name is well-formed: the frame's reader refuses
 * it (indexd asks lb_logspace_name_ok()) and skips the whole frame.
 */
static int
valid_ls(const uint8_t *p, size_t n)
{
	return (lb_logspace_name_ok(p, n, NULL) || lb_logspace_name_reserved(p, n));
}

/* Parses the header line h[0..end) (LF excluded) into f and lens[]. NULL or the reason. */
static const char *
parse_header(const uint8_t *h, size_t end, struct lb_frame *f, uint64_t lens[NLEN])
{
	const uint8_t	*v;
	size_t		 pos = MAGIC_LEN, n;
	uint64_t	 pri;
	struct lb_msg	*m = &f->msg;

	memset(f, 0, sizeof(*f));
	if (!next_field(h, end, &pos, &v, &n) || !parse_time(v, n, 0, &m->received))
		return ("bad receive time");
	if (!next_field(h, end, &pos, &v, &n))
		return ("missing time stamp");
	if (is_dash(v, n))
		m->timestamp = LB_NOTIME;
	else if (!parse_time(v, n, 1, &m->timestamp))
		return ("bad time stamp");
	if (!next_field(h, end, &pos, &v, &n))
		return ("missing UTC offset");
	if (is_dash(v, n))
		m->tzoff = 0;
	else if (!parse_tzoff(v, n, &m->tzoff))
		return ("bad UTC offset");
	if (!next_field(h, end, &pos, &v, &n))
		return ("missing PRI");
	if (is_dash(v, n)) {
		m->facility = LB_NOVALUE;
		m->severity = LB_NOVALUE;
	} else if (!lb_dec_parse(v, n, 3, &pri) || pri > 191)
		return ("bad PRI");
	else {
		m->facility = (uint8_t)(pri >> 3);
		m->severity = (uint8_t)(pri & 7);
	}
	if (!next_field(h, end, &pos, &v, &n) || n != 1)
		return ("bad header format");
	switch (v[0]) {
	case '3':
		m->flags = LB_MSG_RFC3164;
		break;
	case '5':
		m->flags = LB_MSG_RFC5424;
		break;
	case '-':
		m->flags = LB_MSG_NOHEADER;
		break;
	default:
		return ("bad header format");
	}
	for (int i = 0; i < NLEN; i++) {
		if (!next_field(h, end, &pos, &v, &n) || !lb_dec_parse(v, n, 10, &lens[i]))
			return ("bad length");
		if (lens[i] > len_max[i])
			return ("length over its limit");
	}
	if (lens[0] == 0)
		return ("empty logspace name");
	if (pos != end || h[end - 1] == ' ')
		return ("extra header fields");
	return (NULL);
}

/* Points the field slices of f at p (the payload as far as buf holds it: n bytes). */
static void
set_slices(struct lb_frame *f, const uint8_t *p, size_t n, const uint64_t lens[NLEN])
{
	struct lb_slice	*sl[NLEN] = { &f->ls, &f->msg.host, &f->msg.program, &f->msg.pid,
	    &f->msg.msgid, &f->msg.sd, &f->msg.message };
	size_t		 off = 0;

	for (int i = 0; i < NLEN; i++) {
		size_t l = (size_t)lens[i];

		sl[i]->p = p + off;
		if (i == NLEN - 1) {
			sl[i]->len = off <= n ? n - off : 0;
			if (sl[i]->len > l)
				sl[i]->len = l;
			if (sl[i]->len > LB_MSG_MAX)
				sl[i]->len = LB_MSG_MAX;
		} else
			sl[i]->len = off + l <= n ? l : 0;
		off += l;
	}
	if (lens[NLEN - 1] > LB_MSG_MAX)
		f->msg.flags |= LB_MSG_TRUNCATED;
}

int
lb_frame_decode(const uint8_t *buf, size_t len, size_t max, struct lb_frame *f,
    size_t *need, const char **why)
{
	struct lb_frame	 fr;
	const uint8_t	*lf;
	const char	*bad;
	uint64_t	 lens[NLEN], total;
	size_t		 hlen, scan;

	*need = 0;
	if (len < MAGIC_LEN) {
		if (memcmp(buf, LB_FRAME_MAGIC, len) == 0)
			return (EAGAIN);
		*why = "no frame magic";
		return (LB_EPARSE);
	}
	if (memcmp(buf, LB_FRAME_MAGIC, MAGIC_LEN) != 0) {
		*why = "no frame magic";
		return (LB_EPARSE);
	}
	scan = len < LB_FRAME_HDR_MAX ? len : LB_FRAME_HDR_MAX;
	if ((lf = memchr(buf, '\n', scan)) == NULL) {
		for (size_t i = MAGIC_LEN; i < scan; i++)
			if (!hdr_byte(buf[i])) {
				*why = "bad byte in header";
				return (LB_EPARSE);
			}
		if (scan == LB_FRAME_HDR_MAX) {
			*why = "header line too long";
			return (LB_EPARSE);
		}
		return (EAGAIN);
	}
	hlen = (size_t)(lf - buf);
	for (size_t i = MAGIC_LEN; i < hlen; i++)
		if (!hdr_byte(buf[i])) {
			*why = "bad byte in header";
			return (LB_EPARSE);
		}
	if ((bad = parse_header(buf, hlen, &fr, lens)) != NULL) {
		*why = bad;
		return (LB_EPARSE);
	}
	fr.hdr = hlen + 1;
	total = fr.hdr + 1;
	for (int i = 0; i < NLEN; i++)
		total += lens[i];
	if (len > fr.hdr && lens[0] <= len - fr.hdr && !valid_ls(buf + fr.hdr, lens[0])) {
		*why = "bad logspace name";
		return (LB_EPARSE);
	}
	fr.size = (size_t)total;
	if (total > max) {
		set_slices(&fr, buf + fr.hdr, len - fr.hdr, lens);
		*f = fr;
		*need = (size_t)total;
		return (LB_ETOOBIG);
	}
	if (len < total) {
		*need = (size_t)total;
		return (EAGAIN);
	}
	if (buf[total - 1] != '\n') {
		*why = "no LF after the payload";
		return (LB_EPARSE);
	}
	set_slices(&fr, buf + fr.hdr, (size_t)total - fr.hdr - 1, lens);
	*f = fr;
	return (0);
}

size_t
lb_frame_resync(const uint8_t *buf, size_t len, size_t from)
{
	const uint8_t	*p;
	size_t		 tail;

	if (from >= len)
		return (len);
	if ((p = memmem(buf + from, len - from, LB_FRAME_MAGIC, MAGIC_LEN)) != NULL)
		return ((size_t)(p - buf));
	/* A partial magic at the very end may be completed by the next bytes. */
	tail = len - from < MAGIC_LEN - 1 ? len - from : MAGIC_LEN - 1;
	for (size_t k = tail; k > 0; k--)
		if (memcmp(buf + len - k, LB_FRAME_MAGIC, k) == 0)
			return (len - k);
	return (len);
}

/* Appends [-]seconds.micro of us to s. */
static int
fmt_time(char *s, size_t n, int64_t us)
{
	uint64_t a = us < 0 ? (uint64_t)0 - (uint64_t)us : (uint64_t)us;

	return (snprintf(s, n, "%s%" PRIu64 ".%06" PRIu64, us < 0 ? "-" : "", a / 1000000,
	    a % 1000000));
}

int
lb_frame_encode(const struct lb_msg *m, const char *ls, uint8_t **buf, size_t *len,
    size_t *cap)
{
	const struct lb_slice	*sl[NLEN - 1] = { &m->host, &m->program, &m->pid, &m->msgid,
	    &m->sd, &m->message };
	char			 h[LB_FRAME_HDR_MAX], rt[32], st[32], tz[8], pri[8];
	size_t			 lslen = strlen(ls), need;
	int			 n;

	if (!valid_ls((const uint8_t *)ls, lslen) || m->received < 0)
		return (EINVAL);
	for (int i = 0; i < NLEN - 1; i++)
		if (sl[i]->len > len_max[i + 1])
			return (EINVAL);
	fmt_time(rt, sizeof(rt), m->received);
	if (m->timestamp == LB_NOTIME)
		snprintf(st, sizeof(st), "-");
	else
		fmt_time(st, sizeof(st), m->timestamp);
	if (m->tzoff < -(23 * 60 + 59) || m->tzoff > 23 * 60 + 59)
		return (EINVAL);
	snprintf(tz, sizeof(tz), "%c%02d:%02d", m->tzoff < 0 ? '-' : '+', abs(m->tzoff) / 60,
	    abs(m->tzoff) % 60);
	if (m->facility == LB_NOVALUE || m->severity == LB_NOVALUE)
		snprintf(pri, sizeof(pri), "-");
	else if (m->facility > 23 || m->severity > 7)
		return (EINVAL);
	else
		snprintf(pri, sizeof(pri), "%d", m->facility * 8 + m->severity);
	n = snprintf(h, sizeof(h), "LB1 %s %s %s %s %c %zu %zu %zu %zu %zu %zu %zu\n", rt, st, tz,
	    pri, (m->flags & LB_MSG_RFC5424) ? '5' : (m->flags & LB_MSG_RFC3164) ? '3' : '-',
	    lslen, m->host.len, m->program.len, m->pid.len, m->msgid.len, m->sd.len,
	    m->message.len);
	if (n < 0 || (size_t)n >= sizeof(h))
		return (EINVAL);
	need = *len + (size_t)n + lslen + 1;
	for (int i = 0; i < NLEN - 1; i++)
		need += sl[i]->len;
	if (need > *cap) {
		size_t	 c = *cap ? *cap : 4096;
		uint8_t	*nb;

		while (c < need)
			c *= 2;
		if ((nb = realloc(*buf, c)) == NULL)
			return (errno);
		*buf = nb;
		*cap = c;
	}
	memcpy(*buf + *len, h, (size_t)n);
	*len += (size_t)n;
	memcpy(*buf + *len, ls, lslen);
	*len += lslen;
	for (int i = 0; i < NLEN - 1; i++) {
		if (sl[i]->len > 0)
			memcpy(*buf + *len, sl[i]->p, sl[i]->len);
		*len += sl[i]->len;
	}
	(*buf)[(*len)++] = '\n';
	return (0);
}
