package backends_test

import (
	"testing"

	"github.com/ocf-claim/claim/pkg/backends"
)

// Issue 17 item 1: a record is Foreign when its token is greater than the
// storing object's own resourceVersion "or otherwise impossible". The
// protocol never writes a token annotation equal to the version of the write
// that stores it: a grant writes no token (it defaults to the object's
// version), and a write that keeps a grant passes on the token it read, the
// version of an earlier write, so the stored annotation is always strictly
// older than the object. A token equal to the object's own resourceVersion
// can only come from someone who predicted the resourceVersion of their own
// write (on a quiet cluster: the current revision plus one), i.e. a forger.
func TestAttack17_TokenEqualToOwnVersionIsForeign(t *testing.T) {
	a := backends.Annotations{
		Key: backends.DefaultKeyAnnotation, HolderAPIVersion: backends.DefaultHolderAPIVersionAnnotation,
		HolderKind: backends.DefaultHolderKindAnnotation, HolderNamespace: backends.DefaultHolderNamespaceAnnotation,
		HolderName: backends.DefaultHolderNameAnnotation, HolderUID: backends.DefaultHolderUIDAnnotation,
		Token: backends.DefaultTokenAnnotation, Successor: backends.DefaultSuccessorAnnotation,
		Set: backends.DefaultSetAnnotation, RenewTime: backends.DefaultRenewTimeAnnotation,
	}
	cfg := backends.Config{Namespace: "claims", Annotations: a}
	// Given a complete record whose token annotation is exactly the object's resourceVersion
	ann := a.Encode(backends.Record{
		Key:    "k",
		Holder: backends.Holder{APIVersion: "v1", Kind: "ConfigMap", Namespace: "tenant", Name: "squatter", UID: "u"},
		Token:  "4711",
	})
	// When the backend decodes it from the object that stores it
	rec := cfg.DecodeStored("k", backends.Stored{Version: "4711", Annotations: ann, Shared: true})
	// Then it is Foreign: no Claimer could have written it
	if rec.Foreign == "" {
		t.Errorf("record with token %s on an object at resourceVersion 4711 is trusted (holder %s); want Foreign: the token annotation cannot name the write that stores it", rec.Token, rec.Holder)
	}
}
