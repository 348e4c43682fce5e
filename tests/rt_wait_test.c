/*
 * rt_wait_test: dlcp_wait tells "not finished yet" (DLCP_ERR_PENDING)
 * from a failure.  Before, both were DLCP_ERR_TIMEOUT, so a caller that
 * waited again on TIMEOUT spun forever on an operation that had failed
 * because its peer made no progress.
 *
 * Two processes on loopback.  Rank 0 starts an all-reduce that rank 1
 * joins only after rank 0 has seen it pending (a pipe orders the two, no
 * sleeps), then one that rank 1 never joins: rank 0's wait loop must end
 * with a failure, which later waits keep returning.
 *
 * And a completion produced by another thread than the waiter's wakes
 * the waiter.  A thread blocked in dlcp_wait_cq drives the loop and
 * sleeps in epoll; a send that completes within another thread's post
 * (an eager one), or a receive the loop thread's first pass completes,
 * is no event of the loop: the waiter slept on until its deadline (seen
 * in agg_rt_test as a token that took 19.5 s to arrive).
 *
 * And after a long wait the loop thread, which then sleeps until the
 * waiter lets go of the loop, carries an operation nobody waits for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlcp/dlcp.h"
#include "rt/net.h"

#define COUNT 1024u
/* Bounds the wait loop: 20 s at 50 ms per wait, far above the 300 ms
 * timeout the failure needs, so only a spinning loop reaches it. */
#define MAX_WAITS 400

typedef struct report {
  int pending_first;   /* rank 0: the first wait's return */
  int joined;          /* rank 0: the joined all-reduce's status */
  int failed;          /* rank 0: how the unjoined one ended */
  int failed_info;     /* its info.status */
  int failed_again;    /* a wait after the failure */
  int waits;           /* waits until it ended */
  float value;         /* rank 0: an element of the joined result */
  int woken;           /* the waiting thread's dlcp_wait_cq return */
  int woken_late;      /* ... came at its deadline, not with the send */
  int woken_status;    /* the completion it returned: status, */
  uint64_t woken_user; /* user data */
  uint32_t token;      /* rank 1: what it received */
  char error[256];
} report;

static int make_comm(uint32_t rank, uint16_t port, dlcp_comm **comm,
                     report *rep) {
  dlcp_comm_config cfg;
  dlcp_comm_config_default(&cfg);
  cfg.rank = rank;
  cfg.world_size = 2;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = port;
  cfg.timeout_ms = 300;
  cfg.rdzv_timeout_ms = 20000;
  if (dlcp_comm_create(comm, &cfg, rep->error, sizeof(rep->error)) != 0) {
    return 1;
  }
  return 0;
}

static int rank0(uint16_t port, int go_fd, int done_fd, report *rep) {
  dlcp_comm *comm;
  if (make_comm(0, port, &comm, rep) != 0) {
    return 1;
  }
  static float buf[COUNT];
  for (uint32_t i = 0; i < COUNT; i++) {
    buf[i] = 1.0f;
  }
  dlcp_request *req;
  if (dlcp_allreduce(comm, buf, buf, COUNT, DLCP_FLOAT32, DLCP_SUM, NULL,
                     &req) != 0) {
    return 1;
  }
  rep->pending_first = dlcp_wait(req, 0, NULL);
  (void)!write(go_fd, "g", 1);
  rep->joined = dlcp_wait(req, -1, NULL);
  rep->value = buf[COUNT - 1];
  dlcp_request_free(req);

  if (dlcp_allreduce(comm, buf, buf, COUNT, DLCP_FLOAT32, DLCP_SUM, NULL,
                     &req) != 0) {
    return 1;
  }
  dlcp_coll_info info;
  int rv;
  do {
    rv = dlcp_wait(req, 50, &info);
    rep->waits++;
  } while (rv == DLCP_ERR_PENDING && rep->waits < MAX_WAITS);
  rep->failed = rv;
  rep->failed_info = info.status;
  rep->failed_again = dlcp_wait(req, 0, NULL);
  dlcp_request_free(req);
  (void)!write(done_fd, "d", 1);
  dlcp_comm_destroy(comm);
  return 0;
}

