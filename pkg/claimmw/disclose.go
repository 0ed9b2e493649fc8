package claimmw

import (
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/ocf-claim/claim/pkg/claim"
)

// Disclosure says what the condition and events of an object may reveal
// about other objects and about the operator's side. Keys are global across
// the objects a middleware reconciles: a tenant that names another tenant's
// key learns from its own condition that the key is held, and, unless the
// disclosure is limited, by whom.
type Disclosure int

const (
	// DiscloseSameNamespace names another object (a holder, a successor, an older
	// sibling, a previous holder) only when it is in the object's own
	// namespace; otherwise the message says "outside this namespace".
	// A foreign record is named only when it is in the object's own
	// namespace (not in the operator's claim namespace),
	// and a claim that could not be judged is shown with the class of the
	// API error only; the whole error goes to the operator's log. Default.
	DiscloseSameNamespace Disclosure = iota
	// DiscloseAll names every object and shows every error as it is: for
	// operators whose objects all belong to one team.
	DiscloseAll
	// DiscloseNone names no other object, in any namespace, and shows
	// errors as DiscloseSameNamespace does. A waiting object's condition
	// says that its key is held, not by whom, so it does not change when
	// the holder does: a release to many objects waiting on one key writes
	// no waiter's status (docs/operations.md, Many objects waiting for one
	// key). Who holds a key is then shown only by the records (kubectl
	// claims).
	DiscloseNone
)

// WithDisclosure sets what conditions and events may reveal about other
// objects. Default: [DiscloseSameNamespace].
func WithDisclosure(d Disclosure) Option { return func(c *config) { c.disclosure = d } }

// Message is the message of o as the condition of self shows it under d
// (o.Message, or its redacted form), for tools that recognise conditions the
// middleware wrote, such as kubectl claims.
func (d Disclosure) Message(o claim.Outcome, self claim.Holder) string {
	return redact(d, o, self).Message
}

// redact rewrites o's message for self's eyes under d. Only the message
// changes: the decision is the same whatever it may say.
func redact(d Disclosure, o claim.Outcome, self claim.Holder) claim.Outcome {
	if d == DiscloseAll {
		return o
	}
	if d == DiscloseNone {
		return hideOthers(o)
	}
	elsewhere := func(h claim.Holder) bool { return h.Namespace != self.Namespace }
	switch o.Reason {
	case claim.ReasonHeldElsewhere:
		if elsewhere(o.Holder) {
			o.Message = fmt.Sprintf("Key %q is held by another object, outside this namespace.", o.Key)
		}
	case claim.ReasonNotFirst:
		if elsewhere(o.Other) {
			// Named as far as the rule allows: its kind and age, not its
			// namespace or name.
			o.Message = fmt.Sprintf("Key %q is free, but an older object outside this namespace wants it and goes first.", o.Key)
			if o.Other.Kind != "" && !o.Other.Created.IsZero() {
				o.Message = fmt.Sprintf("Key %q is free, but an older %s outside this namespace, created %s, wants it and goes first.",
					o.Key, o.Other.Kind, o.Other.Created.UTC().Format(time.RFC3339))
			}
		}
	case claim.ReasonWaitingForHandover:
		if elsewhere(o.Previous) {
			o.Message = fmt.Sprintf("Key %q waits for its previous holder, outside this namespace, to hand over.", o.Key)
		}
	case claim.ReasonTakenOver:
		if elsewhere(o.Previous) {
			o.Message = fmt.Sprintf("Key %q taken over from a holder outside this namespace, which is gone.", o.Key)
		}
	case claim.ReasonForeign:
		if o.Record.Ref.Namespace != self.Namespace {
			o.Message = foreignHidden(o.Key)
		}
	}
	return o
}

// hideOthers rewrites o's message, under DiscloseNone, so that it names
// no other object and says nothing that changes when the other object
// does (its kind and age included).
func hideOthers(o claim.Outcome) claim.Outcome {
	switch o.Reason {
	case claim.ReasonHeldElsewhere:
		o.Message = fmt.Sprintf("Key %q is held by another object.", o.Key)
	case claim.ReasonNotFirst:
		o.Message = fmt.Sprintf("Key %q is free, but an older object wants it and goes first.", o.Key)
	case claim.ReasonWaitingForHandover:
		o.Message = fmt.Sprintf("Key %q waits for its previous holder to hand over.", o.Key)
	case claim.ReasonTakenOver:
		o.Message = fmt.Sprintf("Key %q taken over from a holder that is gone.", o.Key)
	case claim.ReasonForeign:
		o.Message = foreignHidden(o.Key)
	}
	return o
}

// foreignHidden is the message of a foreign record of key that does not
// say where the record is.
func foreignHidden(key string) string {
	return fmt.Sprintf("Key %q is blocked by a record this operator did not write; the operator's administrators must remove it.", key)
}

// errorMessage is the condition message of an error that kept the claim
// from being judged: under DiscloseSameNamespace the class of the API error
// only, as the whole error may name the operator's identity and namespace.
func errorMessage(d Disclosure, err error) string {
	if d == DiscloseAll {
		return sentence(err.Error())
	}
	class := "an error"
	if r := apierrors.ReasonForError(err); r != "" {
		class = "the API server's answer " + string(r)
	}
	return fmt.Sprintf("The claim could not be judged (%s); it is retried, and the operator's log has the details.", class)
}
