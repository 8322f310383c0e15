/*
 * The settlement and job protocol of freehours, as a Promela model for Spin.
 *
 * One quota (one NMI's day) with its versions, the day's meter data, the ledger, the quota
 * cache, the day's settle job and its workers, the rescuer, API requests, revisions arriving
 * at any moment, and a crash or failure of any process at any step within a fault budget.
 * docs/protocol.md maps every step to the function of freehours that performs it.
 *
 * Bounds (macros, -D): NAPI API requests, NWORKERS job workers, NREV revisions, FAULTS
 * crashes/failures/slow holders, CFAULTS lost cache writes, MAXATT the quota's attempts,
 * JOBMAX the job's attempts. POISON: every settlement attempt fails (a quota that never
 * settles). Mutants (MUTANT_*) each remove one guard of freehours or put back one bug of the
 * incident; verify/check.py runs them and expects a counterexample from each.
 *
 * Time is abstract: a lock, a job's lease or a cache entry expires at any moment the clock
 * process chooses (a live holder's lock or lease only within the fault budget: a slow holder);
 * the data deadline passes once. Transactions are atomic steps holding the row lock and the
 * day lock as freehours holds them (PostgreSQL, READ COMMITTED: each statement sees what is
 * committed).
 */

#ifndef NAPI
#define NAPI 1
#endif
#ifndef NWORKERS
#define NWORKERS 2
#endif
#ifndef NREV
#define NREV 1
#endif
#ifndef FAULTS
#define FAULTS 1
#endif
#ifndef CFAULTS
#define CFAULTS 1
#endif
#ifndef MAXATT
#define MAXATT 2
#endif
#ifndef JOBMAX
#define JOBMAX 2
#endif
#ifndef POSTPONES
#define POSTPONES 1
#endif
#ifndef INITDATA
#define INITDATA 1
#endif

#define MAXV (NREV + 1)

/* Quota statuses (freehours.domain.settlement.QuotaStatus); NONE: no row yet. */
#define NONE      0
#define PENDING   1
#define LOCKED    2
#define COMPLETED 3
#define ABORTED   4
#define TERMINAL(s) ((s) == COMPLETED || (s) == ABORTED)

/* The state machine's steps, named by the function of freehours/domain/settlement.py. */
#define EV_NEW_QUOTA 0
#define EV_CLAIM     1
#define EV_COMPLETE  2
#define EV_POSTPONE  3
#define EV_ABORT     4
#define EV_RELEASE   5

/* BEGIN TRANSITIONS: the allowed (from, step, to); tests/protocol/test_transitions.py derives
 * the same table from freehours/domain/settlement.py and fails while they differ. */
#define ALLOWED(f, e, t) ( \
  (f == NONE && e == EV_NEW_QUOTA && t == PENDING) || \
  (f == PENDING && e == EV_CLAIM && t == LOCKED) || \
  (f == LOCKED && e == EV_CLAIM && t == LOCKED) || \
  (f == LOCKED && e == EV_CLAIM && t == ABORTED) || \
  (f == LOCKED && e == EV_COMPLETE && t == COMPLETED) || \
  (f == LOCKED && e == EV_POSTPONE && t == PENDING) || \
  (f == LOCKED && e == EV_ABORT && t == ABORTED) || \
  (f == LOCKED && e == EV_RELEASE && t == PENDING) || \
  (f == LOCKED && e == EV_RELEASE && t == ABORTED) || \
  false)
/* END TRANSITIONS */

/* What a settle call ended with (freehours.settlement.Outcome), and the model's own. */
#define O_NONE    0
#define O_SETTLED 1
#define O_REPLAYED 2
#define O_LOCKED  3
#define O_NOT_DUE 4
#define O_RETRY   5
#define O_ABORTED 6
#define O_ERROR   7   /* settle raised: the job's attempt failed */
#define O_CRASH   8   /* the process died */
#define O_HELD    9   /* internal: this call holds the lock */

