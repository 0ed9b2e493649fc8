package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
)

// row is one line of the results table.
type row struct {
	scenario, measure, ours, baseline, target, verdict string
}

// report collects the rows of one run in the order the scenarios ran.
type report struct {
	mu    sync.Mutex
	rows  []row
	notes []string
}

func (r *report) add(x row) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, x)
}

// note adds a sentence under the table: how a figure was obtained.
func (r *report) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// verdict words whether a target is met; why says what the miss is about.
func verdict(met bool, miss string) string {
	if met {
		return "met"
	}
	return "MISSED: " + miss
}

func (r *report) table() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	b.WriteString("| Scenario | Measure | ocf-claim | Baseline | Target | Verdict |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, x := range r.rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", x.scenario, x.measure, cell(x.ours), cell(x.baseline), cell(x.target), cell(x.verdict))
	}
	return b.String()
}

func cell(s string) string {
	if s == "" {
		return "—"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

// machine describes where the run happened.
func machine(ctx context.Context) []string {
	lines := []string{
		fmt.Sprintf("CPUs (nproc): %d", runtime.NumCPU()),
		"Memory: " + memTotal(),
		"CPU: " + cpuModel(),
		"Go: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		"Load average at the end of the run (1, 5, 15 min; the machine is shared): " + loadAverage(),
	}
	if dc, err := discovery.NewDiscoveryClientForConfig(env.Config); err == nil {
		if v, err := dc.ServerVersion(); err == nil {
			lines = append(lines, "kube-apiserver: "+v.GitVersion+" (envtest: kube-apiserver and etcd on this machine)")
		}
	}
	_ = ctx
	lines = append(lines, "Date: "+time.Now().UTC().Format(time.RFC3339))
	return lines
}

func procField(path, prefix string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, prefix) {
			_, v, _ := strings.Cut(line, ":")
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}

func memTotal() string { return procField("/proc/meminfo", "MemTotal") }
func cpuModel() string { return procField("/proc/cpuinfo", "model name") }

// write renders the report as docs/benchmarks.md.
func (r *report) write(ctx context.Context, path string, s sizes, took time.Duration) error {
	var b strings.Builder
	b.WriteString("# Benchmarks\n\n")
	b.WriteString("What claims cost the API server and how fast a parked holder gets its key, measured against a real\n")
	b.WriteString("kube-apiserver and etcd (envtest), next to what users would pick instead. This file is written by\n")
	b.WriteString("`make bench`; do not edit it by hand (the prose lives in `bench/report_test.go`).\n\n")
	b.WriteString("## Run\n\n")
	cmd := os.Getenv(envCommand)
	if cmd == "" {
		cmd = "go test ./bench/"
	}
	fmt.Fprintf(&b, "Command: `%s`\n\n", cmd)
	for _, l := range machine(ctx) {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	fmt.Fprintf(&b, "- Scenario run time: %s (sizes: %d passes, %d runs per operation, %d handovers, scale %d holders, fan-out %d parked and %d bystanders, then %d parked and %d bystanders, %d loss runs per way)\n\n",
		took.Round(time.Second), s.passes, s.opRuns, s.handovers, s.scale, s.fanOut, s.bystanders, s.fanOutFew, s.bystandersMany, s.lossRuns)
	b.WriteString("## Results\n\n")
	b.WriteString(r.table())
	b.WriteString("\n")
	b.WriteString(methods)
	if len(r.notes) > 0 {
		b.WriteString("\n## Notes of this run\n\n")
		for _, n := range r.notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	if path := os.Getenv(envMicro); path != "" {
		if raw, err := os.ReadFile(path); err == nil {
			b.WriteString("\n## Pure parts (`go test -run '^$' -bench . -benchmem ./pkg/claim/ ./pkg/backends/`)\n\n```\n")
			b.Write(raw)
			b.WriteString("```\n")
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// methods says how each figure is measured; it is the same in every run.
const methods = `## How each figure is measured

- **Requests** are counted by an http.RoundTripper installed with rest.Config.WrapTransport on the operator's
  rest.Config, so they are exactly what reached the API server from that process (informer lists and watches
  included, cached reads excluded). "Cached reads" are counted by a controller-runtime interceptor on the manager's
  client. Where a row says "server", the figure is the delta of the API server's own apiserver_request_total for
  that resource, which also tells accepted from rejected writes by code.
- **1, 2**: the middleware's Reconcile is called directly 1,000 times for one object after it settled (a pass that
  writes nothing and a condition that no longer changes), so no watch event or requeue adds passes. "Cached reads"
  are the reads through the manager's client that sent no request: the object itself, and the listing of the
  object's records (the give-up rule), which comes from the manager's cache of Leases.
- **3**: claim.Claimer on the Lease backend with uncached clients; holders are ConfigMaps. Fresh acquire: a free key;
  re-entry: the same holder again; takeover: a key whose holder ConfigMap was deleted (default liveness reads it);
  release: a holder with one key sweeps.
- **4**: a manager runs the middleware as a controller with one worker (the default); 200 pairs (holder, parked
  successor) on 200 keys; the holder is deleted (its finalizer releases the Lease), and the latency runs from the
  Delete call to the first pass of the successor's inner reconciler with its key granted (its condition is already
  True then). With wake-up the controller is set up with the middleware's SetupWithManager (the key index and the
  watch of the Leases), and runs are sequential in two series of 100: isolated, each Delete 250 ms after the
  previous grant (longer than the 100 ms at which kube-apiserver asks etcd for progress while a consistent List
  waits for its watch cache, so that no run waits on the previous run's request), and back to back, each Delete as
  soon as the previous successor was granted. The phases split each run at the start of the holder's first pass
  (the controller builds each Reconcile call's logger with the builder's LogConstructor, once per call, which the
  bench uses to note when every pass starts), at the answer to that pass's Delete of the Lease (the counting
  transport), and at the start of the successor's last pass before its grant (the granting pass). The API server
  row times, 20 times each, a List of Leases without resourceVersion (a consistent read, as the claim's uncached
  reads are) right after an Update of a ConfigMap, once 250 ms after the previous such List and once right after
  it, and a Get of one Lease after such an Update. With wake-up off the parked requeue is set to 1 s, holders are
  deleted 37 ms apart, and the latency is the wait for the next requeue plus one pass. At the default parked
  requeue (5 min) the wait is uniform on [0, 5 min), so its p50 is 2.5 min and its p99 4.95 min.
- **5**: n claimants, each with its own connection and ConfigMap holder, call Acquire on one free key at the same
  instant; "settled" is when the last of them has its answer (one granted, the others parked).
- **6**: Claimant custom resources, one key each, created by a pool of workers and reconciled once each by the
  middleware; then a ConfigMap probe holder acquires fresh keys one after the other (p50 compared with the same
  probe run when only 10 keys existed) and releases them all at once (the sweep). The middleware's memory is the
  live heap with the middleware reachable minus the live heap once it is dropped (the informer cache stays; this
  rig calls Reconcile itself, so no key index is registered on its cache).
- **7**: the controller of 4 (wake-up, parked requeue an hour so that only wake-ups run passes); one holder of a
  key, 1,000 Claimants parked on it, and 100 bystanders each holding a key of its own; then 100 parked among 10,000
  bystanders. It runs with the controller-runtime defaults (one worker, the envtest config's client limit of QPS
  1000) and with the settings docs/operations.md recommends for many waiters (4 workers, the client's rate limiter
  off: QPS -1). Once no pass started for 2 s, the holder is deleted; every Reconcile call the controller starts
  from then until no pass started for 2 s again is counted, by object (the LogConstructor of 4). "Granted" is the
  first pass of a parked object's inner reconciler with the key granted; "settled" is when the manager's cache
  shows every other one Parked with a condition naming the new holder (polled every 20 ms, no request). "Changed"
  counts the objects whose condition the release must change: every parked one (it names the new holder), the
  successor and the holder; status writes and events are the operator process's requests. A bystander's pass
  fails the run. Then the new holder is deleted, and so on: 5 releases in a row (the first is the one counted),
  each timed from its Delete to its successor's grant once the one before has settled and no pass started for 2 s;
  the target is on their p50, as one release is one sample.
- **8**: the controller of 4; 100 pairs (holder, parked waiter) on 100 keys. In the first 50 runs the holder's
  Lease is deleted as kubectl claims release does (fenced on the UID and resourceVersion it read), from a client of
  the bench's own; in the next 50 a second claim.Claimer with the middleware's configuration and a liveness that
  says every holder is dead, as another replica would, takes the Lease over for the waiter with one fenced Update.
  The latency runs from the Delete call, or from the Update request, to the holder's first run of its inner
  reconciler without the key (the middleware runs it in the pass that finds a key lost, after the condition was
  written False). A run counts as re-acquired when the record names the holder again after its first pass.
- **8b**: the controller of 4 with 4 workers; 50 pairs (holder, parked waiter), each holder's told pass taking
  300 ms. A holder's spec is edited to name no key (even runs) or another key (odd runs); once its pass told to
  stop using the key has started, the key's Lease is deleted as kubectl claims release does. The successor's record
  written (its Create answered) or its first granted pass started before the told pass returned counts as a key freed
  early, as does the record gone before the delete was sent while the told pass ran.
- **(a)** client-go leaderelection, one LeaseLock per key, LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s,
  counted over a 20 s window after every elector leads and extrapolated to a minute; our holders of as many keys
  are counted over the same window in the same process run.
- **(b)** the hand-written claim, re-implemented in bench/handwritten_test.go from its description: Create; on
  AlreadyExists read and judge (self: held; alive holder: parked; dead holder: Delete with UID and resourceVersion
  preconditions, then Create), at most two rounds. Its handover latency with a 30 s requeue is computed, not waited
  for: the successor finds the key free at its next requeue, uniform on [0, 30 s), plus one takeover pass as
  measured.
`
