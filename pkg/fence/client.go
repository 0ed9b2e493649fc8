package fence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// statusSubresource is the only subresource whose writes are fenced.
const statusSubresource = "status"

// Get reads through the wrapped client, unchanged.
func (f *Client) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return f.c.Get(ctx, key, obj, opts...)
}

// List reads through the wrapped client, unchanged.
func (f *Client) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return f.c.List(ctx, list, opts...)
}

// Scheme returns the wrapped client's scheme.
func (f *Client) Scheme() *runtime.Scheme { return f.c.Scheme() }

// RESTMapper returns the wrapped client's RESTMapper.
func (f *Client) RESTMapper() meta.RESTMapper { return f.c.RESTMapper() }

// GroupVersionKindFor asks the wrapped client.
func (f *Client) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return f.c.GroupVersionKindFor(obj)
}

// IsObjectNamespaced asks the wrapped client.
func (f *Client) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	return f.c.IsObjectNamespaced(obj)
}

// Create stamps obj with the token of every grant and creates it. Stamps
// obj already carries are replaced: a new object has no history to keep.
// On error obj's annotations are left as they were.
func (f *Client) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	before := obj.GetAnnotations()
	obj.SetAnnotations(stamped(before, nil, f.grants))
	if err := f.c.Create(ctx, obj, opts...); err != nil {
		obj.SetAnnotations(before)
		return err
	}
	return nil
}

// Update reads the object, refuses when it carries a newer token of a held
// key, and updates it stamped and conditional on the read's resourceVersion.
// An obj carrying another resourceVersion or UID than the read gets a
// Conflict, as from the API server. On error obj is left as it was.
func (f *Client) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return f.update(ctx, "update", obj, f.grants, func(ctx context.Context) error {
		return f.c.Update(ctx, obj, opts...)
	})
}

// update is Update and status Update: check, then write obj guarded by the
// read, carrying the read's stamps of other keys and the stamps of grants.
func (f *Client) update(ctx context.Context, op string, obj client.Object, grants []Grant, write func(context.Context) error) error {
	t, cur, err := f.read(ctx, op, obj)
	if err != nil {
		return err
	}
	if err := f.check(ctx, t, cur); err != nil {
		return err
	}
	rv, uid := obj.GetResourceVersion(), obj.GetUID()
	if (rv != "" && rv != cur.ResourceVersion) || (uid != "" && uid != cur.UID) {
		return f.conflict(t, obj)
	}
	before := obj.GetAnnotations()
	obj.SetAnnotations(stamped(before, cur.Annotations, grants))
	obj.SetResourceVersion(cur.ResourceVersion)
	if err := write(ctx); err != nil {
		obj.SetAnnotations(before)
		obj.SetResourceVersion(rv)
		return err
	}
	return nil
}

// Patch reads the object, refuses when it carries a newer token of a held
// key, and sends patch with the stamps and the read's resourceVersion added
// to its body. JSON merge, strategic merge and server-side apply
// (client.Apply) patches are accepted; a JSON patch is an
// *UnsupportedError. A patch that carries another resourceVersion than the
// read gets a Conflict, as from the API server. A server-side apply is
// fenced as [Client.Apply] fences it.
func (f *Client) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if patch.Type() == types.ApplyPatchType {
		return f.applyPatch(ctx, obj, patch, opts)
	}
	return f.patch(ctx, "patch", obj, patch, f.grants, func(ctx context.Context, p client.Patch) error {
		return f.c.Patch(ctx, obj, p, opts...)
	})
}

func (f *Client) patch(ctx context.Context, op string, obj client.Object, patch client.Patch, grants []Grant, write func(context.Context, client.Patch) error) error {
	pt := patch.Type()
	if pt != types.MergePatchType && pt != types.StrategicMergePatchType {
		return &UnsupportedError{Op: fmt.Sprintf("%s with %s", op, pt),
			Why: "only JSON merge and strategic merge patches can carry the stamps and the resourceVersion guard; use client.MergeFrom or Update"}
	}
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("computing the %s patch of %T %s: %w", pt, obj, client.ObjectKeyFromObject(obj), err)
	}
	t, cur, err := f.read(ctx, op, obj)
	if err != nil {
		return err
	}
	if err := f.check(ctx, t, cur); err != nil {
		return err
	}
	body, err := guard(data, pt, cur, grants)
	switch {
	case errors.Is(err, errVersionChanged):
		return f.conflict(t, obj)
	case err != nil:
		var unsupported *UnsupportedError
		if errors.As(err, &unsupported) {
			unsupported.Op = op + " " + unsupported.Op
			return unsupported
		}
		return fmt.Errorf("guarding the %s of %s %s: %w", op, t.kind, t.ref, err)
	}
	return write(ctx, client.RawPatch(pt, body))
}

// Delete reads the object, refuses when it carries a newer token of a held
// key, and deletes it with the UID and resourceVersion of the read as
// preconditions. Preconditions in opts that differ from the read get a
// Conflict, as from the API server.
func (f *Client) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	t, cur, err := f.read(ctx, "delete", obj)
	if err != nil {
		return err
	}
	if err := f.check(ctx, t, cur); err != nil {
		return err
	}
	if p := (&client.DeleteOptions{}).ApplyOptions(opts).Preconditions; p != nil {
		if (p.ResourceVersion != nil && *p.ResourceVersion != cur.ResourceVersion) || (p.UID != nil && *p.UID != cur.UID) {
			return f.conflict(t, obj)
		}
	}
	uid, rv := cur.UID, cur.ResourceVersion
	opts = append(slices.Clone(opts), client.Preconditions{UID: &uid, ResourceVersion: &rv})
	return f.c.Delete(ctx, obj, opts...)
}

