package claimsctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/pkg/conditions"
)

// Roles of a record in why's output.
const (
	roleHolds     = "holds"
	roleWaitsFor  = "waits for"
	roleSuccessor = "successor"
)

// WhyView is the -o yaml|json output of why.
type WhyView struct {
	Object    HolderView        `json:"object"`
	Condition *metav1.Condition `json:"condition,omitempty"`
	// Stale is true when the condition was computed for an older
	// generation of the object than the current one.
	Stale   bool          `json:"stale,omitempty"`
	InWords string        `json:"inWords"`
	Claims  []WhyClaimRef `json:"claims"`
}

// WhyClaimRef is a record and what it is to the object.
type WhyClaimRef struct {
	Role  string    `json:"role"`
	Claim ClaimView `json:"claim"`
}

func (o *Options) newWhyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "why (KIND/NAME | KIND NAME)",
		Short: "Explain the claims an object holds or waits for, and its claim condition",
		Long: "why reads the object (any kind; -n for its namespace), its claim condition (type Claimed unless\n" +
			"--condition-type says otherwise) and the claim records it holds, waits for, or is the planned\n" +
			"successor of, and says in words what that means. Records are read in --claim-namespace, else the\n" +
			"published namespace, else in every namespace.",
		Example: "  kubectl claims why camundacluster/orders-v2 -n team-a\n" +
			"  kubectl claims why databases.example.com billing -n team-b -o yaml",
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error { return o.runWhy(cmd.Context(), args) },
	}
	o.addOutputFlag(cmd)
	cmd.Flags().StringVar(&o.conditionType, "condition-type", "", "type of the claim condition (default: published, else Claimed)")
	return cmd
}

func parseObjectArgs(args []string) (kind, name string, err error) {
	if len(args) == 2 {
		kind, name = args[0], args[1]
	} else {
		var ok bool
		kind, name, ok = strings.Cut(args[0], "/")
		if !ok {
			return "", "", fmt.Errorf("%q: want KIND/NAME or KIND NAME", args[0])
		}
	}
	if kind == "" || name == "" {
		return "", "", errors.New("want KIND/NAME or KIND NAME, both non-empty")
	}
	return kind, name, nil
}

func (o *Options) runWhy(ctx context.Context, args []string) error {
	if err := o.validateOutput(); err != nil {
		return err
	}
	kind, name, err := parseObjectArgs(args)
	if err != nil {
		return err
	}
	ss, err := o.connect(ctx, true)
	if err != nil {
		return err
	}
	gvk, err := ss.kindFor(kind)
	if err != nil {
		return err
	}
	mapping, err := ss.c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", kind, err)
	}
	ref := types.NamespacedName{Name: name}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ref.Namespace = ss.namespace
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := ss.c.Get(ctx, ref, obj); err != nil {
		return fmt.Errorf("reading %s %s: %w", gvk.Kind, ref, err)
	}
	cond, err := conditionOf(obj, ss.s.conditionType)
	if err != nil {
		return err
	}

	recs, err := o.relatedRecords(ctx, ss, obj, cond)
	if err != nil {
		return err
	}
	v := WhyView{
		Object:    HolderView{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: o.show(string(obj.GetUID()))},
		Condition: cond,
		Stale:     cond != nil && cond.ObservedGeneration != 0 && cond.ObservedGeneration < obj.GetGeneration(),
		InWords:   inWords(cond, ss.s.conditionType),
		Claims:    []WhyClaimRef{},
	}
	for _, r := range recs {
		v.Claims = append(v.Claims, WhyClaimRef{Role: r.role, Claim: o.view(r.record)})
	}
	if o.output == outputYAML || o.output == outputJSON {
		return writeStructured(o.Streams.Out, o.output, v)
	}
	return o.writeWhy(o.Streams.Out, v, obj.GetGeneration(), ss.s.conditionType, recs)
}

