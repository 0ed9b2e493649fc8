package claimsctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
// is not what the caller saw (another holder, another token, a foreign
// object, a record written between the check and the Delete), or because
// its holder still exists and --force was not given.
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
	// force releases a record whose holder still exists (or whose holder
	// could not be read).
	force bool
}

func (o *Options) newReleaseCommand() *cobra.Command {
	var f releaseFlags
	cmd := &cobra.Command{
		Use:   "release KEY --holder-uid UID",
		Short: "Release one claim by hand, fenced on the holder you saw",
		Long: "release deletes the Lease record of KEY only if it is a claim record of KEY held by --holder-uid\n" +
			"(and carrying --token, if given), and only if it has not changed since that check: the Delete\n" +
			"carries the UID and resourceVersion of the read as preconditions. Anything else is refused.\n" +
			"release is for a key whose holder is gone but cannot release it (a stuck finalizer, an operator\n" +
			"that is gone). While the holder object still exists it is refused unless --force: the key would\n" +
			"go to whichever claimant is reconciled first (an object waiting for it, or the holder again), and\n" +
			"the refusal names them. --dry-run=server asks the API server to check the Delete, preconditions\n" +
			"and RBAC included, without performing it.",
		Example: "  kubectl claims list -n camunda-system -o wide\n" +
			"  kubectl claims release 'elasticsearch|https://es.data.svc:9200' --holder-uid 6f1c1d2e-... -n camunda-system --dry-run=server",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.runRelease(cmd.Context(), args[0], f) },
	}
	cmd.Flags().StringVar(&f.holderUID, "holder-uid", "", "UID of the holder you expect to hold the key (required)")
	cmd.Flags().StringVar(&f.token, "token", "", "fencing token you expect the record to carry (optional, narrows the check to one grant)")
	cmd.Flags().StringVar(&f.dryRun, "dry-run", dryRunNone, `"none", "server" (the API server checks the Delete without performing it) or "client" (only check and print)`)
	cmd.Flags().BoolVar(&f.force, "force", false, "release even though the holder object still exists (or cannot be read); the key goes to whichever claimant is reconciled first")
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
	ss, err := o.connect(ctx, false)
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
	if live := o.liveHolder(ctx, ss, key, recs[0]); live != "" {
		if !f.force {
			return fmt.Errorf("releasing claim %q: %s Make the holder stop naming the key (or delete it) instead, or pass --force to delete the record anyway: %w", key, live, ErrRefused)
		}
		fmt.Fprintf(o.Streams.ErrOut, "Warning (--force): %s\n", printable(live))
	}

	what := printable(fmt.Sprintf("lease/%s: claim %q of %s (uid %s, token %s)", l.Name, key, rec.Holder, o.show(string(rec.Holder.UID)), o.show(rec.Token.String())))
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

// liveHolder says, in sentences, why releasing r would not free its key:
// its holder still exists (or could not be read), and who would get the key
// once the record is gone. It is empty when the holder is gone, the one
// case release is for.
func (o *Options) liveHolder(ctx context.Context, ss *session, key string, r record) string {
	rec := r.rec
	holder := fmt.Sprintf("%s (uid %s)", rec.Holder, o.show(string(rec.Holder.UID)))
	var why string
	switch r.state {
	case StateHeld:
		why = fmt.Sprintf("its holder %s still exists.", holder)
	case StateUnknown:
		why = fmt.Sprintf("whether its holder %s still exists could not be read (%s), so it counts as existing.", holder, r.detail)
	default:
		return ""
	}
	return why + " " + o.nextHolders(ctx, ss, key, rec)
}

// nextHolders says who acquires key once its record is deleted: nobody is
// handed it, the next claimant that is reconciled creates a new record. The
// candidates named are the prepared successor of a planned handover (which
// the Delete drops), the objects of the holder's kind whose claim condition
// says they wait for key (as why finds them), and the holder itself.
func (o *Options) nextHolders(ctx context.Context, ss *session, key string, rec claim.Record) string {
	var candidates []string
	seen := map[types.UID]bool{rec.Holder.UID: true}
	if s := rec.Successor; s != nil && !seen[s.UID] {
		seen[s.UID] = true
		candidates = append(candidates, fmt.Sprintf("%s (the prepared successor; the planned handover is dropped with the record)", s))
	}
	waiting, err := ss.waiters(ctx, key, rec.Holder)
	for _, w := range waiting {
		if !seen[w.holder.UID] {
			seen[w.holder.UID] = true
			candidates = append(candidates, fmt.Sprintf("%s (waiting for it: %s)", w.holder, w.reason))
		}
	}
	next := "Deleting the record hands the key to the next object that names it and is reconciled"
	if len(candidates) == 0 {
		next += fmt.Sprintf("; none is found waiting for it, so most likely the holder %s itself, which claims it again unless it stops naming it.", rec.Holder)
	} else {
		next += fmt.Sprintf(", whichever comes first: %s; or the holder %s itself, which claims it again unless it stops naming it.", strings.Join(candidates, "; "), rec.Holder)
	}
	if err != nil {
		next += fmt.Sprintf(" Other objects may wait for it too: %v.", err)
	}
	return next
}
