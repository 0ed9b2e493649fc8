// Package fence makes the writes of a claim holder refuse to land on objects
// that a newer holder of the same key has already written.
//
// A claim keeps well-behaved holders apart, but a holder that is slow,
// partitioned or reconciling from a stale cache can still write after it lost
// its key. The cure is a fencing token checked by the protected resource.
// A [Client] wraps the client an inner reconciler writes through, built from
// the keys it holds and their tokens ([Grant]); every write it makes stamps
// each grant's token on the object (one annotation per key, see
// [AnnotationFor]) and is refused with a [*StaleTokenError] (errors.Is
// [ErrFenced]) when the object already carries a newer token of one of those
// keys.
//
// # One step: check and write
//
// Every fenced write first reads the object's metadata through the reader
// given to [New], which must be uncached (the manager's GetAPIReader()), and
// then writes conditionally on the resourceVersion of that same read. A newer
// holder that writes between the read and the write changes the
// resourceVersion, so the API server refuses the write with a Conflict; the
// caller reads again and is then refused by the stamp. Per method:
//
//   - Create stamps and creates. A new object carries no stamp to check;
//     AlreadyExists passes through.
//   - Update checks, stamps and sends the read's resourceVersion. An object
//     that carries a resourceVersion other than the read's gets the Conflict
//     the API server would answer; one that carries none is sent with the
//     read's.
//   - Patch accepts JSON merge patches and strategic merge patches: the stamps
//     and metadata.resourceVersion are added to the patch body (a patch that
//     carries another resourceVersion gets a Conflict). JSON patches (and
//     CBOR apply patches) are refused with an [*UnsupportedError]
//     (errors.Is [ErrUnsupported]): they cannot be guarded and stamped
//     without knowing the whole object.
//   - Server-side apply, Patch with client.Apply or [Client.Apply], as ocf
//     writes every managed resource: the applied configuration gets the
//     stamps of the grants and the read's resourceVersion, which makes the
//     apply conditional on the read. It takes no other key's stamp: only
//     those the caller's field manager (client.FieldOwner) already applies,
//     as the read's managedFields say, are kept as read, so that an apply
//     under a field manager shared by the holders of several keys does not
//     remove them, and an apply never makes its manager co-own another
//     key's stamp (whose next holder would then meet a field manager
//     conflict on it). Field ownership is the caller's field manager's, as
//     with an unfenced apply; the stamps of its grants are owned by it too,
//     so the holders of one key share a field manager or force ownership,
//     as ocf does. An apply that names no field owner keeps no other key's
//     stamp. A Conflict the guard caused (someone wrote between
//     the read and the apply) is not what an apply answers: the client
//     reads, checks and applies again, up to 5 times, so that the caller
//     sees the apply land, or the refusal of a newer holder's stamp. A field
//     manager conflict (an apply without ForceOwnership) and a
//     resourceVersion the caller set itself are answered as they are. An
//     apply that finds no object carries resourceVersion "1": the API server
//     ignores it when it creates the object, and answers a Conflict when
//     someone created the object since the read (server-side apply has no
//     "must not exist" precondition; a test pins this one on the real API
//     server), so the apply reads again and a newer holder's creation
//     refuses it.
//   - Delete checks and deletes with UID and resourceVersion preconditions
//     from the read.
//   - Status().Update and Status().Patch check and write conditionally on the
//     read's resourceVersion without stamping: the status subresource ignores
//     metadata. Writes to other subresources, status apply and DeleteAllOf
//     are refused with an [*UnsupportedError].
//   - Reads (Get, List, SubResource(...).Get) pass through unchanged.
//
// The client owns every annotation under [AnnotationPrefix]: it writes the
// stamps of its grants and keeps the stamps of other keys exactly as the read
// found them, whatever the caller's object or patch says about them, so a
// holder of one key never erases the stamp of another (a server-side apply
// keeps them by not naming them, or, those its field manager applies, by
// naming them as read).
//
// A stamp that is not a valid token (hand-edited, truncated) is refused with
// a [*MalformedStampError] naming the annotation, never overwritten: the
// client cannot tell whether it hid a newer token. Remove or correct the
// annotation to let writes through again. Only the stamps of the keys a
// client holds are parsed.
//
// # What is guaranteed, and what is not
//
// Guaranteed: an object written through fenced clients never accepts a write
// from a holder whose token of a key is older than the newest token of that
// key the object carries, and no fenced write lands between another fenced
// write's check and its write.
//
// Not guaranteed: objects written by anything but a fenced client (another
// controller, kubectl, a plain client of the same operator) are not checked,
// and such a writer can remove stamps. A stale holder is refused only by
// objects a newer holder has already written; until then it can still write
// them. Tokens are compared with claim.Token.Compare, so they must come from
// one claim backend (resourceVersions of one resource, KEP-5504). Annotation
// names hold 64 bits of sha256(key); two keys whose names collide share a
// stamp. Every write costs one extra uncached read.
package fence
