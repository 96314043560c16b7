/*
 * logbox.h — the whole public API of liblogbox, the library that indexd, searchd and the
 * logbox CLI share. Types are opaque unless a caller must fill them in. Every function returns
 * an int: 0 on success, a positive errno, or a negative LB_E* / LMDB code; lb_strerror() turns
 * any of them into text. Out-parameters are set only on success. The library never exits,
 * aborts or logs.
 *
 * Each module owns one section below; the on-disk constants live in lb_format.h and are
 * described byte by byte in indexer/FORMAT.md.
 */
#ifndef LOGBOX_H
#define LOGBOX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LB_VERSION "0.1.0"

/* ---------------------------------------------------------------- errors (lb_error.c) */

/*
 * LMDB uses -30799..-30780; errno values are positive. logbox's own codes sit below both.
 */
#define LB_EFORMAT	(-31000)	/* not a logbox file, or an unknown version */
#define LB_ECORRUPT	(-31001)	/* a checksum or cross-reference does not match */
#define LB_ENOTFOUND	(-31002)	/* no such id, term, logspace or day */
#define LB_ETOOBIG	(-31003)	/* input larger than a documented limit */
#define LB_EPARSE	(-31004)	/* malformed syslog frame or header */
#define LB_ELOCKED	(-31005)	/* another writer holds the logspace */
#define LB_EBADCONF	(-31006)	/* bad setting (delimiters, limits, names) */
#define LB_EQUERY	(-31007)	/* bad query text */
#define LB_ETOOBROAD	(-31008)	/* a query would expand past its limits */
#define LB_EDEADLINE	(-31009)	/* a query ran past its deadline */
#define LB_EBADMSG	(-31010)	/* a message the store cannot hold (receive time out of range) */
#define LB_EARCHIVE	(-31011)	/* an archived day could not be read: its object store failed */

/*
 * Returns a static string describing rc (an errno, an LMDB code or an LB_E* code).
 * Never returns NULL.
 */
const char	*lb_strerror(int rc);

/*
 * What an error from storing one message means for the input it came from (lb_errclass):
 * - LB_ERRC_MESSAGE: this message can never be stored (LB_EBADMSG, LB_EPARSE): set it aside
 *   (indexd quarantines it in its dead-letter file) and go on with the next one. Storing it
 *   again fails the same way. lb_store_append says LB_EBADMSG for what is the message's fault.
 * - LB_ERRC_ENV: everything else: the environment failed (ENOSPC, EDQUOT, EIO, ENOMEM,
 *   LB_ELOCKED, an LMDB error, ...), or the store's own state did (LB_ETOOBIG, EINVAL from a
 *   store mean that): hold the input and try again, it works once the cause is gone.
 * 0 is LB_ERRC_NONE. The one place that draws this line: indexd and the CLI ask it.
 */
#define LB_ERRC_NONE	0
#define LB_ERRC_MESSAGE	1
#define LB_ERRC_ENV	2
int		 lb_errclass(int rc);

/* ---------------------------------------------------------------- common types */

/* A run of bytes owned by someone else; the owner is named where a slice is returned. */
struct lb_slice {
	const uint8_t	*p;
	size_t		 len;
};

#define LB_NOTIME	INT64_MIN	/* "no time stamp" in an int64 microsecond field */
#define LB_NOVALUE	0xff		/* facility/severity not known */

/* lb_msg.flags */
#define LB_MSG_TRUNCATED	0x0001	/* the message was cut at LB_MSG_MAX bytes */
#define LB_MSG_RFC5424		0x0002	/* the header was RFC 5424 */
#define LB_MSG_RFC3164		0x0004	/* the header was RFC 3164 (BSD) */
#define LB_MSG_NOHEADER		0x0008	/* no header could be parsed: the whole line is the message */
#define LB_MSG_BADTIME		0x0010	/* a time stamp was present but could not be parsed */
#define LB_MSG_FIELDCUT		0x0020	/* a header field was cut at LB_FIELD_MAX / LB_SD_MAX */
/*
 * A stored record carries a peer (FORMAT.md §3.3). The message file's encoder sets it exactly
 * when peer is not empty and its decoder clears it: lb_msg.flags never has it.
 */
#define LB_MSG_PEER		0x0040

/*
 * One syslog message. Times are microseconds since 1970-01-01 UTC. Slices point into memory
 * owned by whoever filled the struct (the parser's input buffer, a decoded block, ...).
 * An absent field is an empty slice.
 */
struct lb_msg {
	uint64_t	 id;		/* per-logspace id, arrival order; 0 until stored */
	int64_t		 received;	/* when logbox received it, µs */
	int64_t		 timestamp;	/* the message's own time stamp, µs, or LB_NOTIME */
	int16_t		 tzoff;		/* the time stamp's UTC offset in minutes */
	uint8_t		 facility;	/* 0..23 or LB_NOVALUE */
	uint8_t		 severity;	/* 0..7 or LB_NOVALUE */
	uint16_t	 flags;		/* LB_MSG_* */
	struct lb_slice	 host;
	struct lb_slice	 program;	/* RFC 5424 APP-NAME, RFC 3164 TAG */
	struct lb_slice	 pid;		/* RFC 5424 PROCID, RFC 3164 [pid] */
	struct lb_slice	 msgid;		/* RFC 5424 MSGID */
	struct lb_slice	 sd;		/* RFC 5424 STRUCTURED-DATA text as received, "" for "-" */
	struct lb_slice	 message;	/* the message bytes, exactly as received (after header) */
	struct lb_slice	 peer;		/* the sender's IP address as text ("10.0.0.7", "::1"),
					   "" when unknown; not part of the syslog text: the
					   receiver sets it (lb_syslog_parse makes it empty) */
};

/* ---------------------------------------------------------------- tokenizer (lb_tokenize.c) */

/*
 * Tokens: maximal runs of non-delimiter bytes; ASCII letters folded to lower case; bytes >= 0x80
 * are token bytes. A token longer than LB_TOKEN_MAX bytes is cut there (the rest of the run is
 * skipped, not made a second token).
 */
#define LB_TOKEN_MAX	255

/* The per-logspace tokenizer settings. Plain data: copy it freely. */
struct lb_tokconf {
	uint8_t		 delim[256];	/* 1 where the byte is a delimiter */
};

/* The default delimiters beside ASCII whitespace (DESIGN.md "Tokens"). */
#define LB_DEFAULT_DELIMS "&:~?![]=,;()'\"/\\|<>{}*"

/* Fills tc with the default delimiters: ASCII whitespace plus LB_DEFAULT_DELIMS. */
void	lb_tokconf_default(struct lb_tokconf *tc);

/*
 * Fills tc with ASCII whitespace plus the bytes of delims (delims_len bytes; it may hold any
 * byte except letters and digits, which is LB_EBADCONF).
 */
int	lb_tokconf_set(struct lb_tokconf *tc, const char *delims, size_t delims_len);

/*
 * Called once per token, in order. tok is the folded token (at most LB_TOKEN_MAX bytes) in a
 * buffer valid only during the call; pos is the token's ordinal (0, 1, 2, ...) in the input;
 * off is the offset of its first byte in the input. A non-zero return stops the walk and is
 * returned by lb_tokenize().
 */
typedef int	(*lb_token_fn)(void *arg, const uint8_t *tok, size_t len, uint32_t pos, size_t off);

/* Walks the tokens of buf[0..len). Returns 0 or the callback's first non-zero return. */
int	lb_tokenize(const struct lb_tokconf *tc, const uint8_t *buf, size_t len,
	    lb_token_fn fn, void *arg);

/*
 * The forms of a token (DESIGN.md "Tokens", FORMAT.md §6): the other text terms a token makes
 * besides itself, so that a word also finds a token before punctuation and a word inside a
 * compound token.
 * - Its stripped form: the token without its leading and trailing ASCII punctuation
 *   (`LB_FORM_PUNCT`: 21-2f, 3a-40, 5b-60, 7b-7e), when that differs from the token and is not
 *   empty: `refused.` gives `refused`, `"quoted"` gives `quoted`.
 * - Its parts: the stripped form cut at the separators `. - _ @ / +` (`LB_FORM_SEPS`), each part
 *   stripped the same way, when there are two parts or more; empty parts and parts made only
 *   of ASCII digits are left out: `non-existent-user` gives `non`, `existent`, `user`;
 *   `bob@example.com` gives `bob`, `example`, `com`; `10.0.0.1` and `2015-10-18` give none.
 * fn gets each form in order (stripped form, then the parts from left to right; a form that
 * occurs twice is passed twice), at = its offset in tok, and flags: LB_FORM_START when it
 * begins the stripped form (the stripped form and the first part), LB_FORM_END when it ends
 * it (the stripped form and the last part). Phrases use the flags (QUERY.md §1). A non-zero
 * return of fn stops the walk and is returned.
 */
#define LB_FORM_START	0x01
#define LB_FORM_END	0x02
#define LB_FORM_SEPS	".-_@/+"
typedef int	(*lb_form_fn)(void *arg, const uint8_t *form, size_t len, size_t at, int flags);
int	lb_token_forms(const uint8_t *tok, size_t len, lb_form_fn fn, void *arg);

/* 1 for the bytes that lb_token_forms() strips (ASCII punctuation), else 0. */
extern const uint8_t lb_form_punct[256];

