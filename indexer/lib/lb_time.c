/*
 * lb_time.c — times typed by people (a search's from and to) into µs since the epoch. It owns
 * the accepted forms: RFC 3339 (with a space for the "T", a missing offset meaning UTC, a date
 * alone meaning its midnight UTC), times relative to a given "now" ("-15m", "+1d"), "now"
 * itself, and plain seconds since the epoch. It does not format times (lb_time_fmt in
 * lb_json.c does) and never reads the clock: the caller passes now.
 *
 * The one idea: the calendar arithmetic is done on integers (days from civil, in lb_util.h),
 * never through mktime/timegm and the process's time zone, so the result depends only on the
 * text.
 */
#include <stdint.h>
#include <string.h>

#include "logbox.h"
#include "lb_util.h"

#define US_PER_S	INT64_C(1000000)

/* Reads exactly n decimal digits at s[*i]. Returns -1 when they are not there. */
static int64_t
digits(const char *s, size_t *i, size_t n)
{
	int64_t v = 0;

	for (size_t k = 0; k < n; k++) {
		char c = s[*i + k];

		if (c < '0' || c > '9')
			return (-1);
		v = v * 10 + (c - '0');
	}
	*i += n;
	return (v);
}

/* "YYYY-MM-DD[(T|t| )HH:MM[:SS[.frac]][Z|z|(+|-)HH:MM]]" */
static int
rfc3339(const char *s, int64_t *out)
{
	size_t	 i = 0;
	int64_t	 y, mo, d, h = 0, mi = 0, sec = 0, frac = 0, off = 0, oh, om, t;
	int	 nfrac = 0;

	if ((y = digits(s, &i, 4)) < 0 || s[i++] != '-' || (mo = digits(s, &i, 2)) < 0 ||
	    s[i++] != '-' || (d = digits(s, &i, 2)) < 0)
		return (LB_EQUERY);
	if (mo < 1 || mo > 12 || d < 1 || d > lb_month_days(y, mo))
		return (LB_EQUERY);
	if (s[i] != '\0') {
		if (s[i] != 'T' && s[i] != 't' && s[i] != ' ')
			return (LB_EQUERY);
		i++;
		if ((h = digits(s, &i, 2)) < 0 || s[i++] != ':' || (mi = digits(s, &i, 2)) < 0)
			return (LB_EQUERY);
		if (s[i] == ':') {
			i++;
			if ((sec = digits(s, &i, 2)) < 0)
				return (LB_EQUERY);
			if (s[i] == '.' || s[i] == ',') {
				i++;
				if (s[i] < '0' || s[i] > '9')
					return (LB_EQUERY);
				/* Any number of digits; the first six count. */
				while (s[i] >= '0' && s[i] <= '9') {
					if (nfrac < 6) {
						frac = frac * 10 + (s[i] - '0');
						nfrac++;
					}
					i++;
				}
				for (; nfrac < 6; nfrac++)
					frac *= 10;
			}
		}
		/* 60 is a leap second: it is the next minute's first second. */
		if (h > 23 || mi > 59 || sec > 60)
			return (LB_EQUERY);
		if (s[i] == 'Z' || s[i] == 'z')
			i++;
		else if (s[i] == '+' || s[i] == '-') {
			int sign = s[i++] == '-' ? -1 : 1;

			if ((oh = digits(s, &i, 2)) < 0 || s[i++] != ':' ||
			    (om = digits(s, &i, 2)) < 0 || oh > 23 || om > 59)
				return (LB_EQUERY);
			off = sign * (oh * 60 + om);
		}
		if (s[i] != '\0')
			return (LB_EQUERY);
	}
	t = lb_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off * 60;
	*out = t * US_PER_S + frac;
	return (0);
}

/* "(+|-)N(s|m|h|d|w)" relative to now. */
static int
relative(const char *s, int64_t now_us, int64_t *out)
{
	int64_t	 n = 0, unit, delta;
	int	 neg = s[0] == '-';
	size_t	 i = 1;

	if (s[i] < '0' || s[i] > '9')
		return (LB_EQUERY);
	while (s[i] >= '0' && s[i] <= '9') {
		if (n > (INT64_MAX - 9) / 10)
			return (LB_EQUERY);
		n = n * 10 + (s[i++] - '0');
	}
	switch (s[i]) {
	case 's': unit = US_PER_S; break;
	case 'm': unit = 60 * US_PER_S; break;
	case 'h': unit = 3600 * US_PER_S; break;
	case 'd': unit = 86400 * US_PER_S; break;
	case 'w': unit = 7 * 86400 * US_PER_S; break;
	default: return (LB_EQUERY);
	}
	if (s[i + 1] != '\0' || n > INT64_MAX / unit)
		return (LB_EQUERY);
	delta = n * unit;
	if (neg) {
		if (now_us < INT64_MIN + 1 + delta)
			return (LB_EQUERY);
		*out = now_us - delta;
	} else {
		if (now_us > INT64_MAX - delta)
			return (LB_EQUERY);
		*out = now_us + delta;
	}
	return (0);
}

int
lb_time_parse(const char *s, int64_t now_us, int64_t *out)
{
	int64_t	 v = 0;
	size_t	 i, n;

	if (s == NULL)
		return (LB_EQUERY);
	n = strlen(s);
	if (strcmp(s, "now") == 0) {
		*out = now_us;
		return (0);
	}
	if (s[0] == '-' || s[0] == '+')
		return (relative(s, now_us, out));
	for (i = 0; i < n && s[i] >= '0' && s[i] <= '9'; i++)
		;
	if (n > 0 && i == n) {
		for (i = 0; i < n; i++) {
			if (v > (INT64_MAX / US_PER_S - 9) / 10)
				return (LB_EQUERY);
			v = v * 10 + (s[i] - '0');
		}
		*out = v * US_PER_S;
		return (0);
	}
	if (n >= 10 && s[4] == '-')
		return (rfc3339(s, out));
	return (LB_EQUERY);
}
