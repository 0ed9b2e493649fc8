package fence

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
)

// AnnotationPrefix starts the name of every stamp annotation. The fenced
// client owns every annotation under it.
const AnnotationPrefix = "fence." + backends.Domain + "/"

// hashChars is how many hex characters of sha256(key) name a key's stamp.
const hashChars = 16

// AnnotationFor returns the name of the annotation that carries key's token:
// [AnnotationPrefix] followed by the first 16 hex characters of sha256(key),
// a valid annotation name for any key.
func AnnotationFor(key string) string {
	sum := sha256.Sum256([]byte(key))
	return AnnotationPrefix + hex.EncodeToString(sum[:])[:hashChars]
}

// Grant is one key a holder holds, with the fencing token of the grant. It
// has the same fields as claimmw.Grant, so one converts to the other.
type Grant struct {
	Key   string
	Token claim.Token
}

// Errors a caller can test for with errors.Is.
var (
	// ErrFenced marks a write refused because the object carries a newer
	// token of a key than the writer's: the writer lost the key. Retrying
	// does not help; the holder should stop acting for the key.
	ErrFenced = errors.New("fenced: object carries a newer fencing token")
	// ErrUnsupported marks a write the fenced client cannot guard.
	ErrUnsupported = errors.New("write not supported by the fenced client")
	// ErrMalformedStamp marks an object whose stamp of a held key is not a
	// valid token.
	ErrMalformedStamp = errors.New("malformed fencing stamp")
)

// StaleTokenError is the refusal of a write by a holder whose token of Key is
// older than the one the object carries.
type StaleTokenError struct {
	// Op is the refused write, such as "update" or "patch status".
	Op string
	// Kind, Object name the object written.
	Kind   string
	Object types.NamespacedName
	// Key is the claim key; Annotation is its stamp's name.
	Key        string
	Annotation string
	// Token is the writer's token; Newer is the object's.
	Token claim.Token
	Newer claim.Token
}

// Error names the object, the key and both tokens.
func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("refusing to %s %s %s: it carries fencing token %s of claim key %q (annotation %s), newer than this holder's %s",
		e.Op, e.Kind, e.Object, e.Newer, e.Key, e.Annotation, e.Token)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *StaleTokenError) Is(target error) bool { return target == ErrFenced }

// MalformedStampError is the refusal of a write to an object whose stamp of a
// held key is not a valid token. The stamp is left as it is.
type MalformedStampError struct {
	Op         string
	Kind       string
	Object     types.NamespacedName
	Key        string
	Annotation string
	Value      string
	Err        error
}

// Error names the object, the annotation and its value.
func (e *MalformedStampError) Error() string {
	return fmt.Sprintf("refusing to %s %s %s: its annotation %s (fencing stamp of claim key %q) is %q, not a token; remove or correct it: %v",
		e.Op, e.Kind, e.Object, e.Annotation, e.Key, e.Value, e.Err)
}

// Is makes errors.Is(err, ErrMalformedStamp) true.
func (e *MalformedStampError) Is(target error) bool { return target == ErrMalformedStamp }

// Unwrap returns the parse error.
func (e *MalformedStampError) Unwrap() error { return e.Err }

// UnsupportedError is the refusal of a write the fenced client cannot guard.
type UnsupportedError struct {
	// Op is the refused call, such as "apply" or "patch with application/json-patch+json".
	Op string
	// Why says what makes it unguardable, and what to use instead.
	Why string
}

// Error names the refused call and why.
func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("refusing to %s through the fenced client: %s", e.Op, e.Why)
}

// Is makes errors.Is(err, ErrUnsupported) true.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// Client is a client.Client whose writes are fenced by the tokens of the
// grants it was built from. It is safe for concurrent use and keeps no state
// between calls.
type Client struct {
	c      client.Client
	reader client.Reader
	grants []Grant
	names  map[string]bool // the stamp annotations of grants
}

var _ client.Client = (*Client)(nil)

