package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Verbs as the tables show them: the API server's request verbs.
const (
	verbGet    = "get"
	verbList   = "list"
	verbWatch  = "watch"
	verbCreate = "create"
	verbUpdate = "update"
	verbPatch  = "patch"
	verbDelete = "delete"
)

// call is one API request as the counting transport saw it.
type call struct {
	verb, resource string
	// rejected is true for an answer with a 4xx or 5xx code.
	rejected bool
}

func (c call) write() bool {
	switch c.verb {
	case verbCreate, verbUpdate, verbPatch, verbDelete:
		return true
	}
	return false
}

func (c call) read() bool { return c.verb == verbGet || c.verb == verbList }

// counts maps each kind of request to how often it was made.
type counts map[call]int

// sum adds up the requests match selects.
func (c counts) sum(match func(call) bool) int {
	n := 0
	for k, v := range c {
		if match(k) {
			n += v
		}
	}
	return n
}

func (c counts) writes() int   { return c.sum(call.write) }
func (c counts) reads() int    { return c.sum(call.read) }
func (c counts) rejected() int { return c.sum(func(k call) bool { return k.write() && k.rejected }) }

func (c counts) of(verb, resource string) int {
	return c.sum(func(k call) bool { return k.verb == verb && (resource == "" || k.resource == resource) })
}

// byVerb renders the counts divided by per as "verb resource: n" pairs,
// sorted, with rejected writes marked.
func (c counts) byVerb(per int) string {
	if len(c) == 0 {
		return "none"
	}
	agg := map[string]int{}
	for k, v := range c {
		name := k.verb + " " + k.resource
		if k.rejected {
			name += " (rejected)"
		}
		agg[name] += v
	}
	parts := make([]string, 0, len(agg))
	for k, v := range agg {
		parts = append(parts, fmt.Sprintf("%s %s", k, ratio(v, per)))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

func ratio(n, per int) string {
	if per <= 1 {
		return strconv.Itoa(n)
	}
	return strconv.FormatFloat(float64(n)/float64(per), 'g', 3, 64)
}

// counter is an http.RoundTripper wrapper that counts every request a
// rest.Config's clients send: reads, writes, and the lists and watches of
// informer caches. Cached reads never reach it.
type counter struct {
	tally
	// deleted is when each object the process deleted was answered as
	// deleted, by resource and name, for the phases of a handover.
	deleted map[string]time.Time
	// created is when each Create the process sent was answered as
	// created, by resource.
	created map[string][]time.Time
}

// wrap installs the counter on a copy of cfg.
func (c *counter) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			rejected := err != nil || resp.StatusCode >= 400
			k := classify(req)
			c.add(k, rejected)
			if k.verb == verbDelete && !rejected {
				c.noteDeleted(k.resource, path.Base(req.URL.Path))
			}
			if k.verb == verbCreate && !rejected {
				c.noteCreated(k.resource)
			}
			return resp, err
		})
	}
	return cfg
}

func (c *counter) add(k call, rejected bool) {
	k.rejected = rejected && k.write()
	c.count(k)
}

func (c *counter) noteDeleted(resource, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted == nil {
		c.deleted = map[string]time.Time{}
	}
	c.deleted[resource+"/"+name] = time.Now()
}

func (c *counter) noteCreated(resource string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.created == nil {
		c.created = map[string][]time.Time{}
	}
	c.created[resource] = append(c.created[resource], time.Now())
}

// createdAfter returns when the process's first Create of resource answered
// as created at or after t was answered.
func (c *counter) createdAfter(resource string, t time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, at := range c.created[resource] {
		if !at.Before(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

// deletedAt returns when the process's Delete of resource/name was answered.
func (c *counter) deletedAt(resource, name string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.deleted[resource+"/"+name]
	return at, ok
}

// tally counts calls, safe for concurrent use; its zero value is empty.
type tally struct {
	mu sync.Mutex
	n  counts
}

func (t *tally) count(k call) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = counts{}
	}
	t.n[k]++
}

// snapshot returns the counts so far; since returns the counts after it.
func (t *tally) snapshot() counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := counts{}
	for k, v := range t.n {
		out[k] = v
	}
	return out
}

