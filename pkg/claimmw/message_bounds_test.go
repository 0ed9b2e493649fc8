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
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Issue 17 item 5: "event notes ≤ 1 KiB with a count of what was left out".
// The Released note quotes five keys of up to 256 bytes each and then counts
// the rest ("and 3 more"), and only afterwards is the whole note cut to
// 1 KiB: five long keys alone pass 1 KiB, so the cut removes the count, and
// the note reads as if the five keys shown were all that was released.
func TestAttack17_ReleasedNoteKeepsCountOfKeysLeftOut(t *testing.T) {
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
