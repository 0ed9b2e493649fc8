package claimsctl

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func (o *Options) newListCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List claim records: key, holder, token, age, pending successor, state",
		Long: "list shows every claim record in the claim namespace (-A: everywhere): the Leases that carry claim\n" +
			"annotations or the holder label, and with --annotation-backend the objects of that resource that\n" +
			"carry claim annotations. STATE is held, holder gone (the next claimant takes it over) or foreign\n" +
			"(not written by a claim for its key: it blocks the key until a person removes it). A key recorded\n" +
			"in more than one namespace (two installs with different claim namespaces) gets a warning, and\n" +
			"recordedIn in -o yaml|json: each install may have granted it to another holder.",
		Example: "  kubectl claims list -n camunda-system\n" +
			"  kubectl claims list -A -o wide\n" +
			"  kubectl claims list --annotation-backend secondarystorageconfigs.camunda.io -n team-a -o yaml",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.runList(cmd.Context()) },
	}
	o.addOutputFlag(cmd)
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list records in every namespace")
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "label selector the record objects must match")
	return cmd
}

func (o *Options) runList(ctx context.Context) error {
	if err := o.validateOutput(); err != nil {
		return err
	}
	var extra []client.ListOption
	if o.selector != "" {
		sel, err := labels.Parse(o.selector)
		if err != nil {
			return fmt.Errorf("parsing --selector: %w", err)
		}
		extra = append(extra, client.MatchingLabelsSelector{Selector: sel})
	}
	ss, err := o.connect(ctx, false)
	if err != nil {
		return err
	}
	namespace := o.recordNamespace(ss)
	if o.allNamespaces {
		namespace = ""
	}
	recs, err := ss.leaseRecords(ctx, namespace, extra...)
	if err != nil {
		return err
	}
	if res := ss.s.annotationRes; res != "" {
		more, err := ss.annotationRecords(ctx, res, namespace, extra...)
		if err != nil {
			return err
		}
		recs = append(recs, more...)
	}
	ss.judge(ctx, recs)
	sortRecords(recs)
	// Before the records, as kubectl prints warnings: a key held in two
	// places is the first thing to see.
	for _, w := range markSplitKeys(recs) {
		fmt.Fprintf(o.Streams.ErrOut, "Warning: %s\n", printable(w))
	}
	return o.printRecords(recs, namespace)
}

func (o *Options) printRecords(recs []record, namespace string) error {
	out := o.Streams.Out
	switch o.output {
	case outputYAML, outputJSON:
		list := ClaimList{Items: []ClaimView{}}
		for _, r := range recs {
			list.Items = append(list.Items, o.view(r))
		}
		return writeStructured(out, o.output, list)
	}
	if len(recs) == 0 {
		where := "namespace " + namespace
		if namespace == "" {
			where = "any namespace"
		}
		_, err := fmt.Fprintf(o.Streams.ErrOut, "No claim records found in %s.\n", where)
		return err
	}
	return o.recordTable(recs, o.output == outputWide).write(out, "")
}
