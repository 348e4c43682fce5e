/*
 * A completion queue is a mutex-protected FIFO with a condition variable
 * for dlcp_wait_cq.  Missing-range arrays travel with their completion;
 * the ones handed to the application stay alive until its next call on the
 * queue, which is the lifetime dlcp.h promises.
 */
#include "rt/cq.h"

#include "rt/clock.h"
#include "rt/comm_drive.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct cq_entry {
  struct cq_entry *next;
  dlcp_completion c;
  dlcp_range *missing;
} cq_entry;

struct dlcp_cq {
  dlcp_comm *comm; /* whose loop a waiter may drive; NULL: none */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  cq_entry *head, *tail;
  /* arrays handed out by the last poll/wait, freed by the next one */
  dlcp_range **lent;
  size_t nlent, caplent;
};

int dlcp_cq_create(dlcp_comm *comm, dlcp_cq **pcq) {
  if (!pcq) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  dlcp_cq *cq = calloc(1, sizeof(*cq));
  if (!cq) {
    return DLCP_ERR_NOMEM;
  }
  cq->comm = comm;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&cq->mu, NULL);
  pthread_cond_init(&cq->cv, &ca);
  pthread_condattr_destroy(&ca);
  *pcq = cq;
  return 0;
}

static void release_lent(dlcp_cq *cq) {
  for (size_t i = 0; i < cq->nlent; i++) {
    free(cq->lent[i]);
  }
  cq->nlent = 0;
}

void dlcp_cq_destroy(dlcp_cq *cq) {
  if (!cq) {
    return;
  }
  cq_entry *e = cq->head, *next;
  for (; e; e = next) {
    next = e->next;
    free(e->missing);
    free(e);
  }
  release_lent(cq);
  free(cq->lent);
  pthread_mutex_destroy(&cq->mu);
  pthread_cond_destroy(&cq->cv);
  free(cq);
}

int dlcp_cq_push(dlcp_cq *cq, const dlcp_completion *c, dlcp_range *missing) {
  cq_entry *e = malloc(sizeof(*e));
  if (!e) {
    free(missing);
    return DLCP_ERR_NOMEM;
  }
  e->next = NULL;
  e->c = *c;
  e->missing = missing;
  if (!missing) {
    e->c.nmissing = 0;
  }
  pthread_mutex_lock(&cq->mu);
  if (cq->tail) {
    cq->tail->next = e;
  } else {
    cq->head = e;
  }
  cq->tail = e;
  pthread_cond_broadcast(&cq->cv);
  pthread_mutex_unlock(&cq->mu);
  return 0;
}

/* Pops up to |max| entries; called with the lock held. */
static int take(dlcp_cq *cq, dlcp_completion *out, int max) {
  int n = 0;
  while (n < max && cq->head) {
    cq_entry *e = cq->head;
    cq->head = e->next;
    if (!cq->head) {
      cq->tail = NULL;
    }
    out[n] = e->c;
    out[n].missing = e->missing;
    if (e->missing) {
      if (cq->nlent == cq->caplent) {
        size_t cap = cq->caplent ? cq->caplent * 2 : 8;
        dlcp_range **p = realloc(cq->lent, cap * sizeof(*p));
        if (!p) {
          /* Keep the completion; lose only the range list. */
          free(e->missing);
          out[n].missing = NULL;
          out[n].nmissing = 0;
          free(e);
          n++;
          continue;
        }
        cq->lent = p;
        cq->caplent = cap;
      }
      cq->lent[cq->nlent++] = e->missing;
    }
    free(e);
    n++;
  }
  return n;
}

int dlcp_poll_cq(dlcp_cq *cq, dlcp_completion *out, int max) {
  if (!cq || !out || max < 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  pthread_mutex_lock(&cq->mu);
  release_lent(cq);
  int n = take(cq, out, max);
  pthread_mutex_unlock(&cq->mu);
  return n;
}

/* With the communicator's mu held (the loop's drive condition), which
 * comes before the queue's as when a completion is pushed. */
static bool cq_ready(void *arg) {
  dlcp_cq *cq = arg;
  pthread_mutex_lock(&cq->mu);
  bool ready = cq->head != NULL;
  pthread_mutex_unlock(&cq->mu);
  return ready;
}

int dlcp_wait_cq(dlcp_cq *cq, dlcp_completion *out, int timeout_ms) {
  if (!cq || !out) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  dlcp_tstamp deadline = timeout_ms < 0
                             ? DLCP_TSTAMP_NEVER
                             : dlcp_rt_deadline_after((uint64_t)timeout_ms);
  pthread_mutex_lock(&cq->mu);
  release_lent(cq);
  if (cq->head) {
    int n = take(cq, out, 1);
    pthread_mutex_unlock(&cq->mu);
    return n;
  }
  pthread_mutex_unlock(&cq->mu);
  /* Drive the communicator's loop from this thread while waiting, if no
   * other thread does: the completion is then produced right here. */
  if (cq->comm && dlcp_rt_comm_drive_until(cq->comm, cq_ready, cq, deadline)) {
    pthread_mutex_lock(&cq->mu);
    int n = cq->head ? take(cq, out, 1) : DLCP_ERR_TIMEOUT;
    pthread_mutex_unlock(&cq->mu);
    return n;
  }
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  if (timeout_ms >= 0) {
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
  }
  pthread_mutex_lock(&cq->mu);
  while (!cq->head) {
    int rv = timeout_ms >= 0
                 ? pthread_cond_timedwait(&cq->cv, &cq->mu, &until)
                 : pthread_cond_wait(&cq->cv, &cq->mu);
    if (rv == ETIMEDOUT && !cq->head) {
      pthread_mutex_unlock(&cq->mu);
      return DLCP_ERR_TIMEOUT;
    }
  }
  int n = take(cq, out, 1);
  pthread_mutex_unlock(&cq->mu);
  return n;
}
