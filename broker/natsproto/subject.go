package natsproto

// Subjects (NATS protocol: subjects, §1.7 of nats-wire.md): tokens
// separated by '.', each non-empty and free of whitespace (space, tab, CR,
// LF); case-sensitive. In a subscription, a token "*" matches exactly one
// token and a last token ">" matches one or more; "a*" or "a>" is a
// literal token. The parser does not validate subjects: the server does,
// with these functions.

// ValidLiteralSubject reports whether s is a valid subject to publish to:
// no token may be "*" or ">".
func ValidLiteralSubject(s []byte) bool { return validSubject(s, false) }

// ValidSubscribeSubject reports whether s is a valid subscription subject:
// "*" may be any token, ">" only the last.
func ValidSubscribeSubject(s []byte) bool { return validSubject(s, true) }

// ValidQueueName reports whether q is a valid queue group name: non-empty,
// no whitespace.
func ValidQueueName(q []byte) bool {
	for _, c := range q {
		if isWhite(c) {
			return false
		}
	}
	return len(q) > 0
}

func isWhite(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func validSubject(s []byte, wild bool) bool {
	if len(s) == 0 {
		return false
	}
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] != '.' {
			if isWhite(s[i]) {
				return false
			}
			continue
		}
		switch tok := s[start:i]; {
		case len(tok) == 0:
			return false
		case len(tok) == 1 && tok[0] == '*':
			if !wild {
				return false
			}
		case len(tok) == 1 && tok[0] == '>':
			if !wild || i != len(s) {
				return false
			}
		}
		start = i + 1
	}
	return true
}