static int rank1(uint16_t port, int go_fd, int done_fd, report *rep) {
  dlcp_comm *comm;
  if (make_comm(1, port, &comm, rep) != 0) {
    return 1;
  }
  char ch;
  static float buf[COUNT];
  for (uint32_t i = 0; i < COUNT; i++) {
    buf[i] = 2.0f;
  }
  if (read(go_fd, &ch, 1) != 1) {
    return 1;
  }
  dlcp_request *req;
  if (dlcp_allreduce(comm, buf, buf, COUNT, DLCP_FLOAT32, DLCP_SUM, NULL,
                     &req) != 0 ||
      dlcp_wait(req, -1, NULL) != 0) {
    return 1;
  }
  dlcp_request_free(req);
  /* Stays in the job, without joining the second all-reduce, until rank
   * 0 has seen it fail. */
  if (read(done_fd, &ch, 1) != 1) {
    return 1;
  }
  dlcp_comm_destroy(comm);
  return 0;
}

/* A rank's body: rank 0 gets the pipes' write ends, rank 1 their read
 * ends (rank 0 says "go" and "done"). */
typedef int (*rank_fn)(uint16_t port, int go_fd, int done_fd, report *rep);

/* Forks the two ranks on a free port, waits for both and fails the test
 * naming a rank that did not exit 0.  Returns their two reports, in
 * shared memory the caller unmaps. */
static report *run_pair(rank_fn rank0_fn, rank_fn rank1_fn) {
  report *rep = mmap(NULL, 2 * sizeof(report), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(rep != MAP_FAILED);
  memset(rep, 0, 2 * sizeof(report));
  uint16_t port = 0;
  dlcp_errbuf eb;
  assert_int_equal(dlcp_net_free_port("127.0.0.1", &port, &eb), 0);
  int go[2], done[2];
  assert_int_equal(pipe(go), 0);
  assert_int_equal(pipe(done), 0);
  pid_t pid[2];
  for (uint32_t r = 0; r < 2; r++) {
    pid[r] = fork();
    assert_true(pid[r] >= 0);
    if (pid[r] == 0) {
      _exit(r == 0 ? rank0_fn(port, go[1], done[1], &rep[0])
                   : rank1_fn(port, go[0], done[0], &rep[1]));
    }
  }
  for (uint32_t r = 0; r < 2; r++) {
    int st;
    assert_int_equal(waitpid(pid[r], &st, 0), pid[r]);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fail_msg("rank %u exited with 0x%x: %s", r, st, rep[r].error);
    }
  }
  return rep;
}

static void test_pending_is_not_a_failure(void **state) {
  (void)state;
  report *rep = run_pair(rank0, rank1);
  assert_int_equal(rep[0].pending_first, DLCP_ERR_PENDING);
  assert_int_equal(rep[0].joined, 0);
  assert_true(rep[0].value == 3.0f);
  assert_true(rep[0].waits < MAX_WAITS);
  assert_true(rep[0].failed < 0);
  assert_int_not_equal(rep[0].failed, DLCP_ERR_PENDING);
  assert_int_equal(rep[0].failed_info, rep[0].failed);
  assert_int_equal(rep[0].failed_again, rep[0].failed);
  munmap(rep, 2 * sizeof(report));
}

typedef struct waiter {
  dlcp_cq *cq;
  dlcp_completion cmp;
  int rv;
  double waited_ms;
} waiter;

/* Far above what the send takes, far below a test's patience.  A waiter
 * that is not woken returns the completion all the same, at its
 * deadline: only the time it took tells (no speed is measured: the two
 * outcomes are 100 ms and 20 s apart). */
