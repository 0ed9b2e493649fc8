package model

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// world is one bounded world of a model: the -D switches that size it and
// the search that explores it. Each world is explored exhaustively as it is,
// and once more per mutation, which must make SPIN find a counterexample.
type world struct {
	name  string
	model string // file in this directory
	defs  string // -D switches for spin -a, separated by spaces
	// live searches for acceptance cycles of the never claim under weak
	// fairness (pan -a -f), which also checks every assertion; otherwise a
	// safety search (assertions only).
	live      bool
	mutations []mutation
	// depth is pan's -m search depth bound; 0 means 20000.
	depth int
	// optimize compiles pan with -O1, which searches about 1.7 times as
	// fast as -O0 and compiles 5 CPU-seconds longer: worth it only above
	// about a million states.
	optimize bool
}

// mutation is a known bug put back into the model by a -D switch.
type mutation struct {
	// define is the -D switch that puts the bug back (several, separated
	// by spaces, when one bug shows only with another).
	define string
	// want is what pan's first error line must contain: the assertion that
	// fails, or "acceptance cycle" for the never claim of claim.pml (eventually
	// settled).
	want string
	// depth is pan's -m for this mutation; 0 means the world's.
	depth int
	// why says what the bug is, for the log and for a miss.
	why string
}

// worlds are the checks `make model` runs, a row each; a mutation is a row of
// its world. docs/model.md explains each bound and each mutation, with the
// measured states and cost; keep the three in step.
var worlds = []world{
	{name: "key-edits", model: "claim.pml", defs: "EDITS=2 DELS=0 LOST=0 STALE=0", live: true, optimize: true, mutations: []mutation{
		{define: "MUT_NO_GIVEUP", want: "acceptance cycle", why: "a parked object keeps every record it holds: key-swap deadlock"},
		{define: "MUT_RELEASE_BEFORE_INNER", want: "assertion violated ((using[k]&(1<<me))==0)", why: "the granted pass releases the keys it gives up before the inner pass that is told to stop using them"},
		{define: "MUT_PARKED_RELEASE_BEFORE_INNER", want: "assertion violated ((using[k]&(1<<me))==0)", why: "the parked pass releases the keys it gives up before its inner pass, told to stop, has run"},
		{define: "MUT_PARK_KEEP_NAMED", want: "acceptance cycle", why: "a parked object keeps every named key it holds, not only the sorted prefix: key-swap deadlock"},
		{define: "MUT_TOKEN_TRANSITIONS", want: "assertion violated", why: "the token is a count of grants kept in the record, which restarts when the record is deleted and created again"},
		{define: "MUT_LOST_NEVER_TOLD", want: "assertion violated", why: "a Claimed object that parks with nothing to give up is not told to stop (skip mode): its condition says Parked while its workloads still use its key"},
	}},
	// Late record events and the cached listing: obj0 names {k0,k1}, obj1
	// {k0}, one edit.
	{name: "cached-key-edits", model: "claim.pml", defs: "EDITS=1 DELS=0 LOST=0 STALE=0 INIT0=3 INIT1=1 CACHED_HOLDINGS", live: true, mutations: []mutation{
		{define: "MUT_RELEASE_WHATEVER", want: "assertion violated (rec[k].holder==me)", why: "the release deletes whatever record of the key is there now, whoever it names"},
	}},
	// Late record events after a lost response: obj0 names {k0}, obj1
	// nothing, one edit. A Create whose answer was lost leaves the pass's
	// condition for the current spec, so the next pass lists from the
	// cache, which may not have the record yet.
	{name: "cached-lost-response", model: "claim.pml", defs: "EDITS=1 DELS=0 LOST=1 STALE=0 INIT0=1 INIT1=0 CACHED_HOLDINGS", live: true, mutations: []mutation{
		{define: "MUT_WAKE_NO_HOLDER", want: "acceptance cycle", why: "a record event does not wake the record's holder: a record the cached List missed is never swept"},
	}},
	{name: "both-name-both-keys", model: "claim.pml", defs: "INIT0=3 INIT1=3 EDITS=0 DELS=0 LOST=0 STALE=0", live: true, mutations: []mutation{
		{define: "MUT_UNSORTED", want: "acceptance cycle", why: "obj1 acquires its keys in reverse order: each holds one and waits for the other"},
	}},
	{name: "lost-response", model: "claim.pml", defs: "EDITS=2 DELS=0 LOST=1 STALE=0 INIT1=0", live: true, optimize: true, mutations: []mutation{
		{define: "MUT_SWEEP_CACHE", want: "acceptance cycle", why: "the sweep is skipped while the key set is as at the last sweep: a record created with a lost response leaks"},
	}},
	{name: "inner-failure", model: "claim.pml", defs: "EDITS=1 DELS=0 LOST=0 STALE=0 INNERFAIL=1 WFAIL=1", live: true, optimize: true, mutations: []mutation{
		{define: "MUT_RELEASE_AFTER_FAILED_INNER", want: "assertion violated ((using[k]&(1<<me))==0)", why: "the keys given up are released even when the inner pass told of them failed"},
	}},
	{name: "external-deletion", model: "claim.pml", defs: "EXTDEL=1 EDITS=0 DELS=0 LOST=0 STALE=0 INIT1=1", live: true, mutations: []mutation{
		{define: "MUT_WAKE_ONLY_WAITERS", want: "acceptance cycle", why: "a record event wakes only parked objects, not a granted one whose record was deleted"},
		{define: "MUT_NO_PREDECESSOR", want: "assertion violated", why: "a waiter finds the key erased from outside and takes it while its Claimed holder still acts (no predecessor check)"},
		{define: "MUT_NO_POSTCHECK", want: "assertion violated", why: "the predecessor check runs only before the Create: between it and the Create another object becomes Claimed, acts and loses its record to a deletion from outside, and both act"},
	}},
	{name: "release-race", model: "claim.pml", defs: "EXTDEL=1 EDITS=1 DELS=0 LOST=0 STALE=0 INIT0=1 INIT1=1", live: true, optimize: true, mutations: []mutation{
		{define: "MUT_RELEASE_NO_UID", want: "assertion violated (rec[k].holder==me)", why: "the Delete is not fenced at all: it deletes a record created again for another holder"},
		// The holders a record named (lastHolders) are what the
		// predecessor check finds obj1 by once it no longer names k0.
		{define: "MUT_NO_LAST_HOLDERS", want: "assertion violated", why: "the predecessor check reads only the objects whose cache names the key: obj1, which no longer names k0 but still acts for it, is not found after k0's record is deleted from outside"},
		// With the check the windows never overlap, so the fence is
		// never needed; without lastHolders they do, and the fence
		// must refuse the older grant's writes.
		{define: "MUT_NO_LAST_HOLDERS MUT_FENCE_ACCEPT_ALL", want: "assertion violated ((tok[k]>fmax[k])||(fwho[k]==me))", why: "the fenced resource accepts any token: the old holder writes after the newer grant"},
	}},
	{name: "renewal-race", model: "claim.pml", defs: "RENEW=1 EDITS=1 DELS=0 LOST=0 STALE=0 INIT0=3 INIT1=1", live: true, mutations: []mutation{
		{define: "MUT_DELETE_NO_VERSION", want: "assertion violated (ver[k]==lrv[k])", why: "the Delete is fenced on the UID only: it deletes a version a renewal wrote after the read"},
	}},
	{name: "orphan-takeover", model: "claim.pml", defs: "ORPHAN=1 INIT1=1 EDITS=1 DELS=0 LOST=0 STALE=0", live: true, mutations: []mutation{
		{define: "MUT_UNFENCED_TAKEOVER", want: "assertion violated", why: "the takeover is not fenced on the record read: it overwrites a grant made since"},
		// Every holder judged gone: the objects take the key from each
		// other forever; the depth-first search meets an acting or
		// using assertion, or the wrap of the byte ver (the token
		// assertion), depending on the depth bound.
		{define: "MUT_ALIVE_IS_DEAD", want: "assertion violated", depth: 100000, why: "liveness judges every holder gone"},
	}},
	{name: "restart", model: "claim.pml", defs: "RESTART=1 EDITS=1 DELS=0 LOST=0 STALE=0", live: true, mutations: []mutation{
		{define: "MUT_TELL_IN_MEMORY", want: "assertion violated", why: "whether the object may have held (and must be told) is kept in memory: after a restart a Claimed object that parks is not told"},
	}},
	{name: "stale-condition", model: "claim.pml", defs: "STALECOND EDITS=1 DELS=0 LOST=0 STALE=0 INNERFAIL=1", live: true, optimize: true},
	// A cache that has not shown the object its own Parked write, and
	// records deleted from outside: both objects name k0. The pass whose
	// record it wrote asks the post-check and reads itself uncached before
	// it says it acts. A safety search: as a liveness search it passes too
	// (2.83 M states) but costs 30 CPU-seconds more than make model has;
	// stale-condition and external-deletion keep the liveness of each
	// switch.
	{name: "stale-condition-external-deletion", model: "claim.pml", defs: "STALECOND EXTDEL=2 EDITS=0 DELS=0 LOST=0 STALE=0 INIT1=1", mutations: []mutation{
		{define: "MUT_CACHED_OWN_CONDITION", want: "assertion violated (cst[me]!=0)", why: "the cached condition decides whether the object acts already: a cache still showing Claimed after its own Parked write skips the post-check of the record it created and the Claimed write, and it acts while its condition says Parked"},
	}},
	// No edit: deletion-stale-read has the edits with a deletion.
	{name: "deletion-lost-response", model: "claim.pml", defs: "EDITS=0 DELS=1 LOST=1 STALE=0 INIT0=3 INIT1=1", live: true, mutations: []mutation{
		{define: "MUT_CACHED_LIST", want: "acceptance cycle", why: "the finalizer's List reads the cache and misses a record: the finalizer goes, the record leaks"},
		{define: "MUT_FINAL_RELEASE_FIRST", want: "assertion violated", why: "the deletion path deletes the records before the inner pass cleans up"},
		{define: "MUT_DELETING_IS_DEAD", want: "assertion violated", why: "liveness judges a holder whose finalizer runs gone: taken over during its cleanup"},
	}},
	{name: "deletion-stale-read", model: "claim.pml", defs: "EDITS=1 DELS=1 LOST=0 STALE=1", live: true, optimize: true},
	{name: "three-objects-contention", model: "claim.pml", defs: "NOBJ=3 INIT0=1 INIT1=2 INIT2=3 EDITS=0 DELS=0 LOST=0 STALE=0", live: true},
	{name: "three-objects", model: "claim.pml", defs: "NOBJ=3 ORPHAN=1 EDITS=0 DELS=1 LOST=1 STALE=0 INIT2=2", optimize: true},
	// Time-based liveness: both objects name k0; renewals stall once, the
	// holder's hold ends, and a lease duration may pass (the timing
	// contract: once the passes the hold's end asked for have run); one
	// edit, after which a holder that took the key over may stop naming it
	// while its workloads still use it (the holders a record named find it).
	{name: "expiry", model: "claim.pml", defs: "EXPIRY=1 EDITS=1 DELS=0 LOST=0 STALE=0 INIT0=1 INIT1=1", live: true, optimize: true, mutations: []mutation{
		{define: "MUT_HOLD_END_NOT_WOKEN", want: "assertion violated ((using[kk]& ~((1<<me)))==0)", why: "a hold that ends between passes does not wake its object: it is never told to stop before contenders judge it expired"},
		{define: "MUT_HELD_NOT_RENEWED", want: "assertion violated ((using[kk]& ~((1<<me)))==0)", why: "a record whose hold ended is held again without a renewal: the holder acts on while contenders count its lease down"},
		{define: "MUT_UNFENCED_TAKEOVER", want: "assertion violated ((using[kk]& ~((1<<me)))==0)", why: "the takeover of an expired record is not fenced on the record read: it overwrites a renewal written since"},
		{define: "MUT_RENEW_ANY", want: "assertion violated ((using[kk]& ~((1<<me)))==0)", why: "the renewal of a held record whose hold ended is not conditional on the record read: it renews a record taken over since"},
		{define: "MUT_RENEW_NOT_SEEN", want: "assertion violated ((using[kk]& ~((1<<me)))==0)", why: "a renewal does not restart the contenders' count: they take over a holder that renewed and acts again"},
		{define: "MUT_FAILED_RENEW_UNTOLD", want: "assertion violated ((using[kk]& ~((1<<me)))==0)", why: "a pass whose renewal failed ends in an error without the claim error's told pass: the holder's workloads run on when contenders judge it expired"},
	}},
	// A planned handover inside the middleware: obj0 names {k0}, obj1
	// nothing at first; obj0's spec names obj1 as its successor and later
	// none (2 changes); one edit (obj1 may start naming k0, or obj0 stop).
	// MUT_COMMIT_EARLY (the commit before the inner pass) is not a row:
	// the successor's predecessor check keeps it safe (docs/model.md).
	{name: "middleware-handover", model: "claim.pml", defs: "HANDOVER=2 EDITS=1 DELS=0 LOST=0 STALE=0 INIT0=1 INIT1=0", live: true, optimize: true, mutations: []mutation{
		// A handover that never settles writes forever: the byte
		// version wraps, and the token assertion stops the search.
		{define: "MUT_COMMIT_UNREADY", want: "assertion violated", depth: 200000, why: "the holder commits to a successor that does not wait for the key: the successor gives it up at once, the holder takes it again, and the handover starts over for ever"},
	}},
	{name: "handover", model: "transfer.pml", defs: "PASSES=3 LOST=2", mutations: []mutation{
		{define: "MUT_TRUST_LOCAL", want: "assertion violated (acting==0)", why: "the holder trusts its own memory of the handover instead of reading the record"},
		{define: "MUT_COMMIT_BEFORE_ACT", want: "assertion violated (acting==0)", why: "the holder commits the handover before its inner pass is done"},
	}},
}

