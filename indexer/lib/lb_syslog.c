/*
 * lb_syslog.c — syslog headers (FORMAT.md §7). It owns turning one framed message into a
 * struct lb_msg (RFC 5424, RFC 3164 as devices really send it, or no header at all); it does
 * not own splitting a byte stream into frames (lb_syslog_frame.c), the message bytes, tokens or
 * storage. The one idea: parsing is a single forward pass that only fills slices pointing into
 * the caller's buffer. It never allocates, never fails on content, and never looks at the
 * message text after the header, so its cost does not grow with the message.
 */
#include <errno.h>
#include <string.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_util.h"

#define US_PER_SEC	1000000LL
#define US_PER_DAY	(86400LL * US_PER_SEC)
/* Receive times used for year inference are clamped to years 0000..9999. */
#define RECV_MAX	(253402300799LL * US_PER_SEC)

#define IS_DIGIT(c)	((c) >= '0' && (c) <= '9')

/* A broken-down time as read from a header, before it is checked. */
struct btime {
	int	 year;		/* -1: not in the stamp (RFC 3164) */
	int	 mon, day, hour, min, sec;
	int	 usec;		/* fraction cut to 6 digits */
	int	 tzoff;		/* minutes east of UTC */
};

/* The year of day z (days since 1970-01-01). */
static int64_t
year_from_days(int64_t z)
{
	int64_t		 era, doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	return (yoe + era * 400 + (mp >= 10));
}

/* Checks the time of day and the offset; the date is checked per year by bt_to_us(). */
static int
bt_time_ok(const struct btime *bt)
{
	return (bt->mon >= 1 && bt->mon <= 12 && bt->day >= 1 && bt->day <= 31 &&
	    bt->hour <= 23 && bt->min <= 59 && bt->sec <= 60);
}

/* bt in year y as µs since the epoch (UTC), or 0 when the day does not exist in y. */
static int
bt_to_us(const struct btime *bt, int64_t y, int64_t *t)
{
	int64_t		 secs;

	if (bt->day > lb_month_days(y, bt->mon))
		return (0);
	secs = lb_days_from_civil(y, bt->mon, bt->day) * 86400 + bt->hour * 3600 +
	    bt->min * 60 + bt->sec - (int64_t)bt->tzoff * 60;
	*t = secs * US_PER_SEC + bt->usec;
	return (1);
}

/* Reads exactly n digits at p; -1 if one is not a digit. */
static int
digits(const uint8_t *p, int n)
{
	int		 v = 0;

	for (int i = 0; i < n; i++) {
		if (!IS_DIGIT(p[i]))
			return (-1);
		v = v * 10 + (p[i] - '0');
	}
	return (v);
}

/*
 * Reads ".d{1,9}" at *pp (if there) into bt->usec, keeping 6 digits. Returns 0 when a "." has
 * no digit or more than 9 follow.
 */
static int
read_frac(const uint8_t **pp, const uint8_t *end, struct btime *bt)
{
	const uint8_t	*p = *pp;
	int		 n = 0, us = 0;

	bt->usec = 0;
	if (p >= end || *p != '.')
		return (1);
	p++;
	while (p < end && IS_DIGIT(*p)) {
		if (n < 6)
			us = us * 10 + (*p - '0');
		n++;
		p++;
	}
	if (n == 0 || n > 9)
		return (0);
	for (int i = n; i < 6; i++)
		us *= 10;
	bt->usec = us;
	*pp = p;
	return (1);
}

/*
 * An RFC 3339 time stamp filling exactly [p, end):
 * YYYY-MM-DD"T"hh:mm:ss[.frac]("Z" / ("+"/"-")hh[":"]mm), "T" and "Z" in either case.
 * Returns 1 and sets *t and *tzoff when it is one and the values are in range.
 */
static int
parse_iso(const uint8_t *p, const uint8_t *end, int64_t *t, int16_t *tzoff)
{
	struct btime	 bt;
	int		 sign, hh, mm;

	if (end - p < 20 || p[4] != '-' || p[7] != '-' || (p[10] != 'T' && p[10] != 't') ||
	    p[13] != ':' || p[16] != ':')
		return (0);
	if ((bt.year = digits(p, 4)) < 0 || (bt.mon = digits(p + 5, 2)) < 0 ||
	    (bt.day = digits(p + 8, 2)) < 0 || (bt.hour = digits(p + 11, 2)) < 0 ||
	    (bt.min = digits(p + 14, 2)) < 0 || (bt.sec = digits(p + 17, 2)) < 0)
		return (0);
	p += 19;
	if (!read_frac(&p, end, &bt) || p >= end)
		return (0);
	if (*p == 'Z' || *p == 'z') {
		bt.tzoff = 0;
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p++ == '-' ? -1 : 1;
		if (end - p < 4 || (hh = digits(p, 2)) < 0)
			return (0);
		p += 2;
		if (*p == ':')
			p++;
		if (end - p < 2 || (mm = digits(p, 2)) < 0 || hh > 23 || mm > 59)
			return (0);
		p += 2;
		bt.tzoff = sign * (hh * 60 + mm);
	} else
		return (0);
	if (p != end || !bt_time_ok(&bt) || !bt_to_us(&bt, bt.year, t))
		return (0);
	*tzoff = (int16_t)bt.tzoff;
	return (1);
}