/* The settle job's states (freehours.jobs.job.JobState). */
#define J_NONE      0
#define J_AVAILABLE 1
#define J_RUNNING   2
#define J_RETRYABLE 3
#define J_COMPLETED 4
#define J_DISCARDED 5

/* --- the database (committed state) --- */
byte st[MAXV + 1];        /* status of each version */
byte fence[MAXV + 1];
byte att[MAXV + 1];       /* attempts */
byte rev[MAXV + 1];       /* revision: bumped by every write, orders cache entries */
byte freekwh[MAXV + 1];   /* free energy a COMPLETED version booked up to */
byte newest;              /* newest version, 0: none */
bool live;                /* the newest version's lock has not expired */
bool holder_dead;         /* its holder crashed */
byte data = INITDATA;     /* the day's meter data: the free energy it gives; 0: incomplete */
bool deadline;            /* the data deadline has passed: settle with what there is */
byte postpones;           /* polls of a day waiting for its data; the deadline after POSTPONES */
byte booked[MAXV + 1];    /* ledger entries per version */
byte claims[MAXV + 1];    /* claims of each version: bounded, or the retry is endless */
short ledger;             /* the ledger's sum for the day */
bool rowlock;             /* the quota row, held FOR UPDATE by one transaction */
byte day_sh;              /* the day lock, shared (ingest) */
bool day_ex;              /* the day lock, exclusive (completion) */

/* --- the day's settle job (one unfinished job per key) --- */
byte job_st = J_AVAILABLE;
byte job_ver = 1;         /* payload version */
byte job_att;
byte job_owner;           /* the job's fence: the worker running it (its runs) */
bool job_rerun;
bool lease_live;
bool lease_dead;

/* --- the quota cache: one entry, compare-and-set on (version, revision) --- */
byte c_v;                 /* 0: no entry */
byte c_rev;
byte c_st;
byte puts;                /* cache writes on their way */

/* --- faults and monitors --- */
byte faults = FAULTS;
byte cfaults = CFAULTS;
byte served_max;          /* the newest version any answer was served for */
byte cache_served_max;    /* the newest version the cache answered for */
byte apis_done;
bool ingest_done;
byte busy;                /* workers inside a job */

#define CHECK(c, msg) if :: (c) -> skip :: else -> printf(msg); assert(c) fi

inline move(v, ev, to) {
  CHECK(ALLOWED(st[v], ev, to), "PROPERTY VIOLATED: a transition the state machine does not allow\n");
  st[v] = to;
  rev[v]++
}

inline set_att(v, n) {
  CHECK(n >= att[v], "PROPERTY VIOLATED: attempts decreased while the version lives\n");
  att[v] = n
}

inline book(v, amount) {
  CHECK(booked[v] == 0, "PROPERTY VIOLATED: two ledger entries for one version\n");
  booked[v]++;
  ledger = ledger + amount
}

/* An answer served: ``fin`` says stop (a terminal answer). Recorded at its linearisation
 * point, the read or commit it was made from. */
inline serve(v, s, fin, fromcache) {
  CHECK(!fin || (TERMINAL(s) && st[v] == s), "PROPERTY VIOLATED: a terminal answer for a version that is not terminal\n");
#ifdef STRICT_SERVED
  CHECK(v >= served_max, "PROPERTY VIOLATED (strict): an older version answered after a newer one\n");
#else
  if
  :: fromcache ->
     CHECK(v >= cache_served_max, "PROPERTY VIOLATED: the cache answered an older version after a newer one\n");
     cache_served_max = v
  :: else ->
     CHECK(v >= served_max, "PROPERTY VIOLATED: an older version answered after a newer one\n")
  fi;
#endif
  if :: v > served_max -> served_max = v :: else -> skip fi
}

/* The answer to write to the cache after the commit that made it. */
inline answered(v) {
  a_v = v; a_rev = rev[v]; a_st = st[v]; puts++
}

