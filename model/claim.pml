/*
 * claim.pml: the claim protocol (pkg/claim) and the level-triggered
 * middleware pass (pkg/claimmw) of ocf-claim, as a Promela model for SPIN.
 * docs/model.md says what is modelled, what is not, and how each proctype
 * and inline maps to the Go code.
 *
 * One atomic step is one API call: the API server is a compare-and-swap
 * store, and everything a pass decides between two calls may be stale by
 * the next one. Bounds (all overridable with -D): NOBJ objects (2 or 3),
 * NKEY = 2 keys, EDITS key-set edits, DELS object deletions, EXTDEL external
 * record deletions, LOST lost write responses, STALE stale cached reads,
 * ORPHAN records of an already-gone holder present at the start, RENEW
 * renewal writes.
 *
 * Mutation switches (-DMUT_...) put back one known bug each; see
 * docs/model.md: MUT_WAKE_ONLY_WAITERS, MUT_SWEEP_CACHE, MUT_UNFENCED_TAKEOVER,
 * MUT_RELEASE_NO_UID, MUT_NO_GIVEUP, MUT_CACHED_LIST, MUT_FINAL_RELEASE_FIRST,
 * MUT_DELETING_IS_DEAD, MUT_ALIVE_IS_DEAD, MUT_UNSORTED, MUT_PARK_KEEP_NAMED,
 * MUT_TOKEN_TRANSITIONS, MUT_FENCE_ACCEPT_ALL, MUT_WAKE_NO_HOLDER,
 * MUT_RELEASE_BEFORE_INNER, MUT_PARKED_RELEASE_BEFORE_INNER,
 * MUT_DELETE_NO_VERSION. None changes anything
 * when undefined.
 *
 * Fidelity switch CACHED_HOLDINGS: the sweep and give-up list the object's
 * records from the informer cache, as middleware.go does (CachedHoldings,
 * then ReleaseRecords re-reads each record uncached before its fenced
 * Delete); a record whose watch event is still on its way is missed, and the
 * event wakes its holder when it arrives. Without it the sweep lists
 * uncached (cheaper: fewer interleavings). model_test.go turns it on in the
 * worlds where a missed record matters; docs/model.md says which.
 * RENEW: renewal writes (in place, same UID, new version) of a live holder's
 * record.
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
#ifndef STALE
#define STALE 1
#endif
/* With external record deletion, an old holder may still be inside its inner
 * pass when a new holder starts its own: what keeps them apart is the fenced
 * resource, which the model then adds. */
#if EXTDEL > 0
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

