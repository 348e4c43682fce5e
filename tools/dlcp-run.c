/*
 * dlcp-run: start N local ranks of a command, the way
 * `torchrun --standalone --nproc-per-node N` does:
 *
 *   dlcp-run -n N [--port P] [--grace-ms MS] [--] CMD ARGS...
 *
 * Every rank gets MASTER_ADDR=127.0.0.1, MASTER_PORT (a free port unless
 * --port is given), RANK, LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE.
 * Their output comes back line by line, prefixed "[rank R] ".  If a rank
 * fails, the others are terminated and dlcp-run exits non-zero naming it.
 * This file only parses arguments; the supervision lives in src/rt/launch.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt/errbuf.h"
#include "rt/launch.h"
#include "rt/proc.h"

#define DEFAULT_GRACE_MS 3000u
#define MAX_GRACE_MS 600000u

static void usage(FILE *f) {
  fprintf(f,
          "usage: dlcp-run -n N [--port P] [--bind core|none] [--grace-ms MS]\n"
          "                [--] CMD [ARGS...]\n"
          "\n"
          "Runs N copies of CMD on this host as ranks 0..N-1 of one job, with\n"
          "MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK, WORLD_SIZE and\n"
          "LOCAL_WORLD_SIZE set as torchrun --standalone sets them.\n"
          "\n"
          "  -n, --nproc-per-node N  number of ranks, 1..%u\n"
          "  -p, --port P            MASTER_PORT, 1..65535 (default: a free "
          "port)\n"
          "  --bind core|none        core (default): rank R runs only on the\n"
          "                          (R mod M)-th of the M CPUs dlcp-run may\n"
          "                          use, also when ranks outnumber them;\n"
          "                          none: the scheduler places the ranks\n"
          "  --grace-ms MS           time between SIGTERM and SIGKILL when "
          "stopping\n"
          "                          ranks, 0..%u (default %u)\n"
          "  -h, --help              show this help\n"
          "\n"
          "Each output line of rank R is prefixed with \"[rank R] \".  If a "
          "rank\n"
          "exits non-zero or is killed, the other ranks are terminated (if\n"
          "they have not ended within a second) and dlcp-run exits with\n"
          "that rank's status (128+signal if killed).\n"
          "SIGINT/SIGTERM/SIGHUP are forwarded to all ranks.  Ranks read\n"
          "standard input from /dev/null.\n",
          DLCP_LAUNCH_MAX_RANKS, MAX_GRACE_MS, DEFAULT_GRACE_MS);
}

/* parse_uint parses the whole of |text| as a decimal in [min, max]; on
 * error prints a message naming the option and returns -1. */
static int parse_uint(const char *opt, const char *text, unsigned long min,
                      unsigned long max, unsigned long *out) {
  char *end;
  unsigned long v;
  if (text[0] < '0' || text[0] > '9') {
    goto bad;
  }
  errno = 0;
  v = strtoul(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) {
    goto bad;
  }
  *out = v;
  return 0;
bad:
  fprintf(stderr,
          "dlcp-run: invalid value '%s' for %s: expected an integer "
          "in %lu..%lu\n",
          text, opt, min, max);
  return -1;
}

/* option_value returns the value of option |argv[*i]| whose name is
 * |name|: the part after '=' in "--name=V", the rest of a short "-nV", or
 * the next argument (advancing *i).  Prints an error and returns NULL if
 * it is missing. */
static const char *option_value(int argc, char **argv, int *i,
                                const char *name) {
  const char *arg = argv[*i];
  size_t n = strlen(name);
  if (strncmp(arg, name, n) == 0 && arg[n] == '=') {
    return arg + n + 1;
  }
  if (name[1] != '-' && arg[n] != '\0') {
    return arg + n; /* -n4 */
  }
  if (*i + 1 >= argc) {
    fprintf(stderr, "dlcp-run: option %s needs a value\n", name);
    return NULL;
  }
  *i += 1;
  return argv[*i];
}

/* match_option returns the spelling in |names| (NULL-terminated) that
 * |arg| uses: alone, as "--name=V", or for a short option as "-nV"; NULL
 * if none. */
static const char *match_option(const char *arg, const char *const *names) {
  for (; *names != NULL; names++) {
    size_t n = strlen(*names);
    if (strncmp(arg, *names, n) == 0 &&
        (arg[n] == '\0' || arg[n] == '=' || (*names)[1] != '-')) {
      return *names;
    }
  }
  return NULL;
}