/* Settlements._cache_put: after the commit; lost within CFAULTS, or late (a step of its own). */
inline cache_put() {
  if
  :: atomic { cfaults > 0 -> cfaults-- }; puts--
  :: true ->
     atomic {
#ifdef MUTANT_CACHE_NO_CAS
       CHECK(c_v == 0 || a_v >= c_v, "PROPERTY VIOLATED: the cache went back to an older version (its answers would regress)\n");
       c_v = a_v; c_rev = a_rev; c_st = a_st;
#else
       if
       :: a_v > c_v || (a_v == c_v && a_rev > c_rev) ->
          CHECK(c_v == 0 || a_v >= c_v, "PROPERTY VIOLATED: the cache went back to an older version (its answers would regress)\n");
          c_v = a_v; c_rev = a_rev; c_st = a_st
       :: else -> skip
       fi;
#endif
       puts--
     }
  fi
}

/* Settlements._after_stale: the current state as the answer. */
inline after_stale() {
  if
  :: TERMINAL(st[newest]) ->
     serve(newest, st[newest], true, false);
     outc = (st[newest] == ABORTED -> O_ABORTED : O_REPLAYED)
  :: st[newest] == LOCKED && live -> serve(newest, LOCKED, false, false); outc = O_LOCKED
  :: else -> serve(newest, st[newest], false, false); outc = O_RETRY
  fi;
  answered(newest)
}

inline take(v) {
  claims[v]++;
  CHECK(claims[v] <= MAXATT + POSTPONES, "PROPERTY VIOLATED: endless retry (more claims than the attempts and polls allow)\n");
  move(v, EV_CLAIM, LOCKED);
  fence[v]++;
  live = true;
  holder_dead = false;
  hv = v; hf = fence[v]; outc = O_HELD
}

inline crash_holder() {
  if :: hv == newest && fence[hv] == hf && st[hv] == LOCKED -> holder_dead = true :: else -> skip fi;
  outc = O_CRASH
}

