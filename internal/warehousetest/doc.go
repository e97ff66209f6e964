// Package warehousetest reads a published warehouse the way a reader
// does, for the tests of the stages that write it. Only tests import it.
//
// Imports of sepipe's: load.
package warehousetest
