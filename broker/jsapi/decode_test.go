package jsapi

import (
	"encoding/json"
	"testing"
)

// The texts are the reference's (nats-server 2.15 decodes requests with
// a json.Decoder and adds the offset to syntax errors).
func TestDecodeRequest(t *testing.T) {
	for _, tc := range []struct {
		body, err string
		offset    int
	}{
		{``, "", 0},
		{`{"offset":3}`, "", 3},
		{` {"offset":1} {"offset":2} `, "", 2},
		{`{"offset":4,"unknown":true}`, "", 4},
		{`{"offset":`, "unexpected EOF", 0},
		{`{"offset":}`, "invalid character '}' looking for beginning of value at offset 11", 0},
		{`{"offset":"x"}`, "json: cannot unmarshal string into Go struct field StreamNamesRequest.PagedRequest.offset of type int", 0},
	} {
		var req StreamNamesRequest
		err := DecodeRequest([]byte(tc.body), &req)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.body, err)
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.err)
		case tc.err == "" && req.Offset != tc.offset:
			t.Errorf("%q: offset %d, want %d", tc.body, req.Offset, tc.offset)
		}
	}
}

func TestErrorResponseShapes(t *testing.T) {
	e := ErrStreamNotFound()
	const errJSON = `"error":{"code":404,"err_code":10059,"description":"stream not found"}`
	for _, tc := range []struct {
		k    Kind
		want string
	}{
		{KindStreamCreate, `{"type":"` + TypeStreamCreateResponse + `",` + errJSON + `}`},
		{KindStreamInfo, `{"type":"` + TypeStreamInfoResponse + `",` + errJSON + `,"total":0,"offset":0,"limit":0}`},
		{KindStreamPurge, `{"type":"` + TypeStreamPurgeResponse + `",` + errJSON + `,"purged":0}`},
		{KindStreamNames, `{"type":"` + TypeStreamNamesResponse + `",` + errJSON + `,"total":0,"offset":0,"limit":0,"streams":null}`},
		{KindStreamList, `{"type":"` + TypeStreamListResponse + `",` + errJSON + `,"total":0,"offset":0,"limit":0,"streams":[]}`},
		{KindConsumerNames, `{"type":"` + TypeConsumerNamesResponse + `",` + errJSON + `,"total":0,"offset":0,"limit":0,"consumers":[]}`},
		{KindConsumerList, `{"type":"` + TypeConsumerListResponse + `",` + errJSON + `,"total":0,"offset":0,"limit":0,"consumers":[]}`},
	} {
		b, err := json.Marshal(ErrorResponse(tc.k, e))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%v:\n got %s\nwant %s", tc.k, b, tc.want)
		}
	}
}

func TestValidPriorityGroup(t *testing.T) {
	for name, want := range map[string]bool{
		"g": true, "A-z_0/9=": true, "0123456789abcdef": true,
		"": false, "0123456789abcdefg": false, "a.b": false, "a b": false, "a*": false, "ü": false,
	} {
		if got := ValidPriorityGroup(name); got != want {
			t.Errorf("%q: %v, want %v", name, got, want)
		}
	}
}
