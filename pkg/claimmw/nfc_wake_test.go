package claimmw_test

import (
	"context"
	"testing"
	"time"

	"github.com/ocf-claim/claim/pkg/conditions"
)

// Keys are NFC-normalized, so "café" (NFC) and "cafe"+U+0301 (NFD) are one
// key, on the wake-up path too: the object parked on the NFD spelling is
// woken when the NFC holder lets go (the key index and the record agree on
// the normalized key).
func TestTheNFDSpellingOfAKeyIsWokenWhenItsNFCHolderGoes(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	// Given a holds "café" and b, naming the NFD spelling, is parked on it
	f.createWidget(t, "a", "caf\u00e9")
	f.waitForReason(t, "a", conditions.ReasonClaimed, 10*time.Second)
	f.createWidget(t, "b", "cafe\u0301")
	f.waitForReason(t, "b", conditions.ReasonParked, 10*time.Second)
	// When a is deleted
	a, err := f.widget(t, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := direct(t).Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	// Then b is woken and takes the key (no resync: requeue is an hour)
	f.waitForReason(t, "b", conditions.ReasonClaimed, wakeWithin)
}
