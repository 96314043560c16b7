/*
 * main.c — logbox-indexd's process: options and the --config file, the inputs it is given,
 * privileges, the lock file, signals, systemd notification and the order things start and stop
 * in. It owns struct indexd's lifetime and the --routes rules in force; records and frames are
 * stored by spool.c, fifo.c and sock.c through store.c.
 *
 * Start: check options and refuse root unless told otherwise, take the inputs (systemd's
 * sd_listen_fds(): a FIFO or listening unix sockets; --fifo, --listen), drop to --user, lock
 * <data>/indexd/lock, the reserve file (disk.c), open the catalog read-write, read --routes,
 * finish the FIFO batch a killed indexd left (fifo.c), open the spool and finish its batch
 * (spool.c), then read the inputs and tell systemd READY=1. Errors up to there are fatal.
 * Stop (SIGTERM, SIGINT): stop reading, store the complete frames already read from sockets,
 * commit with fdatasync and close every store (the final segments), exit 0. SIGHUP: read
 * --routes, --config and --logspaces (settings.c) again; a bad file is logged and the settings in force
 * are kept.
 */
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "indexd.h"
#include "lb_util.h"
#include "opt.h"

#define TICK_MS		100	/* group commits are checked this often */

static const char *usage_text =
    "usage: logbox-indexd --data DIR [--spool DIR] [--routes FILE] [--fifo PATH]\n"
    "                     [--listen PATH]... [--status FILE]\n"
    "                     [--config FILE] [--logspaces FILE] [--max-memory MB]\n"
    "                     [--reserve-percent P] [--reserve-mb MB] [--user USER]\n"
    "                     [--tsa-url URL] [--root-syslog HOST:PORT] [--archive-state DIR]\n"
    "                     [--allow-root]\n"
    "                     [--foreground] [-v]\n";

static const char *
level_name(int l)
{
	return (l == LOGL_DEBUG ? "debug" : l == LOGL_INFO ? "info" : "warning");
}

/*
 * Reads the --config file (lines "key = value", '#' comments) over base into *out. On an
 * error writes a description to err and returns EINVAL; *out is then untouched.
 */
static int
config_read(const char *path, const struct ix_conf *base, struct ix_conf *out, char *err,
    size_t errlen)
{
	static const struct {
		const char	*key;
		uint64_t	 lo, hi;
	} nums[] = {			/* the number keys and their ranges */
		{ "max_memory_mb",	1, 1048576 },
		{ "status_interval_ms",	100, 3600000 },
		{ "reserve_percent",	0, 50 },
		{ "reserve_mb",		0, 1048576 },
	};
	struct ix_conf	 c = *base;
	FILE		*f;
	size_t		 i;
	char		 line[1024], *k, *v, *e;
	unsigned	 lineno = 0;
	uint64_t	 n = 0;

	if ((f = fopen(path, "re")) == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return (EINVAL);
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		if ((e = strchr(line, '#')) != NULL)
			*e = '\0';
		for (k = line; isspace((unsigned char)*k); k++)
			;
		if (*k == '\0')
			continue;
		if ((v = strchr(k, '=')) == NULL) {
			snprintf(err, errlen, "%s:%u: expected 'key = value'", path, lineno);
			goto bad;
		}
		for (e = v; e > k && isspace((unsigned char)e[-1]); e--)
			;
		*e = '\0';
		for (v++; isspace((unsigned char)*v); v++)
			;
		for (e = v + strlen(v); e > v && isspace((unsigned char)e[-1]); e--)
			;
		*e = '\0';
		for (i = 0; i < sizeof(nums) / sizeof(nums[0]) && strcmp(k, nums[i].key) != 0; i++)
			;
		if (i < sizeof(nums) / sizeof(nums[0]) &&
		    parse_num(v, nums[i].lo, nums[i].hi, &n) != 0) {
			snprintf(err, errlen, "%s:%u: %s: expected %llu..%llu", path, lineno, nums[i].key,
			    (unsigned long long)nums[i].lo, (unsigned long long)nums[i].hi);
			goto bad;
		}
		if (strcmp(k, "max_memory_mb") == 0)
			c.max_memory_mb = n;
		else if (strcmp(k, "status_interval_ms") == 0)
			c.status_interval_ms = (uint32_t)n;
		else if (strcmp(k, "reserve_percent") == 0)
			c.reserve_percent = (uint32_t)n;
		else if (strcmp(k, "reserve_mb") == 0)
			c.reserve_mb = n;
		else if (strcmp(k, "log_level") == 0) {
			if (strcmp(v, "debug") == 0)
				c.log_level = LOGL_DEBUG;
			else if (strcmp(v, "info") == 0)
				c.log_level = LOGL_INFO;
			else if (strcmp(v, "warning") == 0)
				c.log_level = LOGL_WARN;
			else {
				snprintf(err, errlen, "%s:%u: log_level: expected debug, info or "
				    "warning", path, lineno);
				goto bad;
			}
		} else {
			snprintf(err, errlen, "%s:%u: unknown key '%.64s'", path, lineno, k);
			goto bad;
		}
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		goto bad;
	}
	fclose(f);
	*out = c;
	return (0);
 bad:
	fclose(f);
	return (EINVAL);
}

