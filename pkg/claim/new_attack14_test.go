package claim_test

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ocf-claim/claim/pkg/backends/annotation"
	"github.com/ocf-claim/claim/pkg/claim"
)

// TestAttack14_NewWithANilOptionReturnsAnErrorNotAPanic (issue 14, item 1:
// "New validates configuration once ... it never panics"): Given an option
// list that holds a nil Option (an option built conditionally, left nil),
// When New is called, Then it returns (an error or a Claimer) instead of
// panicking with a nil function call.
func TestAttack14_NewWithANilOptionReturnsAnErrorNotAPanic(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	var conditional claim.Option // e.g. only set when a flag is on
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("claim.New(..., nil Option) panicked: %v", r)
		}
	}()
	_, _ = claim.New(c, c, claim.Config{Namespace: "ns"}, conditional)
}

// TestAttack14_NewReportsEveryProblemInOneError (issue 14, item 1: "New
// validates configuration once, at construction, and reports every problem in
// one error naming the field and value"): Given a config with a bad field AND
// a problem the backend factory reports (the default Lease backend's missing
// Namespace; the annotation backend's missing Object and Target), When New is
// called, Then the one error names both. It names only the first: the factory
// is not asked once any config problem was found, so a user fixes one error,
// runs again, and meets the next.
func TestAttack14_NewReportsEveryProblemInOneError(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	tests := []struct {
		name string
		cfg  claim.Config
		opts []claim.Option
		want []string
	}{
		{
			name: "default Lease backend: bad prefix and no namespace",
			cfg:  claim.Config{Prefix: "UPPER_"},
			want: []string{`config.Prefix "UPPER_"`, "config.Namespace is empty"},
		},
		{
			name: "annotation backend: bad label and no Object/Target",
			cfg:  claim.Config{Labels: map[string]string{"ok": "bad value!"}},
			opts: []claim.Option{claim.WithBackend(annotation.Backend(annotation.Options{}))},
			want: []string{`config.Labels["ok"] value "bad value!"`, "options.Object is nil", "options.Target is nil"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := claim.New(c, c, tt.cfg, tt.opts...)
			if err == nil {
				t.Fatal("New() = nil error")
			}
			for _, frag := range tt.want {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("New() error does not name %q; the error was:\n%v", frag, err)
				}
			}
		})
	}
}