#define WAKE_WAIT_MS 20000

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *wait_thread(void *arg) {
  waiter *w = arg;
  double t0 = now_ms();
  w->rv = dlcp_wait_cq(w->cq, &w->cmp, WAKE_WAIT_MS);
  w->waited_ms = now_ms() - t0;
  return NULL;
}

static int make_patient_comm(uint32_t rank, uint16_t port, dlcp_comm **comm,
                             report *rep) {
  dlcp_comm_config cfg;
  dlcp_comm_config_default(&cfg);
  cfg.rank = rank;
  cfg.world_size = 2;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = port;
  cfg.timeout_ms = 2 * WAKE_WAIT_MS;
  cfg.rdzv_timeout_ms = 20000;
  return dlcp_comm_create(comm, &cfg, rep->error, sizeof(rep->error));
}

/* Rank 0: one thread waits on the queue; once it is (very likely) asleep
 * in epoll, this thread posts a 4-byte send, which completes within the
 * post.  The waiter must return it, not its timeout. */
static int wake_rank0(uint16_t port, int go_fd, int done_fd, report *rep) {
  dlcp_comm *comm;
  waiter w = {0};
  pthread_t t;
  uint32_t token = 7;
  dlcp_tensor tensor = {1, &token, sizeof(token)};
  struct timespec settle = {0, 100 * 1000000L};

  (void)go_fd;
  if (make_patient_comm(0, port, &comm, rep) != 0 ||
      dlcp_cq_create(comm, &w.cq) != 0 ||
      pthread_create(&t, NULL, wait_thread, &w) != 0) {
    return 1;
  }
  nanosleep(&settle, NULL);
  if (dlcp_post_send(comm, 1, &tensor, NULL, w.cq, 42) != 0) {
    return 1;
  }
  pthread_join(t, NULL);
  rep->woken = w.rv;
  rep->woken_late = w.waited_ms >= WAKE_WAIT_MS / 2;
  rep->woken_status = w.cmp.status;
  rep->woken_user = w.cmp.user_data;
  (void)!write(done_fd, "d", 1);
  dlcp_cq_destroy(w.cq);
  dlcp_comm_destroy(comm);
  return 0;
}

static int wake_rank1(uint16_t port, int go_fd, int done_fd, report *rep) {
  dlcp_comm *comm;
  dlcp_cq *cq;
  dlcp_completion cmp;
  uint32_t token = 0;
  dlcp_tensor tensor = {1, &token, sizeof(token)};
  char ch;

  (void)go_fd;
  if (make_patient_comm(1, port, &comm, rep) != 0 ||
      dlcp_cq_create(comm, &cq) != 0 ||
      dlcp_post_recv(comm, 0, &tensor, 0.0, cq, 0) != 0 ||
      dlcp_wait_cq(cq, &cmp, -1) != 1) {
    return 1;
  }
  rep->woken_status = cmp.status;
  rep->token = token;
  if (read(done_fd, &ch, 1) != 1) {
    return 1;
  }
  dlcp_cq_destroy(cq);
  dlcp_comm_destroy(comm);
  return 0;
}

static void test_completion_wakes_the_waiter(void **state) {
  (void)state;
  report *rep = run_pair(wake_rank0, wake_rank1);
  assert_int_equal(rep[0].woken, 1);
  assert_false(rep[0].woken_late);
  assert_int_equal(rep[0].woken_status, 0);
  assert_int_equal(rep[0].woken_user, 42);
  assert_int_equal(rep[1].woken_status, 0);
  assert_int_equal(rep[1].token, 7);
  munmap(rep, 2 * sizeof(report));
}

/* A send the loop must carry (larger than a ring and than the eager
 * size), posted after a long wait and then never waited for. */
#define PROGRESS_FLOATS (1u << 20)

/* Rank 0: waits for rank 1's token, which comes 100 ms after "go", long
 * enough that its loop thread stops looking every millisecond and sleeps
 * until this thread lets go of the loop (drive.c); then posts a 4 MiB
 * send and only polls the queue, which drives nothing: the loop thread
 * must wake when the wait ends and carry the send. */