/*
 * The template of a message text (FORMAT.md §6.1): text[0..len) with each maximal run of ASCII
 * letters and digits that holds a digit replaced by one "0", the other letters ASCII-folded.
 * It decides a phrase for every text that has it: a phrase whose words are whole literals
 * without digits matches a text exactly when it matches the text's template (lb_query_match on
 * a message whose text is the template). Letters and digits are never delimiters, separators
 * or punctuation, so the template has the same tokens, forms and form flags as the text in the
 * same order, and a term changes only where it holds a digit, which such a word never equals.
 * That holds while no token is cut at LB_TOKEN_MAX: a text with a run of more than
 * LB_TOKEN_MAX bytes between ASCII whitespace has no template. Writes it to out[0..cap), its
 * length in *outlen, and returns 1; 0 when the text has none (or it does not fit).
 */
int	lb_text_template(const uint8_t *text, size_t len, uint8_t *out, size_t cap,
	    size_t *outlen);

/* ---------------------------------------------------------------- syslog parsing (lb_syslog.c) */

/*
 * Parses one syslog message (RFC 5424, RFC 3164, or neither) from buf[0..len), which holds one
 * message without framing. Fills m's header fields and slices, which point into buf. received
 * is stored in m->received; RFC 3164 time stamps without a year take the year that puts them
 * closest to received. Never fails on content: what cannot be parsed as a header becomes the
 * message with LB_MSG_NOHEADER (facility user, severity notice). A message longer than
 * LB_MSG_MAX is cut and flagged LB_MSG_TRUNCATED. A trailing "\n" (or "\r\n") is dropped.
 */
void	lb_syslog_parse(const uint8_t *buf, size_t len, int64_t received, struct lb_msg *m);

/*
 * Cuts m to what the store keeps, in place: host, program, pid, msgid and peer at LB_FIELD_MAX bytes,
 * sd at LB_SD_MAX bytes (the SD-ELEMENTs that fit whole, or LB_SD_MAX bytes when the first one
 * alone is longer), the message at LB_MSG_MAX bytes. A cut header field sets LB_MSG_FIELDCUT,
 * a cut message LB_MSG_TRUNCATED. The limits live in lb_format.h (FORMAT.md §2); every writer
 * goes through here (lb_store_append calls it), so every entry point cuts the same way.
 */
void	lb_msg_fit(struct lb_msg *m);

/* The largest receive time the store takes: 9999-12-31T23:59:59.999999Z (day directories
 * are named YYYY). */
#define LB_RECEIVED_MAX	INT64_C(253402300799999999)

/* --------------------------------------------------------- syslog framing (lb_syslog_frame.c) */

/*
 * RFC 6587 framing (not the hand-off frame of lb_frame.c). Splits the next frame off
 * buf[0..len) for framing:
 * - LB_FRAMING_OCTET: "<decimal length> SP <bytes>".
 * - LB_FRAMING_LINE:  bytes up to "\n" (the "\n" is not part of the frame).
 * On success *frame points into buf and *used is how many bytes of buf the frame took.
 * Returns EAGAIN when buf holds no complete frame yet (and eof is 0; with eof set, a final
 * unterminated line is a frame), LB_EPARSE for a malformed octet count (the caller should skip
 * to the next "\n" and count the error), LB_ETOOBIG for an octet count over max (the frame's
 * bytes can then be skipped: *used is set to the whole frame's size when len holds it all,
 * otherwise to 0).
 */
#define LB_FRAMING_LINE		0
#define LB_FRAMING_OCTET	1
int	lb_syslog_frame_next(int framing, const uint8_t *buf, size_t len, int eof, size_t max,
	    struct lb_slice *frame, size_t *used);

/* ---------------------------------------------------------------- message file (lb_msgfile.c) */

/*
 * A day's message file: <daydir>/messages (sealed, zlib-compressed blocks) plus
 * <daydir>/messages.wal (the block being filled, one checksummed record per message).
 * One writer per file (the store holds the logspace lock); any number of readers.
 */
struct lb_msgfile;

#define LB_RDONLY	0
#define LB_RDWR		1

/*
 * Opens (LB_RDWR: creates, recovers) the message file in daydir. A writer recovers on open:
 * a torn last block is cut off, WAL records that are already in a sealed block are dropped,
 * a torn WAL tail is cut off. A reader opens what is there and never writes.
 * first_id is the id the day's first message will get when the file is new (writer only).
 * On success *out is owned by the caller: lb_msgfile_close().
 */
int	lb_msgfile_open(const char *daydir, int mode, uint64_t first_id, struct lb_msgfile **out);
void	lb_msgfile_close(struct lb_msgfile *mf);

/* Ids in the file: [*first, *next). *next == *first when empty. Includes WAL records. */
void	lb_msgfile_range(struct lb_msgfile *mf, uint64_t *first, uint64_t *next);

/*
 * Writer. Appends m with id m->id (which must be the file's next id) to the open block and the
 * WAL buffer. Durable only after lb_msgfile_commit(). Seals the block itself when it reaches
 * LB_BLOCK_RAW_TARGET bytes.
 */
int	lb_msgfile_append(struct lb_msgfile *mf, const struct lb_msg *m);

/* Writes buffered WAL records; with sync, fdatasync()s them. After it returns 0 they survive a crash (with sync) or a process kill (without). */
int	lb_msgfile_commit(struct lb_msgfile *mf, int sync);

/*
 * lb_msgfile_commit with sync, after the compressor thread has written every queued block: the
 * WAL is left holding the open block's records only (a writer's last commit before close).
 */
int	lb_msgfile_settle(struct lb_msgfile *mf);

/* Seals the open block (if any): compress, append, fsync, then empty the WAL. */
int	lb_msgfile_seal(struct lb_msgfile *mf);

/*
 * Reader and writer. Reads message id into *m. Slices in *m point into a decoded block held
 * by mf: valid until the next call on mf. Re-reads the files if id is past what mf saw at open
 * (new blocks or WAL records). LB_ENOTFOUND if id is not in the file, LB_ECORRUPT on damage.
 */
int	lb_msgfile_get(struct lb_msgfile *mf, uint64_t id, struct lb_msg *m);

/*
 * Checks every block and WAL record (checksums, ids, record decoding). On damage returns
 * LB_ECORRUPT and writes a one-line description (with the file and byte offset) to
 * why[0..whylen).
 */
int	lb_msgfile_verify(struct lb_msgfile *mf, char *why, size_t whylen);

/* Bytes on disk of the sealed file and the WAL, and raw message bytes stored. */
void	lb_msgfile_sizes(struct lb_msgfile *mf, uint64_t *disk, uint64_t *raw);

/*
 * The block index: the sealed blocks as the file holds them, in file order (a writer's: the
 * blocks its compressor thread has written; durable after lb_msgfile_commit with sync). A
 * damaged range has bad set and no bytes (len 0). lb_msgfile_block_hash is the SHA-256 of a
 * block's bytes on disk, header and payload (lb_chain.h).
 */
struct lb_blkref {
	uint64_t	off;		/* of its header in messages */
	uint64_t	first;		/* its first id */
	uint32_t	count;		/* its messages */
	uint32_t	len;		/* header + payload bytes */
	int		bad;
};
/*
 * A closed day's message file somewhere else (an archive): block(arg, off, len, sha, dst) puts
 * the block at off, len bytes (header + payload), into dst and checks it has SHA-256 sha;
 * done(arg) is called at close. blocks[0..n) (sha[0..n)) is its block index (the day's
 * chain's block records, in id order from first_id). On failure the caller keeps the source.
 */
struct lb_msgsrc {
	void		*arg;
	int		(*block)(void *arg, uint64_t off, uint32_t len, const uint8_t sha[32],
			    uint8_t *dst);
	void		(*done)(void *arg);
};
int	lb_msgfile_open_src(const struct lb_msgsrc *src, uint64_t first_id,
	    const struct lb_blkref *blocks, const uint8_t (*sha)[32], size_t n,
	    struct lb_msgfile **out);
size_t	lb_msgfile_nblocks(struct lb_msgfile *mf);
void	lb_msgfile_block(struct lb_msgfile *mf, size_t i, struct lb_blkref *b);
int	lb_msgfile_block_hash(struct lb_msgfile *mf, const struct lb_blkref *b, uint8_t sha[32]);
/* The file's end as the index knows it (where the next block goes). */
uint64_t lb_msgfile_end(struct lb_msgfile *mf);
/* The messages file's descriptor and size now (for the chain's checks). */
int	lb_msgfile_fd(struct lb_msgfile *mf);
uint64_t lb_msgfile_file_size(struct lb_msgfile *mf);

/* ---------------------------------------------------------------- segments (lb_segment.c) */

/*
 * Index terms. A term is a namespace byte followed by the term bytes:
 *   LB_NS_TEXT     a token of the message text
 *   LB_NS_HOST, LB_NS_PROGRAM, LB_NS_PID, LB_NS_MSGID, LB_NS_PEER
 *                  the field's whole value, ASCII-folded, cut at LB_TOKEN_MAX
 *   LB_NS_FACILITY, LB_NS_SEVERITY
 *                  one byte: the number
 *   LB_NS_SD       "<sd-id>.<param-name>" 0x00 <token of the value> (names as received,
 *                  value tokens folded like text)
 *   LB_NS_TPL      the text's template (lb_text_template), when two messages or more of the
 *                  segment have it; not a term of lb_msg_terms: the segment writer adds it
 *   LB_NS_NOTPL    nothing more: the messages of the segment whose template is not indexed
 *   LB_NS_EVTIME   8 bytes: the message's own time stamp in whole seconds (rounded down),
 *                  as a u64 big-endian with the sign bit flipped (lb_evtime_term), so that
 *                  terms sort by time and a range of event times is a range of terms; none
 *                  for a message without a time stamp
 * Constants stored on disk are fixed.
 */
