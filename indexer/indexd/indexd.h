/*
 * indexd.h — what the files of logbox-indexd share: the one runtime state (struct indexd, hung
 * off every libevent callback), an input (the FIFO, a listening socket, a connection), a
 * logspace being written, and the prototypes of each file's entry points. One concern per file:
 *   main.c    options, privileges, lock file, signals, systemd, config reload, start and stop
 *   fifo.c    the FIFO input: tee(), the intent record's protocol, replay, streamed big frames
 *   sock.c    unix socket inputs: accept, read, decode, store
 *   store.c   logspace routing (one writer store each), appends, commits, memory, holding
 *   state.c   the intent record in <data>/indexd/state (FORMAT.md §11.3)
 *   settings.c the --logspaces settings file and retention
 *   routes.c  the --routes rule file ([[logspace]] tables) and routing a message by it
 *   status.c  counters, the --status JSON file, systemd STATUS=, malformed-frame logging
 *   disk.c    the data directory's free space: the reserve, the hold that keeps it, status
 *   quarantine.c  frames that can never be stored: the dead-letter file
 *   spool.c   the spool input: taking, reading and deleting spool files, the position state
 *   ../daemon/  shared with searchd: log.c (one line per event on stderr), clock.c (now_mono_us,
 *             now_real_us), opt.c (numbers from options and settings), daemon.c (socket,
 *             privileges, signals, systemd's watchdog)
 */
#ifndef INDEXD_H
#define INDEXD_H

#include <sys/queue.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "logbox.h"
#include "lb_format.h"
#include "daemon.h"
#include "clock.h"
#include "log.h"

struct event_base;
struct event;

#define IX_NAME			"logbox-indexd"
#define IX_VIEW_MAX		(1024 * 1024)	/* bytes of the FIFO looked at (tee) at once */
#define IX_PIPE_SIZE		(1024 * 1024)	/* F_SETPIPE_SZ for the FIFO and the private pipe */
#define IX_CONN_BUF		(64 * 1024)	/* a connection's first buffer; grows to a frame */
#define IX_CONN_MAX		4096		/* connections at once; more are refused */
#define IX_LOG_PER_S		10		/* malformed-frame lines per second, then a summary */
#define IX_SHOW_BYTES		48		/* bytes of a malformed frame shown in a log line */
#define IX_BATCHES_PER_CB	16		/* FIFO batches per callback before yielding */
/*
 * A FIFO batch smaller than IX_SMALL_BATCH bytes means the collector trickles: wait
 * IX_GATHER_US before the next one, so that each batch's fixed cost (tee, intent record,
 * commit, consume) is shared by more messages. Adds at most that much latency.
 */
#define IX_SMALL_BATCH		(256 * 1024)
#define IX_GATHER_US		2000

/* Intent record (state.c, FORMAT.md §11.3). Stored on disk: these are fixed. */
#define IX_STATE_MAGIC		"LBIXSTAT"
#define IX_STATE_VERSION	1
#define IX_STATE_HDR		128		/* header bytes */
#define IX_STATE_LS		64		/* logspaces one batch may touch */
#define IX_STATE_ENTRY		80		/* bytes per logspace entry */
#define IX_STATE_SIZE		(IX_STATE_HDR + IX_STATE_LS * IX_STATE_ENTRY)
#define IX_STATE_HEAD		64		/* bytes of the batch copied into the record */

/* The spool (spool.c, FORMAT.md §13). The state file's layout is fixed: FORMAT.md §13.4. */
#define IX_SPOOL_BATCH		(4 * 1024 * 1024)	/* bytes of one file read and stored at once */
#define IX_SPOOL_HDR_MAX	160		/* a record's header line, LF included, at most */
#define IX_SPOOL_LEN_MAX	(1024u * 1024 * 1024)	/* a record's length field, at most */
#define IX_SPOOL_KEEP		(LB_MSG_MAX + 64 * 1024)	/* raw bytes kept of a record
						   longer than a batch */
#define IX_SPOOL_FILES		64		/* partly consumed files the state can name */
#define IX_SPOOL_NAME		96		/* bytes of a taken file's name, NUL included */
#define IX_SPOOL_SLOT		16384		/* the state file: two slots of this size */
#define IX_SPOOL_IDLE_S		30		/* no lease right: a file is final this long
						   after its last change */
#define IX_SPOOL_RESCAN_MS	1000		/* the directory is scanned this often anyway */
#define IX_SPOOL_LEASE_MS	100		/* a caught-up file's writer is asked about this often */
#define IX_SPOOL_SEQ_BIT	(1ULL << 63)	/* set in the batch numbers of dead-letter records */

