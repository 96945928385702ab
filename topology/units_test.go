package topology

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
		err  string // substring of the error; "" for success
	}{
		{"0", 0, ""},
		{"4096", 4096, ""},
		{"0B", 0, ""},
		{"1B", 1, ""},
		{"1KB", 1000, ""},
		{"1MB", 1000 * 1000, ""},
		{"2GB", 2e9, ""},
		{"1TB", 1e12, ""},
		{"1KiB", 1024, ""},
		{"256MiB", 256 << 20, ""},
		{"1GiB", 1 << 30, ""},
		{"2TiB", 2 << 40, ""},
		{"1.5GB", 1_500_000_000, ""},
		{"1.5KiB", 1536, ""},
		{"256 MiB", 256 << 20, ""},
		{" 7KB ", 7000, ""},
		{"8388607TiB", 8388607 << 40, ""},
		{"9223372036854775807", 1<<63 - 1, ""},
		{"", 0, "empty value"},
		{"-1", 0, `"-1" is negative`},
		{"-1GiB", 0, "negative"},
		{"12XB", 0, `unknown size unit "XB"`},
		{"1kb", 0, `unknown size unit "kb"`},
		{"1 K", 0, `unknown size unit "K"`},
		{"MiB", 0, "is not a size"},
		{".5MiB", 0, "is not a size"},
		{"1.MiB", 0, "is not a size"},
		{"0.5B", 0, "not a whole number of bytes"},
		{"0.1KiB", 0, "not a whole number of bytes"},
		{"8388608TiB", 0, "too large"},
		{"9223372036854775808", 0, "too large"},
		{"1e3", 0, `unknown size unit "e3"`},
		{"0x10", 0, `unknown size unit "x10"`},
		{"10MiB/s", 0, `unknown size unit "MiB/s"`},
		{strings.Repeat("9", 41), 0, "is not a size"},
		{strings.Repeat("1", 65), 0, "too long"},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		checkUnit(t, "ParseSize", tt.in, int64(got), err, int64(tt.want), tt.err)
	}
}

func checkUnit(t *testing.T, fn, in string, got int64, err error, want int64, wantErr string) {
	t.Helper()
	switch {
	case wantErr == "" && err != nil:
		t.Errorf("%s(%q): %v", fn, in, err)
	case wantErr == "" && got != want:
		t.Errorf("%s(%q) = %d, want %d", fn, in, got, want)
	case wantErr != "" && err == nil:
		t.Errorf("%s(%q) = %d, want an error with %q", fn, in, got, wantErr)
	case wantErr != "" && !strings.Contains(err.Error(), wantErr):
		t.Errorf("%s(%q) error %q, want it to contain %q", fn, in, err, wantErr)
	}
}

func TestParseDuration(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		in   string
		want time.Duration
		err  string
	}{
		{"0s", 0, ""},
		{"0ms", 0, ""},
		{"500ms", 500 * time.Millisecond, ""},
		{"90s", 90 * time.Second, ""},
		{"5m", 5 * time.Minute, ""},
		{"4h", 4 * time.Hour, ""},
		{"7d", 7 * day, ""},
		{"1h30m", 90 * time.Minute, ""},
		{"1d2h3m4s5ms", day + 2*time.Hour + 3*time.Minute + 4*time.Second + 5*time.Millisecond, ""},
		{"1h 30m", 90 * time.Minute, ""},
		{"1.5h", 90 * time.Minute, ""},
		{"1.5ms", 1500 * time.Microsecond, ""},
		{"0.000001ms", time.Nanosecond, ""},
		{"30m1h", 90 * time.Minute, ""},
		{"106751d", 106751 * day, ""},
		{"90", 0, `"90" needs a unit (ms, s, m, h, d)`},
		{"0", 0, "needs a unit"},
		{"1h30", 0, "needs a unit"},
		{"", 0, "empty value"},
		{"-1h", 0, "negative"},
		{"7days", 0, `unknown duration unit "days"`},
		{"1w", 0, `unknown duration unit "w"`},
		{"1us", 0, `unknown duration unit "us"`},
		{"1H", 0, `unknown duration unit "H"`},
		{"h", 0, "is not a duration"},
		{"1h-1m", 0, "is not a duration"},
		{"1.5.5h", 0, "is not a duration"},
		{"0.0000001ms", 0, "not a whole number of nanoseconds"},
		{"106752d", 0, "too large"},
		{"99999999999h", 0, "too large"},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		checkUnit(t, "ParseDuration", tt.in, int64(got), err, int64(tt.want), tt.err)
	}
}

