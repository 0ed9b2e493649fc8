package claimmw_test

// The middleware's bounds, whatever an object names: at most WithMaxKeys
// keys per object, condition messages of at most 4 KiB and event notes of
// at most 1 KiB.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// "Event notes ≤ 1 KiB with a count of what was left out". The Released
// note quotes up to five keys of up to 256 bytes each and counts the rest
// ("and 3 more"); five long keys alone pass 1 KiB, and the cut to 1 KiB
// still keeps the count, so the note never reads as if the keys shown were
// all that was released.
func TestTheReleasedNoteKeepsTheCountOfKeysLeftOut(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	// Given a widget that holds eight keys of 240 bytes each (valid keys, well within WithMaxKeys)
	keys := make([]string, 8)
	for i := range keys {
		keys[i] = fmt.Sprintf("db-%d.", i) + strings.Repeat("x", 235)
	}
	f.createWidget(t, "w", keys...)
	f.waitForReason(t, "w", conditions.ReasonClaimed, 20*time.Second)
	// When its spec drops all eight keys for one short key
	f.edit(t, "w", func(w *testcrd.Widget) { w.Spec.Keys = []string{"short"} })
	// Then the Released event note is at most 1 KiB and still counts the keys it does not quote
	var note string
	eventually(t, 20*time.Second, func() (bool, string) {
		var list eventsv1.EventList
		if err := env.APIReader.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Name == "w" && e.Reason == string(claimmw.EventReleased) {
				note = e.Note
				return true, ""
			}
		}
		return false, "no Released event"
	})
	if len(note) > 1024 {
		t.Errorf("note is %d bytes, want at most 1024", len(note))
	}
	if !strings.Contains(note, " more") {
		t.Errorf("Released note quotes %d of 8 keys and does not count the rest:\n%s", strings.Count(note, `"db-`), note)
	}
}

// Promise 7: condition messages are at most 4 KiB and event notes at most
// 1 KiB, whatever the keys and errors: here a held object whose keys
// function then fails with a 10 KB multi-byte error (InvalidKey, and a Lost
// event quoting it), and a waiter on very many long multi-byte keys.
func TestMessagesStayBoundedForHugeErrorsAndKeys(t *testing.T) {
	huge := strings.Repeat("é", 5000)
	keys := func(ctx context.Context, obj client.Object) ([]string, error) {
		if obj.(*testcrd.Widget).Spec.HandTo == "huge" {
			return nil, errors.New(huge)
		}
		return specKeys(ctx, obj)
	}
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithKeys(keys), claimmw.WithMaxKeys(64)}})
	var long []string
	for i := 0; i < 60; i++ {
		long = append(long, fmt.Sprintf("%03d-%s", i, strings.Repeat("ключ", 120)))
	}
	// Given a holds every long key, and b waits for them
	f.createWidget(t, "a", long...)
	f.waitForReason(t, "a", conditions.ReasonClaimed, 20*time.Second)
	f.createWidget(t, "b", long...)
	f.waitForReason(t, "b", conditions.ReasonParked, 20*time.Second)
	// When a's keys function fails with a huge error
	f.edit(t, "a", func(w *testcrd.Widget) { w.Spec.HandTo = "huge" })
	f.waitForReason(t, "a", conditions.ReasonInvalidKey, 10*time.Second)
	time.Sleep(time.Second)
	// Then every condition message and event note is bounded
	for _, n := range []string{"a", "b"} {
		if c := f.claimed(t, n); len(c.Message) > conditions.MaxMessageLength {
			t.Errorf("%s: condition message of %d bytes", n, len(c.Message))
		}
	}
	var list eventsv1.EventList
	if err := env.APIReader.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		t.Error("no events recorded")
	}
	for _, e := range list.Items {
		if len(e.Note) > 1024 {
			t.Errorf("event %s on %s: note of %d bytes", e.Reason, e.Regarding.Name, len(e.Note))
		}
	}
	// And the Warning event of a's InvalidKey, whose note carries the huge
	// error, was recorded, not refused for its length
	if !f.hasEvent(t, "a", string(conditions.ReasonInvalidKey)) {
		t.Error("no InvalidKey event on a: was the event refused?")
	}
}

// At most WithMaxKeys (default 32) keys per object, InvalidKey beyond, no
// records written, even when the 33rd key is added by an edit to an object
// that already holds 32 (the pass starts from a holder that holds records).
func TestAThirtyThirdKeyAddedByEditWritesNoRecord(t *testing.T) {
	f := start(t, setup{})
	keys := make([]string, 32)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
	}
	// Given a widget that holds 32 keys
	f.createWidget(t, "w", keys...)
	f.waitForReason(t, "w", conditions.ReasonClaimed, 30*time.Second)
	// When a 33rd key is added by edit
	f.edit(t, "w", func(w *testcrd.Widget) { w.Spec.Keys = append(append([]string{}, keys...), "k32") })
	// Then it is InvalidKey and no record of the 33rd key is written
	cond := f.waitForReason(t, "w", conditions.ReasonInvalidKey, 20*time.Second)
	time.Sleep(time.Second)
	if f.leaseExists(t, "k32") {
		t.Errorf("a record of the 33rd key was written (condition %s: %s)", cond.Reason, cond.Message)
	}
	if len(cond.Message) > conditions.MaxMessageLength {
		t.Errorf("condition message is %d bytes", len(cond.Message))
	}
}

func TestManyLongKeysStillGiveAConditionTheServerAccepts(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithMaxKeys(40)}})
	// Given an object naming 40 keys of 1,000 bytes (40 KB of keys, more
	// than a condition message may hold)
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("%03d-%s", i, strings.Repeat("k", 996))
	}
	f.createWidget(t, "x", keys...)
	// Then it is Claimed, with a bounded message that counts what it left out
	cond := f.waitForReason(t, "x", conditions.ReasonClaimed, 20*time.Second)
	if len(cond.Message) > conditions.MaxMessageLength {
		t.Errorf("message is %d bytes, want at most %d", len(cond.Message), conditions.MaxMessageLength)
	}
	mustContain(t, "x's message", cond.Message, "and 35 more")
}

func TestAnObjectNamingTooManyKeysIsInvalidAndWritesNoRecord(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithMaxKeys(3)}})
	// Given a limit of 3 keys, when an object names 4
	f.createWidget(t, "x", "a", "b", "c", "d")
	// Then it is InvalidKey, saying why, and no record exists for any key
	cond := f.waitForReason(t, "x", conditions.ReasonInvalidKey, 10*time.Second)
	mustContain(t, "x's message", cond.Message, "names 4 keys, at most 3")
	for _, k := range []string{"a", "b", "c", "d"} {
		if f.leaseExists(t, k) {
			t.Errorf("a Lease exists for %q", k)
		}
	}
	// When it names 3, then it holds them
	f.setKeys(t, "x", "a", "b", "c")
	f.waitForReason(t, "x", conditions.ReasonClaimed, 10*time.Second)
}
