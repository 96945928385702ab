package jsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// DecodeRequest decodes an API request body into v the way the reference
// does (its strict request decoding), so that ErrInvalidJSON carries the
// same text: every JSON value in body is decoded into v in turn, an empty
// body decodes nothing and is no error, and a syntax error reads
// "<error> at offset <n>" (a truncated body: "unexpected EOF"). Unlike
// the reference's strict mode, unknown fields are ignored (spec §2.1).
func DecodeRequest(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	for {
		err := d.Decode(v)
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) {
			return fmt.Errorf("%w at offset %d", err, syntax.Offset)
		}
		return err
	}
}
