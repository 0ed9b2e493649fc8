/*
 * claim.pml: the claim protocol (pkg/claim) and the level-triggered
 * middleware pass (pkg/claimmw) of ocf-claim, as a Promela model for SPIN.
 * docs/model.md says what is modelled, what is not, and maps each step to
 * the Go code, with the steps that are atomic here but not in the code.
 *
 * A step of the model is one API call, or a few calls and local decisions
 * folded into one (docs/model.md lists each fold): everything a pass decides
 * between two steps may be stale by the next one. Bounds (all overridable
 * with -D): NOBJ objects (2 or 3), NKEY = 2 keys, EDITS key-set edits, DELS
 * object deletions, EXTDEL external record deletions, LOST lost write
 * responses, WFAIL writes refused before they apply, INNERFAIL failed inner
 * passes, STALE stale cached reads, ORPHAN records of an already-gone holder
 * present at the start, RENEW renewal writes, RESTART operator restarts,
 * EXPIRY renewal stalls under time-based liveness (expiry.Liveness),
 * HANDOVER changes of the successor obj0 names for a planned handover.
 *
 * Mutation switches (-DMUT_...) put back one known bug each; model_test.go
 * and docs/model.md list them. None changes anything when undefined.
 *
 * Fidelity switch CACHED_HOLDINGS: record watch events are steps of their
 * own (the Informer delivers them, and only then wakes anyone), the record
 * cache is what they delivered, and the sweep and give-up list the object's
 * records from that cache, as middleware.go does (CachedHoldings, then
 * ReleaseRecords re-reads each record uncached before its fenced Delete).
 * Without it a record write wakes in the same step, and the sweep lists
 * uncached (cheaper: fewer interleavings). model_test.go turns it on in the
 * worlds where a late event or a missed record matters.
 */

#ifndef NOBJ
#define NOBJ 2
#endif
#define NKEY 2
#ifndef EDITS
#define EDITS 2
#endif
#ifndef DELS
#define DELS 1
#endif
#ifndef EXTDEL
#define EXTDEL 0
#endif
#ifndef LOST
#define LOST 1
#endif
#ifndef WFAIL
#define WFAIL 0
#endif
#ifndef INNERFAIL
#define INNERFAIL 0
#endif
#ifndef STALE
#define STALE 1
#endif
#ifndef RESTART
#define RESTART 0
#endif
#ifndef EXPIRY
#define EXPIRY 0
#endif
#ifndef HANDOVER
#define HANDOVER 0
#endif
/* FENCE: the fenced resource (an older grant's writes are refused after a
 * newer one) and the holders each record named (lh, below), which the code
 * always keeps and the model only where they decide: where a record leaves
 * its holder without that holder's told pass, by a deletion from outside
 * (EXTDEL) or a handover commit (HANDOVER). A takeover by expiry needs
 * neither: the holder it replaces was told to stop before (the timing
 * contract), and a pass of that holder that read its record before the
 * takeover read its hold ended too, so its renewal, conditional on that
 * read, fails. With EXTDEL the predecessor check before the Create is also a
 * step of its own (SPLIT_PRECHECK, below). */
#if EXTDEL > 0 || HANDOVER > 0
#define FENCE
#endif
#ifndef ORPHAN
#define ORPHAN 0
#endif
/* Initial key sets, as bit masks over k0 (1) and k1 (2). */
#ifndef INIT0
#define INIT0 1
#endif
#ifndef INIT1
#define INIT1 2
#endif
#ifndef INIT2
#define INIT2 3
#endif

#define MAXROUNDS 3   /* claim.maxRounds */
#define GHOST NOBJ    /* holder id of an object gone before the model starts */
#define bit(k) (1 << (k))

/* Outcome of one Acquire, as the pass sees it. */
#define GRANTED 0
#define PARKED  1
#define FAILED  2

/* What an object's last pass left behind: the work queue requeues a parked
 * object (periodic requeue) and a failed one (error backoff) on its own:
 * REQUEUED; an IDLE (granted) object runs again only when an event enqueues
 * it. */
#define IDLE     0
#define REQUEUED 1

/* The object's claim condition, on the API server: what a waiter's
 * predecessor check reads. CPARKED stands for every False reason that is
 * not Stopping (Parked, WaitingForHandover, ClaimError, Released) and for no
 * condition at all. */
#define CPARKED   0
#define CCLAIMED  1   /* True, Claimed */
#define CSTOPPING 2   /* False, Stopping: told to stop until a told pass succeeds */

/* ---- API server: claim records, compare-and-swap on UID and version ---- */
typedef Record {
	bool ex;      /* the record exists */
	byte holder;  /* object id; GHOST for the orphan */
	byte uid;     /* UID of this incarnation: the version it was created at */
#if HANDOVER > 0
	byte pend;    /* the successor a prepared handover names, + 1; 0 for none */
#endif
};
Record rec[NKEY];
/* ver[k]: resourceVersion of key k's last write (create, update or delete);
 * it only grows, also across delete and recreate. The record's version and
 * its fencing token are ver[k] as of the write that granted it. */
byte ver[NKEY];

/* ---- API server: the objects that claim keys ---- */
bool exists[NOBJ];
bool deleting[NOBJ];
bool fin[NOBJ];       /* carries the middleware's finalizer */
byte keys[NOBJ];      /* the keys it names, on the server */
byte ckeys[NOBJ];     /* the keys it names, in the informer cache */
byte cst[NOBJ];       /* its claim condition (CPARKED, CCLAIMED, CSTOPPING) */
/* ccur[o]: the condition was written for o's current spec (its
 * observedGeneration is the object's generation): set by a condition write
 * of a pass whose key set is still the object's, cleared by every spec
 * edit. The predecessor check reads it uncached. */
bool ccur[NOBJ];
#if STALE > 0
/* ccurc[o]: the same for the spec the cache shows, which is what a pass
 * judges its own condition by (claimedFor, holdingsOf, granted): cleared
 * when the cache sees an edit, not when the edit is made. */
bool ccurc[NOBJ];
#define setCur(o, v) ccur[o] = v; ccurc[o] = ccur[o]
#define cacheSeesSpec(o) ccurc[o] = false
#define curRead(o) ccurc[o]
#else
#define setCur(o, v) ccur[o] = v
#define cacheSeesSpec(o) skip
#define curRead(o) ccur[o]
#endif
#ifdef STALECOND
/* Switch STALECOND: a pass reads its own condition (Middleware.previous)
 * from the cache, which may not have seen its last status write yet; the
 * Informer catches it up. Without it the condition is read as it is. */
byte ccst[NOBJ];
#define condRead(o) ccst[o]
/* the cache delivers an object's events in order: one that has seen a spec
 * edit has seen the status writes before it */
#define condSeen(o) ccst[o] = cst[o]
/* judgedStale: the pass judged from a cached condition older than the one
 * on the server (its own last write, not seen yet): its condition write
 * conflicts, and setCondition's uncached re-read finds the condition it
 * judged from changed, so the write is refused (errStaleRead) */
#define judgedStale (was != cst[me])
#else
#define judgedStale false
#define condSeen(o) skip
#define condRead(o) cst[o]
#endif

/* ---- controller ---- */
bool q[NOBJ];         /* in the work queue */
byte mode[NOBJ];      /* IDLE or REQUEUED */
#ifdef MUT_TELL_IN_MEMORY
bool seen[NOBJ];      /* the bug's memory: passed since the operator started */
#endif

/* ---- fault and edit budgets ---- */
byte edits = EDITS;
byte dels = DELS;
byte extdels = EXTDEL;
byte lost = LOST;
byte wfails = WFAIL;
byte ifails = INNERFAIL;
byte stale = STALE;
byte restarts = RESTART;
#ifndef RENEW
#define RENEW 0
#endif
byte renews = RENEW;
/* The statements that only a switched-on feature (EXPIRY, HANDOVER) needs are
 * macros that expand to nothing when it is off, not to skip: a skip is a
 * step of its own, which would grow every other world's search. So each
 * carries its own leading separator, and a use reads `x = 1 freshRec(k);`. */
#if EXPIRY > 0
/* Time-based liveness (WithRenewal, pkg/expiry). Renewals succeed in the
 * background (they are not modelled as writes) until a stall: the World
 * makes renewals fail (stalled) and the hold of a key's holder ends (its
 * RenewDeadline passed: hend[k], the Keeper's hold is gone, the object is
 * woken and its inner context cancelled). Later passes of the holder renew
 * the record once, conditional on it, before they hold it again
 * (Middleware's resume of a hold); while renewals fail that is a claim error.
 * exp[k]: contenders judge the record expired (a lease duration passed
 * since they saw it granted or renewed). The World may let that time pass
 * only once the holder's passes that the hold's end asked for have run
 * (busy, q): the timing contract of docs/middleware.md, Time-based claims
 * (its told pass ends within Duration - RenewDeadline). Every grant,
 * renewal or deletion of the record starts the count again. */
