// Package model holds the Promela models of the claim protocol and of the
// claim middleware (claim.pml, transfer.pml) and the test that model-checks
// them with SPIN: every interleaving of a small world is explored on every
// change, and each known bug, put back by a -D switch, must make SPIN find a
// counterexample. docs/model.md says what is modelled, what is not, and how
// to read a trail. The package has no Go API; `make model` runs the test.
package model