// TestModel explores every world of the models and fails on any
// counterexample, printing its trail.
func TestModel(t *testing.T) {
	requireTools(t)
	for _, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			// Given the world as the code implements it,
			// When SPIN explores every interleaving of it,
			// Then it finds no counterexample.
			res := w.check(t, "")
			if res.failure != "" {
				t.Fatalf("%s: SPIN found a counterexample: %s\n%s\nReplay: %s", w.name, res.failure, res.trail, res.replay)
			}
			t.Logf("%s: no counterexample; %s; %.1f s CPU", w.name, res.size, res.cpu.Seconds())
		})
	}
}

// TestMutationsHaveCounterexamples shows the model has teeth: each known bug,
// put back by its -D switch, makes SPIN find a counterexample against the
// property it breaks.
func TestMutationsHaveCounterexamples(t *testing.T) {
	requireTools(t)
	for _, w := range worlds {
		for _, m := range w.mutations {
			t.Run(w.name+"/"+m.define, func(t *testing.T) {
				t.Parallel()
				// Given the world of TestModel with one known bug put back,
				// When SPIN explores it,
				// Then it finds a counterexample against that bug's property.
				mw := w
				if m.depth != 0 {
					mw.depth = m.depth
				}
				res := mw.check(t, m.define)
				if res.failure == "" {
					t.Fatalf("%s with %s: SPIN found no counterexample (%s); the model no longer catches this bug: %s", w.name, m.define, res.size, m.why)
				}
				if !strings.Contains(res.failure, m.want) {
					t.Fatalf("%s with %s: counterexample %q, want one containing %q\n%s", w.name, m.define, res.failure, m.want, res.trail)
				}
				t.Logf("%s with %s: %s (%.1f s CPU)\n%sReplay: %s", w.name, m.define, res.failure, res.cpu.Seconds(), res.trail, res.replay)
			})
		}
	}
}