byte stalls = EXPIRY;
bool stalled;         /* renewals fail */
bool hend[NKEY];      /* the hold of k's holder ended and was not renewed since */
bool exp[NKEY];       /* contenders judge k's record expired */
bool busy[NOBJ];      /* a pass of the object is under way */
#define freshRec(k) ; exp[k] = false; hend[k] = false
#define canExpire(k) (hend[k] && !exp[k] && rec[k].ex && rec[k].holder < NOBJ && !q[rec[k].holder] && !busy[rec[k].holder])
#define expire(k) exp[k] = true; \
	printf("world: a lease duration passes: contenders judge obj%d's record of k%d expired\n", rec[k].holder, k)
#define setBusy(o, v) ; busy[o] = v
#define readExp(k) ; rexp = exp[k]; rhend = hend[k]
#define clearExp ; rexp = false; rhend = false
#else
#define readExp(k)
#define clearExp
#define freshRec(k)
#define setBusy(o, v)
#endif
#if HANDOVER > 0
/* Planned handovers inside the middleware (handover.go, WithHandover):
 * hto[o] is the successor o's HandoverFunc names for every key it holds, + 1
 * (0 for none); the World changes obj0's, within the budget. wfh[o]: o's
 * condition says WaitingForHandover (a False reason: cst[o] is CPARKED),
 * which successorReady reads with the rest of o, uncached. */
byte hos = HANDOVER;
byte hto[NOBJ];
bool wfh[NOBJ];
#define sayWaits(v) ; wfh[me] = v
#define setWhy(v) ; whyw = v
#define readPend(k) ; rpd = rec[k].pend
#define clearPend ; rpd = 0
#define handedMask handed
#define waitsCommit hwait
#define resetHandover ; rpd = 0; whyw = false; succ = 0; handed = 0; hwait = false; lst = 0
/* The granted and parked passes list the object's records before they
 * acquire (holdingsOf), and give up only records from that listing: a
 * record a handover commit made the object's after the listing is not
 * given up by that pass (its acquire, after the listing, may have found the
 * key held by the former holder and parked). Only a commit writes a record
 * for another object, so elsewhere the model folds the listing into the end
 * of the pass. */
#define listAtStart ; lst = (mine(0) -> 1 : 0) | (mine(1) -> 2 : 0)
#define atStart(k) ((lst & bit(k)) != 0)
/* the HandoverFunc reads the object as the pass read it */
#define readSucc ; succ = hto[me]
#else
#define sayWaits(v)
#define setWhy(v)
#define readPend(k)
#define clearPend
#define handedMask 0
#define waitsCommit false
#define resetHandover
#define listAtStart
#define atStart(k) true
#define readSucc
#endif

/* ---- observers (ghost state for the properties) ---- */
byte acting[NKEY];    /* objects whose inner pass acts on the key: bit mask */
byte lastgrant[NKEY]; /* token of the newest grant of the key */
/* using[k]: objects whose workloads still use key k: bit mask. An inner pass
 * that acts for k while granted sets it; it stays set after the pass ends
 * (the workloads the pass started keep running), also when the pass fails,
 * and is cleared only by a later inner pass of the object that runs without
 * k and succeeds: a granted pass whose keys no longer include k, a parked
 * pass (told it holds nothing: it must stop using every key), or the
 * deletion pass (cleanup). A record may be deleted by its holder, or granted
 * to another object, only once its holder's workloads stopped using it. */
byte using[NKEY];
#ifdef FENCE
/* lh[k]: the holders the record of k named, as this process granted it or
 * saw it change (Middleware.lastHolders), as a bit mask: added when a record
 * is written for a holder (its watch event) and when a pass holds it before
 * its post-check; dropped when the holder's own pass says it stopped (a
 * parked pass that told its inner pass or needed not, a deletion pass that
 * succeeded), when its release of the key found the record deleted or gone,
 * and when the object is gone. The predecessor check reads these objects
 * too, whatever keys their cache shows: a holder that no longer names the
 * key is found after a deletion from outside. It decides only then (any
 * other free record was released after its holder's told pass, which left
 * it Parked), so the model keeps it only with EXTDEL; a restart, which
 * empties it, is in no world with EXTDEL. MUT_NO_LAST_HOLDERS leaves it
 * out of the check. */
byte lh[NKEY];
#define remember(k, o) lh[k] = lh[k] | hbit(o)
#define forgetKey(k) lh[k] = lh[k] & ~bit(me)
#define forgetAll(o) lh[0] = lh[0] & ~bit(o); lh[1] = lh[1] & ~bit(o)
#ifdef MUT_NO_LAST_HOLDERS
#define remembered(o, k) false
#else
#define remembered(o, k) ((lh[k] & bit(o)) != 0)
#endif
#else
#define remember(k, o) skip
#define forgetKey(k) skip
#define forgetAll(o) skip
#define remembered(o, k) false
#endif
#ifdef FENCE
byte fmax[NKEY];      /* the fenced resource: highest token it accepted */
byte fwho[NKEY];      /* and who wrote it */
#endif
#ifdef CACHED_HOLDINGS
/* ev[k]: a watch event of the record of k is on its way; evh[k]: the holders
 * its events name (bit mask). cex/chold: the record as the cache has it,
 * which is what the delivered events said. */
bool ev[NKEY];
byte evh[NKEY];
bool cex[NKEY];
byte chold[NKEY];
#endif
/* ALIVE(h): liveness, HolderExists: the holder's object exists (being
 * deleted or not). MUT_DELETING_IS_DEAD judges a holder being deleted gone;
 * MUT_ALIVE_IS_DEAD judges every holder gone. */
/* LIVE(h, k): the liveness a waiter asks about the holder h of k's record.
 * With EXPIRY it is time-based (expiry.Liveness): the holder is alive unless
 * contenders judged k's record expired when the pass read it (rexp: the
 * judgement is of the record read, by the time since its grant or renewal
 * was first seen), whether its object exists or not; otherwise ALIVE. */
#if EXPIRY > 0
#define LIVE(h, k) (!rexp)
#else
#define LIVE(h, k) ALIVE(h)
#endif
#if defined(MUT_ALIVE_IS_DEAD)
#define ALIVE(h) false
#elif defined(MUT_DELETING_IS_DEAD)
#define ALIVE(h) ((h) < NOBJ && exists[h] && !deleting[h])
#else
#define ALIVE(h) ((h) < NOBJ && exists[h])
#endif
/* ORD(i): the i-th key an object acquires (sorted order; MUT_UNSORTED makes
 * obj1 acquire in the reverse order). ORD is its own inverse. */
#ifdef MUT_UNSORTED
#define ORD(i) ((me == 1) -> (NKEY - 1 - (i)) : (i))
#else
#define ORD(i) (i)
#endif
#ifdef MUT_SWEEP_CACHE
byte swept[NOBJ];     /* the key set the last successful sweep kept */
bool sknown[NOBJ];
#endif

#ifdef MUT_FAILED_RENEW_UNTOLD
bool rfail;           /* the bug's memory: the pass failed on a renewal */
#endif
byte w;               /* scratch loop index, only inside atomic steps */
byte wh;              /* scratch: the holder a record event names */

#define names(o, k) ((ckeys[o] & bit(k)) != 0)
#define hbit(h) (bit(h) & ((1 << NOBJ) - 1))   /* the orphan's holder is no object */

/* Who a record event may wake. */
#ifdef MUT_WAKE_ONLY_WAITERS
#define wakeable(o) (exists[o] && mode[o] == REQUEUED)
#else
#define wakeable(o) (exists[o])
#endif

/* wakeMask: events of the record of key k were delivered, naming the
 * holders in hs. The watch enqueues every object that names k (from the
 * cache), holders and waiters alike, and the holders. */
inline wakeMask(k, hs) {
	w = 0;
	do
	:: w < NOBJ ->
		if
#ifdef MUT_WAKE_NO_HOLDER
		/* the bug: a record event wakes the objects naming the key only,
		 * not the record's holder */
		:: wakeable(w) && names(w, k) -> q[w] = true
#else
		:: wakeable(w) && (names(w, k) || (hs & bit(w)) != 0) -> q[w] = true
#endif
		:: else -> skip
		fi;
		w++
	:: else -> break
	od;
	w = 0
}

/* written: the record of k was written (created, updated or deleted); hs
 * are the holders its event names (the new holder, or the one deleted). Without CACHED_HOLDINGS the event wakes
 * in the same step; with it, the event is on its way until the Informer
 * delivers it. */
