package claimmw

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// stubManager stands for one manager: only its identity matters here.
type stubManager struct{ manager.Manager }

func TestTheRegistryAnswersForOneManagerAndForgetsAStoppedOne(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	one, two := &stubManager{}, &stubManager{}
	storage, network, elsewhere := &Middleware{}, &Middleware{}, &Middleware{}
	r := &kindRegistry{m: map[kindKey][]*Middleware{}}
	r.add(kindKey{mgr: one, gvk: gvk}, storage)
	r.add(kindKey{mgr: one, gvk: gvk}, network)
	r.add(kindKey{mgr: two, gvk: gvk}, elsewhere)

	names := map[*Middleware]string{storage: "storage", network: "network", elsewhere: "elsewhere"}
	named := func(ms []*Middleware) []string {
		out := []string{}
		for _, m := range ms {
			out = append(out, names[m])
		}
		return out
	}
	if diff := cmp.Diff([]string{"network"}, named(r.others(kindKey{mgr: one, gvk: gvk}, storage))); diff != "" {
		t.Errorf("others of storage on its manager (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"elsewhere"}, named(r.onManager(two))); diff != "" {
		t.Errorf("middlewares on the second manager (-want +got):\n%s", diff)
	}
	// When the first manager stops, its middlewares are forgotten
	r.remove(kindKey{mgr: one, gvk: gvk}, storage)
	r.remove(kindKey{mgr: one, gvk: gvk}, network)
	if diff := cmp.Diff([]string{}, named(r.onManager(one))); diff != "" {
		t.Errorf("middlewares of a stopped manager (-want +got):\n%s", diff)
	}
	if len(r.m) != 1 {
		t.Errorf("registry keeps %d kinds, want only the running manager's", len(r.m))
	}
}
