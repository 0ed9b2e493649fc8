package claim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/annotation"
)

// nopBackend lets construction tests run without storage: a backend that
// counts calls into a counter nobody reads.
func nopBackend(client.Reader, client.Client, backends.Config) (backends.Backend, error) {
	return countingBackend{n: new(int)}, nil
}

// TestNewValidatesOnceAndReportsEveryProblem: New reports every problem of
// its configuration in one error naming the field and value, the backend
// factory's included (the default Lease backend's missing Namespace; the
// annotation backend's missing Object and Target), so that a user does not
// fix one error, run again, and meet the next.
func TestNewValidatesOnceAndReportsEveryProblem(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	tests := []struct {
		name   string
		reader client.Reader
		writer client.Client
		cfg    Config
		opts   []Option
		want   []string // every fragment must appear in the one error
	}{
		{
			name: "given nil clients then both are named",
			want: []string{"reader: nil", "writer: nil"},
		},
		{
			name:   "given no backend and no namespace then the default Lease backend asks for the namespace",
			reader: c, writer: c,
			want: []string{"lease backend: config.Namespace is empty"},
		},
		{
			name:   "given a bad namespace and prefix then both are named with their values",
			reader: c, writer: c, opts: []Option{WithBackend(nopBackend)},
			cfg:  Config{Namespace: "Bad_NS", Prefix: "UPPER_"},
			want: []string{`config.Namespace "Bad_NS"`, `config.Prefix "UPPER_"`},
		},
		{
			name:   "given bad labels then key and value are named",
			reader: c, writer: c, opts: []Option{WithBackend(nopBackend)},
			cfg:  Config{Labels: map[string]string{"bad key": "ok", "ok": "bad value!"}},
			want: []string{`config.Labels key "bad key"`, `config.Labels["ok"] value "bad value!"`},
		},
		{
			name:   "given an invalid and a duplicate annotation key then both are named",
			reader: c, writer: c, opts: []Option{WithBackend(nopBackend)},
			cfg:  Config{Annotations: backends.Annotations{Key: "not a key", HolderName: backends.DefaultHolderUIDAnnotation}},
			want: []string{`config.Annotations.Key "not a key"`, `config.Annotations.HolderUID "claim.ocf.io/holder-uid": also used by config.Annotations.HolderName`},
		},
		{
			name:   "given a holder label function making a bad key then it is named",
			reader: c, writer: c, opts: []Option{WithBackend(nopBackend)},
			cfg:  Config{HolderLabels: func(Holder) map[string]string { return map[string]string{"no spaces allowed": "x"} }},
			want: []string{`config.HolderLabels key "no spaces allowed"`},
		},
		{
			name:   "given a backend that refuses the config then its error is named",
			reader: c, writer: c,
			opts: []Option{WithBackend(func(client.Reader, client.Client, backends.Config) (backends.Backend, error) {
				return nil, errors.New("config.Namespace is empty")
			})},
			want: []string{"backend: config.Namespace is empty"},
		},
		{
			name:   "default Lease backend: bad prefix and no namespace",
			reader: c, writer: c,
			cfg:  Config{Prefix: "UPPER_"},
			want: []string{`config.Prefix "UPPER_"`, "config.Namespace is empty"},
		},
		{
			name:   "annotation backend: bad label and no Object/Target",
			reader: c, writer: c, opts: []Option{WithBackend(annotation.Backend(annotation.Options{}))},
			cfg:  Config{Labels: map[string]string{"ok": "bad value!"}},
			want: []string{`config.Labels["ok"] value "bad value!"`, "options.Object is nil", "options.Target is nil"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.reader, tt.writer, tt.cfg, tt.opts...)
			if err == nil {
				t.Fatal("New() = nil error")
			}
			for _, frag := range tt.want {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("New() error does not contain %q:\n%v", frag, err)
				}
			}
		})
	}
}

// TestNewRefusesAFactoryThatReturnsNothing: Given a backend factory that
// returns neither a backend nor an error, When New is called, Then it is an
// error at construction, not a nil pointer on the first Acquire.
func TestNewRefusesAFactoryThatReturnsNothing(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	nothing := func(client.Reader, client.Client, backends.Config) (backends.Backend, error) { return nil, nil }
	_, err := New(c, c, Config{}, WithBackend(nothing))
	if err == nil || !strings.Contains(err.Error(), "the factory returned no backend and no error") {
		t.Fatalf("New() = %v, want the empty factory named", err)
	}
}

