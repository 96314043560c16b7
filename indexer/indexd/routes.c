/*
 * routes.c — the --routes rule file: the [[logspace]] tables of collector.toml, read with a
 * strict TOML subset, compiled once into PCRE2 programs, and applied to each parsed message.
 * It owns the reader, the rules and the matching; not when the file is read (main.c: at start
 * and on SIGHUP, keeping the old rules when the new file is refused) and not the logspaces.
 *
 * The one idea: a rule file is small and read rarely, a message is routed ~10^5 times a second.
 * So everything that can be decided at load is: facilities and listeners become bit masks,
 * regular expressions are compiled (JIT when the process may map executable memory) with their
 * match data allocated once, and routes_pick() does no allocation and no string work but the
 * regex matches themselves, cheapest conditions first.
 *
 * Regular expressions match BYTES: compiled without PCRE2_UTF (and with PCRE2_NEVER_UTF, so a
 * pattern cannot turn it on with (*UTF)), given each field's length, so NUL and invalid UTF-8 in
 * a message are plain bytes: `.` is one byte and `host`'s caselessness is ASCII only. That is
 * how syslog-ng 3.38 applied the same rules (type(pcre) without flags(utf8)).
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "indexd.h"
#include "lb_util.h"

#define RT_FILE_MAX	(1024 * 1024)	/* bytes a rule file may have */
#define RT_RULES_MAX	1024		/* [[logspace]] tables */
#define RT_TABLES_MAX	256		/* other [table]s (each named once) */
#define RT_KEYS_MAX	256		/* keys in one table */
#define RT_DEPTH_MAX	8		/* arrays in arrays */
#define RT_MATCH_LIMIT	1000000		/* pcre2_set_match_limit: a runaway regex gives up */
#define RT_JIT_STACK	(512 * 1024)	/* the JIT's stack, most a pattern may use */

/*
 * The listeners a message may come in on: the keys of collector.toml's [ports] (collector/
 * render.py), which the spool record carries (FORMAT.md §13). Index = bit in a rule's mask.
 */
/* The listeners of collector.toml's [ports], and syslog-ng's own messages (FORMAT.md §13.1). */
static const char *const listeners[] = { "tcp", "octet", "tls", "udp", "internal" };
#define RT_NLISTENERS	(sizeof(listeners) / sizeof(listeners[0]))

enum { RX_PROGRAM, RX_HOST, RX_MESSAGE, RX_N };
static const char *const rx_keys[RX_N] = { "program", "host", "message" };

struct rx {
	pcre2_code	*code;		/* NULL: no such condition */
	int		 jit;		/* pcre2_jit_compile succeeded */
	char		*src;		/* the pattern as written (for routes_describe) */
	size_t		 srclen;
};

struct rule {
	char		 name[LB_NAME_MAX + 1];
	int		 line;		/* of its [[logspace]] header */
	uint32_t	 facilities;	/* bit f: facility f matches; 0: no condition */
	uint32_t	 listeners;	/* bit i: listeners[i] matches; 0: no condition */
	struct rx	 rx[RX_N];
	pcre2_match_data *md;		/* one, for this rule's matches (routes_pick is serial) */
};

struct routes {
	struct rule	*rules;
	size_t		 n;
	int		 jit_failed;	/* a pattern could not be JIT-compiled: interpreted */
	int		 any_jit;	/* a pattern was JIT-compiled */
	int		 any_listener;	/* a rule has a listener condition */
	pcre2_match_context *mctx;
	pcre2_jit_stack	*jstack;
	uint64_t	*errors;	/* matches that failed (limit hit): counted as no match */
};

/* ------------------------------------------------------------------ TOML values */

enum { TV_STRING, TV_INT, TV_BOOL, TV_ARRAY };

struct tval {
	int		 type;
	char		*s;		/* TV_STRING: the bytes (NUL-terminated; may hold NULs) */
	size_t		 slen;
	int64_t		 i;		/* TV_INT, TV_BOOL */
	struct tval	*items;		/* TV_ARRAY */
	size_t		 n, cap;
};

/* The reader's state: the file's bytes, where it is, and the first error. */
struct rd {
	const char	*path;
	const uint8_t	*p, *end;
	int		 line;
	char		*err;
	size_t		 errlen;
	struct routes	*r;
	struct rule	*cur;		/* the [[logspace]] being read; NULL: another table */
	int		 flags;
	/* the keys of the current table, for duplicates */
	char		*keys[RT_KEYS_MAX];
	size_t		 nkeys;
	/* the [table]s seen, each at most once */
	char		*tables[RT_TABLES_MAX];
	size_t		 ntables;
	int		 in_logspace;	/* the current table is a [[logspace]] */
	char		 sh[300];	/* shown(): a value quoted in an error */
};

