/*
 * switchd.c: the dlcp-switch process for tests (see switchd.h).
 */
#include "switchd.h"

#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ms(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int find(char *path, size_t len) {
  char self[PATH_MAX - 64];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  char *slash;

  if (n <= 0) {
    return -1;
  }
  self[n] = '\0';
  slash = strrchr(self, '/');
  if (slash == NULL) {
    return -1;
  }
  *slash = '\0';
  snprintf(path, len, "%s/../bin/dlcp-switch", self);
  return access(path, X_OK);
}

int switchd_start(switchd *d, const char *const *args) {
  return switchd_start_at(d, "127.0.0.1", args);
}

int switchd_start_at(switchd *d, const char *bind, const char *const *args) {
  char path[PATH_MAX];
  const char *argv[32];
  int out[2], err[2];
  char line[512];
  size_t len = 0, n = 0;
  uint64_t deadline = mono_ms() + 10000;
  const char *p;

  if (find(path, sizeof(path)) != 0) {
    fprintf(stderr, "switchd: dlcp-switch not found at %s\n", path);
    return -1;
  }
  argv[n++] = path;
  argv[n++] = "--bind";
  argv[n++] = bind;
  argv[n++] = "--port";
  argv[n++] = "0";
  for (size_t i = 0; args != NULL && args[i] != NULL && n < 31; i++) {
    argv[n++] = args[i];
  }
  argv[n] = NULL;
  if (pipe(out) != 0 || pipe(err) != 0) {
    return -1;
  }
  d->pid = fork();
  if (d->pid < 0) {
    return -1;
  }
  if (d->pid == 0) {
    /* a test that fails half-way must not leave a daemon behind */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]);
    close(err[0]);
    execv(path, (char *const *)(uintptr_t)argv);
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  d->err_fd = err[0];
  line[0] = '\0';
  while (strchr(line, '\n') == NULL && len < sizeof(line) - 1) {
    struct pollfd pfd = {out[0], POLLIN, 0};
    ssize_t k;

    if (mono_ms() > deadline) {
      fprintf(stderr, "switchd: dlcp-switch did not start\n");
      kill(d->pid, SIGKILL);
      return -1;
    }
    if (poll(&pfd, 1, 100) <= 0) {
      continue;
    }
    k = read(out[0], line + len, sizeof(line) - 1 - len);
    if (k <= 0) {
      fprintf(stderr, "switchd: dlcp-switch exited at start\n");
      return -1;
    }
    len += (size_t)k;
    line[len] = '\0';
  }
  close(out[0]);
  /* "listening on ADDR:PORT (" or "[IPV6]:PORT (" */
  p = strstr(line, " (");
  while (p != NULL && p > line && p[-1] != ':') {
    p--;
  }
  if (p == NULL || p == line) {
    return -1;
  }
  d->port = (uint16_t)atoi(p);
  return d->port > 0 ? 0 : -1;
}

const char *switchd_stop(switchd *d) {
  static char buf[1 << 16];
  size_t len = 0;
  int status = 0;

  kill(d->pid, SIGTERM);
  for (;;) {
    ssize_t k = read(d->err_fd, buf + len, sizeof(buf) - 1 - len);

    if (k <= 0) {
      break;
    }
    len += (size_t)k;
  }
  buf[len] = '\0';
  close(d->err_fd);
  if (waitpid(d->pid, &status, 0) != d->pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    fprintf(stderr, "switchd: dlcp-switch exited with status %d:\n%s",
            status, buf);
    return NULL;
  }
  return buf;
}

uint64_t switchd_stat(const char *err, const char *name) {
  const char *p = strstr(err, "exit: packets");
  char key[64];

  snprintf(key, sizeof(key), " %s ", name);
  p = p != NULL ? strstr(p, key) : NULL;
  return p != NULL ? strtoull(p + strlen(key), NULL, 10) : UINT64_MAX;
}
