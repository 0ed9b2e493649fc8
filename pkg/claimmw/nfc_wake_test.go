package claimmw_test

import (
	"testing"

	"github.com/ocf-claim/claim/pkg/conditions"
)

// Keys are NFC-normalized, so "café" (NFC) and "cafe"+U+0301 (NFD) are one
// key, on the wake-up path too: the object parked on the NFD spelling is
// woken when the NFC holder lets go (the key index and the record agree on
// the normalized key).
func TestTheNFDSpellingOfAKeyIsWokenWhenItsNFCHolderGoes(t *testing.T) {
	f := start(t, setup{})
	// Given a holds "café" and b, naming the NFD spelling, is parked on it
	f.createAndWait(t, "a", conditions.ReasonClaimed, "caf\u00e9")
	f.createAndWait(t, "b", conditions.ReasonParked, "cafe\u0301")
	// When a is deleted
	f.deleteWidgetAsync(t, "a")
	// Then b is woken and takes the key (no resync: requeue is an hour)
	f.waitForReason(t, "b", conditions.ReasonClaimed, wakeWithin)
}