static int
rd_err(struct rd *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int
rd_err(struct rd *d, const char *fmt, ...)
{
	char	 why[400];
	va_list	 ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(d->err, d->errlen, "%s:%d: %s", d->path, d->line, why);
	return (EINVAL);
}

/* s[0..n) for an error message: at most 64 bytes, other than printable ASCII as \xHH. */
static const char *
shown(char *buf, size_t len, const char *s, size_t n)
{
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && i < 64 && o + 5 < len; i++) {
		uint8_t c = (uint8_t)s[i];

		if (c < 0x20 || c >= 0x7f || c == '\'' || c == '\\')
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
		buf[o] = '\0';
	}
	return (buf);
}

static void
tval_free(struct tval *v)
{
	if (v->type == TV_STRING)
		free(v->s);
	else if (v->type == TV_ARRAY) {
		for (size_t i = 0; i < v->n; i++)
			tval_free(&v->items[i]);
		free(v->items);
	}
	memset(v, 0, sizeof(*v));
}

/*
 * The whole file is UTF-8 text with no control characters but tab, LF and CR before LF (TOML
 * allows no others, not even in comments). Checked first, so that the reader below sees text.
 */
static int
check_text(struct rd *d)
{
	const uint8_t	*p = d->p, *e = d->end;
	uint32_t	 cp;
	int		 n;

	d->line = 1;
	while (p < e) {
		uint8_t c = *p;

		if (c == '\n') {
			d->line++;
			p++;
			continue;
		}
		if (c < 0x80) {
			if (c == 0)
				return (rd_err(d, "a NUL byte: a rule file is UTF-8 text"));
			if (c == '\r' && (p + 1 == e || p[1] != '\n'))
				return (rd_err(d, "a CR not followed by LF"));
			if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f)
				return (rd_err(d, "control character 0x%02x", c));
			p++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else
			return (rd_err(d, "invalid UTF-8 (byte 0x%02x)", c));
		if (e - p <= n)
			return (rd_err(d, "invalid UTF-8 (cut short at the end)"));
		for (int i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return (rd_err(d, "invalid UTF-8 (byte 0x%02x)", c));
			cp = (cp << 6) | (p[i] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return (rd_err(d, "invalid UTF-8 (overlong or surrogate)"));
		p += n + 1;
	}
	return (0);
}

static void
skip_ws(struct rd *d)
{
	while (d->p < d->end && (*d->p == ' ' || *d->p == '\t'))
		d->p++;
}

/* Whitespace, a comment, and the CR of a CRLF: what may stand before a line's LF. */
static void
skip_comment(struct rd *d)
{
	skip_ws(d);
	if (d->p < d->end && *d->p == '#')
		while (d->p < d->end && *d->p != '\n')
			d->p++;
	if (d->p < d->end && *d->p == '\r')
		d->p++;
}

/* At the end of a line: whitespace, a comment, then LF (or CRLF, or the end of the file). */
static int
end_of_line(struct rd *d)
{
	skip_comment(d);
	if (d->p == d->end)
		return (0);
	if (*d->p != '\n')
		return (rd_err(d, "expected the end of the line, found '%s'",
		    shown(d->sh, sizeof(d->sh), (const char *)d->p, 1)));
	d->p++;
	d->line++;
	return (0);
}

/* Whitespace, comments and newlines (inside an array). */
static void
skip_blank(struct rd *d)
{
	for (;;) {
		skip_comment(d);
		if (d->p < d->end && *d->p == '\n') {
			d->p++;
			d->line++;
			continue;
		}
		return;
	}
}

static int
is_bare(uint8_t c)
{
	return ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    c == '_' || c == '-');
}

/* 1 when the word w stands at d->p, not followed by more of a bare key: then it is skipped. */
static int
rd_word(struct rd *d, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(d->end - d->p) < n || memcmp(d->p, w, n) != 0 ||
	    (d->p + n < d->end && is_bare(d->p[n])))
		return (0);
	d->p += n;
	return (1);
}

