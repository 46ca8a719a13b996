/*
 * Smoke test of an *installed* loom, written the way an application would use it: plain C,
 * only <loom/loom.h>, linked against the installed libloom (found through find_package(loom) or
 * pkg-config). It runs a 4-rank job inside this process:
 *   1. loomCommInitAll() creates ranks 0..3; each reports the right count and rank.
 *   2. Every rank splits by parity (color = rank % 2) with key = -rank, so each new pair is in
 *      reverse order. Split is collective, so each rank calls it from its own thread.
 *   3. Every rank finalizes (collective, so again one thread per rank) and destroys both
 *      communicators.
 * Prints "consumer OK" and exits 0, or says what failed and exits 1.
 */
#define _POSIX_C_SOURCE 200809L /* setenv() under -std=c11 */

#include <loom/loom.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NRANKS 4
#define NCOLORS 2

/* Reports a failed loom call with the library's message; returns 0 so callers can chain. */
static int failed(const char* what, int rank, loomResult_t res, loomComm_t comm) {
  fprintf(stderr, "consumer: rank %d: %s failed: %s (%d): %s\n", rank, what,
          loomGetErrorString(res), (int)res, loomGetLastError(comm));
  return 0;
}

typedef struct {
  int rank;
  loomComm_t comm; /* owned by the thread from the split on; NULL once destroyed */
  int ok;
} RankState;

/* Rank r's place in its split communicator: ranks of the same color ordered by key = -rank,
 * so it is the number of same-colored ranks above r. */
static int expectedSplitRank(int r) {
  int n = 0;
  for (int q = r + 1; q < NRANKS; ++q) n += (q % NCOLORS == r % NCOLORS);
  return n;
}

/* Split, check, finalize and destroy for one rank. Returns 1 on success; on failure returns 0
 * and leaves in st->comm and *sub whatever is still alive, for the caller to abort. */
static int splitAndFinalize(RankState* st, loomComm_t* sub) {
  const int r = st->rank;
  int count = -1, subRank = -1;
  loomResult_t res;

  if ((res = loomCommSplit(st->comm, r % NCOLORS, -r, sub, NULL)) != loomSuccess)
    return failed("loomCommSplit", r, res, st->comm);
  if (*sub == NULL) {
    fprintf(stderr, "consumer: rank %d: loomCommSplit returned a NULL communicator\n", r);
    return 0;
  }
  if ((res = loomCommCount(*sub, &count)) != loomSuccess)
    return failed("loomCommCount(split)", r, res, *sub);
  if ((res = loomCommUserRank(*sub, &subRank)) != loomSuccess)
    return failed("loomCommUserRank(split)", r, res, *sub);
  if (count != NRANKS / NCOLORS || subRank != expectedSplitRank(r)) {
    fprintf(stderr, "consumer: rank %d: split gave rank %d of %d, expected rank %d of %d\n", r,
            subRank, count, expectedSplitRank(r), NRANKS / NCOLORS);
    return 0;
  }

  /* Finalize both communicators in the same order on every rank, then free them. */
  if ((res = loomCommFinalize(*sub)) != loomSuccess)
    return failed("loomCommFinalize(split)", r, res, *sub);
  if ((res = loomCommFinalize(st->comm)) != loomSuccess)
    return failed("loomCommFinalize(parent)", r, res, st->comm);
  res = loomCommDestroy(*sub);
  *sub = NULL; /* a failed destroy still leaves nothing we may touch */
  if (res != loomSuccess) return failed("loomCommDestroy(split)", r, res, NULL);
  res = loomCommDestroy(st->comm);
  st->comm = NULL;
  if (res != loomSuccess) return failed("loomCommDestroy(parent)", r, res, NULL);
  return 1;
}

static void* runRank(void* arg) {
  RankState* st = (RankState*)arg;
  loomComm_t sub = NULL;
  st->ok = splitAndFinalize(st, &sub);
  if (!st->ok) {
    /* Abort is local and wakes peers still waiting on this rank, so they fail too instead of
     * waiting for their deadline. */
    if (sub != NULL) loomCommAbort(sub);
    if (st->comm != NULL) loomCommAbort(st->comm);
    st->comm = NULL;
  }
  return NULL;
}

int main(void) {
  loomComm_t comms[NRANKS] = {0};
  RankState states[NRANKS];
  pthread_t threads[NRANKS];
  int version = 0;
  loomResult_t res;

  /* A broken library should fail this test in a minute, not hang for the 300 s default. */
  setenv("LOOM_TIMEOUT", "60", 0);

  /* The initializer must compile as C: applications start every config from it. */
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  if (config.size != sizeof(loomConfig_t) || config.magic != LOOM_CONFIG_MAGIC) {
    fprintf(stderr, "consumer: LOOM_CONFIG_INITIALIZER is wrong\n");
    return 1;
  }

  if ((res = loomGetVersion(&version)) != loomSuccess) {
    failed("loomGetVersion", -1, res, NULL);
    return 1;
  }
  if (version != LOOM_VERSION_CODE) {
    fprintf(stderr, "consumer: library version %d differs from header version %d\n", version,
            LOOM_VERSION_CODE);
    return 1;
  }

  if ((res = loomCommInitAll(comms, NRANKS, NULL)) != loomSuccess) {
    failed("loomCommInitAll", -1, res, NULL);
    return 1;
  }

  int ok = 1;
  for (int r = 0; r < NRANKS; ++r) {
    int count = -1, rank = -1, device = 0;
    if ((res = loomCommCount(comms[r], &count)) != loomSuccess) {
      ok = failed("loomCommCount", r, res, comms[r]);
    } else if ((res = loomCommUserRank(comms[r], &rank)) != loomSuccess) {
      ok = failed("loomCommUserRank", r, res, comms[r]);
    } else if ((res = loomCommDevice(comms[r], &device)) != loomSuccess) {
      ok = failed("loomCommDevice", r, res, comms[r]);
    } else if (count != NRANKS || rank != r || device != LOOM_DEVICE_CPU) {
      fprintf(stderr, "consumer: comms[%d] is rank %d of %d on device %d, expected %d of %d on "
              "the CPU (%d)\n", r, rank, count, device, r, NRANKS, LOOM_DEVICE_CPU);
      ok = 0;
    }
  }
  if (!ok) {
    for (int r = 0; r < NRANKS; ++r) loomCommAbort(comms[r]);
    return 1;
  }

  /* Split and finalize are collective: every rank needs its own thread. */
  int started = 0;
  for (int r = 0; r < NRANKS; ++r) {
    states[r].rank = r;
    states[r].comm = comms[r];
    states[r].ok = 0;
  }
  for (; started < NRANKS; ++started) {
    if (pthread_create(&threads[started], NULL, runRank, &states[started]) != 0) {
      fprintf(stderr, "consumer: pthread_create failed for rank %d\n", started);
      ok = 0;
      /* Ranks already running would wait for this one; abort its communicator so they fail. */
      for (int r = started; r < NRANKS; ++r) {
        loomCommAbort(states[r].comm);
        states[r].comm = NULL;
      }
      break;
    }
  }
  for (int r = 0; r < started; ++r) {
    pthread_join(threads[r], NULL);
    ok = ok && states[r].ok;
  }
  if (!ok) {
    fprintf(stderr, "consumer: FAILED\n");
    return 1;
  }
  printf("consumer OK\n");
  return 0;
}
