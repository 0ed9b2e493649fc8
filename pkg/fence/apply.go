package fence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// applyAttempts bounds how often a fenced apply reads, checks and applies
// again after the API server refused it because the object changed since
// the read.
const applyAttempts = 5

// absentVersion is the resourceVersion an apply carries when the read
// found no object. The API server ignores it when it creates the object,
// and refuses the apply with a Conflict when someone created the object
// since the read: that object's resourceVersion is a later etcd revision
// than 1. Server-side apply has no "must not exist" precondition; this is
// one, pinned by a test on the real API server.
const absentVersion = "1"

// Apply applies obj with server-side apply, fenced: it reads the object,
// refuses when it carries a newer token of a held key, and applies obj with
// the stamps of the grants and the stamps of other keys as read added to
// its annotations and the read's resourceVersion as a precondition. See
// the package comment. The response is decoded into obj, as the wrapped
// client does.
func (f *Client) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encoding the apply configuration %T: %w", obj, err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &u.Object); err != nil {
		return fmt.Errorf("decoding the apply configuration %T: %w", obj, err)
	}
	ao := &client.ApplyOptions{}
	ao.ApplyOptions(opts)
	err = f.apply(ctx, "apply", u, data, ao.FieldManager, func(ctx context.Context, body []byte) error {
		guarded := &unstructured.Unstructured{}
		if err := json.Unmarshal(body, &guarded.Object); err != nil {
			return fmt.Errorf("decoding the guarded apply configuration: %w", err)
		}
		if err := f.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(guarded), opts...); err != nil {
			return err
		}
		out, err := json.Marshal(guarded.Object)
		if err != nil {
			return fmt.Errorf("encoding the applied object: %w", err)
		}
		return json.Unmarshal(out, obj)
	})
	return err
}

// applyPatch is Patch with server-side apply: obj's applied form, fenced.
func (f *Client) applyPatch(ctx context.Context, obj client.Object, patch client.Patch, opts []client.PatchOption) error {
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("computing the apply patch of %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	po := &client.PatchOptions{}
	po.ApplyOptions(opts)
	return f.apply(ctx, "apply", obj, data, po.FieldManager, func(ctx context.Context, body []byte) error {
		return f.c.Patch(ctx, obj, client.RawPatch(types.ApplyPatchType, body), opts...)
	})
}

// apply runs one fenced server-side apply of data, the applied
// configuration of obj: read, check, guard, write. A Conflict the guard
// caused (the object changed, or was created, between the read and the
// apply) is not a field manager conflict, and server-side apply never
// answers it unguarded: apply reads, checks and applies again, so that a
// caller sees what an unfenced apply would answer, or the refusal of a
// newer holder's stamp.
func (f *Client) apply(ctx context.Context, op string, obj client.Object, data []byte, manager string, write func(context.Context, []byte) error) error {
	var err error
	for range applyAttempts {
		var guarded bool
		guarded, err = f.applyOnce(ctx, op, obj, data, manager, write)
		if !guarded || !apierrors.IsConflict(err) || fieldManagerConflict(err) {
			return err
		}
	}
	return err
}

// applyOnce reads, checks, guards and writes once. guarded is true when
// the write was sent with the guard's resourceVersion (every write it
// sends), so that a Conflict may be the guard's.
func (f *Client) applyOnce(ctx context.Context, op string, obj client.Object, data []byte, manager string, write func(context.Context, []byte) error) (guarded bool, err error) {
	t, cur, err := f.read(ctx, op, obj)
	switch {
	case apierrors.IsNotFound(err):
		// An apply may create the object: nothing to check, nothing of
		// other keys to keep, and absentVersion as the guard.
		cur = nil
	case err != nil:
		return false, err
	default:
		if err := f.check(ctx, t, cur); err != nil {
			return false, err
		}
	}
	body, err := guardApply(data, cur, manager, f.grants)
	switch {
	case errors.Is(err, errVersionChanged):
		// The caller's own precondition: answered, not retried.
		return false, f.conflict(t, obj)
	case err != nil:
		return false, fmt.Errorf("guarding the %s of %s %s: %w", op, t.kind, t.ref, err)
	}
	return true, write(ctx, body)
}

// fieldManagerConflict reports whether err is server-side apply's refusal
// to take fields another manager owns: the caller's to resolve (force it),
// not the guard's.
func fieldManagerConflict(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict {
			return true
		}
	}
	return false
}