#ifdef CACHED_HOLDINGS
#define written(k, hs) ev[k] = true; evh[k] = evh[k] | (hs)
#else
#define written(k, hs) wakeMask(k, hs)
#endif

/* wakeNamers: an object was deleted; every object naming one of its keys
 * is enqueued. */
inline wakeNamers(ks) {
	w = 0;
	do
	:: w < NOBJ ->
		if
		:: exists[w] && (ckeys[w] & ks) != 0 -> q[w] = true
		:: else -> skip
		fi;
		w++
	:: else -> break
	od;
	w = 0
}

/* others(x, k): the bits of x of objects other than me. The vacuity check
 * of the fence (MUT_FENCE_ACCEPT_ALL) looks at the fence alone: it needs
 * overlapping windows, which the assertions on them would stop first. */
#ifdef MUT_FENCE_ACCEPT_ALL
#define others(x, k) 0
#else
#define others(x, k) ((x) & ~bit(me))
#endif

/* grant records a new grant of k with token t and checks tokens of a key
 * strictly increase over grants. Whether another object's acting window is
 * still open is asked when the pass counts the key as granted (after the
 * predecessor check that follows the write): a record written while one may
 * is kept without acting for it. */
inline grant(k, t) {
	assert(t > lastgrant[k]);
	lastgrant[k] = t
}

/* TOKC(k)/TOKT(k): the token a create/takeover of k grants: the version of
 * the granting write. MUT_TOKEN_TRANSITIONS takes a count of grants kept in
 * the record instead (1 at create, +1 per takeover), which restarts when the
 * record is deleted and created again. */
#ifdef MUT_TOKEN_TRANSITIONS
byte trv[NKEY];       /* the bug's token: the count of grants of the record */
#define TOKC(k) trv[k]
#define TOKT(k) trv[k]
#define trCreate(k) trv[k] = 1
#define trTake(k) trv[k]++
#else
#define TOKC(k) ver[k]
#define TOKT(k) ver[k]
#endif

/* setTok: the pass remembers the token of each grant, for the fenced
 * resource; without one nothing reads it, so it is not kept in the state. */
#ifdef FENCE
#define setTok(k, t) tok[k] = t
#else
#define setTok(k, t) skip
#endif

/* lose: a write that the server applied may answer with an error. */
#define loseResponse(res) \
	if \
	:: lost > 0 -> lost--; res = FAILED; printf("      (the response to that write is lost: obj%d sees an error)\n", me) \
	:: true -> skip \
	fi

/* refused: a write the server refuses before it applies (an error other
 * than a conflict: a timeout before the request reached etcd, a webhook, a
 * quota). */
#define refused (wfails > 0)
#define refuse wfails--; printf("      (obj%d's write is refused before it applies)\n", me)

/* pred(o, k): the predecessor check (claim.WithPredecessors, claimmw's
 * predecessor): o is another object that names k in the cache's index,
 * or one of the holders k's record named (lh), read uncached: it exists and
 * its condition says it may still act for k (Claimed, or Stopping), unless
 * it is Claimed for its current spec and that spec no longer names k. An
 * object being deleted counts in the code until it says Released, whatever
 * its condition; here only by its condition. */
#ifdef MUT_NO_PREDECESSOR
#define pred(o, k) false
#else
#define predBy(a, o, k) ((o) != (a) && exists[o] && (names(o, k) || remembered(o, k)) && cst[o] != CPARKED && \
	!(cst[o] == CCLAIMED && ccur[o] && (keys[o] & bit(k)) == 0))
#define pred(o, k) predBy(me, o, k)
#endif
#if NOBJ > 2
#define anyPred(k) (pred(0, k) || pred(1, k) || pred(2, k))
#else
#define anyPred(k) (pred(0, k) || pred(1, k))
#endif
/* postPred(k): the predecessor check asked again once the object holds the
 * record of k and before it says it acts (claim.Claimer.Predecessor): about
 * every object but the holder a takeover replaced (gone is its id + 1, 0
 * for none). MUT_NO_POSTCHECK leaves the check out. */
#define notGone(o) (gone != (o) + 1)
/* claimedFor: the pass's condition says Claimed for exactly the keys it read
 * (Middleware.claimedFor): the object acts for them already and asks no
 * predecessor again. */
#define claimedFor (was == CCLAIMED && wascur)
/* staleOwn: the condition the middleware last wrote for the object did not
 * say Claimed (writtenConditions.staleClaimed), so a cache showing Claimed
 * has not caught up. In the model the one operator process writes every
 * condition, so what it last wrote is cst[me], which no step changes between
 * a pass's dequeue and its own first condition write; a restart would empty
 * that memory (staleClaimed is then false), and no world has both switches.
 * Without STALECOND a pass reads its condition as it is: never stale. */
#ifdef STALECOND
#if RESTART > 0
#error "STALECOND with RESTART: the middleware's memory of its condition writes (staleOwn) would outlive the restart"
#endif
#define staleOwn (cst[me] != CCLAIMED)
#else
#define staleOwn false
#endif
/* actsAlready: the pass counts the object as acting for its keys already
 * (Middleware.reconcile's acting): Claimed for exactly them, unless that
 * Claimed is stale. freshSelf: the granted step reads the object uncached
 * before it says it acts: the cached Claimed is stale, or a record was
 * written for it in this pass (wrote). A key whose record this pass wrote
 * is post-checked whatever the pass counts. MUT_CACHED_OWN_CONDITION puts
 * back the bug: the cached condition decides all three (a stale Claimed
 * skips the post-check of a new record and the Claimed write, and the
 * object acts while the server says Parked). */
#ifdef MUT_CACHED_OWN_CONDITION
#define actsAlready claimedFor
#define postChecked(k) (!claimedFor)
#define freshSelf false
#else
#define actsAlready (claimedFor && !staleOwn)
#define postChecked(k) (!actsAlready || (wrote & bit(k)) != 0)
#define freshSelf (claimedFor && staleOwn || wrote != 0)
#endif
#if NOBJ > 2
#define postPred(k) (pred(0, k) && notGone(0) || pred(1, k) && notGone(1) || pred(2, k) && notGone(2))
#else
#define postPred(k) (pred(0, k) && notGone(0) || pred(1, k) && notGone(1))
#endif
/* The predecessor check before the Create and the Create are two calls. In
 * between, another object can become Claimed, act and lose its record only
 * to a deletion from outside (its own release comes after its told pass,
 * which leaves it Parked), so the model folds the two into one step unless
 * EXTDEL is set. */
#if EXTDEL > 0
#define SPLIT_PRECHECK
#endif

/* acquire: Claimer.Acquire(key k) with the default liveness and the
 * middleware's predecessor check. res is GRANTED (tok[k] set), PARKED or
 * FAILED. */
