package claimmw

import (
	"errors"
	"strings"
	"testing"

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
