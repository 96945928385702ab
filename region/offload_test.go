package region

import (
	"strings"
	"testing"
)

func TestParseOffloadRequest(t *testing.T) {
	for body, want := range map[string]int64{"": 0, " \n": 0, `{}`: 0, `{"keep_bytes":0}`: 0, `{"keep_bytes":1048576}`: 1 << 20} {
		got, err := ParseOffloadRequest([]byte(body))
		if err != nil || !got.Offload || got.KeepBytes != want {
			t.Errorf("%q: %+v, %v; want keep %d", body, got, err, want)
		}
	}
	for body, wantErr := range map[string]string{
		`{`:                     "unexpected EOF",
		`[]`:                    "cannot unmarshal array",
		`{"keep_bytes":"1MiB"}`: "cannot unmarshal string",
		`{"keep_bytes":1.5}`:    "cannot unmarshal number",
		`{"keep_bytes":-1}`:     "negative",
		`{"threshold":1}`:       "unknown field",
		`{} {}`:                 "data after",
	} {
		_, err := ParseOffloadRequest([]byte(body))
		if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), "offload body") {
			t.Errorf("%q: err %v, want one naming %q", body, err, wantErr)
		}
	}
}

// FuzzParseOffloadRequest: any body parses to a non-negative keep or
// fails with an error naming the offload body; never panics.
func FuzzParseOffloadRequest(f *testing.F) {
	f.Add([]byte(`{"keep_bytes":1024}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseOffloadRequest(body)
		if err != nil && !strings.Contains(err.Error(), "offload body") {
			t.Fatalf("error %v does not name the offload body", err)
		}
		if err == nil && req.KeepBytes < 0 {
			t.Fatalf("keep_bytes %d accepted", req.KeepBytes)
		}
	})
}