// requireTools fails the test when SPIN or a C compiler is missing: a model
// that is not checked must not pass unnoticed.
func requireTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"spin", "cc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH, so the protocol model cannot be checked: run `make model`, which installs spin (apt-get install -y spin) and runs this test", tool)
		}
	}
}

// result is the outcome of one SPIN search.
type result struct {
	failure string        // pan's first error line; empty when none was found
	trail   string        // the counterexample, replayed in words
	replay  string        // the command that replays it step by step
	size    string        // states stored and visited, for the log
	cpu     time.Duration // user and system CPU of spin, cc and pan
}

var (
	errorsLine = regexp.MustCompile(`errors: (\d+)`)
	statesLine = regexp.MustCompile(`(?m)^\s*(\d+) states, stored(.*)$`)
)

// check generates the verifier of w's model (with mutation defined, when not
// empty), compiles it and runs it in a fresh directory.
func (w world) check(t *testing.T, mutation string) result {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(w.model)
	if err != nil {
		t.Fatalf("reading model: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, w.model), src, 0o644); err != nil {
		t.Fatalf("copying model: %v", err)
	}
	var defs []string
	for _, d := range strings.Fields(w.defs + " " + mutation) {
		defs = append(defs, "-D"+d)
	}

	var cpu time.Duration
	if _, err := run(dir, &cpu, "spin", append(append([]string{"-a"}, defs...), w.model)...); err != nil {
		t.Fatalf("generating the verifier: %v", err)
	}
	// A mutation's counterexample comes early, and a small world's search
	// is short: compiling fast beats running fast. For a full search of a
	// big world -O1 costs least in compile and run together (measured: -O2
	// compiles 1 s longer and runs 10% faster). -DMEMLIM (MB) stops a
	// search that outgrows a shared machine.
	cflags := []string{"-O0", "-DMEMLIM=2048"}
	if mutation == "" && w.optimize {
		cflags[0] = "-O1"
	}
	var panArgs []string
	switch {
	case w.live:
		cflags = append(cflags, "-DNFAIR=3") // World, Informer and up to 3 objects
		panArgs = []string{"-a", "-f"}
	case w.model == "claim.pml":
		cflags = append(cflags, "-DSAFETY", "-DNOCLAIM")
	default:
		cflags = append(cflags, "-DSAFETY")
	}
	if _, err := run(dir, &cpu, "cc", append(cflags, "-o", "pan", "pan.c")...); err != nil {
		t.Fatalf("compiling the verifier: %v", err)
	}
	// -m bounds the search depth; pan says so when a run needs more, and
	// that is reported below rather than trusted.
	depth := w.depth
	if depth == 0 {
		depth = 20000
	}
	out, err := run(dir, &cpu, "./pan", append(panArgs, fmt.Sprintf("-m%d", depth), "-n")...)
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		t.Fatalf("running the verifier: %v", err)
	}
	for _, bad := range []string{"max search depth too small", "reached -DMEMLIM bound", "out of memory"} {
		if strings.Contains(out, bad) {
			t.Fatalf("the search was cut short (%s): the world is too big for an exhaustive check\n%s", bad, out)
		}
	}
	m := errorsLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("reading the verifier's report: no error count\n%s", out)
	}
	res := result{cpu: cpu}
	if s := statesLine.FindStringSubmatch(out); s != nil {
		res.size = strings.TrimSpace(s[1] + " states stored" + s[2])
	}
	if m[1] == "0" {
		return res
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "pan:1:") || strings.HasPrefix(line, "pan: ") && strings.Contains(line, "violated") {
			res.failure = strings.TrimSpace(strings.TrimPrefix(line, "pan:1:"))
			break
		}
	}
	if res.failure == "" {
		res.failure = "errors: " + m[1]
	}
	res.trail = trail(t, dir, w.model, defs)
	d := strings.Join(defs, " ")
	res.replay = fmt.Sprintf("cp model/%s /tmp && cd /tmp && spin -a %s %s && cc %s -o pan pan.c && ./pan %s && spin -t -p -g -l %s %s | grep -v '^Never claim'",
		w.model, d, w.model, strings.Join(cflags, " "), strings.Join(panArgs, " "), d, w.model)
	return res
}