#define IX_SETTINGS_POLL_MS	2000		/* --logspaces: looked at this often for changes */
#define IX_RETENTION_S		3600		/* a retention pass this often (and at start) */


/* The settings a SIGHUP may change (command line, then --config on top). */
struct ix_conf {
	uint64_t	 max_memory_mb;		/* --max-memory, max_memory_mb */
	int		 log_level;		/* enum ix_level; log_level */
	uint32_t	 status_interval_ms;	/* status_interval_ms */
	uint32_t	 reserve_percent;	/* --reserve-percent, reserve_percent (0..50) */
	uint64_t	 reserve_mb;		/* --reserve-mb, reserve_mb */
};

/* The data directory's free space (disk.c). */
struct ix_disk {
	uint64_t	 total, free;		/* bytes, from the last statvfs() */
	uint64_t	 reserve;		/* bytes kept free: disk_reserve() */
	int64_t		 checked;		/* monotonic µs of the last statvfs() */
	int64_t		 since;			/* real µs the disk became full */
	int		 low;			/* free fell below the reserve (and not back above
						   reserve * 5/4 since) */
	int		 enospc;		/* a store failed for want of space in this hold */
	int64_t		 warned;		/* monotonic µs of the last statvfs failure logged */
	int		 ropen;			/* rfd is open */
	int		 rfd;			/* <data>/indexd/reserve */
	uint64_t	 rheld;			/* bytes it holds (allocated) */
	int64_t		 given_up;		/* real µs it was given up; 0: not given up */
};

#define IX_DISK_FLOOR		(8ULL << 20)	/* free space below this: the reserve is given up */

/* The --logspaces file (settings.c). */
struct ix_settings {
	const char	*path;			/* --logspaces, or NULL */
	struct stat	 seen;			/* the file as last read (dev, inode, size, mtime) */
	int		 seen_ok;		/* seen is set */
	int64_t		 applied;		/* real µs of the last good file applied; 0: none */
	char		 error[600];		/* "" or why the last reading failed */
	struct event	*ev_poll;		/* every IX_SETTINGS_POLL_MS */
	struct event	*ev_retention;		/* every IX_RETENTION_S */
};

/* An intent: a batch of the FIFO's head that is being stored. */
struct ix_intent {
	uint64_t	 seq;			/* batches recorded so far (for the curious) */
	uint32_t	 m;			/* bytes of the batch; 0: none in progress */
	uint32_t	 crc;			/* lb_crc32 of the m bytes */
	uint8_t		 head[IX_STATE_HEAD];	/* the first min(m, 64) bytes */
	uint32_t	 nls;			/* logspaces touched */
	struct {
		char	 name[LB_NAME_MAX + 1];
		uint64_t before;		/* the logspace's next id before the batch */
	}		 ls[IX_STATE_LS];
};

/* A logspace being written: one writer store each, all on env->cat. */
struct lspace {
	char		 name[LB_NAME_MAX + 1];
	size_t		 namelen;
	struct lb_store	*st;
	uint32_t	 fsync_ms;		/* from the logspace's settings */
	uint64_t	 next_id;		/* the store's next id (kept in step with it) */
	int64_t		 last_received;
	int64_t		 last_sync;		/* monotonic µs of the last synced commit */
	int		 dirty;			/* appended since the last commit */
	int		 unsynced;		/* committed without fdatasync since */
	uint64_t	 stored;		/* messages stored by this process */
	uint64_t	 bidx;			/* batch scratch: frames of this logspace so far */
	uint64_t	 bbefore;		/* batch scratch: its next id before the batch */
	int		 bmark;			/* batch scratch: in the batch's intent */
};

enum ix_kind { IN_FIFO, IN_LISTEN, IN_CONN, IN_SPOOL };

/* A frame larger than a view (or than LB_FRAME_MAX): kept in part, the rest skipped. */
struct bigframe {
	size_t		 need;		/* the whole frame's size; 0: not streaming */
	size_t		 got;		/* bytes of it seen so far */
	size_t		 keep;		/* bytes of it kept in buf */
	uint8_t		*buf;		/* LB_FRAME_MAX bytes */
	uint8_t		 last;		/* the last byte seen */
	uint64_t	 off;		/* input offset where it began */
};

