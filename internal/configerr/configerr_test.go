package configerr_test

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/drainkit/drainkit/internal/configerr"
	"github.com/drainkit/drainkit/lifecycle"
)

func TestWrapMatchesErrConfigAndKeepsTheText(t *testing.T) {
	err := configerr.Wrap(io.ErrUnexpectedEOF)
	assert.ErrorIs(t, err, lifecycle.ErrConfig)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "what it carries")
	assert.Equal(t, io.ErrUnexpectedEOF.Error(), err.Error())
	assert.NoError(t, configerr.Wrap(nil))
	assert.False(t, errors.Is(io.ErrUnexpectedEOF, lifecycle.ErrConfig))

	err = configerr.Errorf("lease: Config.TTL=%s: too short", "1ms")
	assert.ErrorIs(t, err, lifecycle.ErrConfig)
	assert.EqualError(t, err, "lease: Config.TTL=1ms: too short")
}