/* Settlements.settle(nmi, day, version=minver); ``trust`` whether the cache may answer. */
inline settle(minver, trust) {
  outc = O_NONE; failed = false;
  /* Settlements.settle: a terminal cached state of at least ``minver`` is the answer */
  atomic {
    if
    :: trust && c_v > 0 && c_v >= minver && TERMINAL(c_st) ->
       serve(c_v, c_st, true, true);
       outc = (c_st == ABORTED -> O_ABORTED : O_REPLAYED)
#ifdef MUTANT_CACHE_NONTERMINAL
    :: trust && c_v > 0 && c_v >= minver && !TERMINAL(c_st) ->
       serve(c_v, c_st, true, true); outc = O_REPLAYED
#endif
    :: else -> skip
    fi
  }
  if
  :: outc != O_NONE -> goto settled
  :: else -> skip
  fi;
  /* A: Settlements._claim (one transaction holding the row) */
  atomic {
    !rowlock ->
    if
    :: atomic { faults > 0 -> faults-- }; outc = O_ERROR   /* the database failed: settle raises */
    :: true ->
       if
       :: newest == 0 ->
          newest = 1; move(1, EV_NEW_QUOTA, PENDING); take(1)   /* _claim: inserted LOCKED */
       :: newest > 0 && TERMINAL(st[newest]) ->
          serve(newest, st[newest], true, false);
          outc = (st[newest] == ABORTED -> O_ABORTED : O_REPLAYED); answered(newest)
       :: newest > 0 && st[newest] == LOCKED && live ->
#ifdef MUTANT_BUSY_AS_SETTLED
          serve(newest, LOCKED, true, false); outc = O_REPLAYED;
#else
          serve(newest, LOCKED, false, false); outc = O_LOCKED;
#endif
          answered(newest)
       :: newest > 0 && st[newest] == PENDING -> take(newest)
       :: newest > 0 && st[newest] == LOCKED && !live ->
          /* domain claim: the holder's lock expired, its attempt failed */
          set_att(newest, att[newest] + 1);
          if
          :: att[newest] >= MAXATT ->
             move(newest, EV_CLAIM, ABORTED);
             serve(newest, ABORTED, true, false); outc = O_ABORTED; answered(newest)
          :: else -> take(newest)
          fi
       fi
    fi
  }
  if
  :: outc != O_HELD -> goto settled
  :: else -> skip
  fi;
  /* FaultPoint.AFTER_CLAIM */
  if
  :: atomic { faults > 0 -> faults-- }; crash_holder(); goto settled
  :: atomic { faults > 0 -> faults-- }; failed = true
  :: true -> skip
  fi;
  if
  :: failed -> goto release
  :: else -> skip
  fi;
  /* B: Settlements._complete_ready: the day lock, then the row */
#ifdef MUTANT_NO_DAYLOCK
  atomic { !rowlock -> rowlock = true; rd = data }
#else
  atomic { day_sh == 0 && !day_ex && !rowlock -> day_ex = true; rowlock = true; rd = data }
#endif
  atomic {
#ifndef MUTANT_NO_FENCE
    if
    :: hv != newest || st[hv] != LOCKED || fence[hv] != hf ->
       after_stale(); rowlock = false; day_ex = false; goto settled
    :: else -> skip
    fi;
#endif
    if
    :: rd == 0 && !deadline ->
       /* the window's data is incomplete before the deadline: postpone, no attempt */
       move(hv, EV_POSTPONE, PENDING);
       postpones++;
       if :: postpones >= POSTPONES -> deadline = true :: else -> skip fi;   /* its polls end at the deadline */
       serve(hv, PENDING, false, false); outc = O_NOT_DUE; answered(hv);
       rowlock = false; day_ex = false; goto settled
    :: else -> skip
    fi;
    /* FaultPoint.BEFORE_COMPLETE */
    if
    :: atomic { faults > 0 -> faults-- }; rowlock = false; day_ex = false; crash_holder(); goto settled
    :: atomic { faults > 0 -> faults-- }; failed = true
#ifdef POISON
    :: true -> failed = true
#else
    :: true -> skip
#endif
    fi;
    if
    :: failed -> rowlock = false; day_ex = false
    :: else -> skip
    fi
  }
  if
  :: failed -> goto release
  :: else -> skip
  fi;
#ifdef MUTANT_NO_DAYLOCK
  rd = data;   /* the day's rows read by a statement of their own */
#endif
  atomic {
    /* domain complete, with its ledger entry, in one transaction */
    book(hv, rd - ledger);
    freekwh[hv] = rd;
    move(hv, EV_COMPLETE, COMPLETED);
    serve(hv, COMPLETED, true, false); outc = O_SETTLED; answered(hv);
    rowlock = false; day_ex = false
  }
  goto settled;
release:
  /* C: Settlements._release */
  atomic {
    !rowlock ->
    if
    :: hv != newest || fence[hv] != hf || st[hv] != LOCKED -> after_stale()
    :: else ->
#ifdef MUTANT_BREAKER_SUCCESS
       skip;   /* the failure reported as a success: nothing counted */
#else
       set_att(hv, att[hv] + 1);
#endif
       if
       :: att[hv] >= MAXATT ->
          move(hv, EV_RELEASE, ABORTED);
          serve(hv, ABORTED, true, false); outc = O_ABORTED
       :: else ->
          move(hv, EV_RELEASE, PENDING);
          serve(hv, PENDING, false, false); outc = O_RETRY
       fi;
       answered(hv)
    fi
  }
settled:
  if
  :: outc == O_CRASH || outc == O_ERROR || a_v == 0 -> skip
  :: else ->
     if
     :: atomic { faults > 0 -> faults-- }; puts--; outc = O_CRASH   /* died before the cache write */
     :: true -> cache_put()
     fi
  fi
}

