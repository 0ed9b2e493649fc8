package claimmw

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/expiry"
	"github.com/ocf-claim/claim/pkg/finalizer"
)

// Defaults of the options.
const (
	// DefaultFinalizer is the finalizer the middleware puts on every object
	// that names a key, so that deleting it releases its claims.
	DefaultFinalizer finalizer.Name = backends.Domain + "/release"
	// DefaultParkedRequeue is how long a parked object (Parked, NotFirst,
	// Foreign, InvalidKey) waits before it is reconciled again when no
	// claim event wakes it earlier.
	DefaultParkedRequeue = 5 * time.Minute
	// DefaultWaitingRequeue is how long an object WaitingForHandover waits
	// before it asks the gate again.
	DefaultWaitingRequeue = 10 * time.Second
	// EventRecorderName is the reporting controller name [FromManager]
	// asks the manager's event recorder for.
	EventRecorderName = "ocf-claim"
	// DefaultMaxKeys is how many keys one object may name unless
	// [WithMaxKeys] says otherwise.
	DefaultMaxKeys = 32
)

// KeysFunc returns the claim keys obj needs: none, one or several. An error
// is shown as the InvalidKey condition on obj, not retried as an error.
type KeysFunc func(ctx context.Context, obj client.Object) ([]string, error)

// ParkedMode says what the middleware does with the inner reconciler while
// the object does not hold every key.
type ParkedMode int

const (
	// SkipInnerWhileParked calls the inner reconciler while the object does
	// not hold every key only when it must stop using keys: in the pass in
	// which it found it lost a key (its condition said Claimed), and in
	// passes that give keys up (State.Releasing). Default, except for an
	// object type that is a [StatusConditionsOwner] (see [WhileParked]).
	// An inner reconciler whose workloads must be stopped when a key is
	// lost, even if that stopping pass fails and is retried, should use
	// RunInnerWhileParked.
	SkipInnerWhileParked ParkedMode = iota
	// RunInnerWhileParked calls the inner reconciler in every pass, with a
	// [State] whose Granted is false while the object does not hold every
	// key, so that it can render a suspended form of what it manages. It
	// must not act on any key then.
	RunInnerWhileParked
)

// StatusConditionsOwner is an object that hands out its status conditions
// by pointer: the owner contract of the operator-component-framework (ocf)
// and the convention of Flux's toolkit types. The middleware reads and
// writes the claim condition through it, without reflection.
type StatusConditionsOwner interface {
	client.Object
	GetStatusConditions() *[]metav1.Condition
}

// Conditioned is implemented by objects that copy their status conditions
// in and out (the getter/setter convention of some kubebuilder projects).
// An object that implements neither this nor [StatusConditionsOwner] needs
// a Status.Conditions field of type []metav1.Condition, which the
// middleware reaches by reflection.
type Conditioned interface {
	client.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
}

// Option configures a Middleware. [Wrap] refuses a nil Option, naming its
// position (options[i]: nil), as it refuses a nil or typed-nil dependency.
type Option func(*config)

type config struct {
	prototype     client.Object
	client        client.Client
	apiReader     client.Reader
	claimer       *claim.Claimer
	claimCfg      *claim.Config
	claimOpts     []claim.Option
	keys          KeysFunc
	condType      conditions.Type
	finalizer     finalizer.Name
	parkedRequeue time.Duration
	waitRequeue   time.Duration
	// herdWait is the longest a freed key's namers but the first are held
	// back (herds); herdWait by default, longer only in tests.
	herdWait      time.Duration
	parkedMode    ParkedMode
	parkedModeSet bool
	recorder      events.EventRecorder
	metrics       bool
	name          string
	handover      HandoverFunc
	renewal       *expiry.KeeperConfig
	manager       manager.Manager
	maxKeys       int
	disclosure    Disclosure
	fairness      bool
	fairnessGrace time.Duration
	yieldWake     *yieldWaker
	partial       *partialCache
	// problems are what an option found wrong with its argument, reported
	// by validate with the rest.
	problems []error
	// gvk and kind are the object type's, from the client's scheme.
	gvk  schema.GroupVersionKind
	kind string
}

// For names the type of the objects the middleware reconciles, as
// prototype (for example &v1.CamundaCluster{}). Required. The type needs a
// status subresource, and its conditions reachable in one of three ways,
// tried in this order: GetStatusConditions() *[]metav1.Condition
// ([StatusConditionsOwner], ocf's owner contract), [Conditioned], or a
// Status.Conditions []metav1.Condition field.
func For(prototype client.Object) Option { return func(c *config) { c.prototype = prototype } }