#define LB_NS_TEXT	0x01
#define LB_NS_HOST	0x02
#define LB_NS_PROGRAM	0x03
#define LB_NS_PID	0x04
#define LB_NS_MSGID	0x05
#define LB_NS_FACILITY	0x06
#define LB_NS_SEVERITY	0x07
#define LB_NS_SD	0x08
#define LB_NS_PEER	0x09
#define LB_NS_TPL	0x0a
#define LB_NS_NOTPL	0x0b
#define LB_NS_EVTIME	0x0c

#define LB_EVTIME_TERM_LEN 9	/* namespace byte + 8 bytes */
/* The LB_NS_EVTIME term of second sec (floor of a µs time stamp / 10^6) into out. */
void	lb_evtime_term(int64_t sec, uint8_t out[LB_EVTIME_TERM_LEN]);
/* The second of an LB_NS_EVTIME term (LB_EVTIME_TERM_LEN bytes). */
int64_t	lb_evtime_sec(const uint8_t *term);
/* The second a µs time stamp falls in (rounded down, also before 1970). */
int64_t	lb_evtime_of(int64_t timestamp_us);

/*
 * Calls fn once for every term of m in the order: text tokens (in message order, each followed
 * by its forms, lb_token_forms()), host,
 * program, pid, msgid, peer, facility, severity, event time (LB_NS_EVTIME), structured-data
 * terms. A term that occurs twice is
 * passed twice. term is a namespace byte plus bytes, in a buffer valid during the call. This
 * is the one definition of "the terms of a message": indexing and brute-force matching both
 * use it. A non-zero return of fn stops the walk and is returned.
 */
typedef int	(*lb_msgterm_fn)(void *arg, const uint8_t *term, size_t len);
int	lb_msg_terms(const struct lb_tokconf *tc, const struct lb_msg *m, lb_msgterm_fn fn,
	    void *arg);

/*
 * The same walk, with each term's flags: LB_TERM_FORM for a text term that is a form of the
 * token before it (lb_token_forms(), which gives LB_FORM_START and LB_FORM_END); every other
 * term (a token, a field value, an SD token) has LB_FORM_START | LB_FORM_END. A message's text
 * terms are: its first token, that token's forms, its second token, its forms, and so on.
 */
#define LB_TERM_FORM	0x04
typedef int	(*lb_msgterm2_fn)(void *arg, const uint8_t *term, size_t len, int flags);
int	lb_msg_terms2(const struct lb_tokconf *tc, const struct lb_msg *m, lb_msgterm2_fn fn,
	    void *arg);

/* In-memory index of an interval, written out as one segment file. */
struct lb_segw;

int	lb_segw_new(struct lb_segw **out);
void	lb_segw_free(struct lb_segw *w);

/*
 * Indexes message m (m->id must be greater than every id added before): its text tokens and
 * every field term. tc gives the delimiters.
 */
int	lb_segw_add(struct lb_segw *w, const struct lb_tokconf *tc, const struct lb_msg *m);

/*
 * A batch of messages' terms, cut, folded and hashed, ready to be inserted: lb_segw_add is
 * lb_segw_terms_add then lb_segw_add_terms, split so that the two halves can run in two
 * threads. A batch holds no pointer into the messages; clear it to reuse its memory.
 */
struct lb_segw_terms;

int	lb_segw_terms_new(struct lb_segw_terms **out);
void	lb_segw_terms_free(struct lb_segw_terms *b);
void	lb_segw_terms_clear(struct lb_segw_terms *b);
/* Appends the terms of m (and its id and receive time) to b. On failure b is as before. */
int	lb_segw_terms_add(struct lb_segw_terms *b, const struct lb_tokconf *tc,
	    const struct lb_msg *m);
/* Messages in b, and the bytes its terms take. */
uint32_t lb_segw_terms_count(const struct lb_segw_terms *b);
size_t	lb_segw_terms_size(const struct lb_segw_terms *b);
/*
 * Indexes every message of b in order, as lb_segw_add would (ids ascending, above every id
 * added before: a message that is not stops the batch there with EINVAL). b is unchanged.
 */
int	lb_segw_add_terms(struct lb_segw *w, const struct lb_segw_terms *b);

/* Adds one term for one id (ids ascending per term). For merges and tests. */
int	lb_segw_add_term(struct lb_segw *w, const uint8_t *term, size_t len, uint64_t id);

/* Bytes of memory the builder holds now. */
size_t	lb_segw_mem(const struct lb_segw *w);
/* Messages added, and their id and receive-time ranges. */
void	lb_segw_stats(const struct lb_segw *w, uint64_t *count, uint64_t *first_id,
	    uint64_t *last_id, int64_t *tmin, int64_t *tmax);

/*
 * Writes the segment to path (via path.tmp, fsync, rename, fsync of the directory) and empties
 * w for the next interval. Writing an empty builder is EINVAL.
 */
int	lb_segw_write(struct lb_segw *w, const char *path);

/*
 * A segment file opened for reading (mmap'ed, checked at open). One thread at a time per
 * struct lb_segment: it remembers the last dictionary block it decoded.
 */
struct lb_segment;

/* Opens and checks (header, sections, checksums). LB_EFORMAT / LB_ECORRUPT on damage. */
int	lb_segment_open(const char *path, struct lb_segment **out);
/*
 * A segment whose bytes are somewhere else (an archive): fill(arg, off, len, dst) puts the
 * file's bytes [off, off + len) into dst, off a multiple of piece and len whole pieces (the
 * last one may be short), checked by the source; done(arg) is called at close. Open reads the
 * header and the block index only; every later read fills what it needs first. On success the
 * segment owns the source; on failure the caller keeps it.
 */
struct lb_segsrc {
	void		*arg;
	uint64_t	 size;		/* the file's bytes */
	uint32_t	 piece;		/* bytes of a fill unit */
	int		(*fill)(void *arg, uint64_t off, uint64_t len, uint8_t *dst);
	void		(*done)(void *arg);
};
int	lb_segment_open_src(const struct lb_segsrc *src, struct lb_segment **out);
/* The bytes such a segment holds in memory (0 for a mapped file). */
uint64_t lb_segment_resident(const struct lb_segment *sg);
void	lb_segment_close(struct lb_segment *sg);

struct lb_seginfo {
	uint64_t	 first_id;	/* smallest id indexed */
	uint64_t	 last_id;	/* largest id indexed */
	uint64_t	 count;		/* messages indexed */
	int64_t		 tmin, tmax;	/* receive-time range, µs */
	uint64_t	 nterms;	/* distinct terms */
	uint64_t	 size;		/* file size */
	uint32_t	 version;	/* format version (FORMAT.md §4.2): 2, text terms are the
					   tokens only; 3, also their forms (lb_token_forms). 0 in
					   what a writer is given: the current version */
	int		 noevtime;	/* written before event-time terms (LB_NS_EVTIME): header
					   flag LB_SEG_F_EVTIME clear. 0 in what a writer is given:
					   the segment holds them */
};
void	lb_segment_info(const struct lb_segment *sg, struct lb_seginfo *si);

/*
 * An id list, decoded. ids is owned by the caller of lb_postings_*: free() it (or reuse it:
 * functions that fill a postings grow ids with realloc and keep cap up to date).
 */
struct lb_postings {
	uint64_t	*ids;
	size_t		 n;
	size_t		 cap;
};
void	lb_postings_free(struct lb_postings *p);

/* Exact lookup. Fills *out with the term's ids (ascending); LB_ENOTFOUND if absent. */
int	lb_segment_lookup(struct lb_segment *sg, const uint8_t *term, size_t len,
	    struct lb_postings *out);

/*
 * Calls fn for each term in [lo, hi) in order (hi NULL: to the end; lo NULL: from the start),
 * found by binary search of the sparse block index, not a full scan. The term is valid during
 * the call; the cookie identifies its id list for lb_segment_postings(). A non-zero return of
 * fn stops the walk and is returned.
 */
typedef int	(*lb_term_fn)(void *arg, const uint8_t *term, size_t len, uint64_t cookie,
	    uint32_t df);
int	lb_segment_terms(struct lb_segment *sg, const uint8_t *lo, size_t lolen,
	    const uint8_t *hi, size_t hilen, lb_term_fn fn, void *arg);
/* Calls fn for every term that starts with prefix. */
int	lb_segment_prefix(struct lb_segment *sg, const uint8_t *prefix, size_t len,
	    lb_term_fn fn, void *arg);
/*
 * A wildcard expansion: calls fn, in term order, for every term that starts with
 * prefix[0..len) and whose bytes from skip on (skip <= len) match glob (lb_glob_match), like
 * lb_segment_prefix() with a filter. With the segment's term blob built (lb_segment_blob) it
 * looks for the glob's longest literal run with memmem() over the blob and inflates only the
 * dictionary blocks of terms that match; without it, it walks the blocks of the range.
 */
int	lb_segment_scan(struct lb_segment *sg, const uint8_t *prefix, size_t len, size_t skip,
	    const uint8_t *glob, size_t globlen, lb_term_fn fn, void *arg);
/*
 * Builds the term blob of sg for lb_segment_scan: a copy of every term back to back in memory
 * (one full, checked walk of the dictionary; LB_ECORRUPT on damage). It belongs to sg and is
 * freed by lb_segment_blob_free() or lb_segment_close(). LB_ETOOBIG (nothing kept) when it
 * would take more than max bytes; 0 when it is built already.
 */
