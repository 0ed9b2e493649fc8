//go:build !chaosmutants

package mutant

// enabled: this binary may switch a mutant on.
const enabled = false

// active is the mutant switched on: none, ever, without the build tag.
const active Name = ""
