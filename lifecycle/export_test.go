package lifecycle

// What only this package's tests reach: the steps Run takes, one at a time.

// MarkRunning is Run's move to Running once start-up has finished.
func (m *Manager) MarkRunning() error { return m.markRunning() }

// HandleSignals is Run's signal escalation.
func (m *Manager) HandleSignals() (unsubscribe func()) { return m.watchSignals() }

// Force is what the second signal does.
func (m *Manager) Force(reason string) { m.force(reason) }

// StopRequested is closed by the first stop request.
func (m *Manager) StopRequested() <-chan struct{} { return m.stopRequested.Done() }

// Validate is what New and ConfigFromEnv refuse a config with.
func (c Config) Validate() error { return c.validate() }