int	lb_segment_blob(struct lb_segment *sg, size_t max);
/*
 * Bytes the blob of sg holds (0: none). *need (NULL is fine) gets the bytes it takes or would
 * take, once a build learnt it (0: unknown yet).
 */
size_t	lb_segment_blob_size(const struct lb_segment *sg, size_t *need);
void	lb_segment_blob_free(struct lb_segment *sg);
/* Decodes the id list of a term found by lb_segment_terms(); appends to *out. */
int	lb_segment_postings(struct lb_segment *sg, uint64_t cookie, struct lb_postings *out);

/* Full check of every dictionary block and id list. Describes damage in why. */
int	lb_segment_verify(struct lb_segment *sg, char *why, size_t whylen);

/*
 * Merges n segments (id ranges disjoint) into one file at path (tmp, fsync, rename). Memory
 * stays bounded by streaming the dictionaries in order.
 */
int	lb_segment_merge(struct lb_segment **in, int n, const char *path);
/*
 * lb_segment_merge for a segment that a later merge rewrites (a store's tiered merges within
 * a day): its dictionary is compressed faster and a little less (FORMAT.md §4.10).
 */
int	lb_segment_merge_tier(struct lb_segment **in, int n, const char *path);

/* ---------------------------------------------------------------- catalog (lb_catalog.c) */

/*
 * The LMDB catalog in <data>/catalog/. Readers use their own read transaction per call (a
 * consistent snapshot); there is one writer per logspace at a time (lb_store holds a lock).
 * Every writing call is one transaction, synced when it returns 0. A handle may be shared by
 * threads; it must not be used across fork(), and a process opens a data directory's catalog
 * at most once at a time (LMDB rules). Calls taking a logspace name return LB_EBADCONF for a
 * name that is not [a-z0-9_-]{1,64} and LB_ENOTFOUND for a logspace that does not exist.
 * Damaged values are LB_ECORRUPT; writing calls on a LB_RDONLY handle are EROFS.
 */
struct lb_catalog;

/*
 * LB_RDWR creates <datadir>/catalog/ and the catalog if needed; LB_RDONLY never creates
 * (ENOENT when there is no catalog). LB_EFORMAT when the directory holds something else or
 * another format version. Clears reader slots left by dead processes. On success *out is
 * owned by the caller: lb_catalog_close().
 */
int	lb_catalog_open(const char *datadir, int mode, struct lb_catalog **out);
void	lb_catalog_close(struct lb_catalog *cat);

#define LB_NAME_MAX	64	/* logspace name: [a-z0-9_-]{1,64} */

/*
 * The one logspace name rule (lb_name.c), asked by every input that names a logspace. 1 when
 * name[0..len) may name one: 1..LB_NAME_MAX bytes of [a-z0-9_-], and not one of the data
 * directory's own folders (LB_RESERVED_NAMES in lb_format.h), since a logspace lives in
 * <data>/<name>/. Else 0 and, when why is not NULL, *why is a static string naming the rule
 * broken: "logspace name length not 1..64", "logspace name not [a-z0-9_-]" or "reserved
 * logspace name". The bytes need not end in NUL (a NUL byte breaks the rule).
 */
int	lb_logspace_name_ok(const void *name, size_t len, const char **why);
/*
 * 1 when name[0..len) is one of LB_RESERVED_NAMES: well-formed, but no new logspace's. Readers
 * that only need the form (the hand-off frame, catalog keys) accept
 * lb_logspace_name_ok() || lb_logspace_name_reserved().
 */
int	lb_logspace_name_reserved(const void *name, size_t len);

/* Logspace settings (stored; fixed layout in FORMAT.md). */
struct lb_lsconf {
	char		 delims[64];	/* the delimiters beside whitespace, NUL-terminated */
	uint32_t	 retention_days;	/* 0: keep forever */
	uint32_t	 flush_ms;	/* interval length: a segment at least this often */
	uint64_t	 mem_limit;	/* indexer memory limit in bytes */
	uint32_t	 fsync_ms;	/* group-commit period for fsync; 0 = fsync every commit */
};
void	lb_lsconf_default(struct lb_lsconf *c);

/*
 * Creates logspace name with conf if it does not exist (then EEXIST), with the state
 * { next_id 1, indexed_id 1, last_received LB_NOTIME }. Settings the tokenizer refuses, or a
 * zero flush_ms or mem_limit, are LB_EBADCONF (also for _set), and so is a reserved name
 * (lb_logspace_name_ok(); the other calls still take one, so an older catalog stays readable).
 */
int	lb_catalog_logspace_create(struct lb_catalog *cat, const char *name,
	    const struct lb_lsconf *conf);
int	lb_catalog_logspace_get(struct lb_catalog *cat, const char *name, struct lb_lsconf *conf);
int	lb_catalog_logspace_set(struct lb_catalog *cat, const char *name,
	    const struct lb_lsconf *conf);
/*
 * Calls fn for every logspace name in order, inside one read transaction; a non-zero return
 * of fn stops the walk and is returned.
 */
int	lb_catalog_logspaces(struct lb_catalog *cat,
	    int (*fn)(void *arg, const char *name), void *arg);
/*
 * The logspace names in order, copied out of the transaction (for callers that open stores or
 * delete between them, which they may not do inside lb_catalog_logspaces' walk). On success
 * *names is one malloc'ed array of *n NUL-terminated names, the caller's to free(); NULL when
 * there are none.
 */
int	lb_catalog_logspace_names(struct lb_catalog *cat, char (**names)[LB_NAME_MAX + 1],
	    size_t *n);

/* A published segment as the catalog knows it. */
struct lb_segref {
	uint64_t	 first_id;
	uint64_t	 last_id;
	uint64_t	 count;
	int64_t		 tmin, tmax;
	uint64_t	 size;
	uint32_t	 day;		/* YYYYMMDD */
	uint32_t	 level;		/* 0 = flushed interval, n = merged n times */
	char		 file[64];	/* file name inside <day>/index/ */
};

/*
 * Publishes segments: in one transaction, removes the segments whose first ids are in del[0..ndel)
 * and adds add[0..nadd). The files must already be durable. Also records next_id and the day's
 * range when they grow. All or nothing: LB_ENOTFOUND when a listed segment is missing, EEXIST
 * when an added one overlaps another's id range, EINVAL for an added one with first_id 0,
 * last_id < first_id, an impossible day or a file name that is empty, unterminated or has '/'.
 */
int	lb_catalog_publish(struct lb_catalog *cat, const char *ls,
	    const uint64_t *del, int ndel, const struct lb_segref *add, int nadd);

/*
 * Lists the segments of ls that overlap ids [lo, hi] in id order. *out is malloc'ed: free() it
 * (NULL when *n is 0). lo > hi is EINVAL.
 */
int	lb_catalog_segments(struct lb_catalog *cat, const char *ls, uint64_t lo, uint64_t hi,
	    struct lb_segref **out, size_t *n);

/* 1 when d is a YYYYMMDD day the catalog takes: year 1970..9999, month 1..12, day 1..31. */
int	lb_day_ok(uint32_t d);

/* A day of a logspace. */
struct lb_dayref {
	uint32_t	 day;		/* YYYYMMDD */
	uint64_t	 first_id;	/* first id of the day */
	uint64_t	 next_id;	/* one past the last id stored on the day */
	int64_t		 tmin, tmax;
};
int	lb_catalog_day_put(struct lb_catalog *cat, const char *ls, const struct lb_dayref *d);
/* Lists days in order. *out is malloc'ed: free() it (NULL when *n is 0). */
int	lb_catalog_days(struct lb_catalog *cat, const char *ls, struct lb_dayref **out, size_t *n);
/*
 * Removes, in one transaction, the day's record, the segments whose day is day, and the time
 * map entries of the day's ids [first_id, next_id). LB_ENOTFOUND if there is no such day.
 */
int	lb_catalog_day_delete(struct lb_catalog *cat, const char *ls, uint32_t day);

/*
 * The time-map entries of day d's ids [first_id, next_id) (found as lb_catalog_day_delete finds
 * them), in time order: t[i] is the step's start, id[i] its first id. *t and *id are malloc'ed:
 * free() both (NULL when *n is 0). For the archive's catalog extract (ARCHIVE.md).
 */
int	lb_catalog_day_timemap(struct lb_catalog *cat, const char *ls, const struct lb_dayref *d,
	    int64_t **t, uint64_t **id, size_t *n);
/*
 * Brings a day back (`logbox archive import`): in one transaction, its day record, its segments
 * and its time-map entries. The logspace must exist (LB_ENOTFOUND), the day must not (EEXIST),
 * and no segment may overlap one of the logspace's (EEXIST). EINVAL when a segment is not of
 * the day, lies outside [first_id, next_id), or is malformed as for lb_catalog_publish, or a
 * time-map id is outside the day. next_id and last_received are raised when the day's are
 * larger. All or nothing.
 */
int	lb_catalog_day_import(struct lb_catalog *cat, const char *ls, const struct lb_dayref *d,
	    const struct lb_segref *segs, size_t nseg, const int64_t *t, const uint64_t *id,
	    size_t nt);

/*
 * The sparse time→id map: at most one entry per LB_TIMEMAP_STEP of receive time. The writer
 * puts the first message of each step; a second put for a step keeps the first id.
 * t == LB_NOTIME is EINVAL.
 */
int	lb_catalog_timemap_put(struct lb_catalog *cat, const char *ls, int64_t t, uint64_t id);
/* The same for n entries (t[i], id[i]) in one transaction: all or nothing. */
int	lb_catalog_timemap_putv(struct lb_catalog *cat, const char *ls, const int64_t *t,
	    const uint64_t *id, size_t n);
