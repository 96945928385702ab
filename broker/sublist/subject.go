package sublist

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// checkSubscription returns nil if subject and queue can be inserted, or an
// error wrapping ErrInvalidSubject that says what is wrong (§1.7: tokens
// are non-empty, without whitespace; ">" only as the last token; a queue
// name, if any, without whitespace).
func checkSubscription(subject, queue string) error {
	if subject == "" {
		return fmt.Errorf("%w: empty subject", ErrInvalidSubject)
	}
	start := 0
	for i := 0; i <= len(subject); i++ {
		if i == len(subject) || subject[i] == '.' {
			switch tok := subject[start:i]; {
			case tok == "":
				return fmt.Errorf("%w %q: empty token", ErrInvalidSubject, subject)
			case tok == ">" && i != len(subject):
				return fmt.Errorf("%w %q: \">\" is not the last token", ErrInvalidSubject, subject)
			}
			start = i + 1
			continue
		}
		if space, size := spaceAt(subject, i); space {
			return fmt.Errorf("%w %q: whitespace", ErrInvalidSubject, subject)
		} else {
			i += size - 1
		}
	}
	for i := 0; i < len(queue); {
		space, size := spaceAt(queue, i)
		if space {
			return fmt.Errorf("%w: queue group %q: whitespace", ErrInvalidSubject, queue)
		}
		i += size
	}
	return nil
}

// spaceAt reports whether s has a whitespace character (ASCII or Unicode
// White_Space) at byte i, and that character's size in bytes (1 for
// bytes that are not valid UTF-8).
func spaceAt(s string, i int) (bool, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f', 1
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	return unicode.IsSpace(r), size
}

// literalOK reports whether a published subject can match anything: it is
// non-empty and has no empty token. Anything else (whitespace, "*", ">")
// is taken as literal tokens; checking publishes is the caller's job.
func literalOK(s string) bool {
	return s != "" && s[0] != '.' && s[len(s)-1] != '.' && !strings.Contains(s, "..")
}

// literalBytesOK is literalOK for a byte slice.
func literalBytesOK(s []byte) bool {
	return len(s) > 0 && s[0] != '.' && s[len(s)-1] != '.' && !bytes.Contains(s, []byte(".."))
}

// literalPrefix returns the part of a valid subscription subject before
// its first wildcard token (with the trailing "."), which every subject
// it matches starts with, and whether it has a wildcard at all.
func literalPrefix(subject string) (prefix string, wild bool) {
	for off := 0; off < len(subject); {
		tok, _, _ := strings.Cut(subject[off:], ".")
		if tok == "*" || tok == ">" {
			return subject[:off], true
		}
		off += len(tok) + 1
	}
	return subject, false
}

// matches reports whether the subscription subject pattern (valid) matches
// the published subject literal (literalOK), token by token: "*" matches
// any one token, ">" any one or more remaining tokens, anything else only
// an equal token. It is used to invalidate cached results, and is the
// per-subject counterpart of node.collect. It scans bytes rather than
// cutting tokens: it runs once per cached subject on each change.
func matches(pattern, literal string) bool {
	p, s := 0, 0
	for {
		pe := p
		for pe < len(pattern) && pattern[pe] != '.' {
			pe++
		}
		se := s
		for se < len(literal) && literal[se] != '.' {
			se++
		}
		switch ptok := pattern[p:pe]; {
		case ptok == ">":
			return true
		case ptok != "*" && ptok != literal[s:se]:
			return false
		}
		if pe == len(pattern) || se == len(literal) {
			return pe == len(pattern) && se == len(literal)
		}
		p, s = pe+1, se+1
	}
}
