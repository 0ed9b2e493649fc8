package claimmw_test

// What the middleware reports of what happened: events, the claim metrics
// and their controller label, the held gauge, and the log lines of the
// inner reconciler and of a stop.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// metricValue reads one series of the middleware's metrics from
// controller-runtime's registry: the gauge or counter value, or a
// histogram's sample count.
func metricValue(t *testing.T, family, name string, labels map[string]string) float64 {
	t.Helper()
series:
	for _, m := range seriesOf(t, family) {
		got := labelsOf(m)
		if got["controller"] != name {
			continue
		}
		for k, v := range labels {
			if got[k] != v {
				continue series
			}
		}
		return value(m)
	}
	return 0
}

// seriesOf returns every series of family in controller-runtime's registry.
func seriesOf(t *testing.T, family string) []*dto.Metric {
	t.Helper()
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == family {
			return f.GetMetric()
		}
	}
	return nil
}

// labelsOf returns the labels of one series by name.
func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// hasEvent reports whether an event with reason regards the Widget name.
func (f *fixture) hasEvent(t *testing.T, name, reason string) bool {
	t.Helper()
	var list eventsv1.EventList
	if err := env.APIReader.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			return true
		}
	}
	return false
}

func TestEventsAndMetricsReportWhatHappened(t *testing.T) {
	const name = "observed"
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithName(name)}})
	// Given a holds k and b is parked on it
	f.aHoldsKAndBWaits(t)
	// Then a has a Claimed event and b a Parked one
	for _, want := range []struct{ widget, reason string }{{"a", string(claimmw.EventClaimed)}, {"b", string(conditions.ReasonParked)}} {
		eventually(t, 5*time.Second, func() (bool, string) {
			return f.hasEvent(t, want.widget, want.reason), fmt.Sprintf("no %s event on %s", want.reason, want.widget)
		})
	}
	// And the metrics count one claim held, the outcomes by reason, and the latency
	if got := metricValue(t, claimmw.MetricClaimsHeld, name, nil); got != 1 {
		t.Errorf("%s = %v, want 1", claimmw.MetricClaimsHeld, got)
	}
	for _, reason := range []string{"Acquired", "HeldElsewhere"} {
		if got := metricValue(t, claimmw.MetricAcquireTotal, name, map[string]string{"reason": reason}); got < 1 {
			t.Errorf("%s{reason=%s} = %v, want at least 1", claimmw.MetricAcquireTotal, reason, got)
		}
	}
	if got := metricValue(t, claimmw.MetricAcquireDuration, name, nil); got < 2 {
		t.Errorf("%s has %v samples, want at least 2", claimmw.MetricAcquireDuration, got)
	}
	// When a is deleted
	f.deleteWidgetAsync(t, "a")
	f.waitForReason(t, "b", conditions.ReasonClaimed, wakeWithin)
	// Then a has a Released event, b a Claimed one, and still one claim is held
	for _, want := range []struct{ widget, reason string }{{"a", string(claimmw.EventReleased)}, {"b", string(claimmw.EventClaimed)}} {
		eventually(t, 5*time.Second, func() (bool, string) {
			return f.hasEvent(t, want.widget, want.reason), fmt.Sprintf("no %s event on %s", want.reason, want.widget)
		})
	}
	eventually(t, 5*time.Second, func() (bool, string) {
		got := metricValue(t, claimmw.MetricClaimsHeld, name, nil)
		return got == 1, fmt.Sprintf("%s = %v, want 1", claimmw.MetricClaimsHeld, got)
	})
}

// controllerLabels returns the values of the controller label of family.
func controllerLabels(t *testing.T, family string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, m := range seriesOf(t, family) {
		if c, ok := labelsOf(m)["controller"]; ok {
			out[c] = true
		}
	}
	return out
}

// TestMetricsCarryTheControllerNameAndAreOffWhenAskedTo: the controller
// label of the claim metrics is the name controller-runtime reports the
// controller under (even when the builder was Named otherwise), and
// WithMetrics(false) records nothing and does not panic.
func TestMetricsCarryTheControllerNameAndAreOffWhenAskedTo(t *testing.T) {
	// Given a middleware named metrics-on and one named metrics-off with
	// metrics off
	on := start(t, setup{opts: []claimmw.Option{claimmw.WithName("metrics-on")}})
	off := start(t, setup{opts: []claimmw.Option{claimmw.WithName("metrics-off"), claimmw.WithMetrics(false)}})
	// When each reconciles a holder and a parked object
	for _, f := range []*fixture{on, off} {
		f.aHoldsKAndBWaits(t)
	}
	// Then controller-runtime's own metrics and the claim's name the same
	// controller
	eventually(t, 5*time.Second, func() (bool, string) {
		cr := controllerLabels(t, "controller_runtime_reconcile_total")
		return cr["metrics-on"] && cr["metrics-off"], fmt.Sprintf("controller-runtime controllers: %v", cr)
	})
	for _, fam := range []string{claimmw.MetricClaimsHeld, claimmw.MetricAcquireTotal, claimmw.MetricAcquireDuration} {
		got := controllerLabels(t, fam)
		if !got["metrics-on"] {
			t.Errorf("%s has no series for controller metrics-on: %v", fam, got)
		}
		// And the one with metrics off has none
		if got["metrics-off"] {
			t.Errorf("%s has a series for metrics-off, whose metrics are off", fam)
		}
	}
}

