/*
 * lb_json.c — a message as one JSON object, the shape the CLI's NDJSON output and searchd's
 * responses share, and RFC 3339 time stamps. It owns the escaping rule for bytes that are not
 * UTF-8 (FORMAT.md §10.4); it does not build whole responses (searchd does that).
 *
 * The one idea: messages are bytes, JSON strings are Unicode. Valid UTF-8 passes through and
 * every other byte becomes a lone surrogate \udcXX, as Python's "surrogateescape" does, so
 * json.loads(line)["message"].encode("utf-8", "surrogateescape") gives back the exact bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>

#include "logbox.h"

size_t
lb_utf8_len(const uint8_t *p, size_t len)
{
	uint8_t	c;
	size_t	n = 0;

	if (len == 0)
		return (0);
	c = p[0];
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	if (n == 0 || n > len)
		return (0);
	for (size_t k = 1; k < n; k++)
		if ((p[k] & 0xc0) != 0x80)
			return (0);
	if (n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
		return (0);	/* overlong, or a surrogate */
	if (n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
		return (0);	/* overlong, or past U+10FFFF */
	return (n);
}

void
lb_json_bytes(FILE *f, const uint8_t *p, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c = p[i];
		size_t n = 0;

		if (c < 0x80) {
			switch (c) {
			case '"': fputs("\\\"", f); break;
			case '\\': fputs("\\\\", f); break;
			case '\n': fputs("\\n", f); break;
			case '\r': fputs("\\r", f); break;
			case '\t': fputs("\\t", f); break;
			default:
				if (c < 0x20 || c == 0x7f)
					fprintf(f, "\\u%04x", c);
				else
					fputc(c, f);
			}
			i++;
			continue;
		}
		if ((n = lb_utf8_len(p + i, len - i)) == 0) {
			fprintf(f, "\\udc%02x", c);
			i++;
		} else {
			fwrite(p + i, 1, n, f);
			i += n;
		}
	}
}

static void
json_str(FILE *f, const char *key, struct lb_slice s)
{
	fprintf(f, ",\"%s\":\"", key);
	lb_json_bytes(f, s.p, s.len);
	fputc('"', f);
}

void
lb_time_fmt(char *buf, size_t len, int64_t us, int tzoff)
{
	int64_t		sec = us >= 0 ? us / 1000000 : (us - 999999) / 1000000;
	int64_t		frac = us - sec * 1000000;
	time_t		t = (time_t)(sec + tzoff * 60);
	struct tm	tm;
	char		zone[16];

	gmtime_r(&t, &tm);
	if (tzoff == 0)
		snprintf(zone, sizeof(zone), "Z");
	else
		snprintf(zone, sizeof(zone), "%c%02d:%02d", tzoff < 0 ? '-' : '+',
		    abs(tzoff) / 60, abs(tzoff) % 60);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06lld%s", tm.tm_year + 1900,
	    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (long long)frac, zone);
}

int
lb_msg_json(FILE *f, const struct lb_msg *m)
{
	static const struct { uint16_t bit; const char *name; } flags[] = {
		{ LB_MSG_TRUNCATED, "truncated" }, { LB_MSG_RFC5424, "rfc5424" },
		{ LB_MSG_RFC3164, "rfc3164" }, { LB_MSG_NOHEADER, "noheader" },
		{ LB_MSG_BADTIME, "badtime" }, { LB_MSG_FIELDCUT, "field_truncated" },
	};
	char	t[64];
	int	first = 1;

	lb_time_fmt(t, sizeof(t), m->received, 0);
	fprintf(f, "{\"id\":%llu,\"received\":\"%s\",\"received_us\":%lld",
	    (unsigned long long)m->id, t, (long long)m->received);
	if (m->timestamp == LB_NOTIME)
		fputs(",\"timestamp\":null,\"timestamp_us\":null", f);
	else {
		lb_time_fmt(t, sizeof(t), m->timestamp, m->tzoff);
		fprintf(f, ",\"timestamp\":\"%s\",\"timestamp_us\":%lld", t,
		    (long long)m->timestamp);
	}
	json_str(f, "host", m->host);
	json_str(f, "peer", m->peer);
	json_str(f, "program", m->program);
	json_str(f, "pid", m->pid);
	json_str(f, "msgid", m->msgid);
	json_str(f, "sd", m->sd);
	if (m->facility == LB_NOVALUE)
		fputs(",\"facility\":null", f);
	else
		fprintf(f, ",\"facility\":%u", m->facility);
	if (m->severity == LB_NOVALUE)
		fputs(",\"severity\":null", f);
	else
		fprintf(f, ",\"severity\":%u", m->severity);
	fputs(",\"flags\":[", f);
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		if (m->flags & flags[i].bit) {
			fprintf(f, "%s\"%s\"", first ? "" : ",", flags[i].name);
			first = 0;
		}
	}
	fputc(']', f);
	json_str(f, "message", m->message);
	fputc('}', f);
	return (ferror(f) ? EIO : 0);
}