inline acquire(k) {
	round = 0;
	res = 255;
	do
	:: res != 255 -> break
	:: res == 255 && round == MAXROUNDS -> res = FAILED   /* ErrRaced */
	:: res == 255 && round < MAXROUNDS ->
		/* backend.Get, uncached */
		atomic {
#ifdef MUT_CACHED_HELD
			/* the bug: the cache says the record is mine: trusted */
			if
			:: cex[k] && chold[k] == me -> rex = true; rh = me; rrv = ver[k]
			:: else ->
#endif
			rex = rec[k].ex; rh = rec[k].holder; ruid = rec[k].uid; rrv = ver[k] readExp(k) readPend(k)
#ifdef MUT_CACHED_HELD
			fi
#endif
		};
		if
		:: !rex ->
			/* verdictFree: the predecessor check's reads, then the Create
			 * (one step unless SPLIT_PRECHECK), which wins or conflicts */
#ifdef SPLIT_PRECHECK
			atomic {
				if
				:: anyPred(k) ->
					res = PARKED setWhy(true); printf("obj%d finds k%d free, but another object may still act for it: WaitingForHandover\n", me, k)
				:: else -> skip
				fi
			};
#define noPred true
#else
#define noPred !anyPred(k)
#endif
			atomic {
				if
#ifndef SPLIT_PRECHECK
				:: anyPred(k) ->
					res = PARKED setWhy(true); printf("obj%d finds k%d free, but another object may still act for it: WaitingForHandover\n", me, k)
#endif
				:: res != 255 -> skip
				:: res == 255 && noPred && refused -> refuse; res = FAILED
				:: res == 255 && noPred && rec[k].ex -> round++
				:: res == 255 && noPred && !rec[k].ex ->
					ver[k]++; rec[k].ex = true; rec[k].holder = me; rec[k].uid = ver[k] freshRec(k);
					printf("obj%d creates the record of k%d: granted, token %d\n", me, k, ver[k]);
#ifdef MUT_TOKEN_TRANSITIONS
					trCreate(k);
#endif
					grant(k, TOKC(k)); written(k, bit(me)); remember(k, me);
					res = GRANTED; setTok(k, TOKC(k)); wrote = wrote | bit(k);
					loseResponse(res)
				fi
			}
		:: rex && rh == me ->
			/* verdictHeld: no write */
#if EXPIRY > 0 && !defined(MUT_HELD_NOT_RENEWED)
			/* a record whose hold ended is renewed once, conditional on
			 * the record read, before it is held again; while renewals
			 * fail that is a claim error (MUT_HELD_NOT_RENEWED: held
			 * again as it is) */
			atomic {
				if
				:: !rhend -> res = GRANTED; setTok(k, rrv)
				:: rhend && stalled ->
					res = FAILED; printf("obj%d cannot renew its record of k%d: claim error\n", me, k)
#ifdef MUT_FAILED_RENEW_UNTOLD
					; rfail = true
#endif
#ifdef MUT_RENEW_ANY
				/* the bug: the renewal is not conditional on the record */
				:: rhend && !stalled ->
#else
				:: rhend && !stalled && rec[k].ex && rec[k].holder == me && ver[k] == rrv ->
#endif
#ifdef MUT_RENEW_NOT_SEEN
					/* the bug: contenders do not see the renewal (their
					 * count is not restarted) */
					ver[k]++; hend[k] = false; written(k, bit(me));
#else
					ver[k]++ freshRec(k); written(k, bit(me));
#endif
					res = GRANTED; setTok(k, rrv);
					printf("obj%d renews its record of k%d (version %d) and holds it again\n", me, k, ver[k])
				:: else -> res = FAILED   /* changed since the read */
				fi
			}
#else
			res = GRANTED; setTok(k, rrv)
#endif
		:: rex && rh != me ->
			/* verdictOther: liveness is HolderExists, an uncached read */
			if
			:: LIVE(rh, k) -> res = PARKED setWhy(rpd == me + 1); printf("obj%d finds k%d held by live obj%d: parked\n", me, k, rh)
			:: else ->
				/* takeover: one update fenced on the UID and version read */
				atomic {
					if
					:: refused -> refuse; res = FAILED
#ifdef MUT_UNFENCED_TAKEOVER
					:: rec[k].ex ->
#else
					:: rec[k].ex && rec[k].uid == ruid && ver[k] == rrv ->
#endif
						printf("obj%d takes k%d over from obj%d (read at version %d): granted, token %d\n", me, k, rec[k].holder, rrv, ver[k] + 1);
						gone = (rec[k].holder < NOBJ -> rec[k].holder + 1 : 0);
						ver[k]++; rec[k].holder = me freshRec(k);
#ifdef MUT_TOKEN_TRANSITIONS
						trTake(k);
#endif
						grant(k, TOKT(k)); written(k, bit(me)); remember(k, me);
						res = GRANTED; setTok(k, TOKT(k)); wrote = wrote | bit(k);
						loseResponse(res)
					:: else -> rrv = 0   /* conflict: read again below */
					fi
				};
				if
				:: res == 255 ->
					/* afterTakeoverConflict on a fresh read */
					atomic {
						if
						:: !rec[k].ex -> round++                      /* raceFreed */
						:: rec[k].ex && rec[k].holder == me ->
							res = GRANTED; setTok(k, ver[k])            /* raceSelf */
						:: rec[k].ex && rec[k].holder == rh -> res = FAILED /* raceStale */
						:: rec[k].ex && rec[k].holder != me && rec[k].holder != rh ->
							res = PARKED                               /* raceWinner */
						fi
					}
				:: else -> skip
				fi
			fi
		fi;
		atomic { rex = false; rh = 0; ruid = 0; rrv = 0 clearExp clearPend }
	od;
	round = 0
}

#define PRE_ENDACT 1   /* the granted inner pass returned success */
#define PRE_PARKED 2   /* the parked pass: condition, maybe the told inner */
#define PRE_FINAL  3   /* finalize: the inner cleans up between the List and the deletes */
#define PRE_FAILED 4   /* the granted inner pass failed (only MUT_RELEASE_AFTER_FAILED_INNER releases then) */

/* cmine(k): the listing of a granted or parked pass finds the object's
 * record of k (holdingsOf). With CACHED_HOLDINGS, while its condition speaks
 * of its current spec, from the cache (CachedHoldings): the record as the
 * delivered events say; otherwise uncached (Holdings): the record as it is.
 * The deletion path always lists uncached. ReleaseRecords reads each listed
 * record again uncached before its Delete, folded into the listing's step:
 * mine(k) is that re-read. */
#define mine(k) (rec[k].ex && rec[k].holder == me)
#ifdef CACHED_HOLDINGS
#define cmine(k) (wascur -> (cex[k] && chold[k] == me) : mine(k))
#else
#define cmine(k) mine(k)
#endif

/* parkedCond: the condition says the object acts for nothing (Parked,
 * ClaimError) without a told pass in this step: only when no workloads of
 * the object use a key, or a waiter's predecessor check would let a key go
 * while they do (loss is told until it is heard). */
#define parkedCond cst[me] = CPARKED; assert(((using[0] | using[1]) & bit(me)) == 0) sayWaits(false)
/* inner told to stop: its workloads stop using every key */
#define stopUsing using[0] = using[0] & ~bit(me); using[1] = using[1] & ~bit(me)
#define stopActing acting[0] = acting[0] & ~bit(me); acting[1] = acting[1] & ~bit(me)
/* the inner told it releases the keys outside s: those workloads stop */
#define stopUsingExcept(s) \
	if \
	:: ((s) & 1) == 0 -> using[0] = using[0] & ~bit(me) \
	:: else -> skip \
	fi; \
	if \
	:: ((s) & 2) == 0 -> using[1] = using[1] & ~bit(me) \
	:: else -> skip \
	fi

#if HANDOVER > 0
/* planHandovers (Middleware.planHandovers): for each key the granted pass
 * holds, the successor the object names (successorOf: read uncached; none if
 * it is the object itself, gone or being deleted; the object's successor
 * as the pass read it at its start) is prepared on the record
 * (Claimer.Prepare: the record names it as pending; holder and token do not
 * change), or a pending one no longer named is aborted (Claimer.Abort). The
 * keys with a successor are handed over in this pass: its inner pass, on
 * success, has moved its workloads off them. One step per key: the read of
 * the successor and the write. The code prepares after the Claimed write,
 * before the inner pass; the model before the Claimed write. */
inline planHandovers() {
	k = 0;
	do
	:: k < NKEY && res == 0 && (ks & bit(k)) != 0 ->
		atomic {
			if
			:: succ != 0 && succ != me + 1 && exists[succ - 1] && !deleting[succ - 1] -> named = true
			:: else -> named = false
			fi;
			if
			:: named && mine(k) && rec[k].pend == succ -> handed = handed | bit(k)
			:: named && !(mine(k) && rec[k].pend == succ) ->
				if
				:: refused -> refuse; res = FAILED
				:: mine(k) ->
					ver[k]++; rec[k].pend = succ; written(k, bit(me));
					handed = handed | bit(k);
					printf("obj%d prepares the handover of k%d to obj%d\n", me, k, succ - 1);
					loseResponse(res)
				:: else -> res = FAILED   /* not the holder any more */
				fi
			:: !named && mine(k) && rec[k].pend != 0 ->
				ver[k]++; rec[k].pend = 0; written(k, bit(me));
				printf("obj%d aborts the handover of k%d\n", me, k);
				loseResponse(res)
			:: else -> skip
			fi;
			k++
		}
	:: k < NKEY && res == 0 && (ks & bit(k)) == 0 -> k++
	:: k == NKEY || res != 0 -> break
	od;
	k = 0; named = false;
	if
	:: res != 0 -> handed = 0
	:: else -> skip
	fi
}

/* ready(s, k): successorReady: s, read uncached, exists and is not being
 * deleted, its condition says WaitingForHandover for its current spec, it
 * names k, and it is granted every key it names before k (holds the record,
 * and no other object may still act for it). MUT_COMMIT_UNREADY commits to
 * any successor that exists. */
#ifdef MUT_COMMIT_UNREADY
#define ready(s, k) true
#else
#if NOBJ > 2
#define anyPredBy(a, k) (predBy(a, 0, k) || predBy(a, 1, k) || predBy(a, 2, k))
#else
#define anyPredBy(a, k) (predBy(a, 0, k) || predBy(a, 1, k))
#endif
#define ready(s, k) (wfh[s] && ccur[s] && (keys[s] & bit(k)) != 0 && \
	((k) == 0 || (keys[s] & 1) == 0 || (rec[0].ex && rec[0].holder == (s) && !anyPredBy(s, 0))))
#endif

