/*
 * daemon.c — what logbox-indexd and logbox-searchd do alike at start-up: their listening unix
 * sockets, refusing root unless told, dropping privileges for good, watching their signals and
 * arming systemd's watchdog. Errors are fatal (these run before the daemon serves anything).
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "daemon.h"
#include "log.h"

/*
 * A listening unix socket at path with mode 0660. A socket file nobody answers on is removed
 * first; one a live process answers on is fatal, as is any other kind of file there. Errors are
 * fatal: it is for start-up.
 */
int
sock_listen(const char *path, int backlog)
{
	struct sockaddr_un	 sun;
	struct stat		 sb;
	mode_t			 old;
	int			 fd, rc;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sun.sun_path))
		fatalx("%s: socket path longer than %zu bytes", __func__, sizeof(sun.sun_path) - 1);
	strcpy(sun.sun_path, path);
	if (lstat(path, &sb) == 0) {
		if (!S_ISSOCK(sb.st_mode))
			fatalx("%s: %s exists and is not a socket", __func__, path);
		if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
			fatal("%s: socket", __func__);
		if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0)
			fatalx("%s: another process is listening on %s", __func__, path);
		if (errno != ECONNREFUSED)
			fatal("%s: connect %s", __func__, path);
		close(fd);
		if (unlink(path) == -1)
			fatal("%s: unlink stale socket %s", __func__, path);
		log_info("removed the stale socket %s", path);
	} else if (errno != ENOENT)
		fatal("%s: lstat %s", __func__, path);

	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) == -1)
		fatal("%s: socket", __func__);
	old = umask(0117);
	rc = bind(fd, (struct sockaddr *)&sun, sizeof(sun));
	umask(old);
	if (rc == -1)
		fatal("%s: bind %s", __func__, path);
	if (chmod(path, 0660) == -1)
		fatal("%s: chmod %s", __func__, path);
	if (listen(fd, backlog) == -1)
		fatal("%s: listen %s", __func__, path);
	return (fd);
}

void
priv_check(const char *user, int allow_root)
{
	if (geteuid() != 0) {
		if (user != NULL) {
			struct passwd *pw = getpwnam(user);

			if (pw == NULL || pw->pw_uid != geteuid())
				fatalx("%s: --user %s: only root can switch users", __func__, user);
		}
		return;
	}
	if (user == NULL && !allow_root)
		fatalx("%s: refusing to run as root: give --user USER (or --allow-root for "
		    "development)", __func__);
}

void
priv_drop(const char *user, const char *const *paths, int npaths)
{
	struct passwd	*pw;
	uid_t		 uid;
	gid_t		 gid;

	if (geteuid() != 0 || user == NULL) {
		if (geteuid() == 0)
			log_info("running as root (--allow-root)");
		return;
	}
	if ((pw = getpwnam(user)) == NULL)
		fatalx("%s: no user '%s'", __func__, user);
	if (pw->pw_uid == 0)
		fatalx("%s: --user %s is root", __func__, user);
	uid = pw->pw_uid;
	gid = pw->pw_gid;
	for (int i = 0; i < npaths; i++)
		if (chown(paths[i], uid, gid) == -1)
			fatal("%s: chown %s", __func__, paths[i]);
	if (setgroups(1, &gid) == -1)
		fatal("%s: setgroups", __func__);
	if (setresgid(gid, gid, gid) == -1)
		fatal("%s: setresgid", __func__);
	if (setresuid(uid, uid, uid) == -1)
		fatal("%s: setresuid", __func__);
	if (setuid(0) != -1 || geteuid() == 0)
		fatalx("%s: still root after dropping privileges", __func__);
	log_info("running as %s (uid %u, gid %u)", user, (unsigned)uid, (unsigned)gid);
}

void
signals_watch(struct event_base *base, const int *sigs, int n, struct event **evs,
    void (*cb)(evutil_socket_t, short, void *), void *arg)
{
	for (int i = 0; i < n; i++)
		if ((evs[i] = evsignal_new(base, sigs[i], cb, arg)) == NULL ||
		    evsignal_add(evs[i], NULL) == -1)
			fatalx("%s: cannot watch signal %d", __func__, sigs[i]);
}

static void
watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	sd_notify(0, "WATCHDOG=1");
}

void
watchdog_start(struct event_base *base, struct event **out)
{
	struct timeval	tv;
	uint64_t	wdusec = 0;

	*out = NULL;
	if (sd_watchdog_enabled(0, &wdusec) <= 0 || wdusec == 0)
		return;
	tv.tv_sec = (time_t)(wdusec / 2 / 1000000);
	tv.tv_usec = (suseconds_t)(wdusec / 2 % 1000000);
	if ((*out = event_new(base, -1, EV_PERSIST, watchdog_cb, NULL)) == NULL ||
	    evtimer_add(*out, &tv) == -1)
		fatalx("%s: cannot arm the watchdog timer", __func__);
}
