package consumer

import (
	"strings"

	"github.com/stratamesh/strata/broker/jsapi"
)

// Filters are applied while the cursor reads (spec §4): a message whose
// subject matches none of them is skipped and counts as acked.

func filterList(cfg *jsapi.ConsumerConfig) []string {
	if cfg.FilterSubject != "" {
		return []string{cfg.FilterSubject}
	}
	return cfg.FilterSubjects
}

// compileFilters returns the filters to test (nil when every subject
// matches, e.g. no filter or ">") and whether all of them are literal.
func compileFilters(fs []string) ([]string, bool) {
	if len(fs) == 0 {
		return nil, false
	}
	out := make([]string, 0, len(fs))
	literal := true
	for _, f := range fs {
		if f == ">" {
			return nil, false
		}
		literal = literal && isLiteral(f)
		out = append(out, f)
	}
	return out, literal
}

func (c *Consumer) matches(subject string) bool {
	if c.filters == nil {
		return true
	}
	for _, f := range c.filters {
		if subjectMatches(f, subject) {
			return true
		}
	}
	return false
}

// validFilter: non-empty tokens without whitespace, ">" only last.
func validFilter(f string) bool {
	if f == "" {
		return false
	}
	toks := strings.Split(f, ".")
	for i, t := range toks {
		if t == "" || strings.ContainsAny(t, " \t\r\n") {
			return false
		}
		if t == ">" && i != len(toks)-1 {
			return false
		}
	}
	return true
}

func isLiteral(f string) bool {
	for _, t := range strings.Split(f, ".") {
		if t == "*" || t == ">" {
			return false
		}
	}
	return true
}

// subjectMatches reports whether the filter pattern matches the literal
// subject token by token: "*" one token, ">" one or more trailing tokens.
func subjectMatches(pattern, subject string) bool {
	for {
		ptok, prest, pmore := strings.Cut(pattern, ".")
		stok, srest, smore := strings.Cut(subject, ".")
		switch {
		case ptok == ">":
			return stok != ""
		case ptok != "*" && ptok != stok:
			return false
		}
		if !pmore || !smore {
			return !pmore && !smore
		}
		pattern, subject = prest, srest
	}
}
