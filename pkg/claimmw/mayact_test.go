package claimmw

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/conditions"
)

func TestWhichConditionsMeanAnObjectMayActForItsKeys(t *testing.T) {
	cond := func(r conditions.Reason) metav1.Condition {
		return conditions.New(conditions.Claimed, r, "m", 1)
	}
	for _, tc := range []struct {
		name string
		c    metav1.Condition
		want bool
	}{
		{"given Claimed then it may act", cond(conditions.ReasonClaimed), true},
		{"given Stopping (lost, not yet stopped) then it may act", cond(conditions.ReasonStopping), true},
		{"given Parked (told, and stopped) then it does not act", cond(conditions.ReasonParked), false},
		{"given a claim error it was told of then it does not act", cond(conditions.ReasonClaimError), false},
		{"given WaitingForHandover then it does not act", cond(conditions.ReasonWaitingForHandover), false},
		{"given no keys then it acts for none", cond(conditions.ReasonNoKeys), false},
		{"given no condition then it never acted", metav1.Condition{}, false},
		{"given Claimed written False by hand then it does not act", metav1.Condition{Type: "Claimed", Reason: "Claimed", Status: metav1.ConditionFalse}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayAct(tc.c); got != tc.want {
				t.Errorf("mayAct(%s/%s) = %t, want %t", tc.c.Status, tc.c.Reason, got, tc.want)
			}
		})
	}
}

func TestWhenAParkedPassMustTellTheInnerReconcilerToStop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		was      previous
		givingUp int
		want     bool
	}{
		{"given it was Claimed then it is told", previous{claimed: true}, 0, true},
		{"given it is Stopping (an earlier told pass failed) then it is told again", previous{stopping: true}, 0, true},
		{"given it gives keys up then it is told", previous{}, 1, true},
		{"given it was parked and stopped then it is not told", previous{}, 0, false},
		{"given a claim error it was told of then it is not told again", previous{failed: true}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustTell(tc.was, tc.givingUp); got != tc.want {
				t.Errorf("mustTell(%+v, %d) = %t, want %t", tc.was, tc.givingUp, got, tc.want)
			}
		})
	}
}

func TestTheStoppingConditionKeepsWhatBlocksTheObject(t *testing.T) {
	parked := conditions.New(conditions.Claimed, conditions.ReasonParked, `Key "k" is held by Widget ns/other.`, 3)
	got := stoppingCondition(parked)
	if got.Reason != string(conditions.ReasonStopping) || got.Status != metav1.ConditionFalse || got.ObservedGeneration != 3 || got.Type != parked.Type {
		t.Errorf("stoppingCondition(parked) = %+v", got)
	}
	want := `Key "k" is held by Widget ns/other; its reconciler is told to stop acting for its keys until a pass succeeds.`
	if got.Message != want {
		t.Errorf("message = %q, want %q", got.Message, want)
	}
}

func TestWhichKeysAConditionSaysAnObjectMayActFor(t *testing.T) {
	claimed := func(keys ...string) metav1.Condition { return conditions.ForKeys(conditions.Claimed, keys, 1) }
	withMessage := func(r conditions.Reason, msg string) metav1.Condition {
		return conditions.New(conditions.Claimed, r, msg, 1)
	}
	stopping := func(keys []string, rest string) metav1.Condition {
		msg, ok := stoppingMessage(keys, rest)
		if !ok {
			t.Fatalf("stoppingMessage(%q) does not show the keys whole", keys)
		}
		return withMessage(conditions.ReasonStopping, msg)
	}
	releasing := func(base metav1.Condition, keys ...string) metav1.Condition {
		msg, ok := releasingMessage(strings.TrimSuffix(base.Message, ".")+releasingClaims, keys)
		if !ok {
			t.Fatalf("releasingMessage(%q) does not show the keys whole", keys)
		}
		base.Message = msg
		return base
	}
	tricky := `a". Key "b`
	many := []string{"a", "b", "c", "d", "e", "f"}
	for _, tc := range []struct {
		name  string
		c     metav1.Condition
		want  []string
		exact bool
	}{
		{"given no condition then it acts for nothing", metav1.Condition{}, nil, true},
		{"given Parked then it acts for nothing", withMessage(conditions.ReasonParked, `Key "k" is held by Widget ns/other.`), nil, true},
		{"given Claimed for one key then it acts for that key", claimed("k"), []string{"k"}, true},
		{"given Claimed for keys then it acts for those", claimed("j", "k"), []string{"j", "k"}, true},
		{"given Claimed for a key with quotes and a full stop then it acts for that key", claimed(tricky), []string{tricky}, true},
		{"given Claimed for more keys than it quotes then it does not say", claimed(many...), nil, false},
		{"given Claimed for a key cut short then it does not say", claimed(strings.Repeat("k", conditions.MaxQuotedKeyLength+1)), nil, false},
		{"given Claimed while its key set changes then it does not say", withMessage(conditions.ReasonClaimed, strings.TrimSuffix(claimed("k").Message, ".")+changingKeys), nil, false},
		{"given Claimed while told to release records then it acts for its keys and those", releasing(claimed("k"), "j"), []string{"j", "k"}, true},
		{"given Stopping without its keys then it does not say", stoppingCondition(withMessage(conditions.ReasonParked, `Key "k" is held by Widget ns/other.`)), nil, false},
		{"given Stopping with its keys then it acts for those", stopping([]string{"j"}, `Key "k" is held by Widget ns/other.`), []string{"j"}, true},
		{"given Stopping with a key with quotes and a full stop then it acts for that key", stopping([]string{tricky, "z"}, `Key "k" is held.`), []string{tricky, "z"}, true},
		{"given Stopping told to release records then it acts for those", withMessage(conditions.ReasonStopping, releasingOnly+`"j".`), []string{"j"}, true},
		{"given Stopping whose keys were cut short then it does not say", withMessage(conditions.ReasonStopping, stoppingOnly+`"j", "k [truncated]`), nil, false},
		{"given a hand-written Claimed then it does not say", withMessage(conditions.ReasonClaimed, "Mine."), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, exact := exactKeysOf(tc.c)
			if exact != tc.exact || !cmp.Equal(got, tc.want, cmpopts.EquateEmpty()) {
				t.Errorf("exactKeysOf(%s: %q) = %q, %t; want %q, %t", tc.c.Reason, tc.c.Message, got, exact, tc.want, tc.exact)
			}
		})
	}
}

