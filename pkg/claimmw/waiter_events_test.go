package claimmw_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// eventCount counts the events with reason that regard the Widget name.
func (f *fixture) eventCount(t *testing.T, name, reason string) int {
	t.Helper()
	var list eventsv1.EventList
	if err := env.APIReader.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			n++
		}
	}
	return n
}

func TestAWaiterRecordsNoEventWhenOnlyTheHolderItWaitsBehindChanges(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given alpha holds k, and bravo and charlie wait for it
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	for _, name := range []string{"bravo", "charlie"} {
		f.createAndWait(t, name, conditions.ReasonParked, "k")
	}
	// When alpha is deleted
	f.deleteWidgetAsync(t, "alpha")
	// Then one of them holds k and the other waits behind it, its condition
	// naming the new holder
	var successor, waiter string
	eventually(t, wakeWithin, func() (bool, string) {
		b, c := f.claimed(t, "bravo"), f.claimed(t, "charlie")
		switch {
		case b.Reason == string(conditions.ReasonClaimed) && strings.Contains(c.Message, "/bravo"):
			successor, waiter = "bravo", "charlie"
		case c.Reason == string(conditions.ReasonClaimed) && strings.Contains(b.Message, "/charlie"):
			successor, waiter = "charlie", "bravo"
		default:
			return false, fmt.Sprintf("bravo %+v, charlie %+v", b, c)
		}
		return true, ""
	})
	// And the handover is recorded on the successor and the old holder
	for _, want := range []struct{ widget, reason string }{{successor, string(claimmw.EventClaimed)}, {"alpha", string(claimmw.EventReleased)}} {
		eventually(t, 5*time.Second, func() (bool, string) {
			return f.eventCount(t, want.widget, want.reason) > 0, fmt.Sprintf("no %s event on %s", want.reason, want.widget)
		})
	}
	// But not once more on the waiter: its one Parked event is the one of
	// its first wait
	time.Sleep(time.Second)
	if n := f.eventCount(t, waiter, string(conditions.ReasonParked)); n != 1 {
		t.Errorf("%s, which waited for k all along, has %d Parked events, want 1", waiter, n)
	}
}

func TestTheStartOfAHoldersDeletionRunsNoPassOfItsWaitersBeforeItReleases(t *testing.T) {
	t.Parallel()
	f := start(t, setup{opts: []claimmw.Option{claimmw.WhileParked(claimmw.RunInnerWhileParked)}})
	// Given alpha holds k and bravo waits for it (its inner reconciler runs
	// in each of its passes)
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// When alpha is deleted and its deletion pass keeps failing (it still
	// cleans up), with the default liveness
	failing := f.failToldPassesOf("alpha")
	time.Sleep(time.Second) // bravo's passes of its own condition write are over
	before := len(f.inner.callsOf("bravo"))
	f.deleteWidgetAsync(t, "alpha")
	f.waitForInnerCall(t, "alpha", "a deletion pass", func(s claimmw.State) bool { return s.Deleting })
	time.Sleep(time.Second)
	// Then bravo had no pass: nothing it could judge changed
	if n := len(f.inner.callsOf("bravo")) - before; n != 0 {
		t.Errorf("the start of alpha's deletion ran %d passes of bravo, which waits for k", n)
	}
	// And once alpha's deletion pass succeeds, its release wakes bravo
	failing.Store(false)
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

// Under DiscloseNone a waiter's condition says its key is held, not by
// whom: when the holder it waits behind changes, its status is not written
// at all (the setting for many objects waiting on one key).
func TestUnderDiscloseNoneAWaitersStatusIsNotWrittenWhenTheHolderItWaitsBehindChanges(t *testing.T) {
	t.Parallel()
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithDisclosure(claimmw.DiscloseNone)}})
	// Given alpha holds k, and bravo and charlie wait for it, their
	// conditions naming no holder
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	versions := map[string]string{}
	for _, name := range []string{"bravo", "charlie"} {
		f.createAndWait(t, name, conditions.ReasonParked, "k")
		if c := f.claimed(t, name); c.Message != `Key "k" is held by another object.` {
			t.Fatalf("%s's condition %+v names more than that k is held", name, c)
		}
	}
	time.Sleep(500 * time.Millisecond) // the passes their creation caused are over
	for _, name := range []string{"bravo", "charlie"} {
		w := f.widgetNow(t, name)
		versions[name] = w.ResourceVersion
	}
	// When alpha is deleted
	alpha := f.widgetNow(t, "alpha")
	if err := direct(t).Delete(context.Background(), alpha); err != nil {
		t.Fatal(err)
	}
	// Then one of them holds k
	var waiter string
	eventually(t, wakeWithin, func() (bool, string) {
		b, c := f.claimed(t, "bravo"), f.claimed(t, "charlie")
		switch {
		case b.Reason == string(conditions.ReasonClaimed):
			waiter = "charlie"
		case c.Reason == string(conditions.ReasonClaimed):
			waiter = "bravo"
		default:
			return false, fmt.Sprintf("bravo %+v, charlie %+v", b, c)
		}
		return true, ""
	})
	// And the other, which waits for k all along, was never written
	time.Sleep(time.Second)
	w := f.widgetNow(t, waiter)
	if w.ResourceVersion != versions[waiter] {
		t.Errorf("%s, which waited for k all along, was written (resourceVersion %s -> %s): %+v", waiter, versions[waiter], w.ResourceVersion, f.claimed(t, waiter))
	}
}
