package fence

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGuardApplyCarriesTheStampsAndTheReadsVersion(t *testing.T) {
	a, b := AnnotationFor(keyA), AnnotationFor(keyB)
	grants := []Grant{{Key: keyA, Token: "200"}}
	// ctrl applied b's stamp (it held keyB through a shared field manager);
	// other applies a's stamp; edit wrote b's by an update.
	read := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "77", Annotations: map[string]string{
		a: "150", b: "90", "note": "server's",
	}, ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: "ctrl", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:` + b + `":{}}},"f:data":{"f:k":{}}}`)}},
		{Manager: "other", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:` + a + `":{}}}}`)}},
		{Manager: "edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:` + b + `":{}}}}`)}},
	}}}
	tests := []struct {
		name    string
		data    string
		cur     *metav1.PartialObjectMetadata
		manager string
		want    map[string]any
		wantErr error
	}{
		{
			name:    "given an apply of an existing object then the read's version, the other key's stamp the manager applies, as read, and our stamp",
			data:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","annotations":{"mine":"x"}},"data":{"k":"v"}}`,
			cur:     read,
			manager: "ctrl",
			want: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"},
				"metadata": map[string]any{"name": "cm", "resourceVersion": "77", "annotations": map[string]any{"mine": "x", a: "200", b: "90"}}},
		},
		{
			name:    "given a manager that does not apply the other key's stamp then it is left out, not taken over",
			data:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","annotations":{"mine":"x"}},"data":{"k":"v"}}`,
			cur:     read,
			manager: "other",
			want: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"k": "v"},
				"metadata": map[string]any{"name": "cm", "resourceVersion": "77", "annotations": map[string]any{"mine": "x", a: "200"}}},
		},
		{
			name:    "given a manager that wrote the other key's stamp by an update then it is left out",
			data:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}}`,
			cur:     read,
			manager: "edit",
			want: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "cm", "resourceVersion": "77", "annotations": map[string]any{a: "200"}}},
		},
		{
			name: "given no manager named then no other key's stamp is kept",
			data: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}}`,
			cur:  read,
			want: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "cm", "resourceVersion": "77", "annotations": map[string]any{a: "200"}}},
		},
		{
			name:    "given YAML that names stamps itself then the caller's stamps are replaced",
			data:    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  annotations:\n    " + a + ": \"999\"\n    " + b + ": \"1\"\n",
			cur:     read,
			manager: "ctrl",
			want: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "cm", "resourceVersion": "77", "annotations": map[string]any{a: "200", b: "90"}}},
		},
		{
			name: "given an apply that creates the object then the absent version and only our stamp",
			data: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}}`,
			want: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "cm", "resourceVersion": absentVersion, "annotations": map[string]any{a: "200"}}},
		},
		{
			name:    "given an apply that carries another resourceVersion then a changed-version refusal",
			data:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","resourceVersion":"76"}}`,
			cur:     read,
			wantErr: errVersionChanged,
		},
		{
			name:    "given an apply that is not an object then unsupported",
			data:    `null`,
			cur:     read,
			wantErr: ErrUnsupported,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := guardApply([]byte(tc.data), tc.cur, tc.manager, grants)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("guardApply error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("guarded apply (-want +got):\n%s", diff)
			}
		})
	}
}
