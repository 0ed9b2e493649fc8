// Package crd holds the CustomResourceDefinition of CamundaCluster, as the
// YAML file next to this one that `kubectl apply -f` installs, and loads the
// same file for Go code (tests, the demo), so the two never drift apart.
package crd

import (
	"bytes"
	_ "embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// FileName is the name of the CRD's YAML file in this directory.
const FileName = "camunda.example.com_camundaclusters.yaml"

//go:embed camunda.example.com_camundaclusters.yaml
var camundaClusters []byte

// YAML returns the CRD as written in [FileName].
func YAML() []byte { return bytes.Clone(camundaClusters) }

// CamundaCluster returns the CRD of CamundaCluster, decoded from [FileName].
// A new object is returned on every call.
func CamundaCluster() (*apiextensionsv1.CustomResourceDefinition, error) {
	out := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(camundaClusters), 4096).Decode(out); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", FileName, err)
	}
	return out, nil
}