// New returns a Client that writes through c, reads the object it is about to
// write through reader, and stamps and checks the tokens of grants.
//
// reader must not be served from an informer cache: pass the manager's
// GetAPIReader(). A cached read can miss a newer holder's stamp; the write is
// still conditional on the read's resourceVersion, so it then fails with a
// Conflict instead of being refused as stale, but every retry against the
// same lagging cache fails the same way.
//
// grants must name at least one key, each key once, each with a valid token:
// a fenced client without grants would fence nothing. New reports every
// problem at once.
func New(c client.Client, reader client.Reader, grants ...Grant) (*Client, error) {
	var errs []error
	if c == nil {
		errs = append(errs, errors.New("client: nil"))
	}
	if reader == nil {
		errs = append(errs, errors.New("reader: nil; pass the manager's API reader"))
	}
	if len(grants) == 0 {
		errs = append(errs, errors.New("grants: none; a fenced client needs the keys it holds"))
	}
	names := make(map[string]bool, len(grants))
	seen := make(map[string]bool, len(grants))
	for i, g := range grants {
		if g.Key == "" {
			errs = append(errs, fmt.Errorf("grant %d: empty key", i))
		}
		if seen[g.Key] {
			errs = append(errs, fmt.Errorf("grant %d: key %q given twice", i, g.Key))
		}
		seen[g.Key] = true
		if _, err := backends.ParseToken(g.Token.String()); err != nil {
			errs = append(errs, fmt.Errorf("grant %d of key %q: %w", i, g.Key, err))
		}
		names[AnnotationFor(g.Key)] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("building fenced client: %w", err)
	}
	return &Client{c: c, reader: reader, grants: slices.Clone(grants), names: names}, nil
}

// Grants returns the grants the client fences with.
func (f *Client) Grants() []Grant { return slices.Clone(f.grants) }

// target names the object of one fenced write, for errors.
type target struct {
	op   string
	kind string
	gvk  schema.GroupVersionKind
	ref  types.NamespacedName
}

// check returns nil when every grant's token is at least as new as the stamp
// of its key in annotations, a *StaleTokenError for the first grant that is
// older, and a *MalformedStampError for a stamp that is not a token. A key
// without a stamp passes.
func check(t target, annotations map[string]string, grants []Grant) error {
	for _, g := range grants {
		name := AnnotationFor(g.Key)
		value, ok := annotations[name]
		if !ok {
			continue
		}
		stamp, err := backends.ParseToken(value)
		if err != nil {
			return &MalformedStampError{Op: t.op, Kind: t.kind, Object: t.ref, Key: g.Key, Annotation: name, Value: value, Err: err}
		}
		c, err := g.Token.Compare(stamp)
		if err != nil {
			// New validated our token and ParseToken the stamp.
			return fmt.Errorf("checking the fencing stamp of key %q on %s %s: %w", g.Key, t.kind, t.ref, err)
		}
		if c < 0 {
			return &StaleTokenError{Op: t.op, Kind: t.kind, Object: t.ref, Key: g.Key, Annotation: name, Token: g.Token, Newer: stamp}
		}
	}
	return nil
}

// stamped returns the annotations to write: desired without any stamp, plus
// the stamps of other keys as read, plus the stamps of grants.
func stamped(desired, read map[string]string, grants []Grant) map[string]string {
	out := make(map[string]string, len(desired)+len(grants))
	for k, v := range desired {
		if !strings.HasPrefix(k, AnnotationPrefix) {
			out[k] = v
		}
	}
	for k, v := range read {
		if strings.HasPrefix(k, AnnotationPrefix) {
			out[k] = v
		}
	}
	maps.Copy(out, stamps(grants))
	return out
}

// stamps returns the stamp annotations of grants.
func stamps(grants []Grant) map[string]string {
	out := make(map[string]string, len(grants))
	for _, g := range grants {
		out[AnnotationFor(g.Key)] = g.Token.String()
	}
	return out
}
