package claimmw

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Metric names, on controller-runtime's metrics.Registry. Every metric
// carries the middleware's name (see [WithName]), which is also the name of
// the controller [Middleware.SetupWithManager] builds, as the "controller"
// label, as controller-runtime's own metrics and ocf's do; the acquire
// counter also the outcome reason ([conditions.MetricLabel]). No label carries a key or an object name,
// so no series outlives an object: a deleted object's held keys leave the
// held gauge at its last pass.
const (
	MetricClaimsHeld      = "ocf_claim_held"
	MetricAcquireTotal    = "ocf_claim_acquire_total"
	MetricTakeoversTotal  = "ocf_claim_takeovers_total"
	MetricHandoverWaits   = "ocf_claim_handover_waits_total"
	MetricAcquireDuration = "ocf_claim_acquire_duration_seconds"
	metricLabelName       = "controller"
	metricLabelReason     = "reason"
)

type collectors struct {
	held      *prometheus.GaugeVec
	acquires  *prometheus.CounterVec
	takeovers *prometheus.CounterVec
	waits     *prometheus.CounterVec
	latency   *prometheus.HistogramVec
}

var (
	registerOnce sync.Once
	shared       collectors
)

// registered returns the collectors, registering them on the first call. A
// collector someone else registered under the same name is reused, so two
// middlewares (or a test binary that builds many) never fail to register.
func registered() *collectors {
	registerOnce.Do(func() {
		shared = collectors{
			held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
				Name: MetricClaimsHeld, Help: "Claim keys held by the objects this middleware reconciles.",
			}, []string{metricLabelName}),
			acquires: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: MetricAcquireTotal, Help: "Acquire calls by outcome reason (Error for failed calls).",
			}, []string{metricLabelName, metricLabelReason}),
			takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: MetricTakeoversTotal, Help: "Keys taken over from holders that were gone.",
			}, []string{metricLabelName}),
			waits: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: MetricHandoverWaits, Help: "Times an object started waiting for a handover.",
			}, []string{metricLabelName}),
			latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Name: MetricAcquireDuration, Help: "Latency of one Acquire, including its API requests.",
				Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
			}, []string{metricLabelName}),
		}
		shared.held = register(shared.held)
		shared.acquires = register(shared.acquires)
		shared.takeovers = register(shared.takeovers)
		shared.waits = register(shared.waits)
		shared.latency = register(shared.latency)
	})
	return &shared
}

func register[C prometheus.Collector](c C) C {
	if err := metrics.Registry.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		// A collector of another shape holds the name; count into ours
		// unregistered rather than fail a reconcile over metrics.
	}
	return c
}

// recorder records one middleware's metrics. A nil recorder records nothing
// (metrics off).
type recorder struct {
	name string
	c    *collectors
}

func newRecorder(name string) *recorder { return &recorder{name: name, c: registered()} }

// heldKeys counts the keys each object held at its last pass, per
// controller name, for the held gauge only: nothing decides from it. It is
// shared by every recorder of the process, because they share the gauge's
// series: two middlewares under one controller name (two managers in one
// process) add up instead of overwriting each other.
var heldKeys = struct {
	sync.Mutex
	objects map[string]map[types.NamespacedName]int
	total   map[string]int
}{objects: map[string]map[types.NamespacedName]int{}, total: map[string]int{}}

func (r *recorder) observeAcquire(o claim.Outcome, err error, took time.Duration) {
	if r == nil {
		return
	}
	r.c.acquires.WithLabelValues(r.name, conditions.MetricLabel(o.Reason, err)).Inc()
	r.c.latency.WithLabelValues(r.name).Observe(took.Seconds())
	if err == nil && o.Reason == claim.ReasonTakenOver {
		r.c.takeovers.WithLabelValues(r.name).Inc()
	}
}

func (r *recorder) observeParked(reason conditions.Reason) {
	if r == nil || reason != conditions.ReasonWaitingForHandover {
		return
	}
	r.c.waits.WithLabelValues(r.name).Inc()
}

// setHeld records that obj holds n keys and updates the gauge.
func (r *recorder) setHeld(obj types.NamespacedName, n int) {
	if r == nil {
		return
	}
	heldKeys.Lock()
	defer heldKeys.Unlock()
	objs := heldKeys.objects[r.name]
	if objs == nil {
		objs = map[types.NamespacedName]int{}
		heldKeys.objects[r.name] = objs
	}
	heldKeys.total[r.name] += n - objs[obj]
	if n == 0 {
		delete(objs, obj)
	} else {
		objs[obj] = n
	}
	r.c.held.WithLabelValues(r.name).Set(float64(heldKeys.total[r.name]))
}
