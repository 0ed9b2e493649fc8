package claimmw_test

import (
	"context"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
)

func TestHandoverGatesLookAtTheLabelledWorkloadsOfThePreviousHolder(t *testing.T) {
	ctx := context.Background()
	c := direct(t)
	ns := env.Namespace(t)
	previous := claim.Holder{Kind: "Widget", Namespace: ns, Name: "old", UID: "uid-old"}
	labelsFor := func(_ string, h claim.Holder) map[string]string {
		return map[string]string{holderLabel: string(h.UID)}
	}
	none := func(string, claim.Holder) map[string]string { return nil }
	mine := map[string]string{holderLabel: "uid-old"}
	others := map[string]string{holderLabel: "uid-other"}

	pod := func(name string, labels map[string]string, phase corev1.PodPhase) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "w", Image: "example.invalid/w"}}},
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if phase != "" {
			p.Status.Phase = phase
			if err := c.Status().Update(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	job := func(name string, labels map[string]string) {
		j := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "w", Image: "example.invalid/w"}},
			}}},
		}
		if err := c.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	// Given: a finished pod of the previous holder, a pending pod of another
	// holder, and a Job of another holder
	pod("done", mine, corev1.PodSucceeded)
	pod("someone-else", others, "")
	job("someone-elses-job", others)

	check := func(name string, gate claim.HandoverGate, wantOpen bool, wantDetail string) {
		t.Helper()
		open, detail, err := gate.Open(ctx, "k", previous)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if open != wantOpen || detail != wantDetail {
			t.Errorf("%s: Open = %v, %q; want %v, %q", name, open, detail, wantOpen, wantDetail)
		}
	}
	// Then pods and jobs gates are open: nothing of the previous holder runs
	check("pods, only others and finished ones", claimmw.PodsGone(env.APIReader, labelsFor), true, "")
	check("jobs, only others", claimmw.ObjectsGone(env.APIReader, &batchv1.JobList{}, labelsFor), true, "")
	// When the previous holder has a pending pod and a Job
	pod("pending", mine, "")
	job("importer", mine)
	// Then both gates are closed and name what still runs
	check("pods, one pending", claimmw.PodsGone(env.APIReader, labelsFor), false, "pod "+ns+"/pending of Widget "+ns+"/old is still running")
	check("jobs, one exists", claimmw.ObjectsGone(env.APIReader, &batchv1.JobList{}, labelsFor), false, ns+"/importer of Widget "+ns+"/old still exists")
	// And a gate with no labels is open rather than selecting every workload
	check("pods, no labels", claimmw.PodsGone(env.APIReader, none), true, "")
	check("jobs, no labels", claimmw.ObjectsGone(env.APIReader, &batchv1.JobList{}, none), true, "")
}
