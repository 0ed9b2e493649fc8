package claimmw

// WithStateForTest exposes withState to the external tests.
var WithStateForTest = withState