/*
 * The first id received at or after t (lower bound from the map, exact within a step:
 * *id is the first id of the step containing t, so callers refine with message times; when
 * that step has no entry, the first id of the next step that has one).
 * LB_ENOTFOUND when t is past every entry.
 */
int	lb_catalog_time_to_id(struct lb_catalog *cat, const char *ls, int64_t t, uint64_t *id);

/*
 * A day's catalog extract (lb_dayx.c; indexer/ARCHIVE.md §3, catalog.json): its day record,
 * segments and time-map entries, as the archive keeps them beside the day's files.
 */
#define LB_DAYX_FORMAT	1	/* catalog.json "format" */
struct lb_dayx {
	char			 ls[LB_NAME_MAX + 1];
	struct lb_dayref	 day;
	struct lb_segref	*segs;	/* nseg, malloc'ed */
	size_t			 nseg;
	int64_t			*t;	/* nt time-map entries: step start, first id (malloc'ed) */
	uint64_t		*ids;
	size_t			 nt;
};
/* Reads day of ls from the catalog. LB_ENOTFOUND when the catalog has no such day. */
int	lb_dayx_load(struct lb_catalog *cat, const char *ls, uint32_t day, struct lb_dayx *x);
/* The extract as compact JSON (*out malloc'ed: free()). */
int	lb_dayx_format(const struct lb_dayx *x, char **out);
/*
 * Parses len bytes of JSON: LB_ECORRUPT with a one-line reason in why when they are not an
 * extract this logbox can use (format, logspace name, day, ids inside the day, file names
 * without '/', time-map ids of the day). Members it does not know are ignored.
 */
int	lb_dayx_parse(const char *text, size_t len, struct lb_dayx *x, char *why, size_t whylen);
void	lb_dayx_free(struct lb_dayx *x);

/* The logspace's next id and recovery checkpoint (ids below it are in published segments). */
struct lb_lsstate {
	uint64_t	 next_id;
	uint64_t	 indexed_id;	/* every id below this is in a published segment */
	int64_t		 last_received;	/* largest receive time stored */
};
/* _put: indexed_id > next_id is EINVAL. */
int	lb_catalog_state_get(struct lb_catalog *cat, const char *ls, struct lb_lsstate *st);
int	lb_catalog_state_put(struct lb_catalog *cat, const char *ls, const struct lb_lsstate *st);

/* --------------------------------------------------------------- store (lb_store*.c) */

/*
 * A logspace's store: the one object indexd and the CLI write through, and the CLI reads
 * through. It ties the day's message file, the interval's in-memory index, the published
 * segments and the catalog together, and it owns recovery, flushing and merging.
 *
 * Durability contract: lb_store_append() returns once the message is in memory. After
 * lb_store_commit(st, 1) returns 0, every message appended before it survives a kill -9 and a
 * power cut; after lb_store_commit(st, 0), a kill -9 (not a power cut). A flush (a new segment)
 * first makes the messages it indexes durable, so the catalog never points at a lost message.
 */
struct lb_store;

/*
 * Opens logspace ls in data directory data. LB_RDWR creates the data directory, catalog and
 * logspace when missing, takes the logspace's writer lock (LB_ELOCKED if another process
 * holds it) and recovers: the day's message file is repaired, orphan segment files are
 * removed, and messages not yet in a segment are indexed again in memory. LB_RDONLY never
 * writes (LB_ENOTFOUND when the logspace does not exist). On success *out is the caller's:
 * lb_store_close().
 */
int	lb_store_open(const char *data, const char *ls, int mode, struct lb_store **out);

/*
 * A reader of logspace ls that reads the catalog through cat (an open catalog of data, the
 * caller's; it must outlive the store) instead of opening its own. A process may open a data
 * directory's catalog once, so one that reads several logspaces, or one logspace from several
 * threads (a store handle per thread), opens the catalog once and its readers with this.
 * Otherwise the same as lb_store_open(data, ls, LB_RDONLY, out).
 */
/*
 * Archived days read in place (lb_archive.c, indexer/ARCHIVE.md §7). A cache is one per
 * process: a directory of checked pieces kept under their SHA-256 within budget bytes (least
 * recently used out first), and the kept-alive connections to object stores. An archive is a
 * logspace's verified days (logbox-archive's state directory) that the settings file's target
 * holds, read through a cache; LB_ENOTFOUND (why set) when the logspace has no target or no
 * state. lb_archive_stale says when either changed since open.
 */
struct lb_acache;
struct lb_archive;
int	lb_acache_open(const char *dir, uint64_t budget, struct lb_acache **out);
void	lb_acache_close(struct lb_acache *c);
void	lb_acache_usage(struct lb_acache *c, uint64_t *bytes, uint64_t *pieces);
int	lb_archive_open(struct lb_acache *c, const char *settings, const char *state,
	    const char *ls, struct lb_archive **out, char *why, size_t whylen);
struct lb_archive *lb_archive_ref(struct lb_archive *a);
void	lb_archive_unref(struct lb_archive *a);
int	lb_archive_stale(struct lb_archive *a);
/* The verified days it can read (and how many records it could not use), in id order. */
size_t	lb_archive_ndays(const struct lb_archive *a, size_t *unusable);
const struct lb_dayref *lb_archive_day(const struct lb_archive *a, size_t i);

/* What reads since the last lb_store_archive_take took from the archive. */
struct lb_astat {
	uint32_t	*days;		/* archived days read (YYYYMMDD; taken: in order) */
	size_t		 ndays, cap;
	uint64_t	 us;		/* µs spent reading archived bytes (cache or object store) */
	uint64_t	 fetched;	/* bytes fetched from the object store */
	uint64_t	 cached;	/* bytes read from the local cache */
	uint64_t	 gets;		/* GET requests */
	char		 why[512];	/* the first failure, or "" */
};
int	lb_astat_day(struct lb_astat *s, uint32_t day);
/*
 * Adds the archive's days that are not on local disk to a reader store (a, referenced; NULL:
 * none). Their segments and messages are then read through it: LB_EARCHIVE (the reason in
 * the store's lb_astat.why) when the object store fails or answers other bytes than were
 * archived.
 */
int	lb_store_set_archive(struct lb_store *st, struct lb_archive *a);
/*
 * Adds what was read from the archive since the last call to *out (zeroed first; free
 * out->days), its days in order, the first failure's why kept.
 */
void	lb_store_archive_take(struct lb_store *st, struct lb_astat *out);
int	lb_store_open_reader(struct lb_catalog *cat, const char *data, const char *ls,
	    struct lb_store **out);

/*
 * A writer of logspace ls through cat (opened LB_RDWR by the caller, who keeps it open until
 * every store on it is closed): how one process (indexd) writes several logspaces. Otherwise
 * the same as lb_store_open(data, ls, LB_RDWR, out).
 */
int	lb_store_open_writer(struct lb_catalog *cat, const char *data, const char *ls,
	    struct lb_store **out);

/*
 * Writer: commits, flushes the open interval to a segment, and closes. Reader: closes.
 * Returns the first error of the final flush (the store is closed either way). NULL is fine.
 */
int	lb_store_close(struct lb_store *st);

/*
 * Writer. Stores m: sets m->id to the next id and, when m->received is 0, m->received to the
 * current time; receive times never go backwards (an earlier time is raised to the latest one
 * stored). Every field is first cut to the store's limits by lb_msg_fit() (m's slices and
 * flags are changed in place), so no field's length makes an append fail. A receive time
 * after 9999-12-31 (LB_RECEIVED_MAX) is LB_EBADMSG, and nothing is stored. Flushes a segment
 * when the interval's time or memory limit is reached, and merges. lb_errclass() tells a
 * caller whether an error is the message's (set it aside) or the environment's (retry).
 */
int	lb_store_append(struct lb_store *st, struct lb_msg *m);

/*
 * Writer. Writes appended messages to the operating system (they then survive a kill -9) and,
 * with sync, fdatasync()s them (they then survive a power cut). The caller owns the policy
 * (every commit, group commit every N ms, never).
 */
int	lb_store_commit(struct lb_store *st, int sync);

/*
 * Writer. fdatasync()s what earlier lb_store_commit(st, 0) calls wrote (and commits with sync
 * what was appended since): a group commit's timer, when nothing new may come. 0 when there is
 * nothing to do.
 */
int	lb_store_sync(struct lb_store *st);

/*
 * Writer. Bytes of memory the open interval's index holds (as of the last batch of terms
 * handed to the indexer thread: a few batches behind at most). 0 for a reader.
 */
size_t	lb_store_mem(const struct lb_store *st);

/* Writer. Ends the interval now: durable messages, a new segment, published, then merges. */
int	lb_store_flush(struct lb_store *st);

/*
 * Writer, for a caller's timer while no message arrives: publishes a segment the indexer thread
 * has finished writing, and ends an interval older than the logspace's flush_ms (as the next
 * lb_store_put would), so that the last messages before a quiet spell become indexed within
 * about flush_ms too. Never waits for the indexer thread. 0 for a reader.
 */
int	lb_store_flush_due(struct lb_store *st);

/* Writer. Rebuilds every segment of the logspace from its message files. */
int	lb_store_reindex(struct lb_store *st, void (*progress)(void *arg, uint64_t done,
	    uint64_t total), void *arg);

