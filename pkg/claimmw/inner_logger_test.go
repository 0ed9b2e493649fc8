package claimmw_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claimmw"
)

type callersLoggerKey struct{}

// TestInnerLogsCarryTheCallersLoggerOnEveryPath: the inner reconciler's log
// lines carry the caller's logger, not the middleware's "claim" logger, on
// the granted, the parked and the deletion path.
func TestInnerLogsCarryTheCallersLoggerOnEveryPath(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WhileParked(claimmw.RunInnerWhileParked)}})
	ctx := context.Background()
	var mu sync.Mutex
	var lines []string
	caller := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+"|"+args)
	}, funcr.Options{}).WithName("caller").WithValues("reconcileID", "callers-own")
	f.inner.hook = func(ctx context.Context, name string, c call) (reconcile.Result, error) {
		mine := ctx.Value(callersLoggerKey{}) != nil
		if c.state.Deleting && !mine {
			// Keep the object for the test's own deletion pass.
			return reconcile.Result{}, errors.New("held for the test's own pass")
		}
		if mine {
			log.FromContext(ctx).Info("inner line", "path", fmt.Sprintf("granted=%t deleting=%t", c.state.Granted, c.state.Deleting))
		}
		return reconcile.Result{}, nil
	}
	myCtx := log.IntoContext(context.WithValue(ctx, callersLoggerKey{}, true), caller)
	pass := func(name string) {
		t.Helper()
		if _, err := f.mw.Reconcile(myCtx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: f.ns, Name: name}}); err != nil {
			t.Logf("pass of %s: %v", name, err)
		}
	}
	// Given a holds k and b is parked on it
	f.aHoldsKAndBWaits(t)
	// When the caller runs a pass of each with its own logger, and of a
	// after its deletion began
	pass("a")
	pass("b")
	f.deleteWidgetAsync(t, "a")
	eventually(t, 10*time.Second, func() (bool, string) {
		w, err := f.widget(t, "a")
		return err == nil && w.DeletionTimestamp != nil, "a has no deletion timestamp"
	})
	time.Sleep(200 * time.Millisecond) // the manager's cache sees the deletion
	pass("a")
	// Then every inner line is the caller's logger, with its values, and not
	// the middleware's claim logger
	mu.Lock()
	defer mu.Unlock()
	var paths []string
	for _, l := range lines {
		paths = append(paths, l)
		if got := l[:len("caller|")]; got != "caller|" {
			t.Errorf("inner line logged under %q, want the caller's logger: %s", l, l)
		}
		if !strings.Contains(l, `"reconcileID"="callers-own"`) {
			t.Errorf("inner line lost the caller's values: %s", l)
		}
	}
	if len(lines) != 3 {
		t.Errorf("%d inner lines, want 3 (granted, parked, deleting): %q", len(lines), paths)
	}
}
