package drain

// InFlight lets the tests read the count that Wait waits on.
func (t *Tracker) InFlight() int { return t.inFlight() }

// ReturnGrace is how long Run waits for a hook whose context ended.
const ReturnGrace = returnGrace