struct input {
	TAILQ_ENTRY(input) in_entry;
	struct indexd	*in_env;
	int		 in_kind;	/* enum ix_kind */
	int		 in_fd;
	struct event	*in_ev;
	char		 in_name[160];	/* for logs: "fifo fd 3", "peer pid 12 uid 0 on /run/x" */
	char		 in_path[108];	/* listener: the socket's path ("" if inherited) */
	struct input	*in_parent;	/* connection: its listener */
	uint64_t	 in_received;	/* frames decoded */
	uint64_t	 in_malformed;
	uint64_t	 in_truncated;
	uint64_t	 in_quarantined;	/* frames set aside in the dead-letter file */
	uint64_t	 in_bytes;	/* bytes consumed */
	uint64_t	 in_conns;	/* listener: connections open now */
	uint64_t	 in_accepted;	/* listener: connections accepted */
	/* connection */
	uint8_t		*in_buf;
	size_t		 in_len, in_cap;
	int		 in_eof;
	struct bigframe	 in_big;
};
TAILQ_HEAD(inputq, input);

/* The FIFO input's protocol state (fifo.c). */
struct fifo {
	struct input	*in;		/* NULL: no FIFO */
	int		 kill_safe;	/* inherited from a supervisor (1) or opened by us (0) */
	int		 priv[2];	/* the private pipe tee() copies into */
	size_t		 view_max;	/* bytes one tee() may show: min(pipe sizes, IX_VIEW_MAX) */
	uint8_t		*view;		/* the bytes of the FIFO's head */
	size_t		 vlen;
	uint8_t		*scratch;	/* a streamed frame's bytes land here */
	struct lb_frame	*frames;	/* the batch's frames (slices into view) */
	struct lspace	**fls;		/* and their logspaces (NULL: could not be opened, frc) */
	uint8_t		*fdead;		/* and whether each is in the dead-letter file */
	int		*frc;		/* and, fls NULL, why its logspace could not be opened */
	size_t		 nframes, capframes;
	size_t		 m;		/* bytes of the batch in progress (intent written) */
	int		 pending;	/* a batch is recorded but not yet consumed */
	int		 waiting;	/* a partial frame at the head (or EOF): polling */
	int		 eof;		/* the last tee() saw no writer and no bytes */
	uint64_t	 wait_us;	/* the partial-frame poll's period now (1 ms .. 100 ms) */
	size_t		 wait_len;	/* the head's length when it was last found partial */
	struct event	*ev_retry;	/* the 1 ms poll */
	struct bigframe	 big;
	int		 big_pending;	/* the streamed frame is complete but not yet stored */
	int		 statefd;
	struct ix_intent intent;
};

/* One record of the spool (FORMAT.md §13), as spool_rec_parse() finds it. */
struct spool_rec {
	int64_t		 rtime;		/* µs */
	struct lb_slice	 listener;
	struct lb_slice	 peer;		/* "-" when there was none */
	size_t		 hdr;		/* bytes of the header line, LF included */
	size_t		 len;		/* bytes of the raw message */
	size_t		 size;		/* hdr + len + 1 */
};

/* A spool file indexd has taken (spool.c). */
struct spfile {
	char		 name[IX_SPOOL_NAME];	/* "<name>.<inode>.taken" */
	uint64_t	 ino;
	int		 fd;			/* O_RDONLY */
	uint64_t	 off;			/* bytes consumed (stored) */
	uint64_t	 size;			/* as last seen */
	int64_t		 t;			/* its second (from the name), real s; 0: unknown */
	int		 final;			/* no writer can add to it any more */
	int		 intable;		/* named in the state's table */
	int64_t		 asked;			/* monotonic µs of the last writer test */
};

struct spool;

struct indexd {
	/* configuration */
	const char	*data;		/* --data */
	const char	*fifo_path;	/* --fifo */
	const char	*listen[16];	/* --listen */
	int		 nlisten;
	const char	*status_path;	/* --status */
	const char	*config_path;	/* --config */
	const char	*user;		/* --user */
	int		 allow_root;	/* --allow-root */
	struct ix_conf	 base;		/* from the command line */
	struct ix_conf	 conf;		/* in force: base with --config on top */
	struct ix_settings settings;	/* --logspaces */
	struct {
		const char	*url;		/* --tsa-url: NULL, none */
		const char	*syslog;	/* --root-syslog HOST:PORT: NULL, none */
		int		 on;		/* the thread runs */
		pthread_t	 thr;
		pthread_mutex_t	 mu;
		pthread_cond_t	 cv;
		int		 stop, kick;	/* under mu */
		char		 error[512];	/* under mu: "" or why the last pass failed */
	} stamp;			/* stamp.c */
	struct ix_disk	 disk;		/* free space of --data */