/* A bare key into buf (at most 64 bytes). */
static int
read_key(struct rd *d, char *buf, size_t len, const char *what)
{
	size_t n = 0;

	if (d->p < d->end && (*d->p == '"' || *d->p == '\''))
		return (rd_err(d, "quoted %ss are not supported: write a bare one", what));
	while (d->p < d->end && is_bare(*d->p)) {
		if (n + 1 >= len)
			return (rd_err(d, "%s longer than %zu characters", what, len - 1));
		buf[n++] = (char)*d->p++;
	}
	buf[n] = '\0';
	if (n == 0) {
		if (d->p == d->end || *d->p == '\n' || *d->p == '\r')
			return (rd_err(d, "expected a %s", what));
		return (rd_err(d, "expected a %s, found '%s'", what,
		    shown(d->sh, sizeof(d->sh), (const char *)d->p, 1)));
	}
	skip_ws(d);
	if (d->p < d->end && *d->p == '.')
		return (rd_err(d, "dotted %ss are not supported", what));
	return (0);
}

static void
put_utf8(char *out, size_t *n, uint32_t cp)
{
	if (cp < 0x80)
		out[(*n)++] = (char)cp;
	else if (cp < 0x800) {
		out[(*n)++] = (char)(0xc0 | (cp >> 6));
		out[(*n)++] = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		out[(*n)++] = (char)(0xe0 | (cp >> 12));
		out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[(*n)++] = (char)(0x80 | (cp & 0x3f));
	} else {
		out[(*n)++] = (char)(0xf0 | (cp >> 18));
		out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
		out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[(*n)++] = (char)(0x80 | (cp & 0x3f));
	}
}

/* A basic ("...", with escapes) or literal ('...') string on one line. d->p is at the quote. */
static int
read_string(struct rd *d, struct tval *v)
{
	uint8_t		 q = *d->p;
	const uint8_t	*start;
	char		*out;
	size_t		 n = 0;

	if (d->end - d->p >= 3 && d->p[1] == q && d->p[2] == q)
		return (rd_err(d, "multi-line strings (%c%c%c) are not supported", q, q, q));
	start = ++d->p;
	/* The decoded string is never longer than the quoted text. */
	while (d->p < d->end && *d->p != q && *d->p != '\n') {
		if (q == '"' && *d->p == '\\' && d->p + 1 < d->end && d->p[1] != '\n')
			d->p++;
		d->p++;
	}
	if (d->p == d->end || *d->p != q)
		return (rd_err(d, "unterminated string"));
	if ((out = malloc((size_t)(d->p - start) + 1)) == NULL)
		return (rd_err(d, "out of memory"));
	for (const uint8_t *s = start; s < d->p; s++) {
		uint32_t	 cp = 0;
		int		 k;

		if (q == '\'' || *s != '\\') {
			out[n++] = (char)*s;
			continue;
		}
		switch (*++s) {
		case 'b': out[n++] = '\b'; break;
		case 't': out[n++] = '\t'; break;
		case 'n': out[n++] = '\n'; break;
		case 'f': out[n++] = '\f'; break;
		case 'r': out[n++] = '\r'; break;
		case '"': out[n++] = '"'; break;
		case '\\': out[n++] = '\\'; break;
		case 'u':
		case 'U':
			k = *s == 'u' ? 4 : 8;
			if (d->p - s <= k)
				goto badu;
			for (int i = 1; i <= k; i++) {
				int h = lb_hexval(s[i]);

				if (h < 0)
					goto badu;
				cp = (cp << 4) | (uint32_t)h;
			}
			if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
				goto badu;
			/* The escape took 6 or 10 bytes, its UTF-8 takes at most 4. */
			put_utf8(out, &n, cp);
			s += k;
			break;
		default:
			free(out);
			if (*s == '\r' || *s == '\n' || s == d->p)
				return (rd_err(d, "a backslash at the end of a line (line continuation "
				    "is for multi-line strings, which are not supported)"));
			return (rd_err(d, "unknown escape \\%c in a basic string (write \\\\ for a "
			    "backslash, or use a literal string '...')", *s));
		}
	}
	out[n] = '\0';
	d->p++;
	v->type = TV_STRING;
	v->s = out;
	v->slen = n;
	return (0);
 badu:
	free(out);
	return (rd_err(d, "bad \\u or \\U escape (4 or 8 hex digits of a Unicode scalar value)"));
}

