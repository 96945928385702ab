package jetstream

import "strings"

// subjectsOverlap reports whether some literal subject matches both
// filters a and b (NATS protocol §1.7 wildcards: '*' one token, '>' one or
// more trailing tokens): the rule behind "subjects overlap" (10065).
func subjectsOverlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(at) && i == len(bt):
			return true
		case i == len(at) || i == len(bt):
			// One ran out: only a '>' in the other's last position... the
			// shorter one ended, so the longer needs more tokens: no.
			return false
		}
		x, y := at[i], bt[i]
		if x == ">" || y == ">" {
			return true
		}
		if x != "*" && y != "*" && x != y {
			return false
		}
	}
}

// subjectMatches reports whether the literal subject matches filter.
func subjectMatches(filter, subject string) bool {
	for {
		var f, s string
		fi := strings.IndexByte(filter, '.')
		si := strings.IndexByte(subject, '.')
		if fi < 0 {
			f = filter
		} else {
			f = filter[:fi]
		}
		if si < 0 {
			s = subject
		} else {
			s = subject[:si]
		}
		if f == ">" {
			return s != ""
		}
		if f != "*" && f != s {
			return false
		}
		if fi < 0 || si < 0 {
			return fi < 0 && si < 0
		}
		filter, subject = filter[fi+1:], subject[si+1:]
	}
}

// topicSubjects are the capture filters of a topic that was not created
// through the JetStream API (spec §4): "t.ns.topic" and "t.ns.topic.>".
func topicSubjects(tenant, ns, topic string) []string {
	base := tenant + "." + ns + "." + topic
	return []string{base, base + ".>"}
}