static void
parse_options(struct indexd *env, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "data",		required_argument,	NULL, 'd' },
		{ "fifo",		required_argument,	NULL, 'f' },
		{ "listen",		required_argument,	NULL, 'l' },
		{ "status",		required_argument,	NULL, 's' },
		{ "config",		required_argument,	NULL, 'c' },
		{ "logspaces",		required_argument,	NULL, 'L' },
		{ "max-memory",		required_argument,	NULL, 'm' },
		{ "reserve-percent",	required_argument,	NULL, 'P' },
		{ "reserve-mb",		required_argument,	NULL, 'M' },
		{ "spool",		required_argument,	NULL, 'S' },
		{ "routes",		required_argument,	NULL, 'r' },
		{ "tsa-url",		required_argument,	NULL, 'T' },
		{ "root-syslog",	required_argument,	NULL, 'Y' },
		{ "archive-state",	required_argument,	NULL, 'A' },
		{ "user",		required_argument,	NULL, 'u' },
		{ "allow-root",		no_argument,		NULL, 'R' },
		{ "foreground",		no_argument,		NULL, 'F' },
		{ "verbose",		no_argument,		NULL, 'v' },
		{ "version",		no_argument,		NULL, 'V' },
		{ "help",		no_argument,		NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int	ch;

	env->base.max_memory_mb = 1024;
	env->base.log_level = LOGL_INFO;
	env->base.status_interval_ms = 1000;
	env->base.reserve_percent = 2;
	env->base.reserve_mb = 1024;
	while ((ch = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd': env->data = optarg; break;
		case 'f': env->fifo_path = optarg; break;
		case 'l':
			if (env->nlisten == (int)(sizeof(env->listen) / sizeof(env->listen[0])))
				fatalx("--listen: at most %zu sockets",
				    sizeof(env->listen) / sizeof(env->listen[0]));
			env->listen[env->nlisten++] = optarg;
			break;
		case 's': env->status_path = optarg; break;
		case 'c': env->config_path = optarg; break;
		case 'L': env->settings.path = optarg; break;
		case 'm': env->base.max_memory_mb = opt_num("max-memory", optarg, 1, 1048576);
			break;
		case 'P': env->base.reserve_percent = (uint32_t)opt_num("reserve-percent", optarg,
		    0, 50);
			break;
		case 'M': env->base.reserve_mb = opt_num("reserve-mb", optarg, 0, 1048576);
			break;
		case 'S': env->spool_dir = optarg; break;
		case 'r': env->routes_path = optarg; break;
		case 'T':
			if (strncmp(optarg, "http://", 7) != 0 && strncmp(optarg, "https://", 8) != 0)
				fatalx("--tsa-url: an http:// or https:// URL");
			env->stamp.url = optarg;
			break;
		case 'Y':
			if (strrchr(optarg, ':') == NULL || strrchr(optarg, ':') == optarg ||
			    strrchr(optarg, ':')[1] == '\0' || strlen(optarg) > 250)
				fatalx("--root-syslog: HOST:PORT");
			env->stamp.syslog = optarg;
			break;
		case 'A': env->archive_state = optarg; break;
		case 'u': env->user = optarg; break;
		case 'R': env->allow_root = 1; break;
		case 'F': break;	/* the only mode */
		case 'v': env->base.log_level = LOGL_DEBUG; break;
		default: opt_other(ch, "logbox-indexd", usage_text);
		}
	}
	if (optind != argc || env->data == NULL)
		opt_usage(usage_text);
	if (env->spool_dir == NULL) {
		static char dflt[PATH_MAX];

		if (lb_path(dflt, sizeof(dflt), "%s/spool", env->data) != 0)
			fatalx("--data: path too long");
		env->spool_dir = dflt;
	}
	env->conf = env->base;
	if (env->config_path != NULL) {
		char err[512];

		if (config_read(env->config_path, &env->base, &env->conf, err, sizeof(err)) != 0)
			fatalx("--config: %s", err);
	}
}

