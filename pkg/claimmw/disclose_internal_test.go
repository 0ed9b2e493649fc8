package claimmw

import (
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/pkg/claim"
)

func TestRedactNamesOnlyObjectsOfTheSameNamespace(t *testing.T) {
	self := claim.Holder{Kind: "Database", Namespace: "tenant-a", Name: "orders", UID: "u1"}
	neighbour := claim.Holder{Kind: "Database", Namespace: "tenant-a", Name: "billing", UID: "u2"}
	stranger := claim.Holder{Kind: "Database", Namespace: "tenant-b", Name: "secret-project", UID: "u3"}
	foreign := claim.Record{Ref: types.NamespacedName{Namespace: "operator-system", Name: "claim-abc"}}
	for _, tc := range []struct {
		name      string
		o         claim.Outcome
		hides     string // must not appear under DiscloseSameNamespace
		shows     string // must appear under DiscloseSameNamespace
		unchanged bool
	}{
		{name: "given a holder in the same namespace then it is named", o: claim.Outcome{Reason: claim.ReasonHeldElsewhere, Key: "k", Holder: neighbour}, unchanged: true},
		{name: "given a holder in another namespace then it is not named", o: claim.Outcome{Reason: claim.ReasonHeldElsewhere, Key: "k", Holder: stranger}, hides: "tenant-b", shows: "outside this namespace"},
		{name: "given an older sibling in another namespace then it is not named", o: claim.Outcome{Reason: claim.ReasonNotFirst, Key: "k", Other: stranger}, hides: "secret-project", shows: "goes first"},
		{name: "given a previous holder in another namespace then it is not named", o: claim.Outcome{Reason: claim.ReasonWaitingForHandover, Key: "k", Previous: stranger}, hides: "tenant-b", shows: "hand over"},
		{name: "given a takeover from another namespace then the event does not name it", o: claim.Outcome{Reason: claim.ReasonTakenOver, Key: "k", Holder: self, Previous: stranger}, hides: "secret-project", shows: "gone"},
		{name: "given a foreign record then the claim namespace is not named", o: claim.Outcome{Reason: claim.ReasonForeign, Key: "k", Record: foreign}, hides: "operator-system", shows: "did not write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Message = claim.DefaultMessage(tc.o)
			// When the outcome is shown with every disclosure
			all := redact(DiscloseAll, tc.o, self)
			same := redact(DiscloseSameNamespace, tc.o, self)
			// Then DiscloseAll shows the protocol's message, and the default hides what it must
			if all.Message != tc.o.Message {
				t.Errorf("DiscloseAll changed the message to %q", all.Message)
			}
			if tc.unchanged && same.Message != tc.o.Message {
				t.Errorf("same-namespace message changed to %q", same.Message)
			}
			if tc.hides != "" && (strings.Contains(same.Message, tc.hides) || !strings.Contains(same.Message, tc.shows)) {
				t.Errorf("message %q: want it without %q and with %q", same.Message, tc.hides, tc.shows)
			}
			if same.Reason != tc.o.Reason || same.Holder != tc.o.Holder {
				t.Errorf("redact changed the decision: %+v", same)
			}
		})
	}
}

// Under DiscloseNone a condition names no other object, in the object's
// namespace or another, and says the same whichever object it is about: a
// waiter's condition does not change when the key changes hands.
func TestDiscloseNoneNamesNoOtherObjectAndSaysTheSameWhicheverItIs(t *testing.T) {
	self := claim.Holder{Kind: "Database", Namespace: "tenant-a", Name: "orders", UID: "u1"}
	others := []claim.Holder{
		{Kind: "Database", Namespace: "tenant-a", Name: "billing", UID: "u2", Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Kind: "Schema", Namespace: "tenant-b", Name: "secret-project", UID: "u3", Created: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tc := range []struct {
		name string
		of   func(other claim.Holder) claim.Outcome
	}{
		{"held by another", func(o claim.Holder) claim.Outcome {
			return claim.Outcome{Reason: claim.ReasonHeldElsewhere, Key: "k", Holder: o}
		}},
		{"an older object goes first", func(o claim.Holder) claim.Outcome {
			return claim.Outcome{Reason: claim.ReasonNotFirst, Key: "k", Other: o}
		}},
		{"waiting for a handover", func(o claim.Holder) claim.Outcome {
			return claim.Outcome{Reason: claim.ReasonWaitingForHandover, Key: "k", Previous: o}
		}},
		{"taken over", func(o claim.Holder) claim.Outcome {
			return claim.Outcome{Reason: claim.ReasonTakenOver, Key: "k", Holder: self, Previous: o}
		}},
		{"a foreign record", func(o claim.Holder) claim.Outcome {
			return claim.Outcome{Reason: claim.ReasonForeign, Key: "k", Record: claim.Record{Ref: types.NamespacedName{Namespace: o.Namespace, Name: "claim-abc"}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var shown []string
			for _, other := range others {
				o := tc.of(other)
				o.Message = claim.DefaultMessage(o)
				// When the outcome about other is shown under DiscloseNone
				got := redact(DiscloseNone, o, self)
				// Then it names neither other's namespace nor its name nor
				// its kind, and the decision is the same
				for _, hidden := range []string{other.Namespace, other.Name, other.Kind} {
					if strings.Contains(got.Message, hidden) {
						t.Errorf("message %q names %q", got.Message, hidden)
					}
				}
				if got.Reason != o.Reason || got.Holder != o.Holder || !strings.Contains(got.Message, `"k"`) {
					t.Errorf("redact changed the decision or lost the key: %+v", got)
				}
				shown = append(shown, got.Message)
			}
			// And it says the same whichever object it is about
			if shown[0] != shown[1] {
				t.Errorf("messages differ with the other object: %q, %q", shown[0], shown[1])
			}
		})
	}
}

func TestErrorMessagesKeepTheOperatorsSideToItsLog(t *testing.T) {
	err := apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "claim-1",
		errors.New(`User "system:serviceaccount:operator-system:operator" cannot get resource "leases" in the namespace "operator-system"`))
	msg := errorMessage(DiscloseSameNamespace, err)
	if strings.Contains(msg, "operator-system") || !strings.Contains(msg, "Forbidden") {
		t.Errorf("message %q: want the class (Forbidden) without the identity or namespace", msg)
	}
	if msg := errorMessage(DiscloseAll, err); !strings.Contains(msg, "operator-system") {
		t.Errorf("DiscloseAll message %q: want the whole error", msg)
	}
}
