package claimsctl

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claim"
)

// ErrRefused marks a release the plugin would not perform because the record
// is not what the caller saw: another holder, another token, a foreign
// object, or a record written between the check and the Delete.
var ErrRefused = errors.New("release refused")

// Values of --dry-run, as kubectl spells them.
const (
	dryRunNone   = "none"
	dryRunServer = "server"
	dryRunClient = "client"
)

type releaseFlags struct {
	holderUID string
	token     string
	dryRun    string
}

func (o *Options) newReleaseCommand() *cobra.Command {
	var f releaseFlags
	cmd := &cobra.Command{
		Use:   "release KEY --holder-uid UID",
		Short: "Release one claim by hand, fenced on the holder you saw",
		Long: "release deletes the Lease record of KEY only if it is a claim record of KEY held by --holder-uid\n" +
			"(and carrying --token, if given), and only if it has not changed since that check: the Delete\n" +
			"carries the UID and resourceVersion of the read as preconditions. Anything else is refused.\n" +
			"A holder that still exists claims the key again on its next reconcile; release frees a key whose\n" +
			"holder cannot (a stuck finalizer, an operator that is gone). --dry-run=server asks the API server\n" +
			"to check the Delete, preconditions and RBAC included, without performing it.",
		Example: "  kubectl claims list -n camunda-system -o wide\n" +
			"  kubectl claims release 'elasticsearch|https://es.data.svc:9200' --holder-uid 6f1c1d2e-... -n camunda-system --dry-run=server",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.runRelease(cmd.Context(), args[0], f) },
	}
	cmd.Flags().StringVar(&f.holderUID, "holder-uid", "", "UID of the holder you expect to hold the key (required)")
	cmd.Flags().StringVar(&f.token, "token", "", "fencing token you expect the record to carry (optional, narrows the check to one grant)")
	cmd.Flags().StringVar(&f.dryRun, "dry-run", dryRunNone, `"none", "server" (the API server checks the Delete without performing it) or "client" (only check and print)`)
	_ = cmd.MarkFlagRequired("holder-uid")
	return cmd
}

func (o *Options) runRelease(ctx context.Context, key string, f releaseFlags) error {
	switch f.dryRun {
	case dryRunNone, dryRunServer, dryRunClient:
	default:
		return fmt.Errorf("--dry-run %q: want none, server or client", f.dryRun)
	}
	if f.holderUID == "" {
		return errors.New("--holder-uid is empty; copy it from kubectl claims list -o wide")
	}
	if err := claim.ValidateKey(key); err != nil {
		return fmt.Errorf("releasing claim: %w", err)
	}
	ss, err := o.connect(ctx)
	if err != nil {
		return err
	}
	ref := types.NamespacedName{Namespace: o.recordNamespace(ss), Name: ss.s.recordName(key)}
	var l coordinationv1.Lease
	if err := ss.c.Get(ctx, ref, &l); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing claim %q: no record (Lease %s does not exist): %w", key, ref, ErrRefused)
		}
		return fmt.Errorf("releasing claim %q: reading Lease %s: %w", key, ref, err)
	}
	r := ss.leaseRecord(&l)
	rec := r.rec
	switch {
	case rec.Foreign != "":
		return fmt.Errorf("releasing claim %q: Lease %s was not written by a claim for this key (%s); it is left alone, check it and delete it by hand if it must go: %w", key, ref, rec.Foreign, ErrRefused)
	case string(rec.Holder.UID) != f.holderUID:
		return fmt.Errorf("releasing claim %q: it is held by %s (uid %s), not by uid %s; the holder changed since you looked, look again: %w", key, rec.Holder, rec.Holder.UID, f.holderUID, ErrRefused)
	case f.token != "" && rec.Token.String() != f.token:
		return fmt.Errorf("releasing claim %q: its token is %s, not %s; it was granted again since you looked, look again: %w", key, rec.Token, f.token, ErrRefused)
	}

	recs := []record{r}
	ss.judge(ctx, recs)
	if recs[0].state == StateHeld {
		fmt.Fprintf(o.Streams.ErrOut, "Warning: the holder %s still exists; unless it stops naming key %q, its operator claims it again on its next reconcile.\n", rec.Holder, key)
	}

	what := fmt.Sprintf("lease/%s: claim %q of %s (uid %s, token %s)", l.Name, key, rec.Holder, o.show(string(rec.Holder.UID)), o.show(rec.Token.String()))
	if f.dryRun == dryRunClient {
		_, err := fmt.Fprintf(o.Streams.Out, "%s would be released (client dry run: nothing sent)\n", what)
		return err
	}
	opts := []client.DeleteOption{client.Preconditions{UID: ptr.To(l.UID), ResourceVersion: ptr.To(l.ResourceVersion)}}
	if f.dryRun == dryRunServer {
		opts = append(opts, client.DryRunAll)
	}
	err = ss.c.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name}}, opts...)
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("releasing claim %q: Lease %s changed after it was checked (uid %s, resourceVersion %s); nothing was released, look again: %w", key, ref, l.UID, l.ResourceVersion, ErrRefused)
	case apierrors.IsNotFound(err):
		_, err := fmt.Fprintf(o.Streams.Out, "%s was already released by someone else\n", what)
		return err
	case err != nil:
		return fmt.Errorf("releasing claim %q: deleting Lease %s: %w", key, ref, err)
	}
	suffix := ""
	if f.dryRun == dryRunServer {
		suffix = " (server dry run)"
	}
	_, err = fmt.Fprintf(o.Streams.Out, "%s released%s\n", what, suffix)
	return err
}
