package natsproto

import "testing"

func TestAppendStatusHeader(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{string(AppendStatusHeader(nil, 503, "", "Nats-Subject", "nobody.home")),
			"NATS/1.0 503\r\nNats-Subject: nobody.home\r\n\r\n"},
		{string(AppendStatusHeader(nil, 408, "Request Timeout", "Nats-Pending-Messages", "5", "Nats-Pending-Bytes", "0")),
			"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 5\r\nNats-Pending-Bytes: 0\r\n\r\n"},
		{string(AppendStatusHeader(nil, 100, "Idle Heartbeat")), "NATS/1.0 100 Idle Heartbeat\r\n\r\n"},
		{string(AppendStatusHeader(nil, 0, "", "Nats-Msg-Id", "id-2")), "NATS/1.0\r\nNats-Msg-Id: id-2\r\n\r\n"},
		{string(AppendStatusHeader(nil, 0, "ignored")), "NATS/1.0\r\n\r\n"},
		{string(AppendStatusHeader([]byte("x"), 404, "No Messages")), "xNATS/1.0 404 No Messages\r\n\r\n"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q want %q", tt.got, tt.want)
		}
	}
	if n := len(AppendStatusHeader(nil, 503, "", "Nats-Subject", "nobody.home")); n != 43 {
		t.Errorf("no-responders header is %d bytes, the spec shows 43", n)
	}
	defer func() {
		if recover() == nil {
			t.Error("odd kv did not panic")
		}
	}()
	AppendStatusHeader(nil, 503, "", "k")
}

func TestHeaderGet(t *testing.T) {
	hdr := []byte("NATS/1.0 408 Request Timeout\r\nNats-Msg-Id: first \r\nnats-msg-id: lower\r\n" +
		"Nats-Msg-Id: second\r\nEmpty:\r\nX-Spaces:  \t a b \t\r\nLF-Only: yes\n\r\nAfter-End: no\r\n")
	tests := []struct {
		key, want string
		ok        bool
	}{
		{"Nats-Msg-Id", "first", true},
		{"nats-msg-id", "lower", true},
		{"NATS-MSG-ID", "", false},
		{"Nats-Msg", "", false},
		{"Empty", "", true},
		{"X-Spaces", "a b", true},
		{"LF-Only", "yes", true},
		{"After-End", "", false},
		{"NATS/1.0 408 Request Timeout", "", false},
		{"Missing", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := HeaderGet(hdr, tt.key)
		if ok != tt.ok || string(got) != tt.want {
			t.Errorf("HeaderGet(%q) = %q, %v; want %q, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
	for _, bad := range []string{"", "NATS/1.0", "NATS/1.0\r\nNo-Newline: x"} {
		v, ok := HeaderGet([]byte(bad), "No-Newline")
		if bad == "NATS/1.0\r\nNo-Newline: x" {
			if !ok || string(v) != "x" {
				t.Errorf("unterminated last line: %q %v", v, ok)
			}
			continue
		}
		if ok {
			t.Errorf("HeaderGet(%q) found %q", bad, v)
		}
	}
	if n := testing.AllocsPerRun(100, func() { HeaderGet(hdr, "LF-Only") }); n != 0 {
		t.Errorf("HeaderGet: %v allocs", n)
	}
}

func TestHeaderKeyWithPrefix(t *testing.T) {
	for _, tc := range []struct {
		hdr, want string
		ok        bool
	}{
		{"NATS/1.0\r\nNats-Msg-Id: 1\r\nStrata-Origin: us\r\n\r\n", "Strata-Origin", true},
		{"NATS/1.0\r\nstrata-origin-seq: 4\r\n\r\n", "strata-origin-seq", true},
		{"NATS/1.0\r\nX: Strata-Origin: no\r\n\r\n", "", false},
		{"NATS/1.0\r\nStrat: short\r\n\r\n", "", false},
		{"NATS/1.0\r\n\r\nStrata-After: the block ended\r\n", "", false},
		{"NATS/1.0", "", false},
		{"", "", false},
	} {
		got, ok := HeaderKeyWithPrefix([]byte(tc.hdr), "Strata-")
		if got != tc.want || ok != tc.ok {
			t.Errorf("HeaderKeyWithPrefix(%q) = %q, %v; want %q, %v", tc.hdr, got, ok, tc.want, tc.ok)
		}
	}
}
