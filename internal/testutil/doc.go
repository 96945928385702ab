// Package testutil holds helpers shared by Strata's tests: waiting on a
// condition with a deadline (never a fixed sleep). It must not be imported
// by non-test code.
package testutil