/* The inputs: systemd's fds first, then --fifo and --listen. */
static void
inputs_open(struct indexd *env)
{
	struct stat	 sb;
	struct input	*in;
	char		 name[160];
	int		 n, fd, rc;

	if ((n = sd_listen_fds(1)) < 0)
		fatalx("%s: sd_listen_fds: %s", __func__, strerror(-n));
	for (int i = 0; i < n; i++) {
		fd = SD_LISTEN_FDS_START + i;
		(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
		if (sd_is_fifo(fd, NULL) > 0) {
			if ((rc = fifo_init(env, fd, 1)) != 0)
				fatalx("%s: fd %d: %s", __func__, fd, strerror(rc));
			log_info("input: the FIFO passed as fd %d (kill-safe)", fd);
		} else if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0) {
			int fl = fcntl(fd, F_GETFL);

			if (fl == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1)
				fatal("%s: fd %d", __func__, fd);
			snprintf(name, sizeof(name), "socket fd %d", fd);
			if ((in = input_new(env, IN_LISTEN, fd, name)) == NULL)
				fatalx("%s: out of memory", __func__);
			log_info("input: the listening socket passed as fd %d", fd);
		} else
			fatalx("%s: fd %d from systemd is neither a FIFO nor a listening unix stream "
			    "socket", __func__, fd);
	}
	if (env->fifo_path != NULL) {
		if ((fd = open(env->fifo_path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) == -1)
			fatal("%s: %s", __func__, env->fifo_path);
		if (fstat(fd, &sb) == -1 || !S_ISFIFO(sb.st_mode))
			fatalx("%s: %s is not a FIFO", __func__, env->fifo_path);
		if ((rc = fifo_init(env, fd, 0)) != 0)
			fatalx("%s: %s: %s", __func__, env->fifo_path, strerror(rc));
		snprintf(env->fifo.in->in_name, sizeof(env->fifo.in->in_name), "fifo %s",
		    env->fifo_path);
		log_info("input: the FIFO %s (opened here: not kill-safe)", env->fifo_path);
	}
	for (int i = 0; i < env->nlisten; i++) {
		fd = sock_listen(env->listen[i], 512);
		snprintf(name, sizeof(name), "socket %s", env->listen[i]);
		if ((in = input_new(env, IN_LISTEN, fd, name)) == NULL)
			fatalx("%s: out of memory", __func__);
		snprintf(in->in_path, sizeof(in->in_path), "%s", env->listen[i]);
		log_info("input: listening on %s", env->listen[i]);
	}
}

/* <data>/indexd/lock: one indexd per data directory. */
static void
lock_take(struct indexd *env)
{
	char	path[PATH_MAX], pid[32];
	ssize_t	n;
	int	rc;

	if ((rc = lb_path(path, sizeof(path), "%s/indexd", env->data)) != 0 ||
	    (rc = lb_mkdirs(path)) != 0)
		fatalx("%s: %s/indexd: %s", __func__, env->data, strerror(rc));
	if ((rc = lb_path(path, sizeof(path), "%s/indexd/lock", env->data)) != 0)
		fatalx("%s: %s", __func__, strerror(rc));
	if ((env->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640)) == -1)
		fatal("%s: %s", __func__, path);
	if (flock(env->lockfd, LOCK_EX | LOCK_NB) == -1) {
		if (errno != EWOULDBLOCK)
			fatal("%s: flock %s", __func__, path);
		n = pread(env->lockfd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		fatalx("another logbox-indexd (pid %s) holds %s", pid[0] ? pid : "?", path);
	}
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (ftruncate(env->lockfd, 0) == -1 || pwrite(env->lockfd, pid, (size_t)n, 0) != n)
		log_warn("%s: writing the pid to %s", __func__, path);
}

void
inputs_pause(struct indexd *env)
{
	struct input *in;

	TAILQ_FOREACH(in, &env->inputs, in_entry)
		event_del(in->in_ev);
	if (env->fifo.ev_retry != NULL)
		event_del(env->fifo.ev_retry);
	env->fifo.waiting = 0;
	spool_pause(env);
}

void
inputs_resume(struct indexd *env)
{
	struct input *in;

	TAILQ_FOREACH(in, &env->inputs, in_entry)
		event_add(in->in_ev, NULL);
	spool_kick(env);
}

/*
 * Reads --routes (start, SIGHUP). A file that cannot be read or is refused is logged with its
 * line and the rules in force stay (at start: none, every message to main).
 */
static void
routes_reload(struct indexd *env, const char *why)
{
	struct routes	*r;
	char		 err[512], desc[1024];
	int		 rc;

	if (env->routes_path == NULL)
		return;
	if ((rc = routes_load(env->routes_path, &r, err, sizeof(err))) != 0) {
		snprintf(env->routes_error, sizeof(env->routes_error), "%s", err);
		if (rc == ENOENT && env->routes == NULL)
			log_warnx("%s: routes: %s: no rules, every message goes to main", why, err);
		else
			log_warnx("%s: routes: %s: keeping the %s in force", why, err,
			    env->routes == NULL ? "no rules (every message to main)" : "rules");
		return;
	}
	routes_free(env->routes);
	env->routes = r;
	env->routes_loaded = now_real_us();
	env->routes_error[0] = '\0';
	routes_describe(r, desc, sizeof(desc));
	log_info("%s: routes: %s: %s", why, env->routes_path, desc);
}

static void
reload(struct indexd *env)
{
	struct ix_conf	c;
	char		err[512];

	routes_reload(env, "SIGHUP");
	settings_load(env, "SIGHUP");
	if (env->config_path == NULL) {
		if (env->settings.path == NULL && env->routes_path == NULL)
			log_info("SIGHUP: no --config, --logspaces or --routes to read again");
		return;
	}
	if (config_read(env->config_path, &env->base, &c, err, sizeof(err)) != 0) {
		log_warnx("SIGHUP: %s: keeping the settings in force", err);
		return;
	}
	env->conf = c;
	log_setlevel(c.log_level);
	log_info("SIGHUP: reloaded %s: max_memory_mb = %llu, log_level = %s, "
	    "status_interval_ms = %u, reserve_percent = %u, reserve_mb = %llu", env->config_path,
	    (unsigned long long)c.max_memory_mb, level_name(c.log_level), c.status_interval_ms,
	    c.reserve_percent, (unsigned long long)c.reserve_mb);
	ls_memory(env);
}

static void
sig_cb(evutil_socket_t sig, short what, void *arg)
{
	struct indexd *env = arg;

	(void)what;
	if (sig == SIGHUP) {
		reload(env);
		return;
	}
	if (!env->stopping) {
		log_info("%s: stopping", strsignal(sig));
		sd_notify(0, "STOPPING=1\nSTATUS=stopping");
	}
	env->stopping = 1;
	inputs_pause(env);
	event_base_loopbreak(env->base_ev);
}

/*
 * Seals the store's chains when the epoch is over (FORMAT.md §14.5), or at once with force
 * (stopping: the tail written since the last seal is sealed too). Looked at every second.
 */
static void
seal_due(struct indexd *env, int force)
{
	struct lb_sealstate	ss;
	uint64_t		e = 0;
	int			rc;

	env->seal_checked = now_mono_us();
	rc = lb_seal_run(env->data, env->cat, force, &e);
	if (rc == ENOENT) {
		if (env->sealing != 0)
			log_info("seal: sealing is not set up in %s (logbox keys init): the chains "
			    "are not sealed", env->data);
		env->sealing = 0;
		return;
	}
	env->sealing = 1;
	if (rc != 0) {
		if (env->seal_error[0] == '\0')
			log_warnx("seal: %s", lb_strerror(rc));
		snprintf(env->seal_error, sizeof(env->seal_error), "%s", lb_strerror(rc));
	} else {
		if (env->seal_error[0] != '\0')
			log_info("seal: sealing again");
		env->seal_error[0] = '\0';
	}
	if (rc == 0 && e != 0) {
		env->seal_last = now_real_us();
		log_info("seal: epoch %llu sealed", (unsigned long long)e);
		stamp_kick(env);	/* (a day root is sealed with a day's end) */
	}
	if (lb_seal_state(env->data, &ss) == 0)
		env->seal_epoch = ss.epoch;
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct indexd	*env = arg;
	int64_t		 now = now_mono_us();

	(void)fd;
	(void)what;
	if (env->holding[0] == '\0')
		ls_sync_due(env);
	if (env->holding[0] == '\0')
		ls_flush_due(env);
	/*
	 * The disk's state is otherwise looked at only before more is read: once the inputs are
	 * idle, a "full" seen during the last batch would stay in the status, and the reserve
	 * given up would not be taken back, until the next message came.
	 */
	if (env->holding[0] == '\0' && now - env->disk.checked >= 1000000)
		(void)disk_check(env);
	malformed_second(env);
	if (now - env->seal_checked >= 1000000)
		seal_due(env, 0);
	if (now - env->last_status >= (int64_t)env->conf.status_interval_ms * 1000) {
		env->last_status = now;
		status_tick(env);
	}
}

void
indexd_init(struct indexd *env)
{
	memset(env, 0, sizeof(*env));
	TAILQ_INIT(&env->inputs);
	env->lockfd = -1;
	env->sealing = -1;
	env->fifo.statefd = -1;
	env->fifo.priv[0] = env->fifo.priv[1] = -1;
}

int
main(int argc, char **argv)
{
	static const int	 sigs[3] = { SIGTERM, SIGINT, SIGHUP };
	struct indexd		 env;
	struct input		*in, *next;
	struct timeval		 tv;
	int			 rc, status = 0;

	log_init(IX_NAME, LOGL_INFO);
	indexd_init(&env);
	parse_options(&env, argc, argv);
	log_setlevel(env.conf.log_level);
	priv_check(env.user, env.allow_root);
	signal(SIGPIPE, SIG_IGN);
	env.started = now_real_us();
	env.started_mono = now_mono_us();

	if ((env.base_ev = event_base_new()) == NULL)
		fatalx("%s: event_base_new failed", __func__);
	inputs_open(&env);
	priv_drop(env.user, env.listen, env.nlisten);
	if ((rc = lb_mkdirs(env.data)) != 0)
		fatalx("%s: %s: %s", __func__, env.data, strerror(rc));
	lock_take(&env);
	disk_reserve_open(&env);	/* (before the catalog: a full disk gives it up) */
	if ((rc = lb_catalog_open(env.data, LB_RDWR, &env.cat)) != 0)
		fatalx("%s: lb_catalog_open %s: %s", __func__, env.data, lb_strerror(rc));
	if ((env.ev_hold = evtimer_new(env.base_ev, hold_retry_cb, &env)) == NULL)
		fatalx("%s: evtimer_new failed", __func__);
	/* Settings before any store opens: a writer starts with the delimiters in force. */
	settings_load(&env, "start");
	if (env.settings.applied == 0)
		retention_run(&env);	/* (a load that applied ran it) */
	routes_reload(&env, "start");	/* (before a replayed batch is routed) */
	fifo_recover(&env);
	if ((rc = spool_init(&env)) != 0)
		fatalx("%s: spool %s: %s", __func__, env.spool_dir, strerror(rc));
	spool_recover(&env);
	log_info("input: the spool %s", env.spool_dir);

	signals_watch(env.base_ev, sigs, 3, env.ev_sig, sig_cb, &env);
	tv.tv_sec = 0;
	tv.tv_usec = TICK_MS * 1000;
	if ((env.ev_tick = event_new(env.base_ev, -1, EV_PERSIST, tick_cb, &env)) == NULL ||
	    evtimer_add(env.ev_tick, &tv) == -1)
		fatalx("%s: cannot arm the tick timer", __func__);
	settings_init(&env);
	watchdog_start(env.base_ev, &env.ev_wd);
	if (env.holding[0] == '\0')
		inputs_resume(&env);
	seal_due(&env, 0);		/* (says now when sealing is not set up) */
	stamp_start(&env);
	env.last_status = now_mono_us();
	status_tick(&env);
	(void)disk_check(&env);		/* (numbers for the status) */
	log_info("ready: data %s, max memory %llu MB, free space reserve %llu bytes", env.data,
	    (unsigned long long)env.conf.max_memory_mb, (unsigned long long)env.disk.reserve);
	sd_notify(0, "READY=1\nSTATUS=ready");

	if (event_base_dispatch(env.base_ev) == -1)
		log_warnx("%s: event_base_dispatch failed", __func__);

	/* Stopping: what sockets delivered whole is stored; the FIFO keeps the rest. */
	env.stopping = 1;
	inputs_pause(&env);
	if (env.holding[0] == '\0')
		conn_drain(&env);
	if (env.fifo.pending || env.fifo.big_pending || spool_pending(&env))
		log_warnx("stopping while holding: the batch in progress is finished by the next "
		    "start");
	if ((rc = ls_close_all(&env)) != 0) {
		log_warnx("closing the stores: %s", lb_strerror(rc));
		status = 1;
	}
	stamp_stop(&env);
	if (env.sealing != 0)
		seal_due(&env, 1);
	status_write(&env);
	for (in = TAILQ_FIRST(&env.inputs); in != NULL; in = next) {
		next = TAILQ_NEXT(in, in_entry);
		if (in->in_kind == IN_LISTEN && in->in_path[0] != '\0')
			unlink(in->in_path);
		input_free(in);
	}
	fifo_free(&env);
	spool_free(&env);
	routes_free(env.routes);
	settings_free(&env);
	for (int i = 0; i < 3; i++)
		if (env.ev_sig[i] != NULL)
			event_free(env.ev_sig[i]);
	if (env.ev_tick != NULL)
		event_free(env.ev_tick);
	if (env.ev_wd != NULL)
		event_free(env.ev_wd);
	if (env.ev_hold != NULL)
		event_free(env.ev_hold);
	event_base_free(env.base_ev);
	lb_catalog_close(env.cat);
	if (env.lockfd != -1)
		close(env.lockfd);
	if (env.disk.ropen)
		close(env.disk.rfd);
	log_info("stopped: %llu stored, %llu malformed", (unsigned long long)env.stored,
	    (unsigned long long)env.malformed);
	return (status);
}