func TestAStoppingConditionNamesTheKeysItsObjectActedForAndWhatBlocksIt(t *testing.T) {
	m := &Middleware{cfg: config{condType: conditions.Claimed}}
	parked := conditions.New(conditions.Claimed, conditions.ReasonParked, `Key "m" is held by Widget ns/other.`, 3)
	named := []namedKey{{raw: "M", norm: "m"}}
	for _, tc := range []struct {
		name  string
		was   metav1.Condition
		more  []string
		want  []string
		exact bool
	}{
		{"given it was Claimed for an older spec then it names those keys", conditions.ForKeys(conditions.Claimed, []string{"k"}, 2), nil, []string{"k"}, true},
		{"given it was Claimed for its keys then it names them", conditions.ForKeys(conditions.Claimed, []string{"m"}, 2), nil, []string{"m"}, true},
		{"given it was Stopping with its keys then they are carried", stoppingShownFrom(t, m, named, conditions.ForKeys(conditions.Claimed, []string{"j", "k"}, 2)), nil, []string{"j", "k"}, true},
		{"given records it is told to release then it names them too", conditions.ForKeys(conditions.Claimed, []string{"k"}, 2), []string{"a"}, []string{"a", "k"}, true},
		{"given it acted for nothing and is told to release records then it names those", conditions.New(conditions.Claimed, conditions.ReasonParked, "held", 2), []string{"a"}, []string{"a"}, true},
		{"given it was Stopping without its keys then it still does not say", stoppingCondition(parked), nil, nil, false},
		{"given it was Claimed while its key set changed then it does not say", conditions.New(conditions.Claimed, conditions.ReasonClaimed, `Holds key "m"`+changingKeys, 2), nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := m.stoppingShown(tc.was, named, parked, tc.more...)
			if got.Reason != string(conditions.ReasonStopping) || got.Status != metav1.ConditionFalse || got.ObservedGeneration != 3 {
				t.Errorf("stoppingShown = %+v, want Stopping=False for generation 3", got)
			}
			if !strings.HasSuffix(got.Message, stoppingCondition(parked).Message) {
				t.Errorf("message %q does not end with what blocks the object (%q)", got.Message, stoppingCondition(parked).Message)
			}
			keys, exact := exactKeysOf(got)
			if exact != tc.exact || !cmp.Equal(keys, tc.want, cmpopts.EquateEmpty()) {
				t.Errorf("it says it acts for %q (exact: %t), want %q (exact: %t); message %q", keys, exact, tc.want, tc.exact, got.Message)
			}
		})
	}
}

// stoppingShownFrom is the Stopping condition an object whose condition was
// was shows, parked.
func stoppingShownFrom(t *testing.T, m *Middleware, named []namedKey, was metav1.Condition) metav1.Condition {
	t.Helper()
	return m.stoppingShown(was, named, conditions.New(conditions.Claimed, conditions.ReasonParked, "Waiting.", 2))
}

func TestAStoppingMessageThatCannotShowItsKeysWholeSaysNothingOfThem(t *testing.T) {
	long := strings.Repeat("k", conditions.MaxMessageLength/2)
	for _, tc := range []struct {
		name string
		keys []string
		rest string
		want bool
	}{
		{"given a few keys and a long rest then the keys show whole", []string{"a", "b"}, strings.Repeat("x", conditions.MaxMessageLength), true},
		{"given keys that fill the message then it does not say", []string{long, long + "2"}, "Waiting.", false},
		{"given keys that end just where the message is cut then it does not say", []string{strings.Repeat("k", conditions.MaxMessageLength-len(stoppingOnly)-8)}, "Waiting.", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, ok := stoppingMessage(tc.keys, tc.rest)
			if ok != tc.want {
				t.Fatalf("stoppingMessage shows the keys whole: %t, want %t (message of %d bytes)", ok, tc.want, len(msg))
			}
			if len(msg) > conditions.MaxMessageLength {
				t.Errorf("message of %d bytes, over the bound %d", len(msg), conditions.MaxMessageLength)
			}
			if ok {
				if got, exact := stoppingKeysOf(msg); !exact || !cmp.Equal(got, tc.keys) {
					t.Errorf("read back %q (%t), want %q", got, exact, tc.keys)
				}
			}
		})
	}
}