	/* runtime */
	struct event_base *base_ev;
	struct event	*ev_sig[3];	/* SIGTERM, SIGINT, SIGHUP */
	struct event	*ev_tick;	/* every 100 ms: group commits; status, STATUS= */
	struct event	*ev_wd;		/* systemd watchdog */
	struct event	*ev_hold;	/* holding: retry every second */
	struct lb_catalog *cat;
	int		 lockfd;
	struct inputq	 inputs;	/* FIFO, listeners, connections */
	struct fifo	 fifo;
	const char	*spool_dir;	/* --spool (default <data>/spool) */
	struct spool	*spool;
	const char	*routes_path;	/* --routes */
	const char	*archive_state;	/* --archive-state: logbox-archive's (retention's holds) */
	struct routes	*routes;	/* the rules in force (NULL: none, all to main) */
	int64_t		 routes_loaded;	/* real µs the rules in force were read; 0: never */
	char		 routes_error[600];	/* "" or why the last reading failed */
	struct lspace	**ls;		/* open logspaces */
	size_t		 nls, capls;
	struct lspace	*ls_last;	/* the last one looked up */
	int		 stopping;
	int64_t		 seal_checked;	/* mono µs the sealing key was last looked at */
	int		 sealing;	/* 1: set up; 0: not (said once); -1: not looked yet */
	uint64_t	 seal_epoch;	/* the key's epoch now */
	int64_t		 seal_last;	/* real µs of the last seal made; 0: none yet */
	char		 seal_error[256];	/* "" or why the last seal run failed */
	char		 holding[256];	/* "" or why inputs are not read */
	uint64_t	 conns;		/* connections open */

	/* counters */
	int64_t		 started;	/* real µs at start */
	int64_t		 started_mono;
	uint64_t	 received, stored, malformed, truncated;
	uint64_t	 quarantined;	/* frames set aside by this process */
	struct lb_dl	*dl;		/* the dead-letter file, opened at the first one */
	uint64_t	 dl_records;	/* records it held at start */
	int64_t		 dl_last_at;	/* real µs of the last record; 0: none */
	char		 dl_last[200];	/* its reason */
	uint64_t	 eps_n[61];	/* "stored" sampled once a second, the last 61 times */
	int64_t		 eps_t[61];	/* and when (monotonic µs) */
	unsigned	 eps_pos, eps_cnt;
	double		 eps_1s, eps_60s;
	uint64_t	 log_tokens;	/* malformed-frame lines left in this second */
	uint64_t	 log_dropped;	/* malformed frames not logged in this second */
	int64_t		 log_second;
	int64_t		 last_status;	/* monotonic µs of the last status write */
	int64_t		 status_warned;	/* monotonic µs of the last failure logged */
};

/* main.c */
/* An empty runtime state: nothing open (every fd -1), no inputs. main() and the fuzz targets. */
void	indexd_init(struct indexd *env);
void	inputs_pause(struct indexd *env);
void	inputs_resume(struct indexd *env);