/* commitHandovers (Middleware.commitHandovers), after an inner pass that saw
 * the handovers returned success: each successor that waits for its key now
 * becomes its holder (Claimer.Commit, fenced on the record: still this
 * object's, naming that successor), with a new, greater token; one that is
 * gone or being deleted is aborted; one that does not wait yet is not
 * committed to: the key is kept and the pass asks again (hwait). One step per
 * key: successorReady's reads and the write. The code commits before the
 * sweep's Deletes; the model after them (they touch other records). */
inline commitHandovers() {
	k = 0;
	do
	:: k < NKEY && (handed & bit(k)) != 0 ->
		atomic {
			if
			:: !exists[succ - 1] || deleting[succ - 1] ->
				if
				:: mine(k) && rec[k].pend == succ ->
					ver[k]++; rec[k].pend = 0; written(k, bit(me));
					printf("obj%d aborts the handover of k%d: obj%d is gone\n", me, k, succ - 1)
				:: else -> res = FAILED
				fi
			:: exists[succ - 1] && !deleting[succ - 1] && ready(succ - 1, k) ->
				if
				:: refused -> refuse; res = FAILED
				:: mine(k) && rec[k].pend == succ ->
					ver[k]++; rec[k].holder = succ - 1; rec[k].pend = 0 freshRec(k);
					grant(k, ver[k]); wh = succ - 1; written(k, bit(me) | hbit(wh)); remember(k, wh); wh = 0;
					printf("obj%d commits the handover of k%d to obj%d: token %d\n", me, k, succ - 1, ver[k]);
					loseResponse(res)
				:: else -> res = FAILED   /* the record changed: not committed */
				fi
			:: exists[succ - 1] && !deleting[succ - 1] && !ready(succ - 1, k) ->
				hwait = true;
				printf("obj%d keeps k%d until obj%d waits for it\n", me, k, succ - 1)
			fi;
			k++
		}
	:: k < NKEY && (handed & bit(k)) == 0 -> k++
	:: k == NKEY -> break
	od;
	k = 0
}
#endif

/* release: the end of a pass that releases records: the listing of the
 * object's records, what the pass does between the listing and the deletes
 * (folded into the listing's step, by pre), then one Delete per record
 * listed and not kept, fenced on the UID and version read. A record already
 * gone counts as released; a Delete that fails (changed since the read, or
 * refused) is an error, and the next record is still deleted, as
 * ReleaseRecords does. */
inline release(keep, pre) {
	atomic {
		if
		:: pre == PRE_ENDACT ->
			/* the inner pass returned success: its workloads stopped using
			 * the keys it was told it releases; a condition delayed for a
			 * changed spec is written now */
			printf("obj%d: inner pass ends with success\n", me);
			stopActing;
			stopUsingExcept(keep & ~handedMask);
			if
			:: ks == keys[me] && !judgedStale -> setCur(me, true)
			:: else -> skip
			fi
		:: pre == PRE_FAILED ->
			printf("obj%d: inner pass ends with an error\n", me);
			stopActing
		:: else -> skip
		fi;
		k = 0;
		do
		:: k < NKEY ->
			if
			:: (keep & bit(k)) == 0 && pre != PRE_FINAL && cmine(k) && atStart(k) ->
#ifdef MUT_RELEASE_WHATEVER
				/* the bug: the re-read is not checked for the holder */
				if
				:: rec[k].ex -> listed = listed | bit(k); luid[k] = rec[k].uid; lrv[k] = ver[k]
				:: else -> skip
				fi
#else
				if
				:: mine(k) -> listed = listed | bit(k); luid[k] = rec[k].uid; lrv[k] = ver[k]
				:: else -> skip
				fi
#endif
			:: (keep & bit(k)) == 0 && pre == PRE_FINAL && mine(k) ->
#ifdef MUT_CACHED_LIST
				/* the bug: the finalizer's List reads a cache that may not
				 * have seen the object's newest record yet */
				if
				:: printf("obj%d: its cached List misses k%d\n", me, k)
				:: listed = listed | bit(k); luid[k] = rec[k].uid; lrv[k] = ver[k]
				fi
#else
				listed = listed | bit(k); luid[k] = rec[k].uid; lrv[k] = ver[k]
#endif
			:: else -> skip
			fi;
			k++
		:: else -> break
		od;
		k = 0;
		if
		:: pre == PRE_PARKED ->
			/* Middleware.parked: the condition says Stopping while the object
			 * may still act (it said Claimed or Stopping); the inner pass is
			 * told to stop when it must (mustTell: it may have held, or it
			 * gives records up); after that pass succeeded the condition says
			 * what blocks it. */
#ifdef MUT_LOST_NEVER_TOLD
			tell = (listed != 0);   /* the bug: only giving up is told */
#else
			tell = (was != CPARKED || listed != 0);
#endif
			if
			:: ks != keys[me] || judgedStale ->
				/* the status writes meet a newer spec, or a condition the pass
				 * did not judge from: refused (setCondition);
				 * the condition stays as it was, the pass ends in an error
				 * after the told pass and its release, if any */
				printf("obj%d: its condition write meets a newer spec (or a condition it did not judge from) and is refused\n", me);
				if
				:: tell && ifails > 0 -> ifails--; listed = 0
				:: tell -> stopUsing
				:: !tell -> listed = 0
				fi;
				res = FAILED
			:: else ->
				if
				:: was != CPARKED -> cst[me] = CSTOPPING sayWaits(false)
				:: else -> parkedCond
				fi;
				setCur(me, true);
				if
				:: tell && ifails > 0 ->
					ifails--; res = FAILED;
					printf("obj%d: condition %d, inner pass told to stop fails; keeps keys %d\n", me, cst[me], held);
#ifndef MUT_RELEASE_AFTER_FAILED_INNER
					listed = 0
#endif
				:: tell ->
					printf("obj%d: inner pass told to stop succeeds, condition Parked; keeps keys %d, gives up the rest\n", me, held);
					stopUsing; cst[me] = CPARKED sayWaits(whyw); forgetAll(me)
				:: !tell ->
					printf("obj%d: condition Parked, inner pass not told (keeps keys %d)\n", me, held);
					parkedCond sayWaits(whyw); forgetAll(me)
				fi
			fi
		:: pre == PRE_FINAL ->
			/* the inner runs in deleting mode: it acts (cleans up) for the
			 * keys the object still holds */
			printf("obj%d: being deleted, inner pass cleans up for keys %d\n", me, listed);
#ifndef MUT_FINAL_RELEASE_FIRST
			do
			:: k < NKEY && (listed & bit(k)) != 0 ->
				assert(others(using[k], k) == 0);
				acting[k] = acting[k] | bit(me); k++
			:: k < NKEY && (listed & bit(k)) == 0 -> k++
			:: k == NKEY -> break
			od;
			k = 0
#endif
		:: else -> skip
		fi
	};
#ifndef MUT_FINAL_RELEASE_FIRST
	if
	:: pre == PRE_FINAL ->
		atomic {
			stopActing;
			if
			:: ifails > 0 ->
				/* the deletion pass fails: nothing is released, the
				 * object keeps its condition, and its workloads run on */
				ifails--; res = FAILED; listed = 0;
				printf("obj%d: deletion pass fails\n", me)
			:: true ->
				/* it succeeded: the condition says Released; its
				 * workloads stopped */
				printf("obj%d: deletion pass succeeds\n", me);
				stopUsing; cst[me] = CPARKED sayWaits(false); forgetAll(me)
			fi
		}
	:: else -> skip
	fi;
#endif
	do
	:: k < NKEY && (listed & bit(k)) != 0 ->
		atomic {
			if
			:: refused -> refuse; res = FAILED
#ifdef MUT_RELEASE_NO_UID
			:: rec[k].ex ->
#elif defined(MUT_DELETE_NO_VERSION)
			:: rec[k].ex && rec[k].uid == luid[k] ->
#else
			:: rec[k].ex && rec[k].uid == luid[k] && ver[k] == lrv[k] ->
#endif
				assert(rec[k].holder == me);   /* release frees only its own grant */
				/* a key is freed only after an inner pass that knew the
				 * object must stop using it returned success */
				assert((using[k] & bit(me)) == 0);
				/* the Delete removes the version the pass read, not a
				 * later write (a renewal) it never saw */
				assert(ver[k] == lrv[k]);
				printf("obj%d releases k%d (record of obj%d, version %d)\n", me, k, rec[k].holder, ver[k]);
				ver[k]++; rec[k].ex = false; wh = rec[k].holder; written(k, hbit(wh)); wh = 0;
				rec[k].holder = 0; rec[k].uid = 0; forgetKey(k) freshRec(k);
				loseResponse(res)
			:: !rec[k].ex -> forgetKey(k)         /* already gone */
			:: else -> res = FAILED               /* changed since the read */
			fi;
			k++
		}
	:: k < NKEY && (listed & bit(k)) == 0 -> k++
	:: k == NKEY -> break
	od;
#ifdef MUT_FINAL_RELEASE_FIRST
	/* the bug: the finalizer deletes the records first, then the inner
	 * cleans up for the keys it listed */
	if
	:: pre == PRE_FINAL ->
		atomic {
			printf("obj%d: being deleted, records released, inner pass cleans up for keys %d\n", me, listed);
			k = 0;
			do
			:: k < NKEY && (listed & bit(k)) != 0 ->
				assert(others(using[k], k) == 0);
				acting[k] = acting[k] | bit(me); k++
			:: k < NKEY && (listed & bit(k)) == 0 -> k++
			:: k == NKEY -> break
			od;
			k = 0
		};
		atomic {
			printf("obj%d: deletion pass succeeds\n", me);
			stopActing; stopUsing; cst[me] = CPARKED sayWaits(false)
		}
	:: else -> skip
	fi;
#endif
	atomic { k = 0; listed = 0; luid[0] = 0; luid[1] = 0; lrv[0] = 0; lrv[1] = 0; tell = false }
}

