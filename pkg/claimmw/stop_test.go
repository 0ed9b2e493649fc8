package claimmw_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/conditions"
)

// errorSink records the Error lines of a logger; Info lines are ignored.
type errorSink struct {
	mu     *sync.Mutex
	errors *[]string
}

func (s errorSink) Init(logr.RuntimeInfo)          {}
func (s errorSink) Enabled(int) bool               { return true }
func (s errorSink) Info(int, string, ...any)       {}
func (s errorSink) WithValues(...any) logr.LogSink { return s }
func (s errorSink) WithName(string) logr.LogSink   { return s }
func (s errorSink) Error(err error, msg string, _ ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.errors = append(*s.errors, fmt.Sprintf("%s: %v", msg, err))
}

// TestACleanStopLogsNoError: a manager that stops cancels the context of
// every pass in flight; the API calls of the pass then fail with
// context.Canceled. That is no fault: the pass logs no error and returns
// none for controller-runtime to log.
func TestACleanStopLogsNoError(t *testing.T) {
	f := start(t, setup{})
	// Given a Widget that holds its key
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	var mu sync.Mutex
	var lines []string
	logger := logr.New(errorSink{mu: &mu, errors: &lines})
	// When a pass runs in a context the manager's stop cancelled
	ctx, cancel := context.WithCancel(log.IntoContext(context.Background(), logger))
	cancel()
	_, err := f.mw.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: "a"}})
	// Then it returns no error and logs none
	if err != nil {
		t.Errorf("Reconcile in a cancelled context = %v, want no error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) > 0 {
		t.Errorf("a clean stop logged errors: %q", lines)
	}
}
