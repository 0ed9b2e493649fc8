package envtest

import (
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// testLogLines is how many of its last lines a [TestLogger] keeps.
const testLogLines = 300

// TestLogger returns a logger for what t runs (a manager's Options.Logger,
// a context's logger): its last lines are printed with t's output when t
// has failed, and dropped otherwise. The output of a failing test thus
// shows what its operator logged, and a suite whose reconcilers log errors
// on purpose (refused writes, injected outages) does not bury the name of
// the test that failed under the lines of those that passed. Lines logged
// once t's cleanup has run are dropped. Verbosity is 0 unless
// ENVTEST_VERBOSE is set, which keeps the V(1) lines too.
func TestLogger(t testing.TB) logr.Logger {
	r := &logRing{}
	t.Cleanup(func() {
		lines := r.close()
		if !t.Failed() || len(lines) == 0 {
			return
		}
		t.Logf("the last %d lines logged by what the test ran:\n%s", len(lines), strings.Join(lines, "\n"))
	})
	verbosity := 0
	if zapLevel() < 0 {
		verbosity = 1
	}
	return funcr.New(r.add, funcr.Options{Verbosity: verbosity, LogTimestamp: true})
}

// logRing keeps the last testLogLines lines written to it until closed.
type logRing struct {
	mu     sync.Mutex
	lines  []string
	next   int
	closed bool
}

func (r *logRing) add(prefix, args string) {
	line := args
	if prefix != "" {
		line = prefix + " " + args
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if len(r.lines) < testLogLines {
		r.lines = append(r.lines, line)
		return
	}
	r.lines[r.next] = line
	r.next = (r.next + 1) % testLogLines
}

// close returns the kept lines, oldest first, and keeps no more.
func (r *logRing) close() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return append(append([]string(nil), r.lines[r.next:]...), r.lines[:r.next]...)
}
