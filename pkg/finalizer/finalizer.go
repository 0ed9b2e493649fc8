// Package finalizer adds and removes one finalizer on an object with an
// optimistic lock, and runs the release-on-delete ordering as one call:
// clean up first, remove the finalizer only when the cleanup succeeded.
//
// A finalizer list is written as a whole by a merge patch, so a patch
// without a lock would drop a finalizer another controller added since the
// object was read. Every write here carries the resourceVersion it was
// computed from; on a Conflict the object is read again and the change is
// computed anew, a bounded number of times.
//
// The package works on any client.Object and does not depend on the claim
// middleware; pkg/claimmw uses it for its own finalizer.
package finalizer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Name is a finalizer name: a qualified name with a domain prefix, like
// "claim.ocf.io/release". Declare yours as a typed constant.
type Name string

// Finalizer is one named finalizer, written through a client. It is safe for
// concurrent use and keeps no state between calls.
type Finalizer struct {
	name   string // Name, as controllerutil takes it
	writer client.Client
	reader client.Reader
}

// New returns the Finalizer called name, written through writer. After a
// Conflict the object is read again through reader; pass the manager's API
// reader so the retry does not read the same stale cached copy. A nil reader
// reads through writer.
//
// name must be a qualified name with a domain prefix, like
// "claim.ocf.io/release".
func New(name Name, writer client.Client, reader client.Reader) (*Finalizer, error) {
	var errs []error
	if writer == nil {
		errs = append(errs, errors.New("writer: nil"))
	}
	errs = append(errs, ValidateName(name))
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("configuring finalizer %q: %w", name, err)
	}
	if reader == nil {
		reader = writer
	}
	return &Finalizer{name: string(name), writer: writer, reader: reader}, nil
}

// ValidateName reports whether name is usable as a finalizer: a qualified
// name with a domain prefix, as the API server warns about any other.
func ValidateName(name Name) error {
	var errs []error
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, fmt.Errorf("finalizer name %q: %s", name, msg))
	}
	if name != "" && len(errs) == 0 && !strings.Contains(string(name), "/") {
		errs = append(errs, fmt.Errorf("finalizer name %q: needs a domain prefix, like example.com/%s", name, name))
	}
	return errors.Join(errs...)
}

// Name returns the finalizer's name.
func (f *Finalizer) Name() Name { return Name(f.name) }

// Has reports whether obj, as given, carries the finalizer.
func (f *Finalizer) Has(obj client.Object) bool { return controllerutil.ContainsFinalizer(obj, f.name) }

// Add puts the finalizer on obj and reports whether it wrote. An object that
// already carries it is not written. obj is updated to what the server
// returned. An object that is being deleted is refused: the API server
// accepts no new finalizer then, and nothing may start that would need one.
// So is one that is gone, or was deleted and created again under its name
// since obj was read (another UID): the error is NotFound, and obj is not
// overwritten with the other object.
func (f *Finalizer) Add(ctx context.Context, obj client.Object) (bool, error) {
	return f.change(ctx, obj, true)
}

// Remove takes the finalizer off obj and reports whether it wrote. An object
// without it, or already gone, is not written; nor is an object created again
// under its name since obj was read (another UID), whose finalizer protects
// what that object does, not what the caller judged of obj.
func (f *Finalizer) Remove(ctx context.Context, obj client.Object) (bool, error) {
	return f.change(ctx, obj, false)
}

func (f *Finalizer) change(ctx context.Context, obj client.Object, add bool) (bool, error) {
	verb := "removing"
	if add {
		verb = "adding"
	}
	wrote, first := false, true
	// The first attempt writes obj as the caller read it; a retry after a
	// Conflict reads it again and computes the change anew, only while the
	// name still holds the object the caller read.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			fresh, ok := obj.DeepCopyObject().(client.Object)
			if !ok {
				return fmt.Errorf("copying %T: not a client.Object", obj)
			}
			if err := f.reader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
				return err
			}
			if uid := obj.GetUID(); uid != "" && fresh.GetUID() != uid {
				// The caller decided about the object it read, and that
				// one is gone: the change it computed must not land on
				// another object of the same name (a finalizer taken off
				// an object whose deletion nobody judged).
				return replaced(obj, fresh)
			}
			// fresh is a copy of obj, so of the same pointer-to-struct type.
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(fresh).Elem())
		}
		first = false
		if add && obj.GetDeletionTimestamp() != nil {
			return errors.New("object is being deleted and takes no new finalizer")
		}
		if controllerutil.ContainsFinalizer(obj, f.name) == add {
			return nil
		}
		base, ok := obj.DeepCopyObject().(client.Object)
		if !ok {
			return fmt.Errorf("copying %T: not a client.Object", obj)
		}
		if add {
			controllerutil.AddFinalizer(obj, f.name)
		} else {
			controllerutil.RemoveFinalizer(obj, f.name)
		}
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		if err := f.writer.Patch(ctx, obj, patch); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	if !add && apierrors.IsNotFound(err) {
		// Gone already (or replaced by another object of its name): nothing
		// the caller judged carries the finalizer any more.
		return wrote, nil
	}
	if err != nil {
		return wrote, fmt.Errorf("%s finalizer %q on %s: %w", verb, f.name, client.ObjectKeyFromObject(obj), err)
	}
	return wrote, nil
}

// Finalize runs the release-on-delete ordering for an object being deleted
// that carries the finalizer: it runs cleanup, and only when cleanup
// succeeded removes the finalizer. When cleanup fails the finalizer stays,
// the object stays, and the error is returned so the caller retries.
//
// removed reports whether the finalizer was taken off. An object that is not
// being deleted, or does not carry the finalizer, is left alone: cleanup does
// not run and removed is false.
func (f *Finalizer) Finalize(ctx context.Context, obj client.Object, cleanup func(context.Context) error) (removed bool, err error) {
	if obj.GetDeletionTimestamp() == nil || !f.Has(obj) {
		return false, nil
	}
	if err := cleanup(ctx); err != nil {
		return false, fmt.Errorf("finalizing %s (finalizer %q stays): %w", client.ObjectKeyFromObject(obj), f.name, err)
	}
	if _, err := f.Remove(ctx, obj); err != nil {
		return false, err
	}
	return true, nil
}

// replaced is the NotFound error of an object that is gone although its
// name holds another one now: for a change computed from the object read,
// the two are alike.
func replaced(read, now client.Object) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure,
		Code:   http.StatusNotFound,
		Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("%s (UID %s) is gone; another object of its name (UID %s) was created since it was read",
			client.ObjectKeyFromObject(read), read.GetUID(), now.GetUID()),
	}}
}