// maxTrailLines bounds a printed trail: an acceptance cycle of a parked
// object repeats one pass over and over.
const maxTrailLines = 80

// trail replays the counterexample SPIN wrote: the model's own printf lines
// narrate it (who reads, writes, acts, is parked, what the world does), and
// the values of the globals at the end follow. The never claim's moves,
// which repeat the whole settled predicate, are left out.
func trail(t *testing.T, dir, model string, defs []string) string {
	t.Helper()
	out, err := run(dir, nil, "spin", append(append([]string{"-t"}, defs...), model)...)
	if err != nil {
		return fmt.Sprintf("replaying the trail: %v\n%s", err, out)
	}
	var b strings.Builder
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Never claim") || strings.TrimSpace(line) == "" {
			continue
		}
		if n++; n > maxTrailLines {
			b.WriteString("    ... (the rest repeats the cycle; replay it for every step)\n")
			break
		}
		b.WriteString("    " + strings.TrimSpace(line) + "\n")
	}
	return b.String()
}

// run runs name in dir and returns its combined output; it adds the CPU
// time the command used to cpu, when not nil.
func run(dir string, cpu *time.Duration, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cpu != nil && cmd.ProcessState != nil {
		*cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return out.String(), fmt.Errorf("running %s %s: %w\n%s", name, strings.Join(args, " "), err, lastLines(out.String(), 20))
	}
	return out.String(), nil
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