/* Month name (any case) → 1..12, or 0. */
static int
month_of(const uint8_t *p)
{
	static const char	 names[] = "janfebmaraprmayjunjulaugsepoctnovdec";
	uint8_t			 a = p[0] | 0x20, b = p[1] | 0x20, c = p[2] | 0x20;

	for (int i = 0; i < 12; i++)
		if (names[3 * i] == a && names[3 * i + 1] == b && names[3 * i + 2] == c)
			return (i + 1);
	return (0);
}

/*
 * An RFC 3164 time stamp at p: "Mmm dd hh:mm:ss" with the day as "dd", " d" or "d", an
 * optional ".frac" and an optional year before the time ("Mmm dd yyyy hh:mm:ss"), followed by
 * a space or the end. Returns its length (without the space), or 0 when p does not have that
 * shape; bt is filled but not range-checked.
 */
static size_t
bsd_shape(const uint8_t *p, const uint8_t *end, struct btime *bt)
{
	const uint8_t	*q;

	if (end - p < 14 || (bt->mon = month_of(p)) == 0 || p[3] != ' ')
		return (0);
	q = p + 4;
	if (*q == ' ')
		q++;
	if (q >= end || !IS_DIGIT(*q))
		return (0);
	bt->day = *q++ - '0';
	if (q < end && IS_DIGIT(*q))
		bt->day = bt->day * 10 + (*q++ - '0');
	if (q >= end || *q++ != ' ')
		return (0);
	if (end - q >= 5 && q[4] == ' ' && digits(q, 4) >= 0) {
		bt->year = digits(q, 4);
		q += 5;
	} else
		bt->year = -1;
	if (end - q < 8 || q[2] != ':' || q[5] != ':' || (bt->hour = digits(q, 2)) < 0 ||
	    (bt->min = digits(q + 3, 2)) < 0 || (bt->sec = digits(q + 6, 2)) < 0)
		return (0);
	q += 8;
	if (!read_frac(&q, end, bt) || (q < end && *q != ' '))
		return (0);
	bt->tzoff = 0;
	return ((size_t)(q - p));
}

/*
 * The time of an RFC 3164 stamp. Without a year it takes, of the years before, of and after
 * received's, the one that puts it closest to received (a date that does not exist in a year,
 * Feb 29, skips that year).
 */
static int
bsd_time(const struct btime *bt, int64_t received, int64_t *t)
{
	int64_t		 ry, c, best = 0, bestd = -1, d;

	if (!bt_time_ok(bt))
		return (0);
	if (bt->year >= 0)
		return (bt_to_us(bt, bt->year, t));
	if (received < 0)
		received = 0;
	if (received > RECV_MAX)
		received = RECV_MAX;
	ry = year_from_days(received / US_PER_DAY);
	for (int64_t y = ry - 1; y <= ry + 1; y++) {
		if (!bt_to_us(bt, y, &c))
			continue;
		d = c > received ? c - received : received - c;
		if (bestd < 0 || d < bestd) {
			bestd = d;
			best = c;
		}
	}
	if (bestd < 0)
		return (0);
	*t = best;
	return (1);
}

/* A field slice (lb_msg_fit cuts it at LB_FIELD_MAX bytes once the header is parsed). */
static struct lb_slice
field_cut(const uint8_t *p, size_t n)
{
	struct lb_slice	 s = { p, n };

	return (s);
}

static void
set_message(struct lb_msg *m, const uint8_t *p, const uint8_t *end)
{
	size_t		 n = (size_t)(end - p);

	if (n > LB_MSG_MAX) {
		n = LB_MSG_MAX;
		m->flags |= LB_MSG_TRUNCATED;
	}
	m->message.p = p;
	m->message.len = n;
}

/*
 * The next space-separated RFC 5424 header field at *pp: [*pp, next SP or end). Moves *pp past
 * the field and its SP. Returns 1 when a SP followed (more header to come).
 */