func TestParseRates(t *testing.T) {
	msg := []struct {
		in   string
		want MsgRate
		err  string
	}{
		{"5000/s", 5000, ""},
		{"0/s", 0, ""},
		{"5000 /s", 5000, ""},
		{"5000", 0, `"5000" needs "/s" (e.g. 5000/s)`},
		{"1.5/s", 0, "not a whole number of messages"},
		{"5k/s", 0, "not a message rate"},
		{"/s", 0, "not a message rate"},
		{"-5/s", 0, "negative"},
		{"9223372036854775808/s", 0, "too large"},
	}
	for _, tt := range msg {
		got, err := ParseMsgRate(tt.in)
		checkUnit(t, "ParseMsgRate", tt.in, int64(got), err, int64(tt.want), tt.err)
	}
	bytes := []struct {
		in   string
		want ByteRate
		err  string
	}{
		{"10MiB/s", ByteRate(10 * MiB), ""},
		{"1000/s", 1000, ""},
		{"1.5KB/s", 1500, ""},
		{"10MiB", 0, `"10MiB" needs "/s"`},
		{"10MiB/m", 0, `needs "/s"`},
		{"10XB/s", 0, `in rate "10XB/s": unknown size unit "XB"`},
		{"-1KB/s", 0, "negative"},
	}
	for _, tt := range bytes {
		got, err := ParseByteRate(tt.in)
		checkUnit(t, "ParseByteRate", tt.in, int64(got), err, int64(tt.want), tt.err)
	}
}

func TestUnitStrings(t *testing.T) {
	tests := []struct {
		v    interface{ String() string }
		want string
	}{
		{Size(0), "0B"},
		{Size(1), "1B"},
		{Size(1000), "1KB"},
		{Size(1024), "1KiB"},
		{256 * MiB, "256MiB"},
		{Size(1_500_000_000), "1500MB"},
		{Size(1536), "1536B"},
		{Size(2_048_000), "2000KiB"},
		{5 * TiB, "5TiB"},
		{Size(-1024), "-1KiB"},
		{Size(-1 << 63), "-8388608TiB"},
		{Duration(0), "0s"},
		{Duration(500 * time.Millisecond), "500ms"},
		{Duration(90 * time.Second), "1m30s"},
		{Duration(90 * time.Minute), "1h30m"},
		{Duration(7 * 24 * time.Hour), "7d"},
		{Duration(1500 * time.Microsecond), "1.5ms"},
		{Duration(25*time.Hour + time.Nanosecond), "1d1h0.000001ms"},
		{Duration(-time.Second), "-1s"},
		{MsgRate(5000), "5000/s"},
		{ByteRate(10 * MiB), "10MiB/s"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%T(%d).String() = %q, want %q", tt.v, tt.v, got, tt.want)
		}
	}
}

func TestUnitRoundTrips(t *testing.T) {
	sizes := []Size{0, 1, 999, 1000, 1024, 1025, 256 * MiB, 3 * TB, 1<<63 - 1}
	for _, s := range sizes {
		if got, err := ParseSize(s.String()); err != nil || got != s {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s.String(), got, err, s)
		}
	}
	durations := []Duration{0, 1, 999_999, Duration(time.Hour + time.Millisecond), 1<<63 - 1}
	for _, d := range durations {
		if got, err := ParseDuration(d.String()); err != nil || got != d {
			t.Errorf("ParseDuration(%q) = %d, %v; want %d", d.String(), got, err, d)
		}
	}
}

func TestUnitJSON(t *testing.T) {
	in := Offload{Threshold: GiB, DeletionLag: Duration(time.Hour)}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"Threshold":"1GiB","DeletionLag":"1h"}` {
		t.Errorf("json %s", data)
	}
	var out Offload
	if err := json.Unmarshal(data, &out); err != nil || out != in {
		t.Errorf("json round trip: %+v, %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"DeletionLag":"90"}`), &out); err == nil {
		t.Error("json accepted a duration without a unit")
	}
	y, err := Size(KiB).MarshalYAML()
	if err != nil || y != "1KiB" {
		t.Errorf("MarshalYAML = %v, %v", y, err)
	}
}
