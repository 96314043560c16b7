/*
 * daemon.h — start-up steps shared by logbox-indexd and logbox-searchd (daemon/daemon.c).
 */
#ifndef LB_DAEMON_H
#define LB_DAEMON_H

#include <event2/util.h>

struct event;
struct event_base;

/*
 * A listening unix stream socket at path (non-blocking, close-on-exec, mode 0660). A socket
 * file nobody answers on is replaced; a live one, or another kind of file, is fatal.
 */
int	sock_listen(const char *path, int backlog);

/* Refuses root unless user (--user) or allow_root; a non-root user can only "switch" to itself. */
void	priv_check(const char *user, int allow_root);

/*
 * As root with user: paths (the daemon's sockets) become the user's, then the process drops to
 * the user's uid and gid for good. Without user (or not root) it only says how it runs.
 */
void	priv_drop(const char *user, const char *const *paths, int npaths);

/*
 * evs[i] (n of them) call cb(sig, EV_SIGNAL, arg) on sigs[i]; the caller frees each with
 * event_free(). Errors are fatal (start-up).
 */
void	signals_watch(struct event_base *base, const int *sigs, int n, struct event **evs,
	    void (*cb)(evutil_socket_t, short, void *), void *arg);

/*
 * With systemd's watchdog on (WatchdogSec=), *out is a timer on base that sends WATCHDOG=1 every
 * half period, so a loop that stops turning stops the pings; without it *out is NULL. The
 * caller frees *out with event_free() after the loop.
 */
void	watchdog_start(struct event_base *base, struct event **out);

#endif
