/*
 * lb_msgfit.c — the store's field limits applied to one message: lb_msg_fit() cuts host,
 * program, pid, msgid and peer at LB_FIELD_MAX bytes, structured data at LB_SD_MAX bytes and the
 * message at LB_MSG_MAX bytes, and flags what it cut. It owns the cutting rule, not the limits
 * (lb_format.h, FORMAT.md §2) nor the parsing (lb_syslog.c): the parser, the store's append and
 * so every entry point (logbox ingest, indexd's FIFO and sockets) cut through here, so a field
 * never makes an append fail (issue 15: one long host name used to hold all ingestion).
 */
#include "logbox.h"
#include "lb_format.h"

/* Cuts s at max bytes; 1 when it did. */
static int
cut(struct lb_slice *s, size_t max)
{
	if (s->len <= max)
		return (0);
	s->len = max;
	return (1);
}

/*
 * How much of structured data p[0..len) (len > LB_SD_MAX) to keep: the SD-ELEMENTs that fit
 * whole in LB_SD_MAX bytes, or LB_SD_MAX bytes when the first one alone is longer. An element
 * ends at a "]" outside a quoted PARAM-VALUE (where "\" escapes the next byte). The same rule
 * as the parser's for well-formed data, and a plain cut for anything else.
 */
static size_t
sd_keep(const uint8_t *p, size_t len)
{
	size_t	 k = 0;
	int	 quoted = 0;

	for (size_t i = 0; i < len && i < LB_SD_MAX; i++) {
		if (quoted) {
			if (p[i] == '\\')
				i++;
			else if (p[i] == '"')
				quoted = 0;
		} else if (p[i] == '"')
			quoted = 1;
		else if (p[i] == ']')
			k = i + 1;
	}
	return (k == 0 ? LB_SD_MAX : k);
}

void
lb_msg_fit(struct lb_msg *m)
{
	int	 c = 0;

	c |= cut(&m->host, LB_FIELD_MAX);
	c |= cut(&m->program, LB_FIELD_MAX);
	c |= cut(&m->pid, LB_FIELD_MAX);
	c |= cut(&m->msgid, LB_FIELD_MAX);
	c |= cut(&m->peer, LB_FIELD_MAX);
	if (m->sd.len > LB_SD_MAX) {
		m->sd.len = sd_keep(m->sd.p, m->sd.len);
		c = 1;
	}
	if (c)
		m->flags |= LB_MSG_FIELDCUT;
	if (cut(&m->message, LB_MSG_MAX))
		m->flags |= LB_MSG_TRUNCATED;
}