/* A decimal integer: [+-], digits, single underscores between digits, no leading zero. */
static int
read_int(struct rd *d, struct tval *v)
{
	const uint8_t	*s = d->p;
	int		 neg = 0, digits = 0;
	uint64_t	 x = 0;

	if (*s == '+' || *s == '-')
		neg = *s++ == '-';
	if (s + 1 < d->end && s[0] == '0' && (s[1] == 'x' || s[1] == 'o' || s[1] == 'b'))
		return (rd_err(d, "only decimal integers are supported"));
	for (; s < d->end; s++) {
		if (*s >= '0' && *s <= '9') {
			if (digits == 1 && x == 0)
				return (rd_err(d, "an integer with a leading zero"));
			if (x > (UINT64_C(1) << 63) / 10 ||
			    x * 10 + (uint64_t)(*s - '0') > (UINT64_C(1) << 63) - (neg ? 0 : 1))
				return (rd_err(d, "integer out of range"));
			x = x * 10 + (uint64_t)(*s - '0');
			digits++;
		} else if (*s == '_') {
			if (digits == 0 || s + 1 == d->end || s[1] < '0' || s[1] > '9')
				return (rd_err(d, "an underscore in an integer must be between digits"));
		} else
			break;
	}
	if (digits == 0)
		return (rd_err(d, "expected a value"));
	if (s < d->end && (*s == '.' || *s == 'e' || *s == 'E' || *s == ':' ||
	    (*s == '-' && !neg)))
		return (rd_err(d, "floats, dates and times are not supported"));
	if (s < d->end && is_bare(*s))
		return (rd_err(d, "expected a value, found '%.*s'", (int)(s - d->p + 1), d->p));
	d->p = s;
	v->type = TV_INT;
	v->i = neg ? (int64_t)(0 - x) : (int64_t)x;
	return (0);
}

static int
read_value(struct rd *d, struct tval *v, int depth)
{
	int b;

	if (d->p == d->end || *d->p == '\n' || *d->p == '\r' || *d->p == '#')
		return (rd_err(d, "expected a value"));
	switch (*d->p) {
	case '"':
	case '\'':
		return (read_string(d, v));
	case '{':
		return (rd_err(d, "inline tables are not supported"));
	case '[':
		break;
	default:
		if ((b = rd_word(d, "true")) || rd_word(d, "false")) {
			v->type = TV_BOOL;
			v->i = b;
			return (0);
		}
		if ((*d->p >= '0' && *d->p <= '9') || *d->p == '+' || *d->p == '-')
			return (read_int(d, v));
		if (*d->p == 'i' || *d->p == 'n')
			return (rd_err(d, "floats (inf, nan) are not supported"));
		return (rd_err(d, "expected a value (a string, integer, boolean or array)"));
	}
	if (depth >= RT_DEPTH_MAX)
		return (rd_err(d, "arrays nested deeper than %d", RT_DEPTH_MAX));
	d->p++;
	v->type = TV_ARRAY;
	for (;;) {
		struct tval	*items;
		int		 rc;

		skip_blank(d);
		if (d->p < d->end && *d->p == ']') {
			d->p++;
			return (0);
		}
		if (v->n == v->cap) {
			if ((items = reallocarray(v->items, v->cap ? v->cap * 2 : 4,
			    sizeof(*items))) == NULL)
				return (rd_err(d, "out of memory"));
			v->items = items;
			v->cap = v->cap ? v->cap * 2 : 4;
		}
		memset(&v->items[v->n], 0, sizeof(v->items[0]));
		if (d->p == d->end)
			return (rd_err(d, "unterminated array"));
		if ((rc = read_value(d, &v->items[v->n], depth + 1)) != 0) {
			tval_free(&v->items[v->n]);
			return (rc);
		}
		v->n++;
		skip_blank(d);
		if (d->p < d->end && *d->p == ',') {
			d->p++;
			continue;
		}
		if (d->p < d->end && *d->p == ']') {
			d->p++;
			return (0);
		}
		if (d->p == d->end)
			return (rd_err(d, "unterminated array"));
		return (rd_err(d, "expected ',' or ']' in an array, found '%s'",
		    shown(d->sh, sizeof(d->sh), (const char *)d->p, 1)));
	}
}

/* ------------------------------------------------------------------ rules */

static void
rule_free(struct rule *ru)
{
	for (int k = 0; k < RX_N; k++) {
		pcre2_code_free(ru->rx[k].code);
		free(ru->rx[k].src);
	}
	pcre2_match_data_free(ru->md);
}

