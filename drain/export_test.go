package drain

// InFlight lets the tests read the count that Wait waits on.
func (t *Tracker) InFlight() int { return t.inFlight() }
