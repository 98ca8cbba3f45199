package fxmodule

// ErrShutdownOptionsForTest is what the app's fx.Shutdowner returns when given options.
var ErrShutdownOptionsForTest = errShutdownOptions
