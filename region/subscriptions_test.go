package region

import (
	"strings"
	"testing"
)

func TestParseSubscriptionRequest(t *testing.T) {
	for body, want := range map[string]bool{"": false, "  ": false, `{}`: false, `{"replicated":true}`: true, `{"replicated":false,"filter_subject":"a.b"}`: false} {
		got, err := ParseSubscriptionRequest([]byte(body))
		if err != nil || got.Replicated != want {
			t.Errorf("%q: %+v, %v", body, got, err)
		}
	}
	for body, wantErr := range map[string]string{
		`{`:                      "unexpected EOF",
		`[]`:                     "cannot unmarshal array",
		`{"replicated":"yes"}`:   "cannot unmarshal string",
		`{"reset_to":{"seq":1}}`: "unknown field",
		`{"replicated":true} {}`: "data after",
		`null x`:                 "data after",
	} {
		_, err := ParseSubscriptionRequest([]byte(body))
		if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), "subscription body") {
			t.Errorf("%q: err %v, want one naming %q", body, err, wantErr)
		}
	}
}

// FuzzParseSubscriptionRequest: any body parses or fails with an error
// naming the subscription body; never panics.
func FuzzParseSubscriptionRequest(f *testing.F) {
	f.Add([]byte(`{"replicated":true,"filter_subject":"a.>"}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := ParseSubscriptionRequest(body); err != nil && !strings.Contains(err.Error(), "subscription body") {
			t.Fatalf("error %v does not name the subscription body", err)
		}
	})
}