static int
next_field(const uint8_t **pp, const uint8_t *end, struct lb_slice *f)
{
	const uint8_t	*p = *pp, *q;

	q = memchr(p, ' ', (size_t)(end - p));
	if (q == NULL) {
		f->p = p;
		f->len = (size_t)(end - p);
		*pp = end;
		return (0);
	}
	f->p = p;
	f->len = (size_t)(q - p);
	*pp = q + 1;
	return (1);
}

/* An RFC 5424 header field; "-" is the nil value (an empty slice). */
static void
set_field(struct lb_slice *dst, struct lb_slice f)
{
	if (f.len == 1 && f.p[0] == '-')
		f.len = 0;
	*dst = field_cut(f.p, f.len);
}

/* An SD-NAME: 1* PRINTUSASCII except '=', SP, ']', '"'. Returns its length. */
static size_t
sd_name(const uint8_t *p, const uint8_t *end)
{
	const uint8_t	*q = p;

	while (q < end && *q > ' ' && *q < 0x7f && *q != '=' && *q != ']' && *q != '"')
		q++;
	return ((size_t)(q - p));
}

/*
 * RFC 5424 STRUCTURED-DATA at p: one or more SD-ELEMENTs. Returns their length, or 0 when
 * they are malformed; *keep is how much of them to store: the whole, or the elements that fit
 * in LB_SD_MAX, or LB_SD_MAX bytes when the first element alone is longer.
 */
static size_t
sd_parse(const uint8_t *p, const uint8_t *end, size_t *keep)
{
	const uint8_t	*q = p;
	size_t		 n, k = 0;

	if (q >= end || *q != '[')
		return (0);
	while (q < end && *q == '[') {
		q++;
		if ((n = sd_name(q, end)) == 0)
			return (0);
		q += n;
		while (q < end && *q == ' ') {
			q++;
			if ((n = sd_name(q, end)) == 0)
				return (0);
			q += n;
			if (end - q < 2 || q[0] != '=' || q[1] != '"')
				return (0);
			q += 2;
			while (q < end && *q != '"') {
				if (*q == '\\' && ++q == end)
					return (0);
				q++;
			}
			if (q == end)
				return (0);
			q++;
		}
		if (q >= end || *q != ']')
			return (0);
		q++;
		if ((size_t)(q - p) <= LB_SD_MAX)
			k = (size_t)(q - p);
	}
	*keep = k == 0 ? LB_SD_MAX : k;
	return ((size_t)(q - p));
}

/* RFC 5424 after "<PRI>1 ": TIMESTAMP HOSTNAME APP-NAME PROCID MSGID SD [SP MSG]. */
static void
parse_5424(struct lb_msg *m, const uint8_t *p, const uint8_t *end)
{
	struct lb_slice	*const hdr[] = { &m->host, &m->program, &m->pid, &m->msgid };
	struct lb_slice	 f;
	size_t		 n, keep = 0;
	int		 more;

	m->flags |= LB_MSG_RFC5424;
	more = next_field(&p, end, &f);
	if (f.len > 0 && !(f.len == 1 && f.p[0] == '-') &&
	    !parse_iso(f.p, f.p + f.len, &m->timestamp, &m->tzoff))
		m->flags |= LB_MSG_BADTIME;
	/* HOSTNAME APP-NAME PROCID MSGID, as far as the header goes. */
	for (size_t i = 0; i < sizeof(hdr) / sizeof(hdr[0]); i++) {
		if (!more)
			goto done;
		more = next_field(&p, end, &f);
		set_field(hdr[i], f);
	}
	if (!more)
		goto done;
	if (p < end && *p == '-' && (p + 1 == end || p[1] == ' ')) {
		n = 1;
		keep = 0;
	} else if ((n = sd_parse(p, end, &keep)) == 0 || (p + n < end && p[n] != ' '))
		n = 0;		/* not SD: the rest is the message */
	if (n > 0) {
		m->sd.p = p;
		m->sd.len = keep == 0 ? 0 : n;	/* lb_msg_fit keeps what fits */
		p += n;
		if (p < end)
			p++;
	}
 done:
	set_message(m, p, end);
}

/*
 * An RFC 3164 TAG at p: 1..LB_FIELD_MAX bytes other than SP, '[', ':', then an optional
 * "[PID]", then ":". Without a PID the ":" must be followed by SP or the end (so "fe80::1"
 * and "key:value" are not tags). One SP after the ":" is skipped. Returns 1 and sets the
 * slices and *after when p holds a tag.
 */