// WithClient sets the client that reads the object (a cached client is
// fine) and writes its status and finalizer. Required unless [FromManager]
// is given.
func WithClient(cl client.Client) Option { return func(c *config) { c.client = cl } }

// WithAPIReader sets the uncached reader the claim protocol and the
// finalizer's conflict retries read through. Required with [WithClaim]
// unless [FromManager] is given.
func WithAPIReader(r client.Reader) Option { return func(c *config) { c.apiReader = r } }

// FromManager takes the client, the API reader and an event recorder from
// mgr. Options given after it override what it set. With [WithClaim], the
// Claimer is built with claim.WithServerVersion on a discovery client of
// mgr.GetConfig(), so [Wrap] fails on an API server that does not promise
// comparable resourceVersions instead of handing out fencing tokens that may
// not increase. With [WithRenewal], the renewals are stopped when mgr stops.
func FromManager(mgr manager.Manager) Option {
	return func(c *config) {
		if mgr == nil || isNil(mgr) {
			c.problems = append(c.problems, errors.New("FromManager: the manager is nil"))
			return
		}
		c.manager = mgr
		c.client = mgr.GetClient()
		c.apiReader = mgr.GetAPIReader()
		c.recorder = mgr.GetEventRecorder(EventRecorderName)
	}
}

// WithClaimer sets a ready Claimer. Give either this or [WithClaim].
func WithClaimer(cl *claim.Claimer) Option { return func(c *config) { c.claimer = cl } }

// WithClaim builds the Claimer from cfg and opts (the backend, Liveness,
// HandoverGate, Siblings) with the API reader and the client. Give either
// this or [WithClaimer].
func WithClaim(cfg claim.Config, opts ...claim.Option) Option {
	return func(c *config) { c.claimCfg, c.claimOpts = &cfg, opts }
}

// WithKeys sets the function that computes an object's keys. Required.
func WithKeys(f KeysFunc) Option { return func(c *config) { c.keys = f } }

// WithConditionType sets the type of the claim condition. Default:
// conditions.Claimed.
func WithConditionType(t conditions.Type) Option { return func(c *config) { c.condType = t } }

// WithFinalizer sets the finalizer name. Default: [DefaultFinalizer].
func WithFinalizer(name finalizer.Name) Option { return func(c *config) { c.finalizer = name } }

// WithRequeue sets how long a parked object and an object waiting for a
// handover wait before they are reconciled again when nothing wakes them
// earlier. Defaults: [DefaultParkedRequeue], [DefaultWaitingRequeue].
func WithRequeue(parked, waiting time.Duration) Option {
	return func(c *config) { c.parkedRequeue, c.waitRequeue = parked, waiting }
}

// WhileParked sets what happens to the inner reconciler while the object is
// not granted. Default: [RunInnerWhileParked] when the object type is a
// [StatusConditionsOwner] (ocf's owner contract: its components report a
// condition in every pass, so a parked owner shows why each waits, and its
// Ready is folded every pass), [SkipInnerWhileParked] otherwise. Pass
// WhileParked(SkipInnerWhileParked) to skip an ocf owner's inner
// reconciler while it is parked.
func WhileParked(m ParkedMode) Option {
	return func(c *config) { c.parkedMode, c.parkedModeSet = m, true }
}

// WithEventRecorder sets where events about claims go. nil records none.
func WithEventRecorder(r events.EventRecorder) Option { return func(c *config) { c.recorder = r } }

// WithMetrics turns the Prometheus metrics on or off. Default: on.
func WithMetrics(on bool) Option { return func(c *config) { c.metrics = on } }

// WithName sets the middleware's name: the name of the controller
// [Middleware.SetupWithManager] builds and the "controller" label of its
// metrics, the suffix of its field indexes, and the claim set of its records
// when the claim.Config leaves Set empty. Two middlewares for one kind need
// different names. Default: the lower-case kind of the object type.
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithHandover lets an object hand the keys it holds to a named successor,
// an object of the same type (planned handover, see claim.Claimer.Prepare).
// f is asked, in every pass in which the object holds all its keys, about
// each key it holds:
//
//   - Naming a successor prepares the handover on the key's record (once;
//     later passes write nothing). The successor stays WaitingForHandover
//     and its inner reconciler does not act (it runs parked only with
//     [RunInnerWhileParked]). The object keeps the key, and
//     its inner reconciler runs with the handover in [State].Handovers: that
//     pass moves the workloads off the key.
//   - After an inner pass that saw the handover and returned success with a
//     zero Result (no error, no requeue), the middleware commits: the
//     successor becomes the holder with a new, greater token, and is woken
//     by the record's change (watch records with [Middleware.ClaimEvents]).
//     An inner pass that needs more time returns a requeue or an error and
//     the commit waits. The object then no longer holds the key; it is
//     reconciled again at once and shows Parked while it still names it.
//   - Naming no successor any more, before the commit, aborts the handover.
//
// A successor that does not exist (read uncached, by UID) or is being
// deleted is no successor: nothing is prepared. Needs an API reader.
func WithHandover(f HandoverFunc) Option { return func(c *config) { c.handover = f } }