/*
 * The memory the store's segments may hold as term blobs for wildcard scans
 * (lb_segment_blob), default LB_BLOB_BUDGET; blobs of the least recently used segments are
 * freed to make room, and a segment whose blob does not fit is scanned block by block. 0
 * turns blobs off (and frees them). lb_store_blob_bytes: the bytes held now.
 */
#define LB_BLOB_BUDGET	((size_t)512 << 20)
void	lb_store_set_blob_budget(struct lb_store *st, size_t bytes);
size_t	lb_store_blob_bytes(const struct lb_store *st);

/* Ids stored: [*first, *next). */
void	lb_store_range(struct lb_store *st, uint64_t *first, uint64_t *next);

/*
 * Reads message id. Slices point into a block cached by st: valid until the next call on st.
 */
int	lb_store_get(struct lb_store *st, uint64_t id, struct lb_msg *m);

/*
 * The ids (ascending) of messages holding term (namespace byte + bytes, see LB_NS_*) — or,
 * with prefix, any term starting with it — in published segments and in the messages not yet
 * indexed. *out is filled as lb_postings documents.
 */
int	lb_store_lookup(struct lb_store *st, const uint8_t *term, size_t len, int prefix,
	    struct lb_postings *out);

/*
 * Checks everything: every message block and WAL record, every segment file, the catalog
 * against the files (ranges, counts, sizes, contiguity), orphans. Calls report once per
 * problem with the path and a description; returns 0 when nothing was found, LB_ECORRUPT
 * otherwise (or another error that stopped the check).
 */
/* <data>/<ls>/YYYY/MM-DD: the folder of a logspace's day (FORMAT.md §1), the one rule. */
int	lb_day_dir(char *buf, size_t len, const char *data, const char *ls, uint32_t day);

/* ---------------------------------------------------------------- seals (lb_seal.c) */

#define LB_SEAL_KEYLEN	32

/* The sealing key's state (never the key). */
struct lb_sealstate {
	uint64_t	epoch;		/* the epoch now: seals up to epoch - 1 are written */
	int64_t		started;	/* µs when it began */
	uint64_t	interval;	/* µs of an epoch */
};

/*
 * Sets sealing up in data: a random verification key K_0 in vkey (to show once and keep off
 * the box), and <data>/indexd/seal holding K_1, epoch 1 (FORMAT.md §14.5). EEXIST when
 * sealing is set up already; LB_EBADCONF for an interval outside LB_SEAL_INTERVAL_MIN..MAX.
 */
int	lb_seal_init(const char *data, uint64_t interval_us, uint8_t vkey[LB_SEAL_KEYLEN]);
/* The key's state; ENOENT when sealing is not set up, LB_ECORRUPT when the file is damaged. */
int	lb_seal_state(const char *data, struct lb_sealstate *s);
/*
 * When the epoch is over (or force): a seal of every logspace's chains (each day whose chain
 * does not end with a seal, and the newest day always) with the epoch's key, then the key
 * moves to the next epoch and the old one is overwritten. *sealed: the epoch sealed, 0 when
 * none was due. ENOENT when sealing is not set up.
 */
int	lb_seal_run(const char *data, struct lb_catalog *cat, int force, uint64_t *sealed);
/* For verification: K_next from K_next-1, and a seal's MAC (FORMAT.md §14.5). */
int	lb_seal_ratchet(const uint8_t k[LB_SEAL_KEYLEN], uint64_t next,
	    uint8_t out[LB_SEAL_KEYLEN]);
int	lb_seal_mac(const uint8_t k[LB_SEAL_KEYLEN], const char *ls, uint32_t day,
	    uint64_t epoch, int64_t started, const uint8_t prev[32], uint8_t out[32]);
/* 0 when the key file's key is the one k0 gives at its epoch; LB_ECORRUPT when not. */
int	lb_seal_key_check(const char *data, const uint8_t k0[LB_SEAL_KEYLEN]);
/*
 * Signed days: an Ed25519 key pair, <data>/indexd/sign.key (mode 0600) and sign.pub (the
 * public key the admin downloads; FORMAT.md §14.6). EEXIST when there is one.
 */
int	lb_sign_init(const char *data);
/* A verification key as written: 64 hex digits. LB_EBADCONF otherwise. */
int	lb_seal_key_parse(const char *text, uint8_t k[LB_SEAL_KEYLEN]);

/*
 * Retention: before day gone of logspace ls is removed, a tombstone for it (its ids and its
 * chain's head) goes into the chain of the logspace's next day, next (FORMAT.md §14).
 */
int	lb_chain_tomb(const char *data, struct lb_catalog *cat, const char *ls,
	    const struct lb_dayref *gone, uint32_t next);

int	lb_store_verify(struct lb_store *st,
	    void (*report)(void *arg, const char *path, const char *what), void *arg);

/*
 * The verification key (K_0, lb_seal_init) for the next lb_store_verify: every seal's MAC is
 * then checked with its own epoch's key, and the key file's key against it.
 */
void	lb_store_set_verify_key(struct lb_store *st, const uint8_t key[LB_SEAL_KEYLEN]);

/*
 * The public key (PEM) the next lb_store_verify checks day roots with, instead of the box's
 * own <data>/indexd/sign.pub (which whoever holds the box could replace).
 */
void	lb_store_set_verify_pubkey(struct lb_store *st, const char *path);

/*
 * With fast, the next lb_store_verify checks the chains, seals and day roots (every byte
 * chained is hashed) and the catalog's cross-references, but does not decode every block and
 * id list: blocks and segments not chained yet (the newest day's last ones) are then checked
 * only as far as their headers.
 */
void	lb_store_set_verify_fast(struct lb_store *st, int fast);

/* The CAs (PEM file) a day's RFC 3161 time stamp must come from; without, hash and status. */
void	lb_store_set_verify_tsa_ca(struct lb_store *st, const char *path);

/* What the last lb_store_verify found of the seals. */
struct lb_sealinfo {
	int		 setup;		/* the data directory has a sealing key */
	uint64_t	 key_epoch;	/* the key's epoch now */
	uint64_t	 first, last;	/* the epochs of the logspace's seals (0: none) */
	int64_t		 last_time;	/* µs: when the last seal was made */
	uint64_t	 seals;		/* seal records */
	uint64_t	 checked;	/* of them, MACs checked with the verification key */
	uint64_t	 days_signed;	/* days whose day root's signature checked */
	uint64_t	 days_stamped;	/* days whose root.tsr checked (FORMAT.md §14.7) */
};
void	lb_store_seal_info(const struct lb_store *st, struct lb_sealinfo *out);

/* What the last lb_store_verify found of each day (in day order), for a per-day report. */
struct lb_dayinfo {
	uint32_t	 day;		/* YYYYMMDD */
	uint64_t	 messages;
	uint64_t	 records;	/* records of its chain; 0: it has none */
	uint64_t	 seal_epoch;	/* the last seal in its chain (0: none) */
	int64_t		 sealed_time;	/* µs: when that seal was made */
	int		 signed_;	/* 1: a day root whose signature checked; 0: none; -1: bad */
	int		 stamped;	/* 1: a root.tsr that checked; 0: none; -1: bad */
	uint64_t	 problems;	/* problems reported while this day was checked */
};
size_t	lb_store_day_count(const struct lb_store *st);
void	lb_store_day_info(const struct lb_store *st, size_t i, struct lb_dayinfo *out);

struct lb_storestats {
	uint64_t	 messages;
	uint64_t	 days;
	uint64_t	 segments;
	uint64_t	 raw_bytes;		/* message bytes as received */
	uint64_t	 messages_bytes;	/* messages + WAL files */
	uint64_t	 index_bytes;		/* segment files */
	uint64_t	 catalog_bytes;		/* the LMDB files (shared by all logspaces) */
};
int	lb_store_stats(struct lb_store *st, struct lb_storestats *ss);

/* The logspace's tokenizer settings. */
const struct lb_tokconf	*lb_store_tokconf(const struct lb_store *st);

/*
 * Writer. Tokenizes the messages appended from now on with delims (NUL-terminated, as
 * lb_lsconf.delims: at most 63 bytes, none a letter or digit, else LB_EBADCONF). The open
 * interval is flushed first (as lb_store_flush), so every segment, and the tail not yet in one,
 * holds messages tokenized one way. Nothing happens when delims are those in use. It does not
 * write the catalog: the caller stores the settings (lb_catalog_logspace_set), so that a store
 * opened later uses them too.
 */
int	lb_store_set_delims(struct lb_store *st, const char *delims);

/*
 * Reader. Reloads the day list from the catalog (days added since, days removed by retention)
 * and closes the cached segment files of removed days. Writer: does nothing. Searches do it
 * themselves; lb_store_range and lb_store_get use the list as last loaded.
 */
int	lb_store_refresh(struct lb_store *st);

/* ---------------------------------------------------------------- hand-off frames (lb_frame.c) */

/*
 * The record syslog-ng hands to indexd, one per message (FORMAT.md §11): a text header line,
 * the payload, a LF.
 *   "LB1" SP rtime SP stime SP tzoff SP pri SP fmt SP Lls SP Lhost SP Lprog SP Lpid SP Lmsgid
 *   SP Lsd SP Lmsg LF  <ls><host><prog><pid><msgid><sd><msg> LF
 * Fields that do not fit the store's limits are cut by the store (lb_store_append ->
 * lb_msg_fit: LB_FIELD_MAX, LB_SD_MAX) and flagged LB_MSG_FIELDCUT; a message longer than
 * LB_MSG_MAX is cut by the decoder and flagged LB_MSG_TRUNCATED.
 */
