package backends

import (
	"strings"
	"testing"
	"time"
)

// The codec and naming run on every read and write of a record; these
// benchmarks keep their cost visible (`make bench` runs them with -benchmem).

var (
	sinkString string
	sinkRecord Record
	sinkAnno   map[string]string
)

func benchRecord() Record {
	return Record{
		Key:         "elasticsearch|https://es.storage.svc:9200",
		Holder:      Holder{APIVersion: "camunda.io/v1", Kind: "CamundaCluster", Namespace: "team-a", Name: "prod", UID: "0b6d6c1e-6f64-4cb6-9e39-2d4f6a0e1c11"},
		Token:       "123456",
		AcquireTime: time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC),
		Exists:      true,
	}
}

func BenchmarkHashName(b *testing.B) {
	key := "rdbms|postgres.db.svc:5432/camunda"
	for b.Loop() {
		sinkString = HashName(DefaultPrefix, key)
	}
}

func BenchmarkBound(b *testing.B) {
	for _, bc := range []struct{ name, s string }{
		{"fits", "team-a.prod"},
		{"cut", strings.Repeat("very-long-holder-name.", 12)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				sinkString = Bound(bc.s, 63)
			}
		})
	}
}

func BenchmarkAnnotationsEncode(b *testing.B) {
	var a Annotations
	rec := benchRecord()
	for b.Loop() {
		sinkAnno = a.Encode(rec)
	}
}

func BenchmarkAnnotationsDecode(b *testing.B) {
	var a Annotations
	rec := benchRecord()
	anno := a.Encode(rec)
	for b.Loop() {
		sinkRecord, _, _ = a.Decode(rec.Key, anno)
	}
}