func TestNewAcceptsTheZeroConfig(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	cl, err := New(c, c, Config{}, WithBackend(nopBackend))
	if err != nil {
		t.Fatalf("New(zero Config) = %v", err)
	}
	cfg := cl.Config()
	if cfg.Prefix != backends.DefaultPrefix || cfg.Annotations.Key != backends.DefaultKeyAnnotation {
		t.Fatalf("defaults not filled: %+v", cfg)
	}
}

func TestBadInputIsAClearErrorNotAWrite(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	calls := 0
	cl, err := New(c, c, Config{Normalize: func(k string) (string, error) {
		if strings.HasPrefix(k, "reject") {
			return "", errors.New("not a storage URL")
		}
		return k, nil
	}}, WithBackend(func(client.Reader, client.Client, backends.Config) (backends.Backend, error) {
		return countingBackend{&calls}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	ok := Holder{Name: "a", UID: "u"}
	tests := []struct {
		name string
		key  string
		self Holder
		is   error
		frag string
	}{
		{"given an empty key", "", ok, ErrInvalidKey, "key is empty"},
		{"given a control character", "a\tb", ok, ErrInvalidKey, "control character"},
		{"given a key the normalizer rejects", "reject-me", ok, ErrInvalidKey, "not a storage URL"},
		{"given a holder without UID", "k", Holder{Name: "a"}, ErrInvalidHolder, "UID is empty"},
		{"given a holder without name", "k", Holder{UID: "u"}, ErrInvalidHolder, "name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := cl.Acquire(context.Background(), tt.key, tt.self)
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.frag) {
				t.Fatalf("Acquire() error = %v, want %v containing %q", err, tt.is, tt.frag)
			}
		})
	}
	if err := cl.Release(context.Background(), ok, "reject-this-kept-key"); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("Release with a bad kept key = %v, want ErrInvalidKey (releasing more than asked would free a key in use)", err)
	}
	if calls != 0 {
		t.Fatalf("bad input reached the backend %d times", calls)
	}
}

type countingBackend struct{ n *int }

func (b countingBackend) Get(context.Context, string) (Record, error) { *b.n++; return Record{}, nil }
func (b countingBackend) Create(context.Context, Record, Record) (Record, error) {
	*b.n++
	return Record{}, nil
}
func (b countingBackend) Update(context.Context, Record, Record) (Record, error) {
	*b.n++
	return Record{}, nil
}
func (b countingBackend) Delete(context.Context, Record) error { *b.n++; return nil }
func (b countingBackend) List(context.Context, Holder) ([]Record, error) {
	*b.n++
	return nil, nil
}

// TestNewAcceptsHolderLabelsWhoseValuesLabelValueMakesValid: Given
// HolderLabels that label a holder with its namespace/name, When the
// Claimer is built, Then it is accepted and the selector labels it writes
// are valid label values.
func TestNewAcceptsHolderLabelsWhoseValuesLabelValueMakesValid(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	byName := func(h Holder) map[string]string {
		return map[string]string{"example.com/holder": h.Namespace + "/" + h.Name}
	}
	var storage backends.Config
	seeing := func(_ client.Reader, _ client.Client, cfg backends.Config) (backends.Backend, error) {
		storage = cfg
		return countingBackend{n: new(int)}, nil
	}
	if _, err := New(c, c, Config{HolderLabels: byName}, WithBackend(seeing)); err != nil {
		t.Fatalf("New() = %v", err)
	}
	got := storage.SelectorLabels(Holder{Namespace: "team-a", Name: "orders", UID: "u"})
	if errs := validation.IsValidLabelValue(got["example.com/holder"]); len(errs) > 0 {
		t.Fatalf("selector label %q is invalid: %v", got["example.com/holder"], errs)
	}
}

// TestNewNamesAPanickingFactoryInsteadOfPanicking: Given a backend factory
// that panics (on a Config validation already refused, say), When New is
// called, Then it returns an error naming the backend, not a panic.
func TestNewNamesAPanickingFactoryInsteadOfPanicking(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	panicking := func(client.Reader, client.Client, backends.Config) (backends.Backend, error) { panic("no namespace") }
	_, err := New(c, c, Config{}, WithBackend(panicking))
	if err == nil || !strings.Contains(err.Error(), "backend panicked: no namespace") {
		t.Fatalf("New() = %v, want the panicking backend named", err)
	}
}
