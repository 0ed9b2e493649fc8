package scenario

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/yaml"

	"github.com/ocf-claim/claim/pkg/conditions"
)

func (w *World) printf(format string, args ...any) {
	if w.Out != nil {
		fmt.Fprintf(w.Out, format, args...)
	}
}

// logf prints one timeline line, stamped with the time since the scenario
// began.
func (w *World) logf(format string, args ...any) {
	w.printf("  [%6.2fs] %s\n", time.Since(w.start).Seconds(), fmt.Sprintf(format, args...))
}

// show prints every cluster's claim condition (and the reason of its Ready
// condition) as a table and, when lease
// is set, the storage backend's Lease as `kubectl get lease -o yaml` shows
// it.
func (w *World) show(ctx context.Context, lease bool) error {
	if w.Out == nil {
		return nil
	}
	ccs, err := w.clusters(ctx)
	if err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(ccs))
	w.printf("\n")
	tw := tabwriter.NewWriter(w.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  CLUSTER\tCONDITION\tSTATUS\tREASON\tTOKEN\tREADY\tMESSAGE")
	for _, name := range names {
		cc := ccs[name]
		c := meta.FindStatusCondition(cc.Status.Conditions, string(conditions.Claimed))
		if c == nil {
			fmt.Fprintf(tw, "  %s\t%s\t\t\t\t\t\n", name, conditions.Claimed)
			continue
		}
		token := cc.Status.StorageToken
		if token == "" {
			token = "-"
		}
		state := ""
		if cc.DeletionTimestamp != nil {
			state = " (deleting)"
		}
		ready := "-"
		if r := meta.FindStatusCondition(cc.Status.Conditions, string(conditions.Ready)); r != nil {
			ready = r.Reason
		}
		fmt.Fprintf(tw, "  %s%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, state, c.Type, c.Status, c.Reason, token, ready, c.Message)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("printing the clusters: %w", err)
	}
	if !lease {
		return nil
	}
	l, err := w.storageLease(ctx)
	if err != nil {
		return err
	}
	l.APIVersion, l.Kind = "coordination.k8s.io/v1", "Lease"
	l.ManagedFields = nil
	out, err := yaml.Marshal(l)
	if err != nil {
		return fmt.Errorf("printing the Lease: %w", err)
	}
	w.printf("\n  $ kubectl get lease -n %s %s -o yaml\n", w.ClaimNamespace, l.Name)
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		w.printf("  %s\n", line)
	}
	return nil
}
