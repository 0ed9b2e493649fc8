package fence_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/pkg/backends/backendtest"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/fence"
)

const (
	key      = "elasticsearch|https://es.data.svc:9200"
	otherKey = "rdbms|pg.data.svc:5432/camunda"
	dataKey  = "v"
)

// holder creates a ConfigMap to stand for a holder object.
func holder(t *testing.T, ns, name string) claim.Holder {
	t.Helper()
	return backendtest.ConfigMapHolder(t, env.Client, ns, name)
}

func acquire(t *testing.T, c *claim.Claimer, k string, self claim.Holder, want claim.Reason) claim.Token {
	t.Helper()
	_, o, err := c.Acquire(context.Background(), k, self)
	if err != nil {
		t.Fatalf("Acquire(%q, %s): %v", k, self, err)
	}
	if o.Reason != want {
		t.Fatalf("Acquire(%q, %s) = %s (%s), want %s", k, self, o.Reason, o.Message, want)
	}
	return o.Token
}

// takeover plays a real handover of k on Leases in ns: a first holder
// acquires k, its object is deleted, a second holder takes k over. It
// returns both grants; the second's token is newer.
func takeover(t *testing.T, ns, k string) (stale, current fence.Grant) {
	t.Helper()
	writer := env.TestClient(t)
	c, err := claim.New(env.APIReader, writer, claim.Config{Namespace: ns})
	if err != nil {
		t.Fatalf("lease.NewClaimer: %v", err)
	}
	suffix := strings.TrimPrefix(fence.AnnotationFor(k), fence.AnnotationPrefix)
	first := holder(t, ns, "first-"+suffix)
	stale = fence.Grant{Key: k, Token: acquire(t, c, k, first, claim.ReasonAcquired)}
	if err := env.Client.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: first.Name}}); err != nil {
		t.Fatalf("deleting holder %s: %v", first, err)
	}
	second := holder(t, ns, "second-"+suffix)
	current = fence.Grant{Key: k, Token: acquire(t, c, k, second, claim.ReasonTakenOver)}
	if cmp, err := current.Token.Compare(stale.Token); err != nil || cmp <= 0 {
		t.Fatalf("takeover token %s is not newer than %s (%v)", current.Token, stale.Token, err)
	}
	return stale, current
}

// takenOver plays a takeover of key in a fresh namespace, as takeover does,
// and returns with both grants a fenced client of each holder: old writes
// with the stale grant, holder with the current one.
func takenOver(t *testing.T) (ns string, stale, current fence.Grant, old, holder *fence.Client) {
	t.Helper()
	ns = env.Namespace(t)
	stale, current = takeover(t, ns, key)
	return ns, stale, current, fenced(t, nil, stale), fenced(t, nil, current)
}

// create has c create obj and fails t at once if it cannot, naming who.
func create(t *testing.T, c client.Client, obj client.Object, who string) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("%s creating: %v", who, err)
	}
}

// fenced returns a fenced client with its own connection, reading through
// reader (the API reader when nil).
func fenced(t *testing.T, reader client.Reader, grants ...fence.Grant) *fence.Client {
	t.Helper()
	writer := env.TestClient(t)
	if reader == nil {
		reader = env.APIReader
	}
	f, err := fence.New(writer, reader, grants...)
	if err != nil {
		t.Fatalf("fence.New: %v", err)
	}
	return f
}

// hookedReader reads uncached and runs the armed hook, once, after a read
// and before the fenced client gets to write: a deterministic interleaving.
type hookedReader struct {
	client.Reader
	mu   sync.Mutex
	hook func()
}

func newHookedReader(t *testing.T) *hookedReader {
	t.Helper()
	c := env.TestClient(t)
	h := &hookedReader{}
	h.Reader = interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, k, obj, opts...)
			h.mu.Lock()
			hook := h.hook
			h.hook = nil
			h.mu.Unlock()
			if hook != nil {
				hook()
			}
			return err
		},
	})
	return h
}

func (h *hookedReader) arm(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hook = f
}

func configMap(ns, name, v string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{dataKey: v}}
}

func deployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
}

// get reads obj's current state uncached into a new object of its type.
func get[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	out, ok := obj.DeepCopyObject().(T)
	if !ok {
		t.Fatalf("copying %T", obj)
	}
	if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(obj), out); err != nil {
		t.Fatalf("reading %s: %v", client.ObjectKeyFromObject(obj), err)
	}
	return out
}

// wantStale asserts err is the refusal of grant by newer.
func wantStale(t *testing.T, err error, grant fence.Grant, newer claim.Token) {
	t.Helper()
	var stale *fence.StaleTokenError
	if !errors.As(err, &stale) || !errors.Is(err, fence.ErrFenced) {
		t.Fatalf("error %v, want a *fence.StaleTokenError", err)
	}
	if stale.Key != grant.Key || stale.Token != grant.Token || stale.Newer != newer || stale.Annotation != fence.AnnotationFor(grant.Key) {
		t.Errorf("refusal %+v, want key %q, token %s, newer %s", stale, grant.Key, grant.Token, newer)
	}
}