static const char *const opt_nranks[] = {"-n", "--nproc-per-node",
                                         "--nproc_per_node", NULL};
static const char *const opt_port[] = {"-p", "--port", "--master-port",
                                       "--master_port", NULL};
static const char *const opt_grace[] = {"--grace-ms", NULL};
static const char *const opt_bind[] = {"--bind", NULL};

int main(int argc, char **argv) {
  dlcp_launch_opts opts;
  dlcp_launch_result res;
  dlcp_errbuf eb;
  unsigned long v;
  int have_n = 0;
  int i;
  const char *val;
  const char *name;
  struct sigaction ign;

  memset(&opts, 0, sizeof(opts));
  opts.master_addr = "127.0.0.1";
  opts.grace_ms = DEFAULT_GRACE_MS;
  opts.bind_core = 1;
  opts.out_fd = STDOUT_FILENO;
  opts.err_fd = STDERR_FILENO;

  for (i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) {
      i++;
      break;
    }
    if (arg[0] != '-' || arg[1] == '\0') {
      break; /* the command starts here */
    }
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      usage(stdout);
      return 0;
    }
    if ((name = match_option(arg, opt_nranks)) != NULL) {
      val = option_value(argc, argv, &i, name);
      if (val == NULL ||
          parse_uint(name, val, 1, DLCP_LAUNCH_MAX_RANKS, &v) != 0) {
        return 2;
      }
      opts.nranks = (uint32_t)v;
      have_n = 1;
    } else if ((name = match_option(arg, opt_port)) != NULL) {
      val = option_value(argc, argv, &i, name);
      if (val == NULL || parse_uint(name, val, 1, 65535, &v) != 0) {
        return 2;
      }
      opts.master_port = (uint16_t)v;
    } else if ((name = match_option(arg, opt_bind)) != NULL) {
      val = option_value(argc, argv, &i, name);
      if (val == NULL) {
        return 2;
      }
      if (strcmp(val, "core") == 0 || strcmp(val, "none") == 0) {
        opts.bind_core = val[0] == 'c';
      } else {
        fprintf(stderr,
                "dlcp-run: invalid value '%s' for %s: expected core or "
                "none\n",
                val, name);
        return 2;
      }
    } else if ((name = match_option(arg, opt_grace)) != NULL) {
      val = option_value(argc, argv, &i, name);
      if (val == NULL || parse_uint(name, val, 0, MAX_GRACE_MS, &v) != 0) {
        return 2;
      }
      opts.grace_ms = (uint32_t)v;
    } else {
      fprintf(stderr, "dlcp-run: unknown option '%s' (see dlcp-run --help)\n",
              arg);
      return 2;
    }
  }
  if (!have_n) {
    fprintf(stderr, "dlcp-run: missing -n N, the number of ranks to start "
                    "(see dlcp-run --help)\n");
    return 2;
  }
  if (i >= argc) {
    fprintf(stderr, "dlcp-run: missing the command to run after the "
                    "options (see dlcp-run --help)\n");
    return 2;
  }
  opts.argv = argv + i;

  /* A closed stdout must not kill the launcher (and with it the ranks'
   * supervision); the write fails with EPIPE instead and output is
   * discarded. */
  memset(&ign, 0, sizeof(ign));
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, NULL);

  dlcp_errbuf_clear(&eb);
  if (dlcp_launch_run(&opts, &res, &eb) != 0) {
    fprintf(stderr, "dlcp-run: %s\n", eb.msg);
    return 127;
  }
  if (res.signal != 0) {
    fprintf(stderr, "dlcp-run: stopped by SIG%s\n", sigabbrev_np(res.signal));
  } else if (res.failed_rank >= 0) {
    char how[96];
    char why[96] = "";
    if (res.culprit >= 0 && res.culprit != res.failed_rank) {
      snprintf(why, sizeof(why), "; every waiting rank was waiting on rank "
               "%" PRId64, res.culprit);
    }
    fprintf(stderr, "dlcp-run: failed: rank %" PRId64 " %s (exit code %d)%s\n",
            res.failed_rank,
            dlcp_proc_status_format(how, sizeof(how), res.failed_status),
            res.exit_code, why);
  }
  return res.exit_code;
}