/* Obj: the middleware's Reconcile of one object, run by the work queue
 * whenever the object is enqueued, parked (periodic requeue) or failed
 * (error backoff). controller-runtime never runs two passes of one object at
 * once, so one process per object. */
proctype Obj(byte me) {
	byte ks;      /* the key set this pass read */
	bool del;     /* the object read is being deleted */
	byte was;     /* its condition when the pass began (Middleware.previous) */
	bool wascur;  /* that condition spoke of its current spec */
	byte k;
	byte kk;      /* the key being acquired */
	byte held;    /* the keys granted so far in this pass */
	byte res;
	byte round;
	bool rex; byte rh; byte ruid; byte rrv;   /* the last read of a record */
#if EXPIRY > 0
	bool rexp;    /* and whether contenders judged it expired then */
	bool rhend;   /* and whether the hold of its holder had ended then */
#endif
#if HANDOVER > 0
	byte rpd;     /* and the successor its prepared handover named, + 1 */
	bool whyw;    /* the pass parks waiting for a handover (or a predecessor) */
	byte succ;    /* the successor its spec names, as the pass read it, + 1 */
	bool named;   /* scratch: that successor exists and is not being deleted */
	byte handed;  /* the keys it hands over in this pass (State.Handovers) */
	bool hwait;   /* a successor does not wait for its key yet: ask again */
	byte lst;     /* the keys whose records it held when the pass listed them */
#endif
	bool tell;
	byte tok[NKEY];
	byte listed; byte luid[NKEY]; byte lrv[NKEY];
	byte gone;    /* the holder a takeover replaced, + 1; 0 for none */
	byte kept;    /* the key it holds but does not act for (a predecessor may) */
	byte wrote;   /* the keys whose record this pass wrote (Create, takeover) */

end_idle:
	do
	:: atomic {
		exists[me] && (q[me] || mode[me] != IDLE) ->
		/* dequeued: read the object from the cache, maybe stale in its
		 * keys (its deletion mark and condition are read as they are) */
		q[me] = false; res = 0; del = deleting[me]; ks = (del -> 0 : ckeys[me]) setBusy(me, true) listAtStart readSucc;
		was = condRead(me); wascur = curRead(me);
#ifdef MUT_TELL_IN_MEMORY
		/* the bug: whether it may have held is remembered in memory, which
		 * a restarted operator does not have */
		if
		:: !seen[me] -> was = CPARKED; wascur = false; seen[me] = true
		:: else -> skip
		fi
#endif
	   };
		if
		:: del ->
			/* finalize: the inner runs in deleting mode, told the records
			 * the object holds (listed uncached); after it succeeded they
			 * are released, and only then the finalizer goes and with it
			 * the object. */
			release(0, PRE_FINAL);
			if
			:: res == FAILED -> skip
			:: else ->
				atomic {
					printf("obj%d: finalizer removed, the object is gone\n", me);
					exists[me] = false; fin[me] = false; cst[me] = CPARKED; setCur(me, false); forgetAll(me);
					q[me] = false;
					wakeNamers(ckeys[me] | keys[me])
				}
			fi
		:: else ->
			if
			:: ks != 0 && !fin[me] ->
				atomic {
					if
					:: exists[me] && !deleting[me] -> fin[me] = true
					:: else -> res = FAILED   /* being deleted: takes no new finalizer */
					fi
				}
			:: else -> skip
			fi;
			/* acquire in sorted order, stop at the first key not granted */
			k = 0;
			do
			:: res != 0 -> break
			:: res == 0 && k == NKEY -> break
			:: res == 0 && k < NKEY && (ks & bit(ORD(k))) == 0 -> k++
			:: res == 0 && k < NKEY && (ks & bit(ORD(k))) != 0 ->
				kk = ORD(k);
				acquire(kk);
#ifndef MUT_NO_POSTCHECK
				/* an object that starts acting for kk in this pass, or whose
				 * record of kk this pass wrote, asks again, now that it holds
				 * the record and before its Claimed write, whether another
				 * object may still act for it; if one may, it keeps the record
				 * without acting for it: WaitingForHandover */
				if
				:: res == GRANTED && postChecked(kk) ->
					atomic {
						remember(kk, me);
						if
						:: postPred(kk) ->
							res = PARKED; kept = bit(kk) setWhy(true);
							printf("obj%d holds k%d, but another object may still act for it: keeps it, WaitingForHandover\n", me, kk)
						:: else ->
							/* granted: no other object's workloads use kk,
							 * its acting window is closed */
							assert(others(using[kk], kk) == 0)
						fi;
						gone = 0
					}
				:: else -> gone = 0
				fi;
#else
				/* the bug: the check made before the Create is the only one */
				gone = 0;
#endif
				if
				:: res == GRANTED -> held = held | bit(kk); k = ORD(kk) + 1; res = 0
				:: else -> k = kk
				fi;
				kk = 0
			od;
			k = 0;
			if
#ifdef MUT_FAILED_RENEW_UNTOLD
			/* the bug: a pass whose renewal failed ends in an error without
			 * the claim error's told pass */
			:: res == FAILED && rfail -> rfail = false; printf("obj%d: its renewal failed: an error, not told\n", me)
			:: res == FAILED && !rfail ->
#else
			:: res == FAILED ->
#endif
				/* Middleware.claimError: an object that may still act is
				 * told to stop (Stopping until a told pass succeeded); the
				 * condition says ClaimError after it */
				atomic {
					if
					:: ks != keys[me] || judgedStale ->
						/* its condition writes meet a newer spec (or a
						 * condition it did not judge from): refused
						 * and only logged; the told pass runs anyway */
						if
						:: was != CPARKED && ifails > 0 -> ifails--
						:: was != CPARKED -> stopUsing
						:: else -> skip
						fi
					:: else ->
						setCur(me, true);
						if
						:: was != CPARKED && ifails > 0 ->
							ifails--; cst[me] = CSTOPPING sayWaits(false);
							printf("obj%d: claim error; condition Stopping, inner pass told to stop fails\n", me)
						:: was != CPARKED ->
							stopUsing; cst[me] = CPARKED sayWaits(false);
							printf("obj%d: claim error; inner pass told to stop succeeds, condition ClaimError\n", me)
						:: else -> parkedCond
						fi
					fi
				}
			:: res == 0 ->
#ifdef MUT_RELEASE_BEFORE_INNER
				/* the bug: the sweep runs before the inner pass that was
				 * told to stop using the keys it gives up */
				release(ks, 0);
#endif
#if HANDOVER > 0
				planHandovers();
#ifdef MUT_COMMIT_EARLY
				/* the bug: the commit in the same pass, right after the
				 * Prepare, before the inner pass, which is not told */
				if
				:: res == 0 -> commitHandovers(); handed = 0
				:: else -> skip
				fi;
#endif
#endif
				/* all granted: condition Claimed, written before the inner
				 * pass unless the pass read it Claimed already (for these
				 * keys: unchanged, nothing is written; for an older spec:
				 * written after the inner pass succeeded); an object that
				 * starts acting reads its records again after that write
				 * (folded), and acts only if it still holds them. A pass
				 * whose record was written in it, or whose cached Claimed is
				 * stale, first reads the object uncached (folded): the
				 * server's condition decides the write; a newer spec
				 * requeues the pass */
				atomic {
					if
					:: freshSelf && ks != keys[me] ->
						res = FAILED;
						printf("obj%d: its uncached read finds a newer spec: not acting, requeued\n", me)
					:: freshSelf && ks == keys[me] -> was = cst[me]
					:: else -> skip
					fi;
					if
					:: res != 0 -> skip
					:: res == 0 && was == CCLAIMED -> skip
					:: res == 0 && was != CCLAIMED && (ks != keys[me] || judgedStale) ->
						/* the write meets a newer spec (or a condition it
						 * did not judge from): refused, the pass
						 * ends in an error before its inner pass */
						res = FAILED;
						printf("obj%d: its Claimed write meets a newer spec (or a condition it did not judge from) and is refused\n", me)
					:: res == 0 && was != CCLAIMED && !(ks != keys[me] || judgedStale) ->
						cst[me] = CCLAIMED; setCur(me, (ks == keys[me])) sayWaits(false);
						if
						:: was != CCLAIMED && ((ks & 1) != 0 && !mine(0) || (ks & 2) != 0 && !mine(1)) ->
							res = FAILED;
							printf("obj%d: condition Claimed, but a record is no longer its own: not acting, requeued\n", me)
						:: else -> skip
						fi
					fi;
					if
					:: res == 0 ->
						printf("obj%d: condition Claimed, inner pass acts on keys %d\n", me, ks);
						/* it acts only while its condition on the server says
						 * it may (Claimed, or Stopping): what a waiter's
						 * predecessor check reads */
						assert(cst[me] != CPARKED);
						k = 0;
						do
						:: k < NKEY && (ks & bit(k)) != 0 ->
							/* at most one object acts for a key: no other
							 * object's acting window is open */
							assert(others(using[k], k) == 0);
							acting[k] = acting[k] | bit(me); using[k] = using[k] | bit(me); k++
						:: k < NKEY && (ks & bit(k)) == 0 -> k++
						:: k == NKEY -> break
						od;
						k = 0
					:: else -> skip
					fi
				};
#ifdef FENCE
				/* a write to the fenced resource of each key, with the token */
				do
				:: res == 0 && k < NKEY && (ks & bit(k)) != 0 ->
					atomic {
						if
#ifdef MUT_FENCE_ACCEPT_ALL
						:: true ->   /* the bug: the resource accepts any token */
#else
						:: tok[k] >= fmax[k] ->
#endif
							/* a token names one grant: never two writers */
							assert(tok[k] > fmax[k] || fwho[k] == me);
							fmax[k] = tok[k]; fwho[k] = me
						:: else -> skip   /* refused: an older grant */
						fi;
						k++
					}
				:: res == 0 && k < NKEY && (ks & bit(k)) == 0 -> k++
				:: res != 0 || k == NKEY -> break
				od;
				k = 0;
#endif
				if
				:: res != 0 -> skip
				:: atomic { res == 0 && ifails > 0 -> ifails-- };
					/* the inner pass fails: nothing it gives up is released */
#ifdef MUT_RELEASE_AFTER_FAILED_INNER
					release(ks, PRE_FAILED);
#else
					atomic { stopActing; printf("obj%d: inner pass ends with an error\n", me) };
#endif
					res = FAILED
				:: res == 0 ->
				/* the sweep: release what the object no longer names */
#ifdef MUT_SWEEP_CACHE
					if
					:: sknown[me] && swept[me] == ks ->
						atomic {
							printf("obj%d: inner pass ends; sweep skipped, keys as at the last sweep\n", me);
							stopActing;
							stopUsingExcept(ks)
						}
					:: else ->
						release(ks, PRE_ENDACT);
						if
						:: res != FAILED -> sknown[me] = true; swept[me] = ks
						:: else -> skip
						fi
					fi
#else
					release(ks, PRE_ENDACT)
#endif
#if HANDOVER > 0
					;
					commitHandovers()
#endif
				fi
			:: res == PARKED ->
				/* parked at key k: keep the held prefix, give up the rest */
				res = 0;
#ifdef MUT_NO_GIVEUP
				atomic {
					printf("obj%d: condition Parked, keeps every record it holds\n", me);
					stopUsing; cst[me] = CPARKED sayWaits(whyw)
				}
#elif defined(MUT_PARK_KEEP_NAMED)
				/* the bug: a parked object keeps every named key it holds,
				 * not only the sorted prefix it acquired */
				release(ks, PRE_PARKED)
#else
#ifdef MUT_PARKED_RELEASE_BEFORE_INNER
				/* the bug: the parked pass releases what it gives up before
				 * its inner pass, told to stop, has run */
				release(held | kept, 0);
#endif
				release(held | kept, PRE_PARKED)
#endif
			fi
		fi;
		/* the work queue requeues a parked or failed object by itself */
		atomic {
			if
			:: res == FAILED || held != ks || waitsCommit -> mode[me] = REQUEUED
			:: else -> mode[me] = IDLE
			fi;
			ks = 0; del = false; held = 0; res = 0; was = 0; wascur = false; kept = 0; wrote = 0;
			tok[0] = 0; tok[1] = 0 setBusy(me, false) resetHandover
		}
	od
}
/* World: sets the world up, then plays the people and tools acting on the
 * API server. Each kind of event has a budget, so activity stops. */