// guardApply rewrites a server-side apply body (YAML or JSON) into JSON that
// carries cur's resourceVersion and, under metadata.annotations, the
// annotations the caller applies other than stamps, the stamps of grants,
// and the stamps of other keys that manager, the caller's field manager,
// already applies on cur. The stamps of other keys are otherwise left out:
// naming one would make manager co-own it, and the next holder of that key
// would meet a field manager conflict on its own stamp. Keeping those
// manager already applies matters too: with a field manager shared by the
// holders of several keys, an apply that stopped naming them would remove
// them. cur is nil for an object that did not exist at the read: then
// nothing is kept and the resourceVersion is [absentVersion].
func guardApply(data []byte, cur *metav1.PartialObjectMetadata, manager string, grants []Grant) ([]byte, error) {
	var body map[string]any
	if err := yaml.Unmarshal(data, &body); err != nil {
		return nil, fmt.Errorf("decoding the apply configuration: %w", err)
	}
	if body == nil {
		return nil, &UnsupportedError{Op: "apply a configuration that is not an object", Why: "there is no metadata to guard"}
	}
	metadata := map[string]any{}
	if m, ok := body["metadata"]; ok && m != nil {
		if metadata, ok = m.(map[string]any); !ok {
			return nil, fmt.Errorf("apply configuration metadata is a %T, not an object", m)
		}
	}
	rv := absentVersion
	if cur != nil {
		rv = cur.ResourceVersion
	}
	if v, ok := metadata["resourceVersion"]; ok && v != nil {
		s, isString := v.(string)
		if !isString {
			return nil, fmt.Errorf("apply configuration metadata.resourceVersion is a %T, not a string", v)
		}
		if s != "" && cur != nil && s != rv {
			return nil, errVersionChanged
		}
	}
	metadata["resourceVersion"] = rv
	annotations := map[string]any{}
	if a, ok := metadata["annotations"]; ok && a != nil {
		given, ok := a.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("apply configuration metadata.annotations is a %T, not an object", a)
		}
		for k, v := range given {
			if !strings.HasPrefix(k, AnnotationPrefix) {
				annotations[k] = v
			}
		}
	}
	if cur != nil {
		applied := appliedAnnotations(cur.ManagedFields, manager)
		for k, v := range cur.Annotations {
			if strings.HasPrefix(k, AnnotationPrefix) && applied[k] {
				annotations[k] = v
			}
		}
	}
	for k, v := range stamps(grants) {
		annotations[k] = v
	}
	metadata["annotations"] = annotations
	body["metadata"] = metadata
	out, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding the guarded apply configuration: %w", err)
	}
	return out, nil
}

// appliedAnnotations returns the annotation keys that manager owns by
// server-side apply according to managed: those an apply by manager that
// stops naming them removes. An unknown manager ("": the apply named no
// field owner) owns nothing known.
func appliedAnnotations(managed []metav1.ManagedFieldsEntry, manager string) map[string]bool {
	owned := map[string]bool{}
	if manager == "" {
		return owned
	}
	for _, e := range managed {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.FieldsV1 == nil || e.Subresource != "" {
			continue
		}
		var fields struct {
			Metadata struct {
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if err := json.Unmarshal(e.FieldsV1.Raw, &fields); err != nil {
			// Not the fieldsV1 format: nothing known is owned.
			continue
		}
		for k := range fields.Metadata.Annotations {
			if name, ok := strings.CutPrefix(k, "f:"); ok {
				owned[name] = true
			}
		}
	}
	return owned
}