static int progress_rank0(uint16_t port, int go_fd, int done_fd, report *rep) {
  dlcp_comm *comm;
  dlcp_cq *cq;
  dlcp_completion cmp;
  uint32_t token = 0;
  dlcp_tensor tok = {1, &token, sizeof(token)};
  static float data[PROGRESS_FLOATS];
  dlcp_tensor big = {2, data, sizeof(data)};
  struct timespec ms = {0, 1000000L};

  for (uint32_t i = 0; i < PROGRESS_FLOATS; i++) {
    data[i] = (float)i;
  }
  if (make_patient_comm(0, port, &comm, rep) != 0 ||
      dlcp_cq_create(comm, &cq) != 0 ||
      dlcp_post_recv(comm, 1, &tok, 0.0, cq, 1) != 0 ||
      write(go_fd, "g", 1) != 1 || dlcp_wait_cq(cq, &cmp, -1) != 1 ||
      dlcp_post_send(comm, 1, &big, NULL, cq, 2) != 0) {
    return 1;
  }
  rep->token = token;
  double t0 = now_ms();
  int n;
  while ((n = dlcp_poll_cq(cq, &cmp, 1)) == 0 && now_ms() - t0 < WAKE_WAIT_MS) {
    nanosleep(&ms, NULL);
  }
  rep->woken = n;
  rep->woken_late = now_ms() - t0 >= WAKE_WAIT_MS / 2;
  rep->woken_status = cmp.status;
  rep->woken_user = cmp.user_data;
  (void)!write(done_fd, "d", 1);
  dlcp_cq_destroy(cq);
  dlcp_comm_destroy(comm);
  return 0;
}

static int progress_rank1(uint16_t port, int go_fd, int done_fd, report *rep) {
  dlcp_comm *comm;
  dlcp_cq *cq;
  dlcp_completion cmp[2];
  uint32_t token = 7;
  dlcp_tensor tok = {1, &token, sizeof(token)};
  static float data[PROGRESS_FLOATS];
  dlcp_tensor big = {2, data, sizeof(data)};
  struct timespec late = {0, 100 * 1000000L};
  char ch;

  if (make_patient_comm(1, port, &comm, rep) != 0 ||
      dlcp_cq_create(comm, &cq) != 0 ||
      dlcp_post_recv(comm, 0, &big, 0.0, cq, 2) != 0 ||
      read(go_fd, &ch, 1) != 1) {
    return 1;
  }
  nanosleep(&late, NULL);
  if (dlcp_post_send(comm, 0, &tok, NULL, cq, 1) != 0) {
    return 1;
  }
  for (int got = 0; got < 2; got++) {
    if (dlcp_wait_cq(cq, &cmp[got], WAKE_WAIT_MS) != 1 ||
        cmp[got].status != 0) {
      return 1;
    }
  }
  uint32_t wrong = 0;
  for (uint32_t i = 0; i < PROGRESS_FLOATS; i++) {
    wrong += data[i] != (float)i;
  }
  rep->token = wrong;
  if (read(done_fd, &ch, 1) != 1) {
    return 1;
  }
  dlcp_cq_destroy(cq);
  dlcp_comm_destroy(comm);
  return 0;
}

static void test_progress_after_a_long_wait(void **state) {
  (void)state;
  report *rep = run_pair(progress_rank0, progress_rank1);
  assert_int_equal(rep[0].token, 7);
  assert_int_equal(rep[0].woken, 1);
  assert_false(rep[0].woken_late);
  assert_int_equal(rep[0].woken_status, 0);
  assert_int_equal(rep[0].woken_user, 2);
  assert_int_equal(rep[1].token, 0); /* wrong elements */
  munmap(rep, 2 * sizeof(report));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pending_is_not_a_failure),
      cmocka_unit_test(test_completion_wakes_the_waiter),
      cmocka_unit_test(test_progress_after_a_long_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