/* POST /v1/free-energy/settlements: one request. */
proctype api() {
  byte outc, hv, hf, rd, a_v, a_rev, a_st;
  bool failed;
  settle(1, true);
  atomic { apis_done++; outc = 0; hv = 0; hf = 0; rd = 0; a_v = 0; a_rev = 0; a_st = 0; failed = false }
}

/* freehours.jobs.worker.Worker running freehours.jobs.settle.SettleTask. */
proctype worker() {
  byte outc, hv, hf, rd, a_v, a_rev, a_st, myver;
  bool failed;
end_idle:
  do
  :: atomic {
       (job_st == J_AVAILABLE || job_st == J_RETRYABLE) ->
       job_st = J_RUNNING; job_owner = _pid; myver = job_ver;
       lease_live = true; lease_dead = false; busy++
     }
#ifdef MUTANT_ATTEMPTS_PER_JOB
     /* the incident: the retry count is the job's, so a new job starts from zero */
     atomic {
       if
       :: newest > 0 && !TERMINAL(st[newest]) -> set_att(newest, 0)
       :: else -> skip
       fi
     }
#endif
     a_v = 0;
#ifdef MUTANT_JOB_TRUSTS_CACHE
     settle(myver, true);
#else
     settle(myver, false);
#endif
     atomic {
       if
       :: outc == O_CRASH ->
          /* the worker died: its job stays RUNNING until its lease runs out */
          if :: job_owner == _pid -> lease_dead = true :: else -> skip fi
       :: job_st != J_RUNNING || job_owner != _pid -> skip   /* stale: fenced by runs */
       :: else ->
          if
          :: outc == O_SETTLED || outc == O_REPLAYED || outc == O_ABORTED ->
             job_st = (job_rerun -> J_AVAILABLE : J_COMPLETED); job_rerun = false
          :: outc == O_LOCKED || outc == O_NOT_DUE || outc == O_RETRY ->
             job_st = J_AVAILABLE; job_rerun = false   /* snooze: no attempt */
          :: outc == O_ERROR ->
             job_att++; job_rerun = false;
             job_st = (job_att >= JOBMAX -> J_DISCARDED : J_RETRYABLE)
          fi;
          lease_live = false
       fi;
       busy--;
       /* nothing of this run is kept (keeps the state space to what matters) */
       outc = 0; hv = 0; hf = 0; rd = 0; a_v = 0; a_rev = 0; a_st = 0; myver = 0; failed = false
     }
  od
}

/* freehours.jobs.rescuer.rescue */
proctype rescuer() {
end_idle:
  do
  :: atomic {
       job_st == J_RUNNING && !lease_live ->
       job_att++; job_rerun = false;
       job_st = (job_att >= JOBMAX -> J_DISCARDED : J_RETRYABLE)
     }
  od
}