// WithMaxKeys bounds how many keys one object may name, so that one object
// cannot make the operator hold an unbounded number of records: an object
// naming more shows the InvalidKey condition, and no record is written for
// it. Default: [DefaultMaxKeys].
func WithMaxKeys(n int) Option { return func(c *config) { c.maxKeys = n } }

// WithRenewal keeps time-based claims alive: after a key is granted, a
// expiry.Keeper renews its record every cfg.RenewEvery until the object
// releases the key, is deleted, hands the key over or loses it (one goroutine
// per held key). Contenders judge the holder by expiry.New with
// cfg.Duration (pass it with claim.WithLiveness to [WithClaim]).
//
// The inner reconciler's context is cancelled as soon as the hold of any key
// of its pass ends: when cfg.RenewDeadline passed without a successful
// renewal (the cause wraps expiry.ErrRenewDeadline), or when a renewal found
// the claim lost (claim.ErrNotHolder). Stop acting when it is. The next pass
// acquires again: a key still recorded for the object is renewed once (a
// write conditional on the record) before it is held again.
func WithRenewal(cfg expiry.KeeperConfig) Option {
	return func(c *config) { c.renewal = &cfg }
}

// validate reports every problem of c at once and fills the defaults.
func (c *config) validate() error {
	errs := slices.Clone(c.problems)
	// A typed nil (a nil *T in an interface, as a constructor returns
	// beside its error) is not nil and would panic in the first pass: it is
	// named, then treated as not given, so that nothing below calls it.
	typedNil := func(name string, v any) bool {
		if v != nil && isNil(v) {
			errs = append(errs, fmt.Errorf("%s: a nil %T", name, v))
			return true
		}
		return false
	}
	if typedNil("WithClient", c.client) {
		c.client = nil
	}
	if typedNil("WithAPIReader", c.apiReader) {
		c.apiReader = nil
	}
	if typedNil("WithEventRecorder", c.recorder) {
		c.recorder = nil
	}
	if c.renewal != nil && typedNil("WithRenewal: Clock", c.renewal.Clock) {
		c.renewal.Clock = nil
	}
	if typedNil("For", c.prototype) {
		c.prototype = nil
	}
	if c.prototype == nil {
		errs = append(errs, errors.New("object type: none given; pass claimmw.For(&v1.YourKind{})"))
	} else if _, err := conditionsOf(newObject(c.prototype)); err != nil {
		errs = append(errs, fmt.Errorf("object type %T: %w", c.prototype, err))
	}
	if c.client == nil {
		errs = append(errs, errors.New("client: none given; pass claimmw.FromManager(mgr) or claimmw.WithClient"))
	}
	switch {
	case c.claimer == nil && c.claimCfg == nil:
		errs = append(errs, errors.New("claimer: none given; pass claimmw.WithClaimer or claimmw.WithClaim"))
	case c.claimer != nil && c.claimCfg != nil:
		errs = append(errs, errors.New("claimer: both WithClaimer and WithClaim given; pass one"))
	case c.claimCfg != nil && c.apiReader == nil:
		errs = append(errs, errors.New("API reader: none given for WithClaim; pass claimmw.FromManager(mgr) or claimmw.WithAPIReader"))
	}
	if c.fairnessGrace < 0 {
		errs = append(errs, fmt.Errorf("fairness grace: %s; must not be negative", c.fairnessGrace))
	}
	if c.fairness && c.claimCfg == nil {
		errs = append(errs, errors.New("fairness: WithFairness builds the Claimer's siblings; pass claimmw.WithClaim, not WithClaimer"))
	}
	if c.handover != nil && c.apiReader == nil {
		errs = append(errs, errors.New("handover: needs an API reader to resolve successors; pass claimmw.FromManager(mgr) or claimmw.WithAPIReader"))
	}
	if c.keys == nil {
		errs = append(errs, errors.New("keys: no keys function given; pass claimmw.WithKeys"))
	}
	if c.condType == "" {
		c.condType = conditions.Claimed
	}
	for _, msg := range validation.IsQualifiedName(string(c.condType)) {
		errs = append(errs, fmt.Errorf("condition type %q: %s", c.condType, msg))
	}
	if c.finalizer == "" {
		c.finalizer = DefaultFinalizer
	}
	if err := finalizer.ValidateName(c.finalizer); err != nil {
		errs = append(errs, err)
	}
	if c.parkedRequeue == 0 {
		c.parkedRequeue = DefaultParkedRequeue
	}
	if c.waitRequeue == 0 {
		c.waitRequeue = DefaultWaitingRequeue
	}
	if c.parkedRequeue < 0 || c.waitRequeue < 0 {
		errs = append(errs, fmt.Errorf("requeue: intervals must not be negative (parked %s, waiting %s)", c.parkedRequeue, c.waitRequeue))
	}
	if c.disclosure != DiscloseSameNamespace && c.disclosure != DiscloseAll && c.disclosure != DiscloseNone {
		errs = append(errs, fmt.Errorf("disclosure: unknown value %d", c.disclosure))
	}
	if c.maxKeys == 0 {
		c.maxKeys = DefaultMaxKeys
	}
	if c.maxKeys < 0 {
		errs = append(errs, fmt.Errorf("max keys: %d; must be positive", c.maxKeys))
	}
	if _, ocf := c.prototype.(StatusConditionsOwner); ocf && !c.parkedModeSet {
		c.parkedMode = RunInnerWhileParked
	}
	if c.parkedMode != SkipInnerWhileParked && c.parkedMode != RunInnerWhileParked {
		errs = append(errs, fmt.Errorf("parked mode: unknown value %d", c.parkedMode))
	}
	if c.prototype != nil && c.client != nil {
		if gvk, err := apiutil.GVKForObject(c.prototype, c.client.Scheme()); err == nil {
			c.gvk, c.kind = gvk, gvk.Kind
			if c.name == "" {
				c.name = strings.ToLower(gvk.Kind)
			}
		} else {
			errs = append(errs, fmt.Errorf("object type %T: %w", c.prototype, err))
		}
	}
	return errors.Join(errs...)
}