/* store.c */
int	ls_get(struct indexd *env, const uint8_t *name, size_t len, struct lspace **out);
int	ls_append(struct indexd *env, struct lspace *l, struct lb_msg *m, int *stored);
int	ls_commit_dirty(struct indexd *env, int force_sync);
int	ls_sync_due(struct indexd *env);
int	ls_flush_due(struct indexd *env);
void	ls_memory(struct indexd *env);
size_t	ls_mem_total(struct indexd *env);
int	ls_close_all(struct indexd *env);
void	hold(struct indexd *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void	hold_retry_cb(int fd, short what, void *arg);

/* disk.c */
struct json_t;
uint64_t disk_reserve(const struct ix_conf *c, uint64_t total);
int	disk_check(struct indexd *env);
void	disk_reserve_open(struct indexd *env);
void	disk_note(struct indexd *env, int rc);
void	disk_hold_ended(struct indexd *env);
int	disk_full(const struct indexd *env);
uint64_t disk_held_back(struct indexd *env);
struct json_t *disk_status(struct indexd *env);

/* fifo.c */
int	fifo_init(struct indexd *env, int fd, int kill_safe);
int	fifo_recover(struct indexd *env);
void	fifo_cb(int fd, short what, void *arg);
int	fifo_resume(struct indexd *env);
void	fifo_free(struct indexd *env);
int	bigframe_start(struct bigframe *b, size_t need, uint64_t off);
size_t	bigframe_feed(struct bigframe *b, const uint8_t *p, size_t len);
int	bigframe_msg(struct bigframe *b, struct lb_frame *f, const char **why);
void	bigframe_reset(struct bigframe *b);

/* spool.c */
int	spool_rec_parse(const uint8_t *p, size_t len, struct spool_rec *r, const char **why);
size_t	spool_resync(const uint8_t *p, size_t len);
int	spool_init(struct indexd *env);
int	spool_recover(struct indexd *env);
void	spool_cb(int fd, short what, void *arg);
void	spool_kick(struct indexd *env);
void	spool_pause(struct indexd *env);
int	spool_resume(struct indexd *env);
void	spool_free(struct indexd *env);
uint64_t spool_backlog(struct indexd *env, uint64_t *files, int64_t *oldest);
struct json_t *spool_status(struct indexd *env);
int	spool_pending(const struct indexd *env);

/* sock.c */
struct input *input_new(struct indexd *env, int kind, int fd, const char *name);
void	input_free(struct input *in);
void	listen_cb(int fd, short what, void *arg);
int	conn_resume(struct indexd *env, struct input *in);
void	conn_drain(struct indexd *env);

/* quarantine.c */
int	quarantine(struct indexd *env, struct input *in, const uint8_t *ls, size_t lslen,
	    const struct lb_frame *f, const uint8_t *raw, size_t rawlen, int code,
	    uint64_t batch, uint32_t bcrc, uint32_t index);
int	quarantine_marks(struct indexd *env, uint64_t batch, uint32_t bcrc, uint8_t *dead,
	    size_t n);
void	quarantine_count(struct indexd *env);

/* state.c */
int	state_open(const char *data, int *fdp);
int	state_read(int fd, struct ix_intent *it);
int	state_write(int fd, const struct ix_intent *it);
/* All len bytes of p at off, short writes and EINTR retried (the spool's state too). */
int	pwrite_all(int fd, const uint8_t *p, size_t len, off_t off);

/* settings.c */
void	settings_init(struct indexd *env);
void	settings_load(struct indexd *env, const char *why);
void	settings_free(struct indexd *env);
void	retention_run(struct indexd *env);

/*
 * routes.c — the --routes rule file: the [[logspace]] tables of collector.toml (README.md
 * "Routing"). Rules are immutable once loaded: a reload loads a new set and frees the old one.
 */
struct routes;

#define ROUTES_NOJIT	0x1	/* routes_parse: interpret every pattern (tests, benchmarks) */

/*
 * Reads the [[logspace]] tables of the TOML file at path. On error returns non-zero (an errno)
 * and writes "PATH:LINE: why" into err ("PATH: why" for the file as a whole: missing, not a
 * regular file, larger than 1 MiB). Other tables ([ports], [tls], [buffer], top-level keys) are
 * parsed for syntax and otherwise ignored. A missing file is an error here (the caller decides).
 * On success *out is the caller's, to routes_free().
 */
int	routes_load(const char *path, struct routes **out, char *err, size_t errlen);
/* routes_load on the file's bytes buf[0..len) (path only names it in errors); flags ROUTES_*. */
int	routes_parse(const char *path, const uint8_t *buf, size_t len, int flags,
	    struct routes **out, char *err, size_t errlen);
/* Accepts NULL. */
void	routes_free(struct routes *r);
/* The number of rules (0 for NULL). */
size_t	routes_count(const struct routes *r);
/*
 * The logspace for a parsed message that came in on listener (NUL-terminated). Never NULL:
 * when no rule matches or r is NULL, "system" for listener "internal" (syslog-ng's own
 * messages) and "main" for the others; otherwise a rule's name, owned by r (valid until
 * routes_free(r)). Thread: called from indexd's one reading thread (the rules' match data is
 * shared, so not from two threads at once). Allocates nothing.
 */
const char *routes_pick(const struct routes *r, const struct lb_msg *m, const char *listener);
/* Regex matches that gave up (PCRE2's match limit, 10^6 steps) and counted as no match. */
uint64_t routes_errors(const struct routes *r);
/* One line for the log: "3 rules: secure (facility auth,authpriv), network (host '...'), ...". */
void	routes_describe(const struct routes *r, char *buf, size_t len);

/* status.c */
void	escape_bytes(char *out, size_t outlen, const uint8_t *p, size_t len);
void	status_tick(struct indexd *env);
/* stamp.c: RFC 3161 time stamps of day roots from --tsa-url, in a thread of their own. */
void	stamp_start(struct indexd *env);
void	stamp_kick(struct indexd *env);
void	stamp_stop(struct indexd *env);
int	status_write(struct indexd *env);
void	malformed_second(struct indexd *env);
void	malformed(struct indexd *env, struct input *in, uint64_t off, const char *why,
	    const uint8_t *p, size_t len);



#endif /* INDEXD_H */
