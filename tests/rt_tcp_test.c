/*
 * rt_tcp_test.c: the control plane's TCP connections (src/rt/tcp.c) over
 * loopback: several destinations dialled at once, a refusal that is final
 * or retried with backoff until the listener comes, and the options every
 * control connection carries.  The lossy-fabric behaviour these exist for
 * (attempts from fresh ports racing, the retransmission ceiling) is
 * exercised on the testbed (tests/testbed_lossy_spine_test.py).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/net.h"
#include "rt/tcp.h"

#define LOOPBACK "127.0.0.1"

/* listener opens a loopback listener on |port| (0: any) and returns it,
 * writing its port to |*bound|. */
static int listener(uint16_t port, uint16_t *bound) {
  dlcp_sockaddr a;
  socklen_t len = sizeof(a);
  int one = 1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  assert_int_equal(dlcp_sockaddr_parse(&a, LOOPBACK, port), 0);
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  assert_int_equal(bind(fd, &a.sa, dlcp_sockaddr_len(&a)), 0);
  assert_int_equal(listen(fd, 16), 0);
  assert_int_equal(getsockname(fd, &a.sa, &len), 0);
  *bound = dlcp_net_addr_port(&a.sa);
  return fd;
}

static void expect_accepted(int lfd, int connected) {
  int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(write(connected, "x", 1), 1);
  char c = 0;
  assert_int_equal(read(fd, &c, 1), 1);
  assert_int_equal(c, 'x');
  close(fd);
}

/* Three listeners and a closed port, dialled at once: the three connect
 * on the first attempt, the closed port is refused for good. */
static void test_connect_all(void **state) {
  (void)state;
  int lfd[3];
  dlcp_tcp_dial d[4];
  uint16_t port;
  for (int i = 0; i < 3; i++) {
    lfd[i] = listener(0, &port);
    assert_int_equal(dlcp_sockaddr_parse(&d[i].addr, LOOPBACK, port), 0);
  }
  assert_int_equal(dlcp_net_free_port(LOOPBACK, &port, NULL), 0);
  assert_int_equal(dlcp_sockaddr_parse(&d[3].addr, LOOPBACK, port), 0);
  dlcp_tstamp start = dlcp_rt_now();
  assert_int_equal(
      dlcp_tcp_connect_all(d, 4, true, dlcp_rt_deadline_after(5000)), 0);
  assert_true(dlcp_rt_now() - start < 2000 * DLCP_NS_PER_MS);
  for (int i = 0; i < 3; i++) {
    assert_true(d[i].fd >= 0);
    assert_int_equal(d[i].attempts, 1);
    expect_accepted(lfd[i], d[i].fd);
    close(d[i].fd);
    close(lfd[i]);
  }
  assert_int_equal(d[3].fd, -ECONNREFUSED);
  assert_int_equal(d[3].attempts, 1);
}

typedef struct late {
  uint16_t port;
  int lfd;
} late;

static void *listen_late(void *arg) {
  late *l = arg;
  uint16_t bound;
  usleep(300 * 1000);
  l->lfd = listener(l->port, &bound);
  return NULL;
}

/* A refusal that is not final is retried with backoff until the listener
 * comes; with nothing ever listening the deadline ends it. */
static void test_refusal_retried(void **state) {
  (void)state;
  late l = {.port = 0, .lfd = -1};
  pthread_t th;
  dlcp_sockaddr a;
  unsigned attempts;
  assert_int_equal(dlcp_net_free_port(LOOPBACK, &l.port, NULL), 0);
  assert_int_equal(dlcp_sockaddr_parse(&a, LOOPBACK, l.port), 0);
  assert_int_equal(pthread_create(&th, NULL, listen_late, &l), 0);
  int fd = dlcp_tcp_connect(&a, false, dlcp_rt_deadline_after(5000), &attempts);
  pthread_join(th, NULL);
  assert_true(fd >= 0);
  assert_true(attempts > 1);
  expect_accepted(l.lfd, fd);
  close(fd);
  close(l.lfd);

  dlcp_tstamp start = dlcp_rt_now();
  fd = dlcp_tcp_connect(&a, false, dlcp_rt_deadline_after(200), &attempts);
  assert_int_equal(fd, -ECONNREFUSED);
  assert_true(attempts > 1);
  assert_true(dlcp_rt_now() - start >= 190 * DLCP_NS_PER_MS);
}

/* Every control connection carries the user timeout, and the
 * retransmission ceiling where the kernel has the option. */
static void test_tuned(void **state) {
  (void)state;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  unsigned user = 0;
  int nodelay = 0;
  socklen_t len = sizeof(user);
  dlcp_tcp_tune(fd);
  assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, &len),
                   0);
  assert_int_equal(user, DLCP_TCP_USER_TIMEOUT_MS);
  len = sizeof(nodelay);
  assert_int_equal(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  assert_int_equal(nodelay, 1);
  int rto_max = 0;
  len = sizeof(rto_max);
  if (getsockopt(fd, IPPROTO_TCP, 44 /* TCP_RTO_MAX_MS */, &rto_max, &len) ==
      0) {
    assert_int_equal(rto_max, DLCP_TCP_RTO_MAX_MS);
  }
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_connect_all),
      cmocka_unit_test(test_refusal_retried),
      cmocka_unit_test(test_tuned),
  };
  alarm(60);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
