package claimmw

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestReadingObjectsAgainAnswersAsTheAPIServerAndListsWhenManyAreRead pins
// what the predecessor check's uncached reads answer: each object as the
// API server has it (not as the cache shows it), NotFound for one the
// server no longer has, whether it reads with Gets or, when it reads many
// objects that are a large share of their namespace, with one List.
func TestReadingObjectsAgainAnswersAsTheAPIServerAndListsWhenManyAreRead(t *testing.T) {
	for _, tc := range []struct {
		name       string
		read, more int // objects read; other objects of the namespace
		wantGets   int
		wantLists  int
	}{
		{"given a few objects then each is read with a Get", 10, 0, 10, 0},
		{"given many objects that are most of their namespace then one List reads them", 2 * listedReads, 10, 0, 1},
		{"given many objects among very many bystanders then each is read with a Get", listedReads, listedReads * listedShare, listedReads, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			obj := func(i int, view string) *corev1.ConfigMap {
				return &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("o-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))},
					Data:       map[string]string{"view": view},
				}
			}
			// The API server has every object but the first (deleted since
			// the cache saw it), as its "server" view.
			var server, cached []client.Object
			for i := range tc.read + tc.more {
				cached = append(cached, obj(i, "cache"))
				if i > 0 {
					server = append(server, obj(i, "server"))
				}
			}
			var gets, lists atomic.Int32
			apiReader := fake.NewClientBuilder().WithObjects(server...).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					gets.Add(1)
					return c.Get(ctx, key, obj, opts...)
				},
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					lists.Add(1)
					return c.List(ctx, list, opts...)
				},
			}).Build()
			m := &Middleware{cfg: config{
				prototype: &corev1.ConfigMap{},
				gvk:       corev1.SchemeGroupVersion.WithKind("ConfigMap"),
				client:    fake.NewClientBuilder().WithObjects(cached...).Build(),
				apiReader: apiReader,
			}}

			got := m.readAll(ctx, cached[:tc.read])

			views := make([]string, len(got))
			want := make([]string, len(got))
			for i, r := range got {
				want[i] = "server"
				switch {
				case i == 0:
					want[i] = "not found"
					if apierrors.IsNotFound(r.err) {
						views[i] = "not found"
					} else {
						views[i] = fmt.Sprintf("%v", r.err)
					}
				case r.err != nil:
					views[i] = r.err.Error()
				default:
					views[i] = r.obj.(*corev1.ConfigMap).Data["view"]
				}
			}
			if diff := cmp.Diff(want, views); diff != "" {
				t.Errorf("objects read (-want +got):\n%s", diff)
			}
			if int(gets.Load()) != tc.wantGets || int(lists.Load()) != tc.wantLists {
				t.Errorf("read with %d Gets and %d Lists; want %d and %d", gets.Load(), lists.Load(), tc.wantGets, tc.wantLists)
			}
		})
	}
}