#define LB_FRAME_MAGIC		"LB1 "
#define LB_FRAME_HDR_MAX	256		/* header line bytes, LF included */
#define LB_FRAME_MAX		(512 * 1024)	/* a frame indexd decodes in one piece */
#define LB_FRAME_FIELD_MAX	4096		/* host, program, pid, msgid in a frame */
#define LB_FRAME_SD_MAX		(64 * 1024)	/* structured data in a frame */
#define LB_FRAME_MSG_MAX	(64 * 1024 * 1024)	/* message bytes a frame may announce */

struct lb_frame {
	struct lb_msg	 msg;	/* id 0; slices point into the decoded buffer */
	struct lb_slice	 ls;	/* the logspace name: 1..LB_NAME_MAX bytes of [a-z0-9_-] */
	size_t		 hdr;	/* bytes of the header line, LF included */
	size_t		 size;	/* bytes of the whole frame */
};

/*
 * Decodes the frame at buf[0..len).
 * - 0: *f is the frame; it took f->size bytes.
 * - EAGAIN: buf holds a valid beginning but not the whole frame. *need is the whole frame's
 *   size once the header line is complete, else 0.
 * - LB_ETOOBIG: the header is valid but the frame is larger than max bytes. *need is its size;
 *   f->hdr, f->size and the header fields of f->msg are set, the field slices are set where buf
 *   holds the whole field (else empty), and f->msg.message is the part of the message buf holds,
 *   at most LB_MSG_MAX bytes (LB_MSG_TRUNCATED when the message is longer). A caller that keeps
 *   the first f->hdr + fields + LB_MSG_MAX bytes thus has the message, cut; it skips the rest and
 *   checks the final LF itself.
 * - LB_EPARSE: buf does not start with a valid frame; *why says what is wrong (a static
 *   string). Skip with lb_frame_resync(buf, len, 1).
 * Never reads past buf[len - 1].
 */
int	lb_frame_decode(const uint8_t *buf, size_t len, size_t max, struct lb_frame *f,
	    size_t *need, const char **why);

/* The offset of the next "LB1 " at or after from in buf[0..len), or the offset from which a
 * partial "LB1 " at the end of buf begins, or len. */
size_t	lb_frame_resync(const uint8_t *buf, size_t len, size_t from);

/*
 * Appends m as a frame for logspace ls to *buf (len bytes used of cap, grown with realloc).
 * m->received must be set; LB_NOTIME / LB_NOVALUE fields become "-". EINVAL for a bad ls or a
 * field longer than a frame allows. For tests, benchmarks and tools.
 */
int	lb_frame_encode(const struct lb_msg *m, const char *ls, uint8_t **buf, size_t *len,
	    size_t *cap);

/* ---------------------------------------------------------------- dead letters (lb_deadletter.c) */

/*
 * The dead-letter file (FORMAT.md §12): messages that can never be stored (lb_errclass() ==
 * LB_ERRC_MESSAGE), set aside with why, so that an input goes on with the next one. indexd
 * writes <data>/LB_DL_FILE; `logbox deadletter` reads it.
 */
struct lb_dl;

struct lb_dlrec {
	int64_t		 when;		/* when it was set aside, µs */
	int64_t		 received;	/* the message's receive time, µs (LB_NOTIME: unknown) */
	int32_t		 code;		/* the error: lb_strerror(code) */
	uint64_t	 batch;		/* indexd's FIFO batch (intent sequence number); 0: none */
	uint32_t	 batch_crc;	/* that batch's CRC (FORMAT.md §11.3) */
	uint32_t	 index;		/* the frame's position in its batch */
	char		 ls[LB_NAME_MAX + 1];	/* the logspace it was for ("" if unknown) */
	struct lb_slice	 input;		/* the input's name, e.g. "fifo fd 3" (cut at 65535) */
	struct lb_slice	 reason;	/* the reason in words (cut at 65535) */
	struct lb_slice	 frame;		/* the raw frame bytes, at most LB_DL_FRAME_MAX */
	uint64_t	 offset;	/* lb_dl_next: the record's offset in the file */
};

/*
 * Opens the dead-letter file at path. LB_RDWR creates it (with its header) when missing and
 * cuts a torn or damaged tail off; LB_RDONLY only reads (LB_ENOTFOUND when it does not exist).
 * On success *out is the caller's: lb_dl_close() (NULL is fine).
 */
int	lb_dl_open(const char *path, int mode, struct lb_dl **out);
void	lb_dl_close(struct lb_dl *dl);

/*
 * Writer. Appends r with one write and fdatasync()s it: once this returns 0 the record
 * survives a kill -9 and a power cut. r->offset is ignored.
 */
int	lb_dl_append(struct lb_dl *dl, const struct lb_dlrec *r);

/*
 * Reads the next record into *r, whose slices point into dl: valid until the next call on dl.
 * LB_ENOTFOUND at the end; LB_ECORRUPT at a damaged or torn record (nothing after it is read).
 */
int	lb_dl_next(struct lb_dl *dl, struct lb_dlrec *r);

/* ---------------------------------------------------------------- JSON and time (lb_json.c, lb_time.c) */

/*
 * Writes m as one JSON object (no newline) to f: id, received (RFC 3339 UTC, µs), received_us,
 * timestamp (RFC 3339 with the message's own UTC offset, or null), timestamp_us, host, peer
 * ("" when unknown), program, pid, msgid, sd, facility, severity (numbers or null), flags
 * (array of names) and message. Byte strings that are valid UTF-8 pass through; every byte that is not part of a
 * valid UTF-8 sequence is written as \udcXX (Python's "surrogateescape"), so the exact bytes
 * can be recovered. Returns 0 or EIO when f reports an error.
 */
int	lb_msg_json(FILE *f, const struct lb_msg *m);

/* Writes p[0..len) as the inside of a JSON string with the escaping lb_msg_json() uses. */
void	lb_json_bytes(FILE *f, const uint8_t *p, size_t len);

/*
 * The length (2 to 4) of the valid UTF-8 sequence of a non-ASCII character at p[0..len), or 0
 * when the bytes there are not one (overlong forms, surrogates and code points past U+10FFFF
 * are not valid): the rule lb_json_bytes() escapes by.
 */
size_t	lb_utf8_len(const uint8_t *p, size_t len);

/*
 * Formats us (µs since the epoch) as RFC 3339 with microseconds in the UTC offset tzoff
 * (minutes; 0 prints "Z"): "2026-11-22T12:00:00.000001Z". buf should hold 40 bytes.
 */
void	lb_time_fmt(char *buf, size_t len, int64_t us, int tzoff);

/*
 * Parses a time given by a user into µs since the epoch:
 *   - RFC 3339: "2026-11-22T12:00:00Z", fractional seconds and "+01:00" offsets allowed; a
 *     "T" may be a space; a date alone ("2026-11-22") is its midnight UTC;
 *   - relative to now_us: "-15m", "-2h", "-1d", "-1w", "-30s" (also "+" for the future);
 *   - "now";
 *   - a decimal integer: seconds since the epoch.
 * LB_EQUERY for anything else (or a value out of range).
 */
int	lb_time_parse(const char *s, int64_t now_us, int64_t *out);

/* ---------------------------------------------------------------- queries (lb_query.c) */

/*
 * A query (DESIGN.md "Query language", QUERY.md) parsed into a tree of nodes. The tree is
 * plain data owned by whoever parsed it: lb_query_free() frees a whole tree.
 *
 * Term patterns are kept in "glob form": the bytes of the term, where an unescaped '*' matches
 * any run of bytes (also none), an unescaped '?' exactly one byte, and '\' followed by any
 * byte means that byte literally. Literal '*', '?' and '\' bytes are always escaped; no other
 * byte ever is. Text and field values are ASCII-folded as the index folds them.
 */
enum lb_qkind {
	LB_Q_ALL = 1,	/* "*": every message in range */
	LB_Q_TERM,	/* one term pattern in namespace ns */
	LB_Q_PHRASE,	/* npats >= 2 patterns, adjacent and in order, in namespace ns */
	LB_Q_SET,	/* facility or severity (ns) is one of the values in mask */
	LB_Q_AND,	/* every child (nkids >= 2) */
	LB_Q_OR,	/* any child (nkids >= 2) */
	LB_Q_NOT	/* not the child (nkids == 1) */
};

enum lb_qpatkind {
	LB_QP_EXACT = 1,	/* no wildcard: lit is the whole term */
	LB_QP_PREFIX,		/* lit followed by one or more '*' and nothing else */
	LB_QP_WILD		/* anything else with a wildcard; lit is the part before the first */
};

struct lb_qpat {
	int		 kind;		/* LB_QP_* */
	uint8_t		*glob;		/* glob form (see above) */
	size_t		 globlen;
	uint8_t		*lit;		/* the literal bytes before the first wildcard, unescaped */
	size_t		 litlen;
};

struct lb_qnode {
	int		  kind;		/* LB_Q_* */
	size_t		  pos;		/* byte offset in the query text where it starts */
	uint8_t		  ns;		/* TERM, PHRASE: LB_NS_TEXT, _HOST, _PROGRAM, _PID, _MSGID
					   or _SD; SET: LB_NS_FACILITY or LB_NS_SEVERITY */
	char		 *sdname;	/* LB_NS_SD: "<sd-id>.<param-name>", NUL-terminated */
	uint32_t	  mask;		/* SET: bit v set when value v matches */
	struct lb_qpat	 *pats;		/* TERM: 1, PHRASE: npats */
	size_t		  npats;
	struct lb_qnode	**kids;		/* AND, OR, NOT */
	size_t		  nkids;
};

