/*
 * sigdump.c: SIGUSR1 to the registered eventfds (sigdump.h).  The table
 * is read by the handler without a lock: slots are atomics, written only
 * under |mu| by (un)registration.
 */
#include "rt/sigdump.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int fds[DLCP_SIGDUMP_MAX];
static int registered;
static bool installed;
static struct sigaction previous;

static void on_sigusr1(int sig) {
  int saved = errno;
  uint64_t one = 1;
  (void)sig;
  for (int i = 0; i < DLCP_SIGDUMP_MAX; i++) {
    int fd = atomic_load(&fds[i]);
    if (fd > 0) {
      (void)!write(fd, &one, sizeof(one));
    }
  }
  errno = saved;
}

bool dlcp_sigdump_register(int efd) {
  bool ok = false;
  pthread_mutex_lock(&mu);
  if (registered == 0) {
    struct sigaction cur;
    if (sigaction(SIGUSR1, NULL, &cur) == 0 && cur.sa_handler == SIG_DFL &&
        !(cur.sa_flags & SA_SIGINFO)) {
      struct sigaction sa;
      memset(&sa, 0, sizeof(sa));
      sa.sa_handler = on_sigusr1;
      sa.sa_flags = SA_RESTART;
      sigemptyset(&sa.sa_mask);
      installed = sigaction(SIGUSR1, &sa, &previous) == 0;
    }
  }
  for (int i = 0; installed && i < DLCP_SIGDUMP_MAX; i++) {
    if (atomic_load(&fds[i]) <= 0) {
      atomic_store(&fds[i], efd);
      ok = true;
      break;
    }
  }
  registered++;
  pthread_mutex_unlock(&mu);
  return ok;
}

void dlcp_sigdump_unregister(int efd) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < DLCP_SIGDUMP_MAX; i++) {
    if (atomic_load(&fds[i]) == efd) {
      atomic_store(&fds[i], 0);
      break;
    }
  }
  if (registered > 0 && --registered == 0 && installed) {
    (void)sigaction(SIGUSR1, &previous, NULL);
    installed = false;
  }
  pthread_mutex_unlock(&mu);
}