// TestHeldGaugeDropsByTheDeletedObjectsKeysOnly: "no series outlives a
// deleted object (the held gauge drops by the object's keys)", even when two
// middlewares share a controller name (two managers in one process, a
// multi-cluster operator, or any test binary; controller-runtime sums its own
// metrics of such controllers): the gauge series is keyed by the controller
// label only, so neither middleware may overwrite it with its own private
// total, and deleting one object drops the gauge by that object's keys only.
func TestHeldGaugeDropsByTheDeletedObjectsKeysOnly(t *testing.T) {
	const name = "held-gauge"
	// Given two managers, each with a middleware named name
	first := start(t, setup{opts: []claimmw.Option{claimmw.WithName(name)}})
	second := start(t, setup{opts: []claimmw.Option{claimmw.WithName(name)}})
	// And b, of the first, holds one key
	first.createAndWait(t, "b", conditions.ReasonClaimed, "k-b")
	// And a, of the second, holds two
	second.createAndWait(t, "a", conditions.ReasonClaimed, "k-a1", "k-a2")
	time.Sleep(200 * time.Millisecond)
	before := metricValue(t, claimmw.MetricClaimsHeld, name, nil)

	// When b, holding one key, is deleted
	first.deleteWidgetAsync(t, "b")
	eventually(t, 10*time.Second, func() (bool, string) {
		_, err := first.widget(t, "b")
		return err != nil, fmt.Sprintf("b still exists (%v)", err)
	})
	time.Sleep(300 * time.Millisecond)
	after := metricValue(t, claimmw.MetricClaimsHeld, name, nil)

	// Then the gauge dropped by b's one key: a still holds two
	t.Logf("%s{controller=%q}: %v before, %v after deleting a one-key holder; 3 keys were held, 2 still are",
		claimmw.MetricClaimsHeld, name, before, after)
	if before-after != 1 {
		t.Errorf("deleting an object that held 1 key moved %s from %v to %v (by %v); want a drop of 1",
			claimmw.MetricClaimsHeld, before, after, before-after)
	}
	if after != 2 {
		t.Errorf("%s = %v after the deletion while a holds 2 keys under controller %q", claimmw.MetricClaimsHeld, after, name)
	}
}

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

// What the middleware logs when its manager starts (resuming the renewals
// of what the objects hold, stamping records) goes to the manager's logger,
// as the passes' lines do: an operator that sets only the manager's
// Options.Logger, not controller-runtime's global one, sees it. When the
// manager's Options.BaseContext (the context it starts its runnables with)
// carries a logger, that one gets them instead. Either way they name the
// middleware.
func TestWhatTheStartLogsGoesToTheManagersLoggerOrTheBaseContexts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		baseCtx bool
	}{
		{name: "the manager's logger"},
		{name: "a logger in Options.BaseContext", baseCtx: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			s := shortRenewal(t)
			f, stop := startIn(t, ns, s)
			// Given a holds k on time-based liveness
			f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
			a, _ := f.widget(t, "a")
			// When the operator restarts, its manager logging to a logger
			// of its own (and its BaseContext carrying another), and the
			// renewals of a's record are refused
			stop()
			s.logs, s.failRenewalsOf = &logLines{}, a.UID
			want, other := s.logs, (*logLines)(nil)
			if tc.baseCtx {
				s.baseCtxLogs = &logLines{}
				want, other = s.baseCtxLogs, s.logs
			}
			startIn(t, ns, s)
			// Then the start's refused renewal is logged there, naming
			// the middleware, and only there
			const line = "renewing a claim the object still holds"
			eventually(t, wakeWithin, func() (bool, string) {
				return want.contain(line), "the logger has no line of the refused renewal:\n" + want.all()
			})
			if !want.contain(`"middleware"="widget"`) {
				t.Errorf("the start's lines do not name the middleware:\n%s", want.all())
			}
			if other != nil && other.contain(line) {
				t.Errorf("the start's lines went to the manager's logger too:\n%s", other.all())
			}
		})
	}
}

// Given a holds k, when the manager's cache refuses the listings by index
// and another client deletes k's record, then the record event handler's
// failed listing is logged through the manager's logger, naming the
// middleware: the handlers run on a context that carries no logger, and
// would otherwise log to controller-runtime's global logger, which an
// operator that set only the manager's Options.Logger never sees.
func TestWhatTheRecordEventsLogGoesToTheManagersLogger(t *testing.T) {
	var refuse atomic.Bool
	funcs := &interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lo := &client.ListOptions{}
			lo.ApplyOptions(opts)
			if _, widgets := list.(*testcrd.WidgetList); widgets && refuse.Load() && lo.FieldSelector != nil && !lo.FieldSelector.Empty() {
				return errors.New("injected: the cache refuses listings by index")
			}
			return c.List(ctx, list, opts...)
		},
	}
	r := startTenantRig(t, true, funcs)
	// Given a holds k
	dc := direct(t)
	if err := dc.Create(context.Background(), &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: r.a, Name: "a"}, Spec: testcrd.WidgetSpec{Keys: []string{"k"}}}); err != nil {
		t.Fatal(err)
	}
	r.waitReason(t, r.a, "a", conditions.ReasonClaimed)
	// When the cache refuses listings by index and another client deletes
	// k's record
	refuse.Store(true)
	leases := &coordinationv1.LeaseList{}
	if err := dc.List(context.Background(), leases, client.InNamespace(r.claims)); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) == 0 {
		t.Fatal("no record of k")
	}
	for i := range leases.Items {
		if err := dc.Delete(context.Background(), &leases.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Then the handler's failed listing is in the manager's log, naming
	// the middleware
	eventually(t, wakeWithin, func() (bool, string) {
		return r.logs.contain("listing the objects that name a claim key"),
			"the manager's logger has no line of the record event handler's failed listing:\n" + r.logs.all()
	})
	for _, line := range strings.Split(r.logs.all(), "\n") {
		if strings.Contains(line, "listing the objects that name a claim key") && !strings.Contains(line, `"middleware"=`) {
			t.Errorf("the handler's line does not name the middleware: %s", line)
		}
	}
}
