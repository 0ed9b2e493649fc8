/*
 * transfer.pml: a planned handover (pkg/claim/transfer.go: Prepare, Commit,
 * Abort) between a live holder A and its successor B, under lost write
 * responses. docs/model.md maps it to the Go code.
 *
 * A holds the key at the start. Each pass of A acquires (Held), acts, then
 * prepares the handover to B and either commits or aborts it; a write whose
 * response is lost fails the pass, and the next pass starts over from a
 * fresh read, as the middleware does. B acquires in a loop: while A lives
 * and names B its successor, B waits (WaitingForHandover); once B is the
 * holder it acts. Bounds: PASSES passes of A (default 3), LOST lost
 * responses (default 2); A never dies, so only the handover moves the key.
 *
 * Mutation: -DMUT_TRUST_LOCAL makes A trust the answer of its last Commit
 * instead of reading the record, so a lost Commit response leaves A acting
 * after B was granted.
 */

#ifndef PASSES
#define PASSES 3
#endif
#ifndef LOST
#define LOST 2
#endif

#define A 0
#define B 1
#define NONE 2

/* The record of the one key: compare-and-swap on its version. */
byte holder = A;
byte succ = NONE;
byte ver = 1;        /* resourceVersion: grows on every write */
byte tok = 1;        /* fencing token of the grant in force */

byte lost = LOST;
byte acting;         /* bit mask: A = 1, B = 2 */
byte lastgrant = 1;  /* observer: token of the newest grant */
bool committed;      /* observer: a Commit was applied */

/* act: the inner pass of who, acting for the key with its grant's token t. */
inline act(who, t) {
	atomic {
		assert(acting == 0);   /* at most one holder acts */
		acting = acting | (1 << who)
	};
	acting = acting & ~(1 << who)
}

/* update: Backend.Update fenced on the version read, rv; the response may
 * be lost after the write is applied. ok says what the caller sees. */
#define loseResponse(ok) \
	if \
	:: lost > 0 -> lost--; ok = false \
	:: true -> skip \
	fi

active proctype Holder() {
	byte passes = PASSES;
	byte rh, rs, rv, rt;   /* the last read */
	bool ok;
#ifdef MUT_COMMIT_BEFORE_ACT
	bool wasA;
#endif
#ifdef MUT_TRUST_LOCAL
	bool mine = true;      /* what A believes without reading */
#endif
end_a:
	do
	:: passes > 0 ->
		passes--;
		ok = true;
		/* Acquire: read; A acts only while it is the holder */
		atomic { rh = holder; rs = succ; rv = ver; rt = tok };
#ifdef MUT_TRUST_LOCAL
		/* the bug: A trusts what its last Commit answered over the record */
		if
		:: mine -> rh = A
		:: else -> skip
		fi;
#endif
		if
		:: rh != A -> goto done   /* HeldElsewhere: parked, acts on nothing */
#ifdef MUT_COMMIT_BEFORE_ACT
		/* the bug: the inner pass (acting) runs after the handover is
		 * committed, on the read of the pass's start */
		:: else -> wasA = true
#else
		:: else -> act(A, rt)
#endif
		fi;
		/* Prepare(B): readHeld, then a write only if B is not yet the
		 * successor */
		atomic { rh = holder; rs = succ; rv = ver };
		if
		:: rh != A -> goto done   /* ErrNotHolder */
		:: rs == B -> skip
		:: else ->
			atomic {
				if
				:: ver == rv -> ver++; succ = B; loseResponse(ok)
				:: else -> ok = false   /* ErrConflict */
				fi
			};
			if
			:: !ok -> goto done
			:: else -> skip
			fi
		fi;
		if
		:: true ->
			/* Commit(B) */
			atomic { rh = holder; rs = succ; rv = ver };
			if
			:: rh == B && rs == NONE -> skip   /* our earlier Commit landed */
			:: rh != A -> skip                 /* ErrNotHolder */
			:: rh == A && rs != B -> skip      /* ErrNotPrepared */
			:: rh == A && rs == B ->
				atomic {
					if
					:: ver == rv ->
						ver++; holder = B; succ = NONE; tok = ver;
						assert(tok > lastgrant); lastgrant = tok;
						committed = true;
						loseResponse(ok)
					:: else -> skip   /* ErrConflict */
					fi
				};
#ifdef MUT_TRUST_LOCAL
				if
				:: ok -> mine = false
				:: else -> skip
				fi
#else
				skip
#endif
			fi
		:: true ->
			/* Abort */
			atomic { rh = holder; rs = succ; rv = ver };
			if
			:: rh != A -> skip    /* ErrNotHolder: a Commit cannot be undone */
			:: rh == A && rs == NONE -> skip
			:: rh == A && rs != NONE ->
				atomic {
					if
					:: ver == rv -> ver++; succ = NONE; loseResponse(ok)
					:: else -> skip
					fi
				}
			fi
		fi;
done:
#ifdef MUT_COMMIT_BEFORE_ACT
		if
		:: wasA -> act(A, rt); wasA = false
		:: else -> skip
		fi;
#endif
		atomic { rh = 0; rs = 0; rv = 0; rt = 0; ok = false }
	od
}

active proctype Successor() {
	byte rh, rs, rt;
end_b:
	do
	:: atomic { rh = holder; rs = succ; rt = tok };
		if
		:: rh == B -> act(B, rt)          /* Held */
		:: rh == A && rs == B -> skip     /* WaitingForHandover */
		:: rh == A && rs != B -> skip     /* HeldElsewhere: A is alive */
		fi;
		/* B is granted only through A's Commit */
		assert(rh != B || committed);
		atomic { rh = 0; rs = 0; rt = 0 }
	od
}