static int
tag_at(const uint8_t *p, const uint8_t *end, struct lb_slice *prog, struct lb_slice *pid,
    const uint8_t **after)
{
	const uint8_t	*q = p, *r;
	const uint8_t	*lim = end - p > LB_FIELD_MAX ? p + LB_FIELD_MAX : end;

	while (q < lim && *q != ' ' && *q != '[' && *q != ':')
		q++;
	if (q == p || q == end || (*q != '[' && *q != ':'))
		return (0);
	prog->p = p;
	prog->len = (size_t)(q - p);
	pid->p = p;
	pid->len = 0;
	if (*q == '[') {
		r = ++q;
		lim = end - q > LB_FIELD_MAX ? q + LB_FIELD_MAX : end;
		while (r < lim && *r != ']' && *r != ' ')
			r++;
		if (end - r < 2 || r[0] != ']' || r[1] != ':')
			return (0);
		pid->p = q;
		pid->len = (size_t)(r - q);
		q = r + 1;
	} else if (q + 1 < end && q[1] != ' ')
		return (0);
	q++;
	if (q < end && *q == ' ')
		q++;
	*after = q;
	return (1);
}

/*
 * RFC 3164 after the PRI (or at the start when there is none):
 * [TIMESTAMP SP [HOSTNAME SP]] [TAG["["PID"]"]":" SP] MSG. Returns 0 without touching m when
 * there is no PRI and no time stamp: then this is not a syslog header.
 */
static int
parse_3164(struct lb_msg *m, const uint8_t *p, const uint8_t *end, int64_t received,
    int havepri)
{
	struct btime	 bt;
	struct lb_slice	 prog, pid;
	const uint8_t	*q, *after;
	size_t		 n = 0;
	int		 ok = 0;

	if ((n = bsd_shape(p, end, &bt)) > 0)
		ok = bsd_time(&bt, received, &m->timestamp);
	else if (end - p >= 11 && digits(p, 4) >= 0 && p[4] == '-' && digits(p + 5, 2) >= 0 &&
	    p[7] == '-' && digits(p + 8, 2) >= 0 && (p[10] == 'T' || p[10] == 't')) {
		q = memchr(p, ' ', (size_t)(end - p));
		n = (size_t)((q == NULL ? end : q) - p);
		ok = parse_iso(p, p + n, &m->timestamp, &m->tzoff);
	}
	if (n == 0 && !havepri)
		return (0);
	m->flags |= LB_MSG_RFC3164;
	if (n > 0) {
		if (!ok) {
			m->flags |= LB_MSG_BADTIME;
			m->timestamp = LB_NOTIME;
			m->tzoff = 0;
		}
		p += n;
		if (p < end)
			p++;
		if (!tag_at(p, end, &prog, &pid, &after)) {
			q = memchr(p, ' ', (size_t)(end - p));
			if (q == NULL)
				q = end;
			m->host = field_cut(p, (size_t)(q - p));
			p = q < end ? q + 1 : end;
		}
	}
	if (tag_at(p, end, &prog, &pid, &after)) {
		m->program = prog;
		m->pid = pid;
		p = after;
	}
	set_message(m, p, end);
	return (1);
}

/* "<PRI>" at p (p[0] is '<'): 1-3 digits, value 0..191. Returns its length or 0. */
static size_t
parse_pri(const uint8_t *p, const uint8_t *end, int *pri)
{
	size_t		 i = 1;
	int		 v = 0;

	while (i < 4 && p + i < end && IS_DIGIT(p[i]))
		v = v * 10 + (p[i++] - '0');
	if (i == 1 || p + i >= end || p[i] != '>' || v > 191)
		return (0);
	*pri = v;
	return (i + 1);
}

void
lb_syslog_parse(const uint8_t *buf, size_t len, int64_t received, struct lb_msg *m)
{
	const uint8_t	*p = buf, *end;
	struct lb_slice	 empty = { buf, 0 };
	size_t		 n;
	int		 pri = -1;

	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len > 0 && buf[len - 1] == '\r')
		len--;
	end = buf + len;

	m->id = 0;
	m->received = received;
	m->timestamp = LB_NOTIME;
	m->tzoff = 0;
	m->facility = 1;
	m->severity = 5;
	m->flags = 0;
	m->host = m->program = m->pid = m->msgid = m->sd = m->message = m->peer = empty;

	if (len > 0 && buf[0] == '<') {
		if ((n = parse_pri(buf, end, &pri)) == 0)
			goto noheader;
		m->facility = (uint8_t)(pri >> 3);
		m->severity = (uint8_t)(pri & 7);
		p += n;
		if (end - p >= 2 && p[0] == '1' && p[1] == ' ') {
			parse_5424(m, p + 2, end);
			lb_msg_fit(m);
			return;
		}
	}
	if (parse_3164(m, p, end, received, pri >= 0)) {
		lb_msg_fit(m);
		return;
	}
 noheader:
	m->facility = 1;
	m->severity = 5;
	m->flags = LB_MSG_NOHEADER;
	set_message(m, buf, end);
}