/* freehours.ingest.Ingestion: revisions of the day's meter data. */
proctype ingest() {
  byte r, nd, newv, a_v, a_rev, a_st;
  bool reopened, settled;
  for (r : 1 .. NREV) {
    a_v = 0; reopened = false;
    nd = data + 1;                      /* MeterData.ingest_days: uncommitted */
    if
    :: atomic { faults > 0 -> faults-- }; goto done   /* crashed: rolled back, the revision never arrives */
    :: true -> skip
    fi;
#ifndef MUTANT_NO_DAYLOCK
    atomic { !day_ex -> day_sh++ }      /* Settlements.reopen: hold_shared(day_lock) */
#endif
    /* Quotas.settled_among: is the newest version COMPLETED? (nothing locked) */
    settled = (newest > 0 && st[newest] == COMPLETED);
    atomic {
      /* reopen_if_settled: the row locked, the version opened when the free energy differs;
       * then the commit: the data, the next version, its job */
      (!settled || !rowlock) ->
      if
      :: settled && st[newest] == COMPLETED && freekwh[newest] != nd ->
         newv = newest + 1;
         data = nd;
         newest = newv;
         move(newv, EV_NEW_QUOTA, PENDING);
         live = false;
         reopened = true
      :: else -> data = nd
      fi;
      /* schedule_settlements: enqueue_many (unique per key) */
      if
      :: job_st == J_NONE || job_st == J_COMPLETED || job_st == J_DISCARDED ->
         job_st = J_AVAILABLE; job_att = 0; job_rerun = false;
         job_ver = (reopened -> newv : 1)
      :: job_st == J_RUNNING -> job_rerun = true
      :: else -> skip   /* waiting: brought forward, payload kept */
      fi;
#ifndef MUTANT_NO_DAYLOCK
      day_sh--;
#endif
      if :: reopened -> answered(newv) :: else -> skip fi
    }
    /* Ingestion.committed: publish the reopened quota */
    if
    :: a_v > 0 -> cache_put()
    :: else -> skip
    fi;
    atomic { nd = 0; newv = 0; a_v = 0; a_rev = 0; a_st = 0; reopened = false; settled = false }
  }
done:
  ingest_done = true
}

/* The clock: locks, leases and cache entries expire; the data deadline passes. */
proctype clock() {
end_idle:
  do
  :: atomic { newest > 0 && st[newest] == LOCKED && live && holder_dead -> live = false }
  :: atomic { newest > 0 && st[newest] == LOCKED && live && !holder_dead && faults > 0 ->
              faults--; live = false }   /* a slow holder outlived its lock */
  :: atomic { job_st == J_RUNNING && lease_live && lease_dead -> lease_live = false }
  :: atomic { job_st == J_RUNNING && lease_live && !lease_dead && faults > 0 ->
              faults--; lease_live = false }   /* a slow worker outlived its lease */
  :: atomic { !deadline -> deadline = true }
  od
}

/* The cache entry's time to live (a process of its own, so that weak fairness does not let
 * the expiry of cache entries, which recur, stand in for the clock's other steps). A cache
 * write arrives within the time to live of the entry it replaces (milliseconds against
 * minutes): no entry expires while a write is on its way. */
proctype cache_ttl() {
end_idle:
  do
  :: atomic { c_v > 0 && puts == 0 -> c_v = 0; c_rev = 0; c_st = NONE }
  od
}

#define idle (apis_done == NAPI && ingest_done && busy == 0)
#define quiet (idle && job_st == J_COMPLETED)
#define settled_now (newest > 0 && TERMINAL(st[newest]))

/* Once quiet: the newest version is terminal, and a COMPLETED one booked the newest data. A
 * DISCARDED job (out of attempts: alerted, never requeued) leaves its quota as it is; the
 * ledger still matches what is COMPLETED. */
active proctype monitor() {
  atomic {
    (quiet || (idle && job_st == J_DISCARDED)) ->
    if
    :: job_st == J_COMPLETED ->
       CHECK(settled_now, "PROPERTY VIOLATED: quiet, and the newest version is not terminal\n");
       if
       :: st[newest] == COMPLETED ->
          CHECK(ledger == freekwh[newest] && freekwh[newest] == data, "PROPERTY VIOLATED: quiet, and the ledger's sum is not the newest data's free energy\n")
       :: else -> skip
       fi
    :: else ->
       CHECK(newest == 0 || st[newest] != COMPLETED || ledger == freekwh[newest], "PROPERTY VIOLATED: the ledger's sum is not the newest version's free energy\n")
    fi
  }
}

init {
  byte i;
  atomic {
    for (i : 1 .. NAPI) { run api() }
    for (i : 1 .. NWORKERS) { run worker() }
    run rescuer();
    run ingest();
    run clock();
    run cache_ttl()
  }
}

#ifdef LIVENESS
/* Under weak fairness and the bounded faults: every quota ends COMPLETED or ABORTED. */
ltl terminates { <> [] settled_now }
#endif