/* A list of names (or one name), each looked up in names[0..n): the mask of their indices. */
static int
name_mask(struct rd *d, const char *key, const struct tval *v, const char *const *names,
    size_t n, uint32_t *mask)
{
	const struct tval	*items = v;
	size_t			 count = 1;
	char			 all[300];
	size_t			 off = 0;

	if (v->type == TV_ARRAY) {
		items = v->items;
		count = v->n;
		if (count == 0)
			return (rd_err(d, "[[logspace]] %s: empty list", key));
	}
	*mask = 0;
	for (size_t i = 0; i < count; i++) {
		size_t j;

		if (items[i].type != TV_STRING)
			return (rd_err(d, "[[logspace]] %s: expected a list of names (strings)", key));
		for (j = 0; j < n; j++)
			if (strlen(names[j]) == items[i].slen && strcmp(names[j], items[i].s) == 0)
				break;
		if (j == n) {
			all[0] = '\0';
			for (size_t k = 0; k < n && off < sizeof(all); k++)
				off += (size_t)snprintf(all + off, sizeof(all) - off, "%s%s",
				    k ? ", " : "", names[k]);
			return (rd_err(d, "[[logspace]] %s: '%s' is not one of %s", key,
			    shown(d->sh, sizeof(d->sh), items[i].s, items[i].slen), all));
		}
		*mask |= UINT32_C(1) << j;
	}
	return (0);
}

static int
compile_rx(struct rd *d, const char *key, const struct tval *v, struct rx *x, int caseless)
{
	PCRE2_UCHAR	 msg[256];
	PCRE2_SIZE	 off;
	int		 code;

	if (v->type != TV_STRING)
		return (rd_err(d, "[[logspace]] %s: expected a string (a regular expression)", key));
	if (memchr(v->s, '\0', v->slen) != NULL)
		return (rd_err(d, "[[logspace]] %s: contains a NUL character", key));
	x->code = pcre2_compile((PCRE2_SPTR)v->s, v->slen,
	    PCRE2_NEVER_UTF | (caseless ? PCRE2_CASELESS : 0), &code, &off, NULL);
	if (x->code == NULL) {
		pcre2_get_error_message(code, msg, sizeof(msg));
		return (rd_err(d, "[[logspace]] %s: bad regular expression at offset %zu: %s", key,
		    (size_t)off, (const char *)msg));
	}
	if ((x->src = malloc(v->slen + 1)) == NULL)
		return (rd_err(d, "out of memory"));
	memcpy(x->src, v->s, v->slen + 1);
	x->srclen = v->slen;
	/* Fails where executable memory cannot be mapped (systemd's MemoryDenyWriteExecute=). */
	x->jit = !(d->flags & ROUTES_NOJIT) && pcre2_jit_compile(x->code, PCRE2_JIT_COMPLETE) == 0;
	if (x->jit)
		d->r->any_jit = 1;
	else
		d->r->jit_failed = 1;
	return (0);
}

/* key = v inside the current [[logspace]]. */
static int
rule_key(struct rd *d, const char *key, const struct tval *v)
{
	struct rule	*ru = d->cur;
	const char	*why;
	const char	*facs[24];

	if (strcmp(key, "name") == 0) {
		if (v->type != TV_STRING)
			return (rd_err(d, "[[logspace]] name: expected a string"));
		if (!lb_logspace_name_ok((const uint8_t *)v->s, v->slen, &why))
			return (rd_err(d, "[[logspace]] name '%s': %s",
		    shown(d->sh, sizeof(d->sh), v->s, v->slen), why));
		memcpy(ru->name, v->s, v->slen + 1);
		return (0);
	}
	for (int k = 0; k < RX_N; k++)
		if (strcmp(key, rx_keys[k]) == 0)
			return (compile_rx(d, key, v, &ru->rx[k], k == RX_HOST));
	if (strcmp(key, "facility") == 0) {
		for (unsigned f = 0; f < 24; f++)
			facs[f] = lb_facility_name(f);
		return (name_mask(d, key, v, facs, 24, &ru->facilities));
	}
	if (strcmp(key, "listener") == 0) {
		if (name_mask(d, key, v, listeners, RT_NLISTENERS, &ru->listeners) != 0)
			return (EINVAL);
		d->r->any_listener = 1;
		return (0);
	}
	return (rd_err(d, "[[logspace]]: unknown key '%s' (name, host, program, message, facility, "
	    "listener)", key));
}

