//go:build chaosmutants

package mutant

import "os"

// enabled: this binary may switch a mutant on.
const enabled = true

// active is the mutant switched on, empty for none.
var active = Name(os.Getenv(Env))
