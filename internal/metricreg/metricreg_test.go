package metricreg_test

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drainkit/drainkit/internal/configerr"
	"github.com/drainkit/drainkit/internal/metricreg"
)

func gauge(name string) metricreg.Named {
	return metricreg.Named{Name: name, Collector: prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: name})}
}

// A refusal names the field and the metric, matches ErrConfig, and leaves
// none of the collectors registered before it.
func TestRegisterAllOrNone(t *testing.T) {
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(gauge("b").Collector)) // another collector of the same metric
	err := metricreg.Register(reg, "pkg: Config.Registerer", gauge("a"), gauge("b"), gauge("c"))
	assert.True(t, errors.Is(err, configerr.ErrConfig), "errors.Is(%v, ErrConfig): got false; want true", err)
	assert.ErrorAs(t, err, new(prometheus.AlreadyRegisteredError))
	assert.EqualError(t, err, `pkg: Config.Registerer: metric "b": duplicate metrics collector registration attempted`)
	families, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, families, 1, "metrics registered after the refusal")
	assert.Equal(t, "b", families[0].GetName(), "the one metric left: someone else's")

	assert.NoError(t, metricreg.Register(nil, "pkg: Config.Registerer", gauge("a")), "nil Registerer")
	assert.NoError(t, metricreg.Register(prometheus.NewRegistry(), "pkg: Config.Registerer", gauge("a"), gauge("c")))
}