/* The [[logspace]] being read is complete. */
static int
rule_end(struct rd *d)
{
	struct rule *ru = d->cur;

	if (ru == NULL)
		return (0);
	d->cur = NULL;
	if (ru->name[0] == '\0') {
		d->line = ru->line;
		return (rd_err(d, "[[logspace]] without a name"));
	}
	if ((ru->md = pcre2_match_data_create(1, NULL)) == NULL)
		return (rd_err(d, "out of memory"));
	return (0);
}

/*
 * Adds a copy of name to names[0..*n), the [table]s seen or the current table's keys: each at
 * most once, at most max of them. twice (with the name) and toomany (with max) are the errors.
 */
static int
rd_once(struct rd *d, char **names, size_t *n, size_t max, const char *name,
    const char *twice, const char *toomany)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp(names[i], name) == 0)
			return (rd_err(d, twice, name));
	if (*n >= max)
		return (rd_err(d, toomany, (int)max));
	if ((names[*n] = strdup(name)) == NULL)
		return (rd_err(d, "out of memory"));
	(*n)++;
	return (0);
}

static void
keys_reset(struct rd *d)
{
	for (size_t i = 0; i < d->nkeys; i++)
		free(d->keys[i]);
	d->nkeys = 0;
}

/* [name] or [[name]]; d->p is at the first '['. */
static int
header(struct rd *d)
{
	char	 name[65];
	int	 array = 0;
	int	 rc;

	if ((rc = rule_end(d)) != 0)
		return (rc);
	keys_reset(d);
	d->p++;
	if (d->p < d->end && *d->p == '[') {
		array = 1;
		d->p++;
	}
	skip_ws(d);
	if ((rc = read_key(d, name, sizeof(name), "table name")) != 0)
		return (rc);
	if (d->p == d->end || *d->p != ']' || (array && (d->end - d->p < 2 || d->p[1] != ']')))
		return (rd_err(d, "expected '%s' after the table name", array ? "]]" : "]"));
	d->p += array ? 2 : 1;
	d->in_logspace = 0;
	if (strcmp(name, "logspace") == 0) {
		if (!array)
			return (rd_err(d, "[logspace] must be [[logspace]] (an array of tables)"));
		if (d->r->n >= RT_RULES_MAX)
			return (rd_err(d, "more than %d [[logspace]] tables", RT_RULES_MAX));
		d->cur = &d->r->rules[d->r->n++];
		d->cur->line = d->line;
		d->in_logspace = 1;
	} else if (!array && (rc = rd_once(d, d->tables, &d->ntables, RT_TABLES_MAX, name,
	    "table [%s] defined twice", "more than %d tables")) != 0)
		return (rc);
	/* Another [[array]] table: read for its syntax, otherwise ignored. */
	return (end_of_line(d));
}

/* key = value */
static int
keyval(struct rd *d)
{
	char		 key[65];
	struct tval	 v;
	int		 rc, line;

	memset(&v, 0, sizeof(v));
	if ((rc = read_key(d, key, sizeof(key), "key")) != 0)
		return (rc);
	if (d->p == d->end || *d->p != '=')
		return (rd_err(d, "expected '=' after the key '%s'", key));
	d->p++;
	skip_ws(d);
	if ((rc = rd_once(d, d->keys, &d->nkeys, RT_KEYS_MAX, key,
	    "key '%s' defined twice in one table", "more than %d keys in one table")) != 0)
		return (rc);
	line = d->line;
	if ((rc = read_value(d, &v, 0)) == 0 && (rc = end_of_line(d)) == 0 && d->in_logspace) {
		int after = d->line;

		d->line = line;		/* errors about the value name its key's line */
		rc = rule_key(d, key, &v);
		d->line = after;
	}
	tval_free(&v);
	return (rc);
}

static int
parse(struct rd *d)
{
	int rc;

	if ((rc = check_text(d)) != 0)
		return (rc);
	d->line = 1;
	if (d->end - d->p >= 3 && memcmp(d->p, "\xef\xbb\xbf", 3) == 0)
		d->p += 3;		/* a byte order mark */
	while (d->p < d->end) {
		skip_ws(d);
		if (d->p == d->end)
			break;
		switch (*d->p) {
		case '#':
		case '\r':
		case '\n':
			rc = end_of_line(d);
			break;
		case '[':
			rc = header(d);
			break;
		default:
			rc = keyval(d);
			break;
		}
		if (rc != 0)
			return (rc);
	}
	return (rule_end(d));
}

/* ------------------------------------------------------------------ API */

