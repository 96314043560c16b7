/*
 * lb_syslog_frame.c — RFC 6587 framing (FORMAT.md §7.1): splitting a byte stream of syslog
 * messages into frames, octet-counted or one a line. It owns only where a frame starts and
 * ends; lb_syslog.c parses the frame's header, and lb_frame.c is the unrelated hand-off frame
 * between the collector and indexd. The one idea: the answer is decided only from whole
 * tokens, so for every prefix of a stream it is EAGAIN or the answer for the whole stream.
 */
#include <errno.h>
#include <string.h>

#include "logbox.h"

#define IS_DIGIT(c)	((c) >= '0' && (c) <= '9')

/* LB_FRAMING_LINE: bytes up to "\n". */
static int
frame_line(const uint8_t *buf, size_t len, int eof, size_t max, struct lb_slice *frame,
    size_t *used)
{
	const uint8_t	*nl;
	size_t		 n;

	if (len == 0)
		return (EAGAIN);
	if ((nl = memchr(buf, '\n', len)) != NULL) {
		n = (size_t)(nl - buf);
		if (n > max) {
			*used = n + 1;
			return (LB_ETOOBIG);
		}
		frame->p = buf;
		frame->len = n;
		*used = n + 1;
		return (0);
	}
	if (len > max) {
		*used = eof ? len : 0;
		return (LB_ETOOBIG);
	}
	if (!eof)
		return (EAGAIN);
	frame->p = buf;
	frame->len = len;
	*used = len;
	return (0);
}

/* At most this many digits in an octet count (up to 9,999,999,999 bytes). */
#define OCTET_DIGITS	10

/*
 * LB_FRAMING_OCTET: MSG-LEN SP SYSLOG-MSG, MSG-LEN = NONZERO-DIGIT *DIGIT. CR and LF bytes before
 * the count are skipped (senders that end each frame with a newline as well). The answer for a
 * prefix of a stream is EAGAIN or the same answer as for the whole stream.
 */
static int
frame_octet(const uint8_t *buf, size_t len, int eof, size_t max, struct lb_slice *frame,
    size_t *used)
{
	size_t		 i = 0, s;
	uint64_t	 n = 0, total;

	while (i < len && (buf[i] == '\n' || buf[i] == '\r'))
		i++;
	if (i == len)
		return (EAGAIN);
	if (buf[i] < '1' || buf[i] > '9')
		return (LB_EPARSE);
	s = i;
	while (i < len && IS_DIGIT(buf[i]) && i - s < OCTET_DIGITS)
		n = n * 10 + (uint64_t)(buf[i++] - '0');
	if (i == len)
		return (eof ? LB_EPARSE : EAGAIN);
	if (buf[i] != ' ')
		return (LB_EPARSE);	/* a non-digit, or an eleventh digit */
	i++;
	total = (uint64_t)i + n;
	if (n > max) {
		*used = (uint64_t)len >= total ? (size_t)total : 0;
		return (LB_ETOOBIG);
	}
	if ((uint64_t)len < total)
		return (eof ? LB_EPARSE : EAGAIN);
	frame->p = buf + i;
	frame->len = (size_t)n;
	*used = (size_t)total;
	return (0);
}

int
lb_syslog_frame_next(int framing, const uint8_t *buf, size_t len, int eof, size_t max,
    struct lb_slice *frame, size_t *used)
{
	switch (framing) {
	case LB_FRAMING_LINE:
		return (frame_line(buf, len, eof, max, frame, used));
	case LB_FRAMING_OCTET:
		return (frame_octet(buf, len, eof, max, frame, used));
	default:
		return (EINVAL);
	}
}