/* ---- API server: claim records, compare-and-swap on UID and version ---- */
typedef Record {
	bool ex;      /* the record exists */
	byte holder;  /* object id; GHOST for the orphan */
	byte uid;     /* UID of this incarnation: the version it was created at */
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

/* ---- controller ---- */
bool q[NOBJ];         /* in the work queue */
byte mode[NOBJ];      /* IDLE or REQUEUED */
bool cond[NOBJ];      /* claim condition True */

/* ---- fault and edit budgets ---- */
byte edits = EDITS;
byte dels = DELS;
byte extdels = EXTDEL;
byte lost = LOST;
byte stale = STALE;
#ifndef RENEW
#define RENEW 0
#endif
byte renews = RENEW;
bool extdone;         /* an external deletion happened */

/* ---- observers (ghost state for the properties) ---- */
byte acting[NKEY];    /* objects whose inner pass acts on the key: bit mask */
byte lastgrant[NKEY]; /* token of the newest grant of the key */
/* using[k]: objects whose workloads still use key k: bit mask. An inner pass
 * that acts for k while granted sets it; it stays set after the pass ends
 * (the workloads the pass started keep running) and is cleared only by a
 * later inner pass of the object that runs without k: a granted pass whose
 * keys no longer include k, a parked pass (told it holds nothing: it must
 * stop using every key), or the deletion pass (cleanup). A record may be
 * deleted by its holder, or granted to another object, only once its
 * holder's workloads stopped using it. */
byte using[NKEY];
#ifdef FENCE
byte fmax[NKEY];      /* the fenced resource: highest token it accepted */
byte fwho[NKEY];      /* and who wrote it */
#endif
#ifdef CACHED_HOLDINGS
/* rlag[k]: the record cache has not yet seen the newest write of the record
 * of k; the watch event of that write is still on its way. The pass's
 * CachedHoldings misses such a record; the event wakes the holder when it
 * arrives (Informer). */
bool rlag[NKEY];
#define recWritten(k) rlag[k] = true
#endif
/* ALIVE(h): liveness, HolderExists: the holder's object exists (being
 * deleted or not). MUT_DELETING_IS_DEAD judges a holder being deleted gone;
 * MUT_ALIVE_IS_DEAD judges every holder gone. */
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

byte w;               /* scratch loop index, only inside atomic steps */
byte wh;              /* scratch: the holder a record event names */

#define names(o, k) ((ckeys[o] & bit(k)) != 0)

/* Who a record event may wake. */
#ifdef MUT_WAKE_ONLY_WAITERS
#define wakeable(o) (exists[o] && mode[o] == REQUEUED)
#else
#define wakeable(o) (exists[o])
#endif

/* wake: the record of key k was created, updated or deleted, its holder
 * (before or after) being h. The watch enqueues every object that names k,
 * holders and waiters alike, and the holder. */
inline wake(k, h) {
	w = 0;
	do
	:: w < NOBJ ->
		if
		#ifdef MUT_WAKE_NO_HOLDER
		/* the bug: a record event wakes the objects naming the key only,
		 * not the record's holder */
		:: wakeable(w) && names(w, k) -> q[w] = true
#else
		:: wakeable(w) && (names(w, k) || w == h) -> q[w] = true
#endif
		:: else -> skip
		fi;
		w++
	:: else -> break
	od;
	w = 0
}

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

/* grant records a new grant of k with token t and checks tokens of a key
 * strictly increase over grants. */
inline grant(k, t) {
	assert(t > lastgrant[k]);
#ifdef FENCE
	assert((using[k] & ~bit(me)) == 0 || extdone);
#else
	assert((using[k] & ~bit(me)) == 0);   /* no other object's workloads use k */
#endif
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

/* acquire: Claimer.Acquire(key k) with the default liveness. res is
 * GRANTED (tok[k] set), PARKED or FAILED. */
inline acquire(k) {
	round = 0;
	res = 255;
	do
	:: res != 255 -> break
	:: res == 255 && round == MAXROUNDS -> res = FAILED   /* ErrRaced */
	:: res == 255 && round < MAXROUNDS ->
		/* backend.Get, uncached */
		atomic { rex = rec[k].ex; rh = rec[k].holder; ruid = rec[k].uid; rrv = ver[k] };
		if
		:: !rex ->
			/* verdictFree: create wins or conflicts */
			atomic {
				if
				:: rec[k].ex -> round++
				:: else ->
					ver[k]++; rec[k].ex = true; rec[k].holder = me; rec[k].uid = ver[k];
					printf("obj%d creates the record of k%d: granted, token %d\n", me, k, ver[k]);
#ifdef MUT_TOKEN_TRANSITIONS
					trCreate(k);
#endif
#ifdef CACHED_HOLDINGS
					recWritten(k);
#endif
					grant(k, TOKC(k)); wake(k, me);
					res = GRANTED; setTok(k, TOKC(k));
					loseResponse(res)
				fi
			}
		:: rex && rh == me ->
			/* verdictHeld: no write */
			res = GRANTED; setTok(k, rrv)
		:: rex && rh != me ->
			/* verdictOther: liveness is HolderExists, an uncached read */
			if
			:: ALIVE(rh) -> res = PARKED; printf("obj%d finds k%d held by live obj%d: parked\n", me, k, rh)
			:: else ->
				/* takeover: one update fenced on the UID and version read */
				atomic {
					if
#ifdef MUT_UNFENCED_TAKEOVER
					:: rec[k].ex ->
#else
					:: rec[k].ex && rec[k].uid == ruid && ver[k] == rrv ->
#endif
						printf("obj%d takes k%d over from obj%d (read at version %d): granted, token %d\n", me, k, rec[k].holder, rrv, ver[k] + 1);
						ver[k]++; rec[k].holder = me;
#ifdef MUT_TOKEN_TRANSITIONS
						trTake(k);
#endif
#ifdef CACHED_HOLDINGS
						recWritten(k);
#endif
						grant(k, TOKT(k)); wake(k, me);
						res = GRANTED; setTok(k, TOKT(k));
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
		atomic { rex = false; rh = 0; ruid = 0; rrv = 0 }
	od;
	round = 0
}

#define PRE_ENDACT 1   /* the inner pass ends */
#define PRE_PARKED 2   /* the condition turns False */
#define PRE_FINAL  3   /* finalize: the inner acts between the List and the deletes */

/* release: Claimer.Release(self, keep): one List of self's records, then one
 * Delete per record not kept, fenced on the UID and version of the List. A
 * record already gone counts as released; one that changed is an error. */
inline release(keep, pre) {
	atomic {
		/* what the pass did last before the List, folded into it: no other
		 * process reads it, so it needs no step of its own */
		if
		:: pre == PRE_ENDACT ->
			printf("obj%d: inner pass ends\n", me);
			acting[0] = acting[0] & ~bit(me); acting[1] = acting[1] & ~bit(me)
		:: pre == PRE_PARKED ->
			/* the inner pass runs parked (told it holds nothing and which
			 * keys it gives up) and stops using every key */
			printf("obj%d: condition False, inner pass stops using its keys; keeps keys %d, gives up the rest\n", me, held);
			cond[me] = false;
			using[0] = using[0] & ~bit(me); using[1] = using[1] & ~bit(me)
		:: else -> skip
		fi;
		k = 0;
		do
		:: k < NKEY ->
			if
			:: rec[k].ex && rec[k].holder == me && (keep & bit(k)) == 0 ->
#ifdef MUT_CACHED_LIST
				/* the bug: the finalizer's List reads a cache that may not
				 * have seen the object's newest record yet */
				if
				:: pre == PRE_FINAL -> printf("obj%d: its cached List misses k%d\n", me, k)
				:: true -> listed = listed | bit(k); luid[k] = rec[k].uid; lrv[k] = ver[k]
				fi
#elif defined(CACHED_HOLDINGS)
				/* as the code does: the sweep and give-up list the
				 * object's records from the cache (CachedHoldings), which
				 * misses a record whose watch event is still on its way */
				if
				:: pre != PRE_FINAL && rlag[k] -> printf("obj%d: its cached List misses k%d\n", me, k)
				:: else -> listed = listed | bit(k); luid[k] = rec[k].uid; lrv[k] = ver[k]
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
#ifdef MUT_FINAL_RELEASE_FIRST
		:: false ->
#else
		:: pre == PRE_FINAL ->
#endif
			/* the inner runs in deleting mode: it acts (cleans up) for the
			 * keys the object still holds */
			printf("obj%d: being deleted, inner pass cleans up for keys %d\n", me, listed);
			do
			:: k < NKEY && (listed & bit(k)) != 0 ->
#ifdef FENCE
				assert(acting[k] == 0 || extdone);
#else
				assert(acting[k] == 0);
#endif
				acting[k] = acting[k] | bit(me); k++
			:: k < NKEY && (listed & bit(k)) == 0 -> k++
			:: k == NKEY -> break
			od;
			k = 0
		:: else -> skip
		fi
	};
	if
#ifdef MUT_FINAL_RELEASE_FIRST
	:: false ->
#else
	:: pre == PRE_FINAL && listed != 0 ->
#endif
		atomic {
			printf("obj%d: inner pass ends\n", me);
			acting[0] = acting[0] & ~bit(me); acting[1] = acting[1] & ~bit(me);
			using[0] = using[0] & ~bit(me); using[1] = using[1] & ~bit(me)
		}
	:: pre == PRE_FINAL && listed == 0 ->
		/* the deletion pass runs its inner (cleanup) for nothing held: its
		 * workloads stop */
		atomic { using[0] = using[0] & ~bit(me); using[1] = using[1] & ~bit(me) }
	:: else -> skip
	fi;
	do
	:: k < NKEY && (listed & bit(k)) != 0 && res != FAILED ->
		atomic {
			if
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
				ver[k]++; rec[k].ex = false; wh = rec[k].holder; wake(k, wh); wh = 0;
				rec[k].holder = 0; rec[k].uid = 0;
				loseResponse(res)
			:: !rec[k].ex -> skip                 /* already gone */
			:: else -> res = FAILED               /* changed since the List */
			fi;
			k++
		}
	:: k < NKEY && ((listed & bit(k)) == 0 || res == FAILED) -> k++
	:: k == NKEY -> break
	od;
#ifdef MUT_FINAL_RELEASE_FIRST
	/* the bug: the finalizer deletes the records first, then the inner
	 * cleans up for the keys it listed */
	if
	:: pre == PRE_FINAL && listed != 0 ->
		atomic {
			printf("obj%d: being deleted, records released, inner pass cleans up for keys %d\n", me, listed);
			k = 0;
			do
			:: k < NKEY && (listed & bit(k)) != 0 ->
#ifdef FENCE
				assert(acting[k] == 0 || extdone);
#else
				assert(acting[k] == 0);
#endif
				acting[k] = acting[k] | bit(me); k++
			:: k < NKEY && (listed & bit(k)) == 0 -> k++
			:: k == NKEY -> break
			od;
			k = 0
		};
		atomic {
			printf("obj%d: inner pass ends\n", me);
			acting[0] = acting[0] & ~bit(me); acting[1] = acting[1] & ~bit(me);
			using[0] = using[0] & ~bit(me); using[1] = using[1] & ~bit(me)
		}
	:: else -> skip
	fi;
#endif
	atomic { k = 0; listed = 0; luid[0] = 0; luid[1] = 0; lrv[0] = 0; lrv[1] = 0 }
}

/* Obj: the middleware's Reconcile of one object, run by the work queue
 * whenever the object is enqueued, parked (periodic requeue) or failed
 * (error backoff). controller-runtime never runs two passes of one object at
 * once, so one process per object. */
proctype Obj(byte me) {
	byte ks;      /* the key set this pass read */
	bool del;     /* the object read is being deleted */
	byte k;
	byte kk;      /* the key being acquired */
	byte held;    /* the keys granted so far in this pass */
	byte res;
	byte round;
	bool rex; byte rh; byte ruid; byte rrv;   /* the last read of a record */
	byte tok[NKEY];
	byte listed; byte luid[NKEY]; byte lrv[NKEY];

end_idle:
	do
	:: atomic {
		exists[me] && (q[me] || mode[me] != IDLE) ->
		/* dequeued: read the object from the cache, maybe stale in its
		 * keys (deletion is read as it is) */
		q[me] = false; res = 0; del = deleting[me]; ks = (del -> 0 : ckeys[me])
	   };
		if
		:: del ->
			/* finalize: the inner runs in deleting mode (it acts on no
			 * key), then every record of the object is released and only
			 * then the finalizer goes and with it the object. */
			release(0, PRE_FINAL);
			if
			:: res == FAILED -> skip
			:: else ->
				atomic {
					printf("obj%d: finalizer removed, the object is gone\n", me);
					exists[me] = false; fin[me] = false; cond[me] = false;
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
				if
				:: res == GRANTED -> held = held | bit(kk); k = ORD(kk) + 1; res = 0
				:: else -> k = kk
				fi;
				kk = 0
			od;
			k = 0;
			if
			:: res == FAILED ->
				cond[me] = false   /* ClaimError */
			:: res == 0 ->
#ifdef MUT_RELEASE_BEFORE_INNER
				/* the bug: the sweep runs before the inner pass that was
				 * told to stop using the keys it gives up */
				release(ks, 0);
#endif
				/* all granted: condition True, the inner acts on every key */
				atomic {
					printf("obj%d: condition True, inner pass acts on keys %d\n", me, ks);
					cond[me] = true;
					k = 0;
					do
					:: k < NKEY && (ks & bit(k)) != 0 ->
#ifdef FENCE
						assert(acting[k] == 0 || extdone);
#else
						assert(acting[k] == 0);   /* at most one object acts for a key */
#endif
						acting[k] = acting[k] | bit(me); using[k] = using[k] | bit(me); k++
					:: k < NKEY && (ks & bit(k)) == 0 ->
						/* told it no longer holds k (Releasing): its
						 * workloads stop using k */
						using[k] = using[k] & ~bit(me); k++
					:: k == NKEY -> break
					od;
					k = 0
				};
#ifdef FENCE
				/* a write to the fenced resource of each key, with the token */
				do
				:: k < NKEY && (ks & bit(k)) != 0 ->
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
				:: k < NKEY && (ks & bit(k)) == 0 -> k++
				:: k == NKEY -> break
				od;
				k = 0;
#endif
				/* the sweep: release what the object no longer names */
#ifdef MUT_SWEEP_CACHE
				if
				:: sknown[me] && swept[me] == ks ->
					atomic {
						printf("obj%d: inner pass ends; sweep skipped, keys as at the last sweep\n", me);
						acting[0] = acting[0] & ~bit(me); acting[1] = acting[1] & ~bit(me)
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
			:: res == PARKED ->
				/* parked at key k: keep the held prefix, give up the rest */
				res = 0;
#ifdef MUT_NO_GIVEUP
				atomic {
					printf("obj%d: condition False, keeps every record it holds\n", me);
					cond[me] = false
				}
#elif defined(MUT_PARK_KEEP_NAMED)
				/* the bug: a parked object keeps every named key it holds,
				 * not only the sorted prefix it acquired */
				release(ks, PRE_PARKED)
#else
#ifdef MUT_PARKED_RELEASE_BEFORE_INNER
				/* the bug: the parked pass releases what it gives up before
				 * its inner pass, told to stop, has run */
				release(held, 0);
#endif
				release(held, PRE_PARKED)
#endif
			fi
		fi;
		/* the work queue requeues a parked or failed object by itself */
		atomic {
			if
			:: res == FAILED || held != ks -> mode[me] = REQUEUED
			:: else -> mode[me] = IDLE
			fi;
			ks = 0; del = false; held = 0; res = 0;
			tok[0] = 0; tok[1] = 0
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
			edits--; keys[i] = m;
			printf("world: obj%d now names keys %d (1 = k0, 2 = k1, 3 = both)\n", i, m);
			if
			:: stale > 0 -> stale--; printf("      (the cache of obj%d lags: its next reads are stale)\n", i)
			:: true -> ckeys[i] = m; q[i] = true
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
			:: else -> exists[i] = false; cond[i] = false; wakeNamers(ckeys[i] | keys[i])
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
			ver[i]++;
#ifdef CACHED_HOLDINGS
			recWritten(i);
#endif
			wh = rec[i].holder; wake(i, wh); wh = 0
		:: else -> skip
		fi;
		i = 0
	   }
	:: atomic {
		/* a person or tool deletes a claim record */
		extdels > 0 ->
		select(i : 0 .. NKEY - 1);
		if
		:: rec[i].ex ->
			extdels--; extdone = true;
			printf("world: someone deletes the record of k%d (holder obj%d)\n", i, rec[i].holder);
			ver[i]++; rec[i].ex = false; wh = rec[i].holder; wake(i, wh); wh = 0;
			rec[i].holder = 0; rec[i].uid = 0
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
#define recsCaughtUp (!rlag[0] && !rlag[1])
#else
#define recsCaughtUp true
#endif
#if NOBJ > 2
#define caughtUp (ckeys[0] == keys[0] && ckeys[1] == keys[1] && ckeys[2] == keys[2] && recsCaughtUp)
#else
#define caughtUp (ckeys[0] == keys[0] && ckeys[1] == keys[1] && recsCaughtUp)
#endif
proctype Informer() {
end_informer:
	do
	:: caughtUp -> skip
	:: atomic { ckeys[0] != keys[0] -> ckeys[0] = keys[0]; q[0] = true }
	:: atomic { ckeys[1] != keys[1] -> ckeys[1] = keys[1]; q[1] = true }
#ifdef CACHED_HOLDINGS
	/* the record's watch event arrives: the cache has it, and the event
	 * wakes the objects naming the key and its holder */
	:: atomic { rlag[0] -> rlag[0] = false; wh = rec[0].holder; wake(0, wh); wh = 0 }
	:: atomic { rlag[1] -> rlag[1] = false; wh = rec[1].holder; wake(1, wh); wh = 0 }
#endif
#if NOBJ > 2
	:: atomic { ckeys[2] != keys[2] -> ckeys[2] = keys[2]; q[2] = true }
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
 * fresh, hold only keys they name, report the truth in their condition, and
 * hold all their keys unless they wait, through a chain, on a granted object
 * (no deadlock). Objects being deleted are not settled: their finalizer must
 * run. */
#define ownsOnlyNamed(o) \
	((!holds(o, 0) || (keys[o] & 1) != 0) && (!holds(o, 1) || (keys[o] & 2) != 0))
#define okObj(o) \
	((!exists[o] && !holds(o, 0) && !holds(o, 1)) || \
	 (live(o) && ckeys[o] == keys[o] && ownsOnlyNamed(o) && \
	  ((cond[o] && holdsAll(o)) || (!cond[o] && !holdsAll(o))) && \
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
