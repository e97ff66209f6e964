// Package faults names the points of sepipe's run protocol where a crash
// test stops the process (SIGKILL), and is how the protocol's code marks
// them. In normal use no hook is set and At does nothing.
//
// It is internal: the hook is a seam for the module's own tests (the kill
// tests in pipeline), never part of sepipe's API.
//
// Imports nothing of sepipe's.
package faults
