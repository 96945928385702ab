package topology

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Problem is one error or warning found in a topology file. Line and Col
// are 1-based and point at the offending value, at the key of an unknown or
// duplicate field, or at the enclosing mapping when a field is missing.
// Path is the field path, e.g. "regions[1].ledger.write_quorum"; it is "$"
// for problems with the file as a whole (syntax errors, an empty file, a
// second document).
type Problem struct {
	File      string
	Line, Col int
	Path      string
	Message   string
	// Warning marks a risky but legal choice; it does not make a file invalid.
	Warning bool
}

// String formats p as "FILE:LINE:COL: PATH: MESSAGE", or
// "FILE:LINE:COL: PATH: warning: MESSAGE" for a warning.
func (p Problem) String() string {
	kind := ""
	if p.Warning {
		kind = "warning: "
	}
	return fmt.Sprintf("%s:%d:%d: %s: %s%s", p.File, p.Line, p.Col, p.Path, kind, p.Message)
}

// Problems is every error found in a topology file, in file order. As an
// error it prints one problem per line; warnings, if any, are left out.
type Problems []Problem

// Error prints the errors among ps, one per line, without a trailing newline.
func (ps Problems) Error() string {
	var b strings.Builder
	for _, p := range ps {
		if p.Warning {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// rootPath is the path printed for problems with the file as a whole.
const rootPath = "$"

// report collects the problems of one file. The decoder and the checks
// share it; positions come from the index the decoder fills.
type report struct {
	file  string
	ix    *index
	errs  []Problem
	warns []Problem
}

func newReport(file string) *report {
	return &report{file: file, ix: newIndex()}
}

func (r *report) problem(at pos, path string, warn bool, format string, args ...any) Problem {
	if path == "" {
		path = rootPath
	}
	msg := oneLine(fmt.Sprintf(format, args...))
	return Problem{File: r.file, Line: max(at.line, 1), Col: max(at.col, 1), Path: oneLine(path), Message: msg, Warning: warn}
}

// oneLine escapes control characters (a key or a parser message may hold
// a newline or a tab) so that every problem prints on one line.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, c := range s {
		if isControl(c) {
			q := strconv.QuoteRune(c)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

func isControl(c rune) bool { return c < 0x20 || c == 0x7f }

// errorAt records an error at an explicit position.
func (r *report) errorAt(at pos, path, format string, args ...any) {
	r.errs = append(r.errs, r.problem(at, path, false, format, args...))
}

// errorf records an error at path's value (or its nearest written
// ancestor), unless path or an ancestor could not be decoded: that problem
// has been reported already and a second one would only be noise.
func (r *report) errorf(path, format string, args ...any) {
	if r.ix.isBad(path) {
		return
	}
	r.errorAt(r.ix.at(path), path, format, args...)
}

// warnf records a warning at path's value.
func (r *report) warnf(path, format string, args ...any) {
	if r.ix.isBad(path) {
		return
	}
	r.warns = append(r.warns, r.problem(r.ix.at(path), path, true, format, args...))
}

// missing reports a required field that is absent (at the enclosing
// mapping), written as null (at its key) or written empty (at its value).
func (r *report) missing(path string) {
	if r.ix.has(path) {
		r.errorf(path, "must not be empty")
		return
	}
	if at, ok := r.ix.keys[path]; ok {
		if !r.ix.isBad(path) {
			r.errorAt(at, path, "must not be empty")
		}
		return
	}
	r.errorf(path, "required field missing")
}

// finish returns the warnings and errors in file order, without repeats.
func (r *report) finish() (warns []Problem, errs Problems) {
	return sortProblems(r.warns), sortProblems(r.errs)
}

func sortProblems(ps []Problem) []Problem {
	if len(ps) == 0 {
		return nil
	}
	slices.SortStableFunc(ps, func(a, b Problem) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Col - b.Col
	})
	return slices.CompactFunc(ps, func(a, b Problem) bool { return a == b })
}
