package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ardanlabs/jinja"
)

// JSONValue decodes JSON text into a template value, objects keeping their
// keys in the text's order (as Python's json.loads does), so that tojson
// writes them back in that order.
func JSONValue(data []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("chat: json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("chat: json: data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				key, _ := k.(string)
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.AsDict().Set(key, v)
			}
			_, err := dec.Token()
			return d, err
		case '[':
			var list []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				list = append(list, v)
			}
			_, err := dec.Token()
			return jinja.NewList(list), err
		}
		return jinja.Undefined(), fmt.Errorf("unexpected %v", t)
	default:
		return jinja.FromGoValue(t), nil
	}
}