// DeleteAllOf is refused with an *UnsupportedError: a collection delete
// cannot check the stamps of each object it deletes. List and Delete each.
func (f *Client) DeleteAllOf(_ context.Context, obj client.Object, _ ...client.DeleteAllOfOption) error {
	return &UnsupportedError{Op: "delete all of " + fmt.Sprintf("%T", obj),
		Why: "a collection delete cannot check each object's stamps; list the objects and delete each"}
}

func errApply(op string) error {
	return &UnsupportedError{Op: op,
		Why: "status is not stamped and a status apply is not guarded; use Status().Update or a merge patch"}
}

// Status returns the writer of the status subresource: its Update and Patch
// are checked and conditional on the read's resourceVersion, never stamped.
func (f *Client) Status() client.SubResourceWriter { return f.SubResource(statusSubresource) }

// SubResource returns a client of the named subresource. Get passes
// through; writes are fenced for "status" and refused with an
// *UnsupportedError for every other subresource.
func (f *Client) SubResource(subResource string) client.SubResourceClient {
	return &subClient{f: f, name: subResource}
}

type subClient struct {
	f    *Client
	name string
}

func (s *subClient) Get(ctx context.Context, obj, subResource client.Object, opts ...client.SubResourceGetOption) error {
	return s.f.c.SubResource(s.name).Get(ctx, obj, subResource, opts...)
}

func (s *subClient) unsupported(op string) error {
	if s.name != statusSubresource {
		return &UnsupportedError{Op: fmt.Sprintf("%s subresource %q", op, s.name),
			Why: "only the status subresource is fenced; write others through an unfenced client deliberately"}
	}
	return nil
}

func (s *subClient) Create(_ context.Context, _, _ client.Object, _ ...client.SubResourceCreateOption) error {
	return &UnsupportedError{Op: fmt.Sprintf("create subresource %q", s.name),
		Why: "a subresource create cannot be made conditional on the read the stamps were checked on"}
}

func (s *subClient) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.unsupported("update"); err != nil {
		return err
	}
	if (&client.SubResourceUpdateOptions{}).ApplyOptions(opts).SubResourceBody != nil {
		return &UnsupportedError{Op: "update status with a separate body", Why: "the body would not carry the guard; update obj itself"}
	}
	// Status ignores metadata: stamps are kept as read, not added.
	return s.f.update(ctx, "update status", obj, nil, func(ctx context.Context) error {
		return s.f.c.SubResource(s.name).Update(ctx, obj, opts...)
	})
}

func (s *subClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.unsupported("patch"); err != nil {
		return err
	}
	if (&client.SubResourcePatchOptions{}).ApplyOptions(opts).SubResourceBody != nil {
		return &UnsupportedError{Op: "patch status with a separate body", Why: "the body would not carry the guard; patch obj itself"}
	}
	return s.f.patch(ctx, "patch status", obj, patch, nil, func(ctx context.Context, p client.Patch) error {
		return s.f.c.SubResource(s.name).Patch(ctx, obj, p, opts...)
	})
}

func (s *subClient) Apply(_ context.Context, _ runtime.ApplyConfiguration, _ ...client.SubResourceApplyOption) error {
	return errApply(fmt.Sprintf("apply subresource %q", s.name))
}

// read returns the object's metadata as the API server has it now.
func (f *Client) read(ctx context.Context, op string, obj client.Object) (target, *metav1.PartialObjectMetadata, error) {
	t := target{op: op, kind: fmt.Sprintf("%T", obj), ref: client.ObjectKeyFromObject(obj)}
	gvk, err := f.c.GroupVersionKindFor(obj)
	if err != nil {
		return t, nil, fmt.Errorf("finding the kind of %T %s to %s it: %w", obj, t.ref, op, err)
	}
	t.kind = gvk.Kind
	t.gvk = gvk
	cur := &metav1.PartialObjectMetadata{}
	cur.SetGroupVersionKind(gvk)
	if err := f.reader.Get(ctx, t.ref, cur); err != nil {
		return t, nil, fmt.Errorf("reading %s %s to check its fencing stamps before the %s: %w", t.kind, t.ref, op, err)
	}
	return t, cur, nil
}

// check checks cur's stamps against the grants and logs a refusal.
func (f *Client) check(ctx context.Context, t target, cur *metav1.PartialObjectMetadata) error {
	err := check(t, cur.Annotations, f.grants)
	if err != nil {
		log.FromContext(ctx).V(1).Info("fenced write refused", "op", t.op, "kind", t.kind, "object", t.ref, "reason", err.Error())
	}
	return err
}

// conflict is the Conflict the API server answers a write whose
// resourceVersion is not the object's.
func (f *Client) conflict(t target, obj client.Object) error {
	gr := schema.GroupResource{Group: t.gvk.Group, Resource: strings.ToLower(t.gvk.Kind)}
	if m, err := f.c.RESTMapper().RESTMapping(t.gvk.GroupKind(), t.gvk.Version); err == nil {
		gr = m.Resource.GroupResource()
	}
	return apierrors.NewConflict(gr, obj.GetName(),
		errors.New("the object has been modified since the fenced client read it; please apply your changes to the latest version and try again"))
}