func (t *tally) since(before counts) counts {
	out := counts{}
	for k, v := range t.snapshot() {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// classify names a request by verb and resource from its method and path:
// /api/v1/namespaces/ns/configmaps/name and
// /apis/group/version/namespaces/ns/leases/name/status alike.
func classify(req *http.Request) call {
	segs := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		segs = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		segs = segs[3:]
	default:
		return call{verb: strings.ToLower(req.Method), resource: "(discovery)"}
	}
	if len(segs) >= 3 && segs[0] == "namespaces" {
		segs = segs[2:]
	}
	resource, named := "", false
	if len(segs) > 0 {
		resource = segs[0]
		named = len(segs) > 1
	}
	if len(segs) > 2 {
		resource += "/" + segs[2]
	}
	verb := ""
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true":
			verb = verbWatch
		case named:
			verb = verbGet
		default:
			verb = verbList
		}
	case http.MethodPost:
		verb = verbCreate
	case http.MethodPut:
		verb = verbUpdate
	case http.MethodPatch:
		verb = verbPatch
	case http.MethodDelete:
		verb = verbDelete
	default:
		verb = strings.ToLower(req.Method)
	}
	return call{verb: verb, resource: resource}
}

// clientCalls counts the calls made on a controller-runtime client, cached
// reads included, by verb and kind, so that a table can tell a cached read
// (no request) from an uncached one.
type clientCalls struct{ tally }

func (c *clientCalls) add(verb string, cl client.Client, obj runtime.Object) {
	kind := "unknown"
	if gvk, err := cl.GroupVersionKindFor(obj); err == nil {
		kind = strings.TrimSuffix(gvk.Kind, "List")
	}
	c.count(call{verb: verb, resource: kind})
}

// wrapClient returns cl with every call counted by verb and kind.
func (c *clientCalls) wrapClient(cl client.WithWatch) client.WithWatch {
	return interceptor.NewClient(cl, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			c.add(verbGet, cl, obj)
			return cl.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			c.add(verbList, cl, list)
			return cl.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			c.add(verbCreate, cl, obj)
			return cl.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			c.add(verbUpdate, cl, obj)
			return cl.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			c.add(verbPatch, cl, obj)
			return cl.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			c.add(verbDelete, cl, obj)
			return cl.Delete(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			c.add(verbPatch+"/"+sub, cl, obj)
			return cl.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	})
}

// serverCount is one series of the API server's apiserver_request_total.
type serverCount struct {
	verb, resource, code string
}

// serverRequests reads apiserver_request_total from the API server's
// /metrics, as the server itself counted the requests of every client.
func serverRequests(ctx context.Context, cfg *rest.Config) (map[serverCount]float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting for /metrics: %w", err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading /metrics: %w", err)
	}
	out := map[serverCount]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		labels, value := line[len("apiserver_request_total{"):end], strings.TrimSpace(line[end+1:])
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		var k serverCount
		for _, kv := range strings.Split(labels, ",") {
			name, val, ok := strings.Cut(kv, "=")
			if !ok {
				continue
			}
			val = strings.Trim(val, `"`)
			switch name {
			case "verb":
				k.verb = val
			case "resource":
				k.resource = val
			case "code":
				k.code = val
			}
		}
		out[k] += v
	}
	return out, sc.Err()
}

// serverWrites is how many writes of resource the server answered between
// two reads of its metrics, and how many of them it rejected.
func serverWrites(before, after map[serverCount]float64, resource string) (total, rejected int) {
	for k, v := range after {
		if k.resource != resource {
			continue
		}
		switch k.verb {
		case "POST", "CREATE", "PUT", "UPDATE", "PATCH", "APPLY", "DELETE":
		default:
			continue
		}
		d := int(v - before[k])
		total += d
		if !strings.HasPrefix(k.code, "2") {
			rejected += d
		}
	}
	return total, rejected
}