void
routes_free(struct routes *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->n; i++)
		rule_free(&r->rules[i]);
	free(r->rules);
	pcre2_match_context_free(r->mctx);
	pcre2_jit_stack_free(r->jstack);
	free(r->errors);
	free(r);
}

int
routes_parse(const char *path, const uint8_t *buf, size_t len, int flags, struct routes **out,
    char *err, size_t errlen)
{
	struct routes	*r;
	struct rd	 d;
	int		 rc;

	if (len > RT_FILE_MAX) {
		snprintf(err, errlen, "%s: %zu bytes, more than a rule file may have (%d)", path,
		    len, RT_FILE_MAX);
		return (EFBIG);
	}
	memset(&d, 0, sizeof(d));
	d.path = path;
	d.p = buf;
	d.end = buf + len;
	d.err = err;
	d.errlen = errlen;
	d.flags = flags;
	d.line = 1;
	if ((r = calloc(1, sizeof(*r))) == NULL ||
	    (r->rules = calloc(RT_RULES_MAX, sizeof(*r->rules))) == NULL ||
	    (r->errors = calloc(1, sizeof(*r->errors))) == NULL ||
	    (r->mctx = pcre2_match_context_create(NULL)) == NULL) {
		rc = ENOMEM;
		snprintf(err, errlen, "%s: out of memory", path);
		goto fail;
	}
	d.r = r;
	pcre2_set_match_limit(r->mctx, RT_MATCH_LIMIT);
	if ((rc = parse(&d)) != 0)
		goto fail;
	/* A JIT stack only when a pattern was JIT-compiled (without one: 32 KiB on the stack). */
	if (r->any_jit && (r->jstack = pcre2_jit_stack_create(32 * 1024, RT_JIT_STACK,
	    NULL)) != NULL)
		pcre2_jit_stack_assign(r->mctx, NULL, r->jstack);
	keys_reset(&d);
	for (size_t i = 0; i < d.ntables; i++)
		free(d.tables[i]);
	*out = r;
	return (0);
 fail:
	keys_reset(&d);
	for (size_t i = 0; i < d.ntables; i++)
		free(d.tables[i]);
	routes_free(r);
	return (rc);
}