active proctype World() {
	byte i; byte m;
	atomic {
		exists[0] = true; keys[0] = INIT0; ckeys[0] = INIT0; q[0] = true;
		exists[1] = true; keys[1] = INIT1; ckeys[1] = INIT1; q[1] = true;
#if NOBJ > 2
		exists[2] = true; keys[2] = INIT2; ckeys[2] = INIT2; q[2] = true;
#endif
#if ORPHAN
		/* k0 recorded for a holder gone before the model starts */
		ver[0] = 1; rec[0].ex = true; rec[0].holder = GHOST; rec[0].uid = 1;
		lastgrant[0] = 1;
#ifdef CACHED_HOLDINGS
		cex[0] = true; chold[0] = GHOST;
#endif
#endif
		run Informer();
		run Obj(0);
		run Obj(1);
#if NOBJ > 2
		run Obj(2);
#endif
	};
end_world:
	do
	:: atomic {
		/* edit the keys an object names */
		edits > 0 ->
		select(i : 0 .. NOBJ - 1);
		select(m : 0 .. 3);
		if
		:: exists[i] && !deleting[i] && keys[i] != m ->
			/* a new generation: no condition speaks of it yet */
			edits--; keys[i] = m; ccur[i] = false;
			printf("world: obj%d now names keys %d (1 = k0, 2 = k1, 3 = both)\n", i, m);
			if
			:: stale > 0 -> stale--; printf("      (the cache of obj%d lags: its next reads are stale)\n", i)
			:: true -> ckeys[i] = m; q[i] = true; condSeen(i); cacheSeesSpec(i)
			fi
		:: else -> skip
		fi;
		i = 0; m = 0
	   }
	:: atomic {
		/* delete an object */
		dels > 0 ->
		select(i : 0 .. NOBJ - 1);
		if
		:: exists[i] && !deleting[i] ->
			dels--; deleting[i] = true;
			printf("world: obj%d is deleted\n", i);
			if
			:: fin[i] -> q[i] = true
			:: else -> exists[i] = false; cst[i] = CPARKED; setCur(i, false); forgetAll(i); wakeNamers(ckeys[i] | keys[i])
			fi
		:: else -> skip
		fi;
		i = 0
	   }
	:: atomic {
		/* the holder's renewal (a goroutine of its own, middleware.go
		 * renew.ensure) updates its record in place: same UID, new version */
		renews > 0 ->
		select(i : 0 .. NKEY - 1);
		if
		:: rec[i].ex && rec[i].holder < NOBJ && exists[rec[i].holder] && !deleting[rec[i].holder] ->
			renews--;
			printf("world: obj%d renews its record of k%d\n", rec[i].holder, i);
			ver[i]++; wh = rec[i].holder; written(i, hbit(wh)); wh = 0
		:: else -> skip
		fi;
		i = 0
	   }
	:: atomic {
		/* the operator restarts: the informers list everything again, so
		 * every object is enqueued, and whatever the middleware kept in
		 * memory is gone (a pass under way runs to its end: a pass cut
		 * short is a failed one, which INNERFAIL covers) */
		restarts > 0 ->
		restarts--;
		printf("world: the operator restarts\n");
		i = 0;
		do
		:: i < NOBJ ->
			if
			:: exists[i] -> q[i] = true
			:: else -> skip
			fi;
#ifdef MUT_TELL_IN_MEMORY
			seen[i] = false;
#endif
			i++
		:: else -> break
		od;
		i = 0
	   }
#if HANDOVER > 0
	:: atomic {
		/* obj0's spec names obj1 as the successor of its keys, or no
		 * successor any more: a new generation */
		hos > 0 ->
		hos--;
		if
		:: hto[0] == 0 -> hto[0] = 2
		:: else -> hto[0] = 0
		fi;
		ccur[0] = false; q[0] = true; cacheSeesSpec(0);
		printf("world: obj0 names %d as its successor (0 = none, 2 = obj1)\n", hto[0])
	   }
#endif
#if EXPIRY > 0
	:: atomic {
		/* renewals start failing; the renew deadline of the hold of k by
		 * its holder passes: the hold ends, which wakes the holder
		 * (MUT_HOLD_END_NOT_WOKEN: it does not) */
		stalls > 0 ->
		select(i : 0 .. NKEY - 1);
		if
		:: rec[i].ex && rec[i].holder < NOBJ && !hend[i] ->
			stalls--; stalled = true; hend[i] = true;
			printf("world: renewals fail; obj%d's hold of k%d ends\n", rec[i].holder, i);
#ifndef MUT_HOLD_END_NOT_WOKEN
			if
			:: exists[rec[i].holder] -> q[rec[i].holder] = true
			:: else -> skip
			fi
#endif
		:: else -> skip
		fi;
		i = 0
	   }
	/* a lease duration passes without a renewal of k: contenders judge its
	 * holder expired. The timing contract: only once the passes the hold's
	 * end asked for have run. */
	:: atomic { canExpire(0) -> expire(0) }
	:: atomic { canExpire(1) -> expire(1) }
#endif
	:: atomic {
		/* a person or tool deletes a claim record */
		extdels > 0 ->
		select(i : 0 .. NKEY - 1);
		if
		:: rec[i].ex ->
			extdels--;
			printf("world: someone deletes the record of k%d (holder obj%d)\n", i, rec[i].holder);
			ver[i]++; rec[i].ex = false; wh = rec[i].holder; written(i, hbit(wh)); wh = 0;
			rec[i].holder = 0; rec[i].uid = 0 freshRec(i)
		:: else -> skip
		fi;
		i = 0
	   }
	od
}

