package lease_test

import (
	"testing"

	"github.com/ocf-claim/claim/envtest"
)

// env is the control plane every test of the package runs against, started
// once for the package.
var env *envtest.Env

func TestMain(m *testing.M) { envtest.Main(m, &env) }
