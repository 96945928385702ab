package natsproto

import "testing"

func TestSubjects(t *testing.T) {
	tests := []struct {
		s                  string
		literal, subscribe bool
	}{
		{"a", true, true},
		{"orders.new", true, true},
		{"a.*.c", false, true},
		{"*", false, true},
		{">", false, true},
		{"a.>", false, true},
		{"a.*.>", false, true},
		{"a.>.c", false, false},
		{">.a", false, false},
		{"a*", true, true}, // a literal token
		{"a.b*.c", true, true},
		{"a>", true, true},
		{"a.>b", true, true},
		{"**", true, true},
		{"$JS.API.STREAM.CREATE.ORDERS", true, true},
		{"_INBOX.tSvuZrujoHluWFQ6fNOuy4.*", false, true},
		{"", false, false},
		{".", false, false},
		{"a.", false, false},
		{".a", false, false},
		{"a..b", false, false},
		{"a. .b", false, false},
		{"a b", false, false},
		{"a\tb", false, false},
		{"a\rb", false, false},
		{"a\nb", false, false},
		{"a.b ", false, false},
		{"a.*.b\t", false, false},
	}
	for _, tt := range tests {
		if got := ValidLiteralSubject([]byte(tt.s)); got != tt.literal {
			t.Errorf("ValidLiteralSubject(%q) = %v", tt.s, got)
		}
		if got := ValidSubscribeSubject([]byte(tt.s)); got != tt.subscribe {
			t.Errorf("ValidSubscribeSubject(%q) = %v", tt.s, got)
		}
	}
}

func TestQueueNames(t *testing.T) {
	for q, want := range map[string]bool{
		"workers": true, "a.b": true, "*": true, "q-1_x": true,
		"": false, "a b": false, "a\t": false, "\r": false, "x\n": false,
	} {
		if got := ValidQueueName([]byte(q)); got != want {
			t.Errorf("ValidQueueName(%q) = %v", q, got)
		}
	}
}