int
routes_load(const char *path, struct routes **out, char *err, size_t errlen)
{
	struct stat	 st;
	uint8_t		*buf = NULL;
	size_t		 len = 0;
	ssize_t		 n;
	int		 fd, rc;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) == -1) {
		rc = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(rc));
		return (rc);
	}
	if (fstat(fd, &st) == -1) {
		rc = errno;
		snprintf(err, errlen, "%s: %s", path, strerror(rc));
		goto done;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = EINVAL;
		snprintf(err, errlen, "%s: not a regular file", path);
		goto done;
	}
	if (st.st_size > RT_FILE_MAX) {
		rc = EFBIG;
		snprintf(err, errlen, "%s: %lld bytes, more than a rule file may have (%d)", path,
		    (long long)st.st_size, RT_FILE_MAX);
		goto done;
	}
	/* One byte more than allowed: a file that grew since fstat() is seen to be too big. */
	if ((buf = malloc(RT_FILE_MAX + 1)) == NULL) {
		rc = ENOMEM;
		snprintf(err, errlen, "%s: out of memory", path);
		goto done;
	}
	while (len < RT_FILE_MAX + 1) {
		if ((n = read(fd, buf + len, RT_FILE_MAX + 1 - len)) == -1) {
			if (errno == EINTR)
				continue;
			rc = errno;
			snprintf(err, errlen, "%s: %s", path, strerror(rc));
			goto done;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	rc = routes_parse(path, buf, len, 0, out, err, errlen);
 done:
	free(buf);
	close(fd);
	return (rc);
}

size_t
routes_count(const struct routes *r)
{
	return (r == NULL ? 0 : r->n);
}

uint64_t
routes_errors(const struct routes *r)
{
	return (r == NULL ? 0 : *r->errors);
}

/* 1 when x matches p[0..len), 0 when not (or when the match gave up: counted). */
static int
rx_match(const struct routes *r, const struct rule *ru, const struct rx *x,
    const struct lb_slice *s)
{
	PCRE2_SPTR	 subj = s->len > 0 ? (PCRE2_SPTR)s->p : (PCRE2_SPTR)"";
	int		 rc;

	if (x->jit)
		rc = pcre2_jit_match(x->code, subj, s->len, 0, 0, ru->md, r->mctx);
	else
		rc = pcre2_match(x->code, subj, s->len, 0, 0, ru->md, r->mctx);
	if (rc >= 0)
		return (1);
	if (rc != PCRE2_ERROR_NOMATCH)
		(*r->errors)++;
	return (0);
}

/* Where a message no rule takes goes: syslog-ng's own messages to "system", the rest to "main". */
static const char *
fallback(const char *listener)
{
	return (listener != NULL && strcmp(listener, "internal") == 0 ? "system" : "main");
}

const char *
routes_pick(const struct routes *r, const struct lb_msg *m, const char *listener)
{
	uint32_t lbit = 0;

	if (r == NULL)
		return (fallback(listener));
	if (r->any_listener && listener != NULL)
		for (size_t i = 0; i < RT_NLISTENERS; i++)
			if (strcmp(listener, listeners[i]) == 0) {
				lbit = UINT32_C(1) << i;
				break;
			}
	for (size_t i = 0; i < r->n; i++) {
		const struct rule	*ru = &r->rules[i];
		int			 k;

		if (ru->listeners != 0 && (ru->listeners & lbit) == 0)
			continue;
		if (ru->facilities != 0 &&
		    (m->facility >= 24 || (ru->facilities & (UINT32_C(1) << m->facility)) == 0))
			continue;
		for (k = 0; k < RX_N; k++) {
			const struct lb_slice *s = k == RX_PROGRAM ? &m->program :
			    k == RX_HOST ? &m->host : &m->message;

			if (ru->rx[k].code != NULL && !rx_match(r, ru, &ru->rx[k], s))
				break;
		}
		if (k == RX_N)
			return (ru->name);
	}
	return (fallback(listener));
}

/* Appends fmt to buf[*off..len), keeping it NUL-terminated; "..." when it does not fit. */
static void
put(char *buf, size_t len, size_t *off, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void
put(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
	va_list	 ap;
	int	 n;

	if (*off >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *off, len - *off, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= len - *off) {
		*off = len;
		if (len >= 4)
			memcpy(buf + len - 4, "...", 4);
		return;
	}
	*off += (size_t)n;
}

/* A pattern between single quotes, its control bytes, quotes and backslashes escaped. */
static void
put_rx(char *buf, size_t len, size_t *off, const struct rx *x)
{
	put(buf, len, off, "'");
	for (size_t i = 0; i < x->srclen; i++) {
		uint8_t c = (uint8_t)x->src[i];

		if (c < 0x20 || c == 0x7f)
			put(buf, len, off, "\\x%02x", c);
		else if (c == '\'')
			put(buf, len, off, "\\'");
		else
			put(buf, len, off, "%c", c);
	}
	put(buf, len, off, "'");
}

static void
put_names(char *buf, size_t len, size_t *off, const char *key, uint32_t mask, int facility)
{
	int first = 1;

	put(buf, len, off, "%s ", key);
	for (unsigned i = 0; i < 32; i++)
		if (mask & (UINT32_C(1) << i)) {
			put(buf, len, off, "%s%s", first ? "" : ",",
			    facility ? lb_facility_name(i) : listeners[i]);
			first = 0;
		}
}

void
routes_describe(const struct routes *r, char *buf, size_t len)
{
	size_t off = 0;

	if (len == 0)
		return;
	buf[0] = '\0';
	if (r == NULL || r->n == 0) {
		put(buf, len, &off, "no rules: everything to main");
		return;
	}
	put(buf, len, &off, "%zu rule%s: ", r->n, r->n == 1 ? "" : "s");
	for (size_t i = 0; i < r->n; i++) {
		const struct rule	*ru = &r->rules[i];
		int			 n = 0;

		put(buf, len, &off, "%s%s (", i ? ", " : "", ru->name);
		if (ru->listeners) {
			put_names(buf, len, &off, "listener", ru->listeners, 0);
			n++;
		}
		if (ru->facilities) {
			put(buf, len, &off, "%s", n++ ? " " : "");
			put_names(buf, len, &off, "facility", ru->facilities, 1);
		}
		for (int k = 0; k < RX_N; k++)
			if (ru->rx[k].code != NULL) {
				put(buf, len, &off, "%s%s ", n++ ? " " : "", rx_keys[k]);
				put_rx(buf, len, &off, &ru->rx[k]);
			}
		put(buf, len, &off, "%s)", n ? "" : "everything");
	}
	if (r->jit_failed)
		put(buf, len, &off, "; regular expressions interpreted (no PCRE2 JIT)");
}
