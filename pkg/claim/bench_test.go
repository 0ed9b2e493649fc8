package claim

import (
	"testing"
)

// The pure parts of the protocol run on every reconcile of every claimant;
// these benchmarks keep their cost visible (`make bench` runs them with
// -benchmem). They allocate nothing on the decision path, which the
// AllocsPerRun guard below holds them to.

var (
	sinkVerdict verdict
	sinkStep    step
	sinkRace    raceResult
)

func benchRecord() Record {
	return Record{
		Key:    "elasticsearch|https://es.storage.svc:9200",
		Holder: Holder{APIVersion: "camunda.io/v1", Kind: "CamundaCluster", Namespace: "team-a", Name: "prod", UID: "0b6d6c1e-6f64-4cb6-9e39-2d4f6a0e1c11"},
		Token:  "123456",
		Exists: true,
	}
}

// BenchmarkDecide is the whole pure decision of one Acquire: judge the record
// read, then (for another holder) decide after liveness, then classify a
// takeover conflict's re-read.
func BenchmarkDecide(b *testing.B) {
	rec := benchRecord()
	self := rec.Holder
	other := Holder{Namespace: "team-b", Name: "prod", UID: "uid-other"}
	b.Run("judge/held", func(b *testing.B) {
		for b.Loop() {
			sinkVerdict = judge(rec, self, "")
		}
	})
	b.Run("judge/other", func(b *testing.B) {
		for b.Loop() {
			sinkVerdict = judge(rec, other, "")
		}
	})
	b.Run("afterLiveness", func(b *testing.B) {
		for b.Loop() {
			sinkStep = afterLiveness(false, true, false)
		}
	})
	b.Run("afterTakeoverConflict", func(b *testing.B) {
		for b.Loop() {
			sinkRace = afterTakeoverConflict(rec, other, Holder{UID: "uid-third"}, "a")
		}
	})
}

// Given a record read for a key, when the pure decision runs, then it
// allocates nothing: a claimant's steady pass adds no garbage beyond its
// one read.
func TestDecideAllocatesNothing(t *testing.T) {
	rec := benchRecord()
	other := Holder{Namespace: "team-b", Name: "prod", UID: "uid-other"}
	allocs := testing.AllocsPerRun(100, func() {
		sinkVerdict = judge(rec, other, "")
		sinkStep = afterLiveness(false, true, false)
		sinkRace = afterTakeoverConflict(rec, other, Holder{UID: "uid-third"}, "a")
	})
	if allocs != 0 {
		t.Errorf("decision allocates %.1f times per run, want 0", allocs)
	}
}
