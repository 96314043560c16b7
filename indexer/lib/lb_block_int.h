/*
 * lb_block_int.h — what the block codec's two files share (lb_block.c: the methods, the
 * payloads and the header streams; lb_block_tpl.c: message bodies as templates and typed
 * variables, FORMAT.md §3.2). Not part of liblogbox's interface.
 */
#ifndef LB_BLOCK_INT_H
#define LB_BLOCK_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lb_util.h"

/* A growing byte buffer. */
struct bbuf {
	uint8_t		*p;
	size_t		 len, cap;
};

/* Room for n more bytes in b. 0 or ENOMEM. */
static inline int
bb_room(struct bbuf *b, size_t n)
{
	return (b->len + n <= b->cap ? 0 : lb_grow(&b->p, &b->cap, b->len + n, 1));
}

static inline int
bb_put(struct bbuf *b, const uint8_t *p, size_t n)
{
	int	 rc;

	if (n == 0)
		return (0);
	if ((rc = bb_room(b, n)) != 0)
		return (rc);
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return (0);
}

static inline int
bb_var(struct bbuf *b, uint64_t v)
{
	int	 rc;

	if ((rc = bb_room(b, LB_VARINT_MAX)) != 0)
		return (rc);
	b->len += lb_varint_put(b->p + b->len, v);
	return (0);
}

/* A stream being read: p[0..len), at the cursor. */
struct rs {
	const uint8_t	*p;
	size_t		 len, at;
};

/*
 * The template streams of a LB_BLK_TPL payload (FORMAT.md §3.2), in the order they follow the
 * header streams: template codes, new templates, numbers, numbers with leading zeros, IPv4
 * addresses, hex runs.
 */
enum { T_CODE, T_TEXT, T_NUM, T_NUM0, T_IP, T_HEX, NTSTREAM };

/* The placeholder bytes of a template, and its escape (FORMAT.md §3.2). */
#define TPL_NUM		0x11
#define TPL_NUM0	0x12
#define TPL_IP		0x13
#define TPL_HEX		0x14
#define TPL_ESC		0x15

/* The template codec's scratch (encoder's table, decoder's templates); NULL is empty. */
struct lb_tpl;
void	lb_tpl_free(struct lb_tpl *t);

/* Starts a block for the encoder (an empty template table). 0 or ENOMEM. */
int	lb_tpl_begin(struct lb_tpl **t);
/* One body p[0..n) into the streams st[NTSTREAM]. 0 or ENOMEM. */
int	lb_tpl_put(struct lb_tpl *t, const uint8_t *p, size_t n, struct bbuf *st);

/* Starts a block of n bodies for the decoder. 0 or ENOMEM. */
int	lb_tpl_dbegin(struct lb_tpl **t, uint64_t n);
/*
 * The next body from the streams' cursors s[NTSTREAM], as a record holds it (its length
 * varint, then its bytes), into dst[0..room); the bytes written in *used. 0, LB_ECORRUPT (a
 * code past the table, a template ending in an escape, a variable stream cut short, a value
 * out of its range, more than room bytes) or ENOMEM.
 */
int	lb_tpl_body(struct lb_tpl *t, struct rs *s, uint8_t *dst, size_t room, size_t *used);

#endif /* LB_BLOCK_INT_H */