// isNil reports whether v, a non-nil interface, holds a nil pointer, map,
// func, channel, slice or interface.
func isNil(v any) bool {
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// newObject returns a new, empty object of prototype's type.
func newObject(prototype client.Object) client.Object {
	t := reflect.TypeOf(prototype)
	if t.Kind() != reflect.Pointer {
		return prototype.DeepCopyObject().(client.Object) //nolint:forcetypeassert // a client.Object's copy is one
	}
	return reflect.New(t.Elem()).Interface().(client.Object) //nolint:forcetypeassert // same type as prototype
}

var conditionSliceType = reflect.TypeOf([]metav1.Condition(nil))

// conditionsOf returns a pointer to obj's status conditions.
func conditionsOf(obj client.Object) (*[]metav1.Condition, error) {
	if o, ok := obj.(StatusConditionsOwner); ok {
		if conds := o.GetStatusConditions(); conds != nil {
			return conds, nil
		}
		// A nil answer from an owner whose status is an unset pointer: the
		// Status.Conditions path below allocates the status.
	}
	if c, ok := obj.(Conditioned); ok {
		conds := c.GetConditions()
		return &conds, nil
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, errors.New("is not a pointer to a struct and has no GetStatusConditions() *[]metav1.Condition (claimmw.StatusConditionsOwner)")
	}
	status := v.Elem().FieldByName("Status")
	if status.Kind() == reflect.Pointer {
		if status.IsNil() {
			status.Set(reflect.New(status.Type().Elem()))
		}
		status = status.Elem()
	}
	if !status.IsValid() || status.Kind() != reflect.Struct {
		return nil, errors.New("has no Status struct field and no GetStatusConditions() *[]metav1.Condition (claimmw.StatusConditionsOwner)")
	}
	f := status.FieldByName("Conditions")
	if !f.IsValid() || f.Type() != conditionSliceType {
		return nil, errors.New("has no Status.Conditions []metav1.Condition field and no GetStatusConditions() *[]metav1.Condition (claimmw.StatusConditionsOwner)")
	}
	return f.Addr().Interface().(*[]metav1.Condition), nil //nolint:forcetypeassert // type checked above
}
