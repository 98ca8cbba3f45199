// Package metricreg registers a package's collectors all or none, with the
// one error every package of the module gives for a refused metric.
package metricreg

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/drainkit/drainkit/internal/configerr"
)

// Named is a collector and the name of its metric, for the error:
// prometheus's own error names no metric.
type Named struct {
	Name      string
	Collector prometheus.Collector
}

// Register registers every collector on reg, or none: at the first refusal
// it unregisters those it registered and returns a configuration error
// (lifecycle.ErrConfig) reading "<field>: metric <name>: <why>". A nil reg
// registers nothing.
func Register(reg prometheus.Registerer, field string, cs ...Named) error {
	if reg == nil {
		return nil
	}
	for i, c := range cs {
		if err := reg.Register(c.Collector); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done.Collector)
			}
			return configerr.Errorf("%s: metric %q: %w", field, c.Name, err)
		}
	}
	return nil
}