/* Informer: the cache catches up with a lagging object and the object's own
 * watch event enqueues it. A process of its own, so that weak fairness makes
 * it catch up eventually. Once nothing lags it lets time pass: a world where
 * nothing else can move is a steady state, not a deadlock, and SPIN's
 * weak-fairness search does not extend a finite run by stuttering. */
#ifdef CACHED_HOLDINGS
#define recsCaughtUp (!ev[0] && !ev[1])
#else
#define recsCaughtUp true
#endif
#ifdef STALECOND
#if NOBJ > 2
#define condsCaughtUp (ccst[0] == cst[0] && ccst[1] == cst[1] && ccst[2] == cst[2])
#else
#define condsCaughtUp (ccst[0] == cst[0] && ccst[1] == cst[1])
#endif
#else
#define condsCaughtUp true
#endif
#if NOBJ > 2
#define caughtUp (ckeys[0] == keys[0] && ckeys[1] == keys[1] && ckeys[2] == keys[2] && recsCaughtUp && condsCaughtUp)
#else
#define caughtUp (ckeys[0] == keys[0] && ckeys[1] == keys[1] && recsCaughtUp && condsCaughtUp)
#endif
#if EXPIRY > 0
#define renewing (!stalled)
#else
#define renewing true
#endif
proctype Informer() {
end_informer:
	do
	:: caughtUp && renewing -> skip
#if EXPIRY > 0
	/* renewals succeed again: a stall ends */
	:: atomic { stalled -> stalled = false; printf("      (renewals succeed again)\n") }
#endif
	:: atomic { ckeys[0] != keys[0] -> ckeys[0] = keys[0]; q[0] = true; condSeen(0); cacheSeesSpec(0) }
	:: atomic { ckeys[1] != keys[1] -> ckeys[1] = keys[1]; q[1] = true; condSeen(1); cacheSeesSpec(1) }
#ifdef CACHED_HOLDINGS
	/* the record's watch event arrives: the cache has it, and the event
	 * wakes the objects naming the key and its holder */
	:: atomic { ev[0] -> ev[0] = false; cex[0] = rec[0].ex; chold[0] = rec[0].holder; wakeMask(0, evh[0]); evh[0] = 0 }
	:: atomic { ev[1] -> ev[1] = false; cex[1] = rec[1].ex; chold[1] = rec[1].holder; wakeMask(1, evh[1]); evh[1] = 0 }
#endif
#if NOBJ > 2
	:: atomic { ckeys[2] != keys[2] -> ckeys[2] = keys[2]; q[2] = true; condSeen(2); cacheSeesSpec(2) }
#endif
#ifdef STALECOND
	/* the cache sees an object's last status write (its event enqueues
	 * nothing: a status write does not change the generation) */
	:: atomic { ccst[0] != cst[0] -> ccst[0] = cst[0] }
	:: atomic { ccst[1] != cst[1] -> ccst[1] = cst[1] }
#if NOBJ > 2
	:: atomic { ccst[2] != cst[2] -> ccst[2] = cst[2] }
#endif
#endif
	od
}

/* ---- liveness: once activity stops, the world settles ---- */

/* holds(o, k): o holds the record of k. */
#define holds(o, k) (rec[k].ex && rec[k].holder == (o))
#define holdsAll(o) \
	(((keys[o] & 1) == 0 || holds(o, 0)) && ((keys[o] & 2) == 0 || holds(o, 1)))
/* live(o): o exists and is not being deleted. */
#define live(o) (exists[o] && !deleting[o])
/* liveNamer(h, k): h is a live object that names k (not the orphan). */
#define liveNamer(h, k) ((h) < NOBJ && live(h) && (keys[h] & bit(k)) != 0)
/* granted(h): h is a live object that holds every key it names. */
#define granted(h) ((h) < NOBJ && live(h) && holdsAll(h))
/* waits0(o, k): o names k, which another live namer holds, and that holder
 * is granted. waits1 also accepts a holder that itself waits0: a waits-for
 * chain that ends at a granted object (with at most 3 objects no chain is
 * longer). A cycle of waiting objects is neither: a deadlock. */
#define waits0(o, k) \
	((keys[o] & bit(k)) != 0 && rec[k].ex && rec[k].holder != (o) && \
	 liveNamer(rec[k].holder, k) && granted(rec[k].holder))
#define waitsOn0(o) (waits0(o, 0) || waits0(o, 1))
#define waits1(o, k) \
	((keys[o] & bit(k)) != 0 && rec[k].ex && rec[k].holder != (o) && \
	 liveNamer(rec[k].holder, k) && (granted(rec[k].holder) || waitsOn0(rec[k].holder)))
#if NOBJ > 2
#define namedByLive(k) ((live(0) && (keys[0] & bit(k)) != 0) || (live(1) && (keys[1] & bit(k)) != 0) || (live(2) && (keys[2] & bit(k)) != 0))
#else
#define namedByLive(k) ((live(0) && (keys[0] & bit(k)) != 0) || (live(1) && (keys[1] & bit(k)) != 0))
#endif
/* okObj(o): gone objects hold nothing (no leak); live ones read their keys
 * fresh, hold only keys they name, report the truth in their condition
 * (never Stopping once settled), use only keys they hold, and
 * hold all their keys unless they wait, through a chain, on a granted object
 * (no deadlock). Objects being deleted are not settled: their finalizer must
 * run. */
#define ownsOnlyNamed(o) \
	((!holds(o, 0) || (keys[o] & 1) != 0) && (!holds(o, 1) || (keys[o] & 2) != 0))
/* usesOnlyHeld(o): o's workloads use only keys it holds (loss is told until
 * it is heard). */
#define usesOnlyHeld(o) \
	(((using[0] & bit(o)) == 0 || holds(o, 0)) && ((using[1] & bit(o)) == 0 || holds(o, 1)))
#define okObj(o) \
	(usesOnlyHeld(o) && okObj1(o))
#define okObj1(o) \
	((!exists[o] && !holds(o, 0) && !holds(o, 1)) || \
	 (live(o) && ckeys[o] == keys[o] && ownsOnlyNamed(o) && \
	  ((cst[o] == CCLAIMED && holdsAll(o)) || (cst[o] == CPARKED && !holdsAll(o))) && \
	  (holdsAll(o) || waits1(o, 0) || waits1(o, 1))))
/* okKey(k): the orphan's record does not outlive the first live object that
 * names its key. */
#define okKey(k) (!(rec[k].ex && rec[k].holder == GHOST && namedByLive(k)))
#if NOBJ > 2
#define settled (okObj(0) && okObj(1) && okObj(2) && okKey(0) && okKey(1))
#else
#define settled (okObj(0) && okObj(1) && okKey(0) && okKey(1))
#endif

/* LTL <>[] settled, written as the never claim of its negation ([]<> !settled:
 * an accepting cycle that leaves the settled states infinitely often) because
 * SPIN's LTL translator refuses a formula this long once the macros expand.
 * spin -f '!(<>[]p)' gives this automaton. */
never {
T0_init:
	do
	:: !(settled) -> goto accept_S9
	:: true -> goto T0_init
	od;
accept_S9:
	do
	:: true -> goto T0_init
	od
}
