package chaos_test

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ocf-claim/claim/internal/testclaimant"
)

// The holder type the middleware reconciles here, shared with the other
// suites that need one (internal/testclaimant).
type (
	Claimant       = testclaimant.Claimant
	ClaimantSpec   = testclaimant.ClaimantSpec
	ClaimantStatus = testclaimant.ClaimantStatus
	ClaimantList   = testclaimant.ClaimantList
)

func addClaimant(s *runtime.Scheme) error { return testclaimant.AddToScheme(s) }

func claimantCRD() *apiextensionsv1.CustomResourceDefinition { return testclaimant.CRD() }
