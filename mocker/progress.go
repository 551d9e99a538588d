package mocker

// EachRunning calls fn with the id and the generated token count of every
// request in the running set, in admission order. A driver that reports a
// request's tokens as they stream, as a router node's frontend does (the
// simulator), reads them after each Advance; finished requests have left
// the set by then and are reported by Advance itself.
func (e *Engine) EachRunning(fn func(id string, generated int)) {
	for _, s := range e.running {
		if s.held >= 0 {
			fn(s.id, s.generated)
		}
	}
}
