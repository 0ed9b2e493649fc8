package fence

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// errVersionChanged marks a patch that carries a resourceVersion other than
// the read's; the caller answers with a Conflict.
var errVersionChanged = errors.New("patch carries a resourceVersion other than the one read")

// directives are the strategic merge patch keys that replace or delete a
// whole map, which would take stamps with them.
var directives = []string{"$patch", "$retainKeys"}

// guard rewrites a merge or strategic merge patch body so that it carries
// cur's resourceVersion and, under metadata.annotations, exactly the stamps
// of grants: every stamp the caller's patch names is dropped, so stamps of
// other keys stay as the server has them. A patch that removes all
// annotations (annotations: null) is turned into removals of cur's
// annotations other than stamps, which the resourceVersion makes exact.
func guard(data []byte, pt types.PatchType, cur *metav1.PartialObjectMetadata, grants []Grant) ([]byte, error) {
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, fmt.Errorf("decoding the %s patch: %w", pt, err)
	}
	if body == nil {
		return nil, &UnsupportedError{Op: "with a patch that is not a JSON object", Why: "there is no metadata to guard"}
	}
	strategic := pt == types.StrategicMergePatchType
	if err := noDirectives(strategic, body, ""); err != nil {
		return nil, err
	}
	m, present := body["metadata"]
	if present && m == nil {
		return nil, &UnsupportedError{Op: "with a patch that removes metadata", Why: "there is no metadata left to guard"}
	}
	metadata := map[string]any{}
	if present {
		var ok bool
		if metadata, ok = m.(map[string]any); !ok {
			return nil, fmt.Errorf("patch metadata is a %T, not an object", m)
		}
	}
	if err := noDirectives(strategic, metadata, "metadata."); err != nil {
		return nil, err
	}
	if v, ok := metadata["resourceVersion"]; ok && v != nil {
		s, isString := v.(string)
		if !isString {
			return nil, fmt.Errorf("patch metadata.resourceVersion is a %T, not a string", v)
		}
		if s != "" && s != cur.ResourceVersion {
			return nil, errVersionChanged
		}
	}
	metadata["resourceVersion"] = cur.ResourceVersion

	a, present := metadata["annotations"]
	annotations := map[string]any{}
	switch {
	case present && a == nil:
		for k := range cur.Annotations {
			if !strings.HasPrefix(k, AnnotationPrefix) {
				annotations[k] = nil
			}
		}
	case present:
		given, ok := a.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("patch metadata.annotations is a %T, not an object", a)
		}
		if err := noDirectives(strategic, given, "metadata.annotations."); err != nil {
			return nil, err
		}
		for k, v := range given {
			if !strings.HasPrefix(k, AnnotationPrefix) {
				annotations[k] = v
			}
		}
	}
	for k, v := range stamps(grants) {
		annotations[k] = v
	}
	if len(annotations) > 0 {
		metadata["annotations"] = annotations
	} else {
		delete(metadata, "annotations")
	}
	body["metadata"] = metadata
	out, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encoding the guarded %s patch: %w", pt, err)
	}
	return out, nil
}

// noDirectives refuses strategic merge directives at one level of the patch.
func noDirectives(strategic bool, m map[string]any, path string) error {
	if !strategic {
		return nil
	}
	for _, d := range directives {
		if _, ok := m[d]; ok {
			return &UnsupportedError{Op: fmt.Sprintf("with a strategic merge patch directive %s%s", path, d),
				Why: "it can replace or drop the stamps wholesale; send the fields themselves"}
		}
	}
	return nil
}