#define LB_QUERY_MAX	16384	/* bytes of query text; longer is LB_ETOOBIG */
#define LB_QUERY_DEPTH	64	/* nesting of parentheses and NOT */
#define LB_QUERY_NODES	4096	/* nodes in one tree */

/* Where and why a query was refused. */
struct lb_qerr {
	size_t		 pos;		/* byte offset in the query text */
	char		 msg[160];	/* "expected ')' to close '(' at 4", ... */
};

/*
 * Parses text[0..len) with the logspace's tokenizer settings tc (words are split into tokens
 * as messages are). On success *out is the caller's (lb_query_free). On failure returns
 * LB_EQUERY (or LB_ETOOBIG, ENOMEM) and, for LB_EQUERY and LB_ETOOBIG, fills *err.
 */
int	lb_query_parse(const struct lb_tokconf *tc, const char *text, size_t len,
	    struct lb_qnode **out, struct lb_qerr *err);
void	lb_query_free(struct lb_qnode *q);

/*
 * Prints q as canonical query text into a malloc'ed, NUL-terminated *out (the caller's: free)
 * of *outlen bytes. With the same settings tc, lb_query_parse(tc, lb_query_fmt(tc, q)) gives a
 * tree equal to q (lb_query_equal); tc says which bytes must be escaped.
 */
int	lb_query_fmt(const struct lb_tokconf *tc, const struct lb_qnode *q, char **out,
	    size_t *outlen);

/*
 * The query language's name of facility v (0..23: "kern" .. "local7") or severity v (0..7:
 * "emerg" .. "debug"): a static string, or NULL for a value out of range.
 */
const char	*lb_facility_name(unsigned v);
const char	*lb_severity_name(unsigned v);

/*
 * The query language's field names, for those that take a field apart from a query (/v1/top,
 * logbox search --top). lb_field_name: 1 when name[0..len) is one of host, program, pid,
 * msgid, facility, severity, message or peer, in any ASCII case, with *ns its LB_NS_* and
 * *canon its lower-case spelling (a static string); else 0 and neither is set.
 * lb_sdname_ok: 1 when name[0..len) is a structured-data parameter "<sd-id>.<param>" as the
 * language takes one (both parts non-empty; the sd-id holds '@' or is RFC 5424's timeQuality,
 * origin or meta), else 0.
 */
int	lb_field_name(const void *name, size_t len, uint8_t *ns, const char **canon);
int	lb_sdname_ok(const void *name, size_t len);

/* 1 when the two trees are the same (positions aside), else 0. */
int	lb_query_equal(const struct lb_qnode *a, const struct lb_qnode *b);

/* 1 when s[0..slen) matches glob[0..globlen) (glob form above), else 0. */
int	lb_glob_match(const uint8_t *glob, size_t globlen, const uint8_t *s, size_t slen);

/* 1 when the term bytes s[0..slen) (no namespace byte) match pattern pt, else 0. */
int	lb_qpat_match(const struct lb_qpat *pt, const uint8_t *s, size_t slen);

/*
 * Brute force: 1 when message m matches q, else 0 (or a negative error code, e.g. ENOMEM).
 * The definition the index must agree with, used for messages not yet indexed and to verify
 * phrase candidates. Terms are those of lb_msg_terms(tc, m); a phrase matches a run of
 * consecutive terms of that sequence.
 */
int	lb_query_match(const struct lb_qnode *q, const struct lb_tokconf *tc,
	    const struct lb_msg *m);

/* ---------------------------------------------------------------- highlighting (lb_spans.c) */

/* Bytes text[off..off+len) of a message's text. */
struct lb_span {
	size_t		 off;
	size_t		 len;
};

/*
 * The spans of text[0..len) (a message's text) that q matched, in text order, never
 * overlapping: a whole token (the run of non-delimiter bytes, not cut at LB_TOKEN_MAX) or the
 * bytes of a form of a token (lb_token_forms) that a text term of q matches (lb_qpat_match),
 * or that a word of a text phrase of q matched where the phrase matches, terms under an odd
 * number of NOTs left out. *out is malloc'ed (the caller's: free), NULL when *n
 * is 0. Returns 0 or ENOMEM.
 */
int	lb_query_spans(const struct lb_qnode *q, const struct lb_tokconf *tc,
	    const uint8_t *text, size_t len, struct lb_span **out, size_t *n);

/* ---------------------------------------------------------------- search (lb_eval.c) */

/*
 * Evaluates a query over one logspace's store: the published segments and the messages not
 * yet indexed, between two receive times. Ids follow receive time, so a time range is an id
 * range found through the catalog's time map; times are whole seconds in a search (from is
 * rounded down and to up to a whole second, so [from, to) covers both given instants).
 */

#define LB_ORDER_NEWEST	0
#define LB_ORDER_OLDEST	1

/* lb_searchreq.want */
#define LB_WANT_HITS	0x01	/* ids of up to limit matches after cursor */
#define LB_WANT_TOTAL	0x02	/* the exact number of matches */
#define LB_WANT_HIST	0x04	/* a histogram of nbuckets buckets */
#define LB_WANT_TOP	0x08	/* the topk most frequent values of field top_ns */

/* lb_searchreq.time: which time from and to are */
#define LB_TIME_RECEIVED 0	/* receive time: an id range through the time map */
#define LB_TIME_EVENT	1	/* the message's own time stamp: every id, filtered through the
				   LB_NS_EVTIME terms of each segment; messages without a time
				   stamp never match. Hits stay in id (receive) order; the
				   histogram's buckets are event seconds */

struct lb_searchreq {
	const struct lb_qnode	*q;
	int64_t		 from;		/* time, µs, inclusive (rounded down to a second) */
	int64_t		 to;		/* time, µs, exclusive (rounded up to a second) */
	uint32_t	 want;		/* LB_WANT_* */
	uint32_t	 limit;		/* hits: at most this many ids */
	int		 order;		/* LB_ORDER_* */
	uint64_t	 cursor;	/* 0: from the start; else continue after this id (ids below
					   it when newest first, above it when oldest first) */
	uint32_t	 nbuckets;	/* histogram: 1..LB_HIST_MAX */
	uint8_t		 top_ns;	/* top: LB_NS_HOST, _PROGRAM, _PID, _MSGID, _FACILITY,
					   _SEVERITY, _SD or _TEXT (the most frequent tokens) */
	const char	*top_sdname;	/* top of LB_NS_SD: "<sd-id>.<param-name>" */
	uint32_t	 topk;		/* top: 1..LB_TOP_MAX values */
	int64_t		 deadline_ms;	/* give up with LB_EDEADLINE after this long; 0 = none */
	uint64_t	 max_terms;	/* wildcards may expand to this many terms; 0 = LB_MAX_TERMS */
	const atomic_int *cancel;	/* or NULL: give up with ECANCELED once *cancel is non-zero
					   (another thread sets it; looked at with the clock) */
	uint64_t	 after;		/* 0: none; else only ids above it (an id window, on top of
					   from and to) */
	uint64_t	 upto;		/* 0: none; else only ids up to it */
	int		 indexed;	/* only ids in published segments: no brute force */
	int		 time;		/* LB_TIME_*: what from and to select by */
};

#define LB_HIST_MAX	10000
#define LB_TOP_MAX	1000
#define LB_MAX_TERMS	1000000

struct lb_topval {
	uint8_t		*value;		/* the term's bytes without namespace (and sd name) */
	size_t		 len;
	uint64_t	 count;		/* matching messages holding it */
};

struct lb_searchres {
	uint64_t	*ids;		/* hits, in the requested order */
	size_t		 n;
	uint64_t	 next_cursor;	/* pass as cursor for the next page; 0 when there is none */
	uint64_t	 total;		/* LB_WANT_TOTAL */
	int64_t		 hist_from;	/* LB_WANT_HIST: bucket k covers [hist_from + k * hist_step, */
	int64_t		 hist_step;	/*   + hist_step), the last one cut at the range's end (µs) */
	uint64_t	*hist;		/* nbuckets counts */
	uint32_t	 nhist;
	struct lb_topval *top;		/* LB_WANT_TOP: by count descending, then value ascending */
	size_t		 ntop;
	uint64_t	 id_lo, id_hi;	/* the id range [id_lo, id_hi) the time range mapped to
					   (cut to the id window) */
	uint64_t	 through;	/* the last id the window covered (id_hi - 1, at least
					   after): the next request's after sees every later id once */
	uint64_t	 segments;	/* segments searched */
	uint64_t	 tail;		/* messages searched by brute force (not yet indexed) */
	char		**warnings;	/* "segment <path> skipped: <why>" for damaged segments */
	size_t		 nwarnings;
};

/* Frees what a result holds (not res itself) and zeroes it. NULL is fine. */
void	lb_searchres_free(struct lb_searchres *res);

/*
 * Runs rq on st (a reader or the writer). Fills *res (the caller frees it with
 * lb_searchres_free) with what rq->want asks for. A damaged segment is skipped and named in
 * res->warnings; the rest is still searched. LB_ETOOBROAD when wildcards expand past
 * max_terms, LB_EDEADLINE past the deadline, ECANCELED once *rq->cancel is set, EINVAL for a
 * bad request (from > to, limit 0 with LB_WANT_HITS, nbuckets or topk out of range, an unknown
 * top_ns).
 * A store handle must be used by one thread at a time; lb_search uses it (and caches open
 * segments in it) like lb_store_get does.
 */
int	lb_search(struct lb_store *st, const struct lb_searchreq *rq, struct lb_searchres *res);

#endif /* LOGBOX_H */