// conditionOf returns obj's condition of type t, nil when it has none.
func conditionOf(obj *unstructured.Unstructured, t string) (*metav1.Condition, error) {
	raw, found, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	if err != nil {
		return nil, fmt.Errorf("reading status.conditions of %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	if !found {
		return nil, nil
	}
	for _, item := range raw {
		m, ok := item.(map[string]any)
		if !ok || m["type"] != t {
			continue
		}
		var c metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err != nil {
			return nil, fmt.Errorf("reading condition %s of %s %s: %w", t, obj.GetKind(), obj.GetName(), err)
		}
		return &c, nil
	}
	return nil, nil
}

type relatedRecord struct {
	record
	role string
}

// relatedRecords finds the records obj holds, is the planned successor of,
// and, when its condition names a key it does not hold, the record of that
// key. One List of the claim records; liveness is read for the ones shown.
func (o *Options) relatedRecords(ctx context.Context, ss *session, obj *unstructured.Unstructured, cond *metav1.Condition) ([]relatedRecord, error) {
	namespace := o.claimNamespace
	if namespace == "" {
		namespace = ss.s.recordNamespace // empty: every namespace
	}
	all, err := ss.leaseRecords(ctx, namespace)
	if err != nil {
		return nil, err
	}
	if res := ss.s.annotationRes; res != "" {
		more, err := ss.annotationRecords(ctx, res, namespace)
		if err != nil {
			return nil, err
		}
		all = append(all, more...)
	}
	sortRecords(all)
	uid := obj.GetUID()
	waitKey, waiting := keyOfCondition(cond)
	var out []relatedRecord
	for _, r := range all {
		switch {
		case r.rec.Ours() && r.rec.Holder.UID == uid:
			out = append(out, relatedRecord{r, roleHolds})
		case r.rec.Ours() && r.rec.Successor != nil && r.rec.Successor.UID == uid:
			out = append(out, relatedRecord{r, roleSuccessor})
		case waiting && r.rec.Key == waitKey,
			waiting && r.backend == backendLease && r.rec.Ref.Name == ss.s.recordName(waitKey):
			out = append(out, relatedRecord{r, roleWaitsFor})
		}
	}
	recs := make([]record, len(out))
	for i := range out {
		recs[i] = out[i].record
	}
	ss.judge(ctx, recs)
	for i := range out {
		out[i].record = recs[i]
	}
	return out, nil
}

// keyOfCondition returns the key a not-granted claim condition names. The
// claim's default messages start with the key, quoted: `Key "..." ...`.
func keyOfCondition(cond *metav1.Condition) (string, bool) {
	if cond == nil || cond.Status == metav1.ConditionTrue {
		return "", false
	}
	rest, ok := strings.CutPrefix(cond.Message, "Key ")
	if !ok {
		return "", false
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", false
	}
	key, err := strconv.Unquote(q)
	if err != nil {
		return "", false
	}
	return key, true
}

// inWords explains a claim condition to someone on call: what it means and
// what, if anything, a person has to do.
func inWords(cond *metav1.Condition, t string) string {
	if cond == nil {
		return fmt.Sprintf("The object has no %s condition: its operator has not reconciled it yet, or writes the claim condition under another type (--condition-type).", t)
	}
	switch conditions.Reason(cond.Reason) {
	case conditions.ReasonClaimed:
		return "It holds every key it names; its operator acts for it."
	case conditions.ReasonNoKeys:
		return "It names no key, so there is nothing to hold."
	case conditions.ReasonParked:
		return "Another live object holds a key it needs. It waits, and takes the key over once that holder is deleted or stops naming the key. Nothing to do unless the holder should not hold it."
	case conditions.ReasonWaitingForHandover:
		return "The previous holder of a key is gone, but what it ran is still draining (the handover gate is closed). It takes the key over as soon as the gate opens."
	case conditions.ReasonNotFirst:
		return "The key is free, but an older object wants it too and goes first."
	case conditions.ReasonForeign:
		return "An object the claim did not write blocks a key. The claim never removes it: a person has to check it and delete it (see the foreign record below)."
	case conditions.ReasonClaimError:
		return "The claim could not be judged (an API error, or a liveness or handover check failed). The operator retries; its logs say more."
	case conditions.ReasonInvalidKey:
		return "Its keys could not be computed or are not acceptable claim keys. Fix the object's spec."
	}
	return fmt.Sprintf("Reason %q is not a reason the claim writes; another controller may own this condition type.", cond.Reason)
}

func (o *Options) writeWhy(w io.Writer, v WhyView, generation int64, condType string, recs []relatedRecord) error {
	var b strings.Builder
	// Every value holds something from the cluster (a name, a reason, a
	// message), escaped as table cells are.
	field := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%-11s %s\n", label+":", printable(fmt.Sprintf(format, args...)))
	}
	obj := v.Object
	where := obj.Name
	if obj.Namespace != "" {
		where = obj.Namespace + "/" + obj.Name
	}
	field("Object", "%s %s (uid %s)", obj.Kind, where, obj.UID)
	if c := v.Condition; c != nil {
		line := fmt.Sprintf("%s=%s, reason %s", c.Type, c.Status, c.Reason)
		if !c.LastTransitionTime.IsZero() {
			line += ", for " + age(o.Clock.Now(), c.LastTransitionTime.Time)
		}
		if v.Stale {
			line += fmt.Sprintf(" (stale: computed for generation %d, the object is at %d)", c.ObservedGeneration, generation)
		}
		field("Condition", "%s", line)
		if c.Message != "" {
			field("Message", "%s", c.Message)
		}
	} else {
		field("Condition", "none of type %s", condType)
	}
	field("In words", "%s", v.InWords)
	if len(recs) == 0 {
		field("Claims", "none found")
		_, err := io.WriteString(w, b.String())
		return err
	}
	b.WriteString("Claims:\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	rs := make([]record, len(recs))
	for i := range recs {
		rs[i] = recs[i].record
	}
	t := o.recordTable(rs, o.output == outputWide)
	t.header = append([]string{"ROLE"}, t.header...)
	for i := range t.rows {
		t.rows[i] = append([]string{recs[i].role}, t.rows[i]...)
	}
	return t.write(w, "  ")
}
