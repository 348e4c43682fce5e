/*
 * bench-rdzv_scale: how long the rendezvous takes as the world grows.  For
 * each world size N, rank 0's store is started on loopback and N client
 * threads of this process do what every rank of a job does with it
 * (rendezvous.c): connect and say HELLO, exchange a record of VALUE bytes
 * under "addr" (an address record is about 100), pass the leaving
 * barrier, disconnect.  Prints, per N, the wall time from the first
 * connect to the last rank's return (median, min and max of RUNS) and
 * the requests the store answered per rank.
 *
 *   bench-rdzv_scale [-r RUNS] [-v VALUE] N...   (default 3 runs, 100 B;
 *                                                  N default 64 256 1024)
 *
 * Each rank holds two descriptors (its connection and the server's end),
 * so the soft limit on open files is raised to the hard one first.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/rendezvous.h"

#define LOOPBACK "127.0.0.1"
#define JOB 11u
#define TIMEOUT_MS 600000u
#define MAX_RUNS 31
#define THREAD_STACK (256u << 10)

typedef struct rank_arg {
  uint16_t port;
  uint32_t rank;
  uint32_t world;
  size_t value_len;
  int rv;
  dlcp_errbuf eb;
} rank_arg;

static void *run_rank(void *p) {
  rank_arg *a = p;
  dlcp_tstamp deadline = dlcp_rt_deadline_after(TIMEOUT_MS);
  dlcp_errbuf *eb = &a->eb;
  dlcp_rdzv_client *cli = NULL;
  void **values = calloc(a->world, sizeof(*values));
  size_t *lens = calloc(a->world, sizeof(*lens));
  char *mine = malloc(a->value_len + 1);
  dlcp_errbuf_clear(eb);
  if (values == NULL || lens == NULL || mine == NULL) {
    a->rv = DLCP_ERR_NOMEM;
    goto out;
  }
  memset(mine, 'a' + (int)(a->rank % 26), a->value_len);
  a->rv = dlcp_rdzv_client_connect(&cli, LOOPBACK, a->port, a->rank, a->world,
                                   JOB, NULL, NULL, deadline, eb);
  if (a->rv == 0) {
    a->rv = dlcp_rdzv_exchange(cli, "addr", mine, a->value_len, values, lens,
                               deadline, eb);
  }
  if (a->rv == 0) {
    for (uint32_t r = 0; r < a->world; r++) {
      if (lens[r] != a->value_len ||
          ((char *)values[r])[0] != (char)('a' + (int)(r % 26))) {
        a->rv = dlcp_errbuf_set(eb, DLCP_ERR_INTERNAL,
                                "rank %" PRIu32 "'s record arrived wrong", r);
        break;
      }
    }
    dlcp_rdzv_free_values(values, a->world);
  }
  if (a->rv == 0) {
    a->rv = dlcp_rdzv_barrier(cli, "dlcp/leave", deadline, eb);
  }
out:
  dlcp_rdzv_client_close(cli);
  free(values);
  free(lens);
  free(mine);
  return NULL;
}

/* one_run returns the seconds N ranks took, or a negative value. */
static double one_run(uint32_t world, size_t value_len, uint64_t *requests) {
  dlcp_rdzv_server_config cfg;
  dlcp_rdzv_server *srv = NULL;
  pthread_attr_t attr;
  pthread_t *tid = calloc(world, sizeof(*tid));
  rank_arg *args = calloc(world, sizeof(*args));
  double secs = -1;
  uint32_t started = 0;
  if (tid == NULL || args == NULL) {
    goto out;
  }
  dlcp_rdzv_server_config_default(&cfg, world, JOB);
  if (dlcp_rdzv_server_start(&srv, LOOPBACK, 0, &cfg, NULL) != 0) {
    fprintf(stderr, "bench-rdzv_scale: cannot start the server\n");
    goto out;
  }
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, THREAD_STACK);
  dlcp_tstamp t0 = dlcp_rt_now();
  for (; started < world; started++) {
    args[started] = (rank_arg){.port = dlcp_rdzv_server_port(srv),
                               .rank = started,
                               .world = world,
                               .value_len = value_len};
    if (pthread_create(&tid[started], &attr, run_rank, &args[started]) != 0) {
      fprintf(stderr, "bench-rdzv_scale: cannot start thread %" PRIu32 "\n",
              started);
      break;
    }
  }
  pthread_attr_destroy(&attr);
  for (uint32_t r = 0; r < started; r++) {
    pthread_join(tid[r], NULL);
  }
  secs = (double)(dlcp_rt_now() - t0) / 1e9;
  for (uint32_t r = 0; r < started; r++) {
    if (args[r].rv != 0) {
      fprintf(stderr, "bench-rdzv_scale: rank %" PRIu32 " of %" PRIu32 ": %s\n",
              r, world, args[r].eb.msg);
      secs = -1;
      break;
    }
  }
  if (started < world) {
    secs = -1;
  }
  *requests = dlcp_rdzv_server_requests(srv);
  dlcp_rdzv_server_stop(srv, dlcp_rt_deadline_after(1000));
out:
  free(tid);
  free(args);
  return secs;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void raise_open_files(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
      fprintf(stderr, "bench-rdzv_scale: setrlimit: %s\n", strerror(errno));
    }
  }
}

static int usage(void) {
  fprintf(stderr,
          "usage: bench-rdzv_scale [-r RUNS (1..%d)] [-v VALUE_BYTES "
          "(0..65536)] [WORLD_SIZE (2..%u)]...\n",
          MAX_RUNS, DLCP_ENV_MAX_WORLD);
  return 2;
}

int main(int argc, char **argv) {
  static const uint32_t default_worlds[] = {64, 256, 1024};
  long runs = 3;
  long value_len = 100;
  int opt;
  while ((opt = getopt(argc, argv, "r:v:")) != -1) {
    char *end;
    if (opt == 'r') {
      runs = strtol(optarg, &end, 10);
      if (*end != '\0' || runs < 1 || runs > MAX_RUNS) {
        return usage();
      }
    } else if (opt == 'v') {
      value_len = strtol(optarg, &end, 10);
      if (*end != '\0' || value_len < 0 || value_len > DLCP_RDZV_MAX_VALUE) {
        return usage();
      }
    } else {
      return usage();
    }
  }
  uint32_t nworlds = argc > optind ? (uint32_t)(argc - optind) : 3;
  raise_open_files();
  printf("# world value_bytes runs median_s min_s max_s requests_per_rank\n");
  for (uint32_t w = 0; w < nworlds; w++) {
    uint32_t world = default_worlds[w < 3 ? w : 0];
    double t[MAX_RUNS];
    uint64_t requests = 0;
    if (argc > optind) {
      char *end;
      long v = strtol(argv[optind + (int)w], &end, 10);
      if (*end != '\0' || v < 2 || v > (long)DLCP_ENV_MAX_WORLD) {
        return usage();
      }
      world = (uint32_t)v;
    }
    for (long i = 0; i < runs; i++) {
      t[i] = one_run(world, (size_t)value_len, &requests);
      if (t[i] < 0) {
        return 1;
      }
    }
    qsort(t, (size_t)runs, sizeof(t[0]), cmp_double);
    printf("%" PRIu32 " %ld %ld %.3f %.3f %.3f %.1f\n", world, value_len, runs,
           t[runs / 2], t[0], t[runs - 1], (double)requests / world);
    fflush(stdout);
  }
  return 0;
}
