package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestDecodeIDs compares Decode and the streaming Decoder with spm_decode
// on hand-picked (decode_ids.txt) and random (randids.txt) id sequences.
func TestDecodeIDs(t *testing.T) {
	for _, c := range []struct{ model, input string }{
		{"tok512", "decode_ids"}, {"tok512_fromvocab", "decode_ids"},
		{"tok512", "randids"}, {"tok512_fromvocab", "randids"},
	} {
		model := c.model
		lines := readLines(t, filepath.Join(spmData, c.input+".txt"))
		t.Run(model+"/"+c.input, func(t *testing.T) {
			tok, err := LoadFile(modelPath(t, model))
			if err != nil {
				t.Fatal(err)
			}
			want := readLines(t, filepath.Join(spmData, model+"."+c.input+".decoded"))
			if len(want) != len(lines) {
				t.Fatalf("%d id lines, %d decoded lines", len(lines), len(want))
			}
			for i, line := range lines {
				ids := parseIDs(t, line)
				if got := tok.Decode(ids); got != want[i] {
					t.Errorf("ids %q: Decode %q, spm_decode %q", line, got, want[i])
				}
				if got := decodeStreaming(t, tok, ids); got != want[i] {
					t.Errorf("ids %q: streaming %q, spm_decode %q", line, got, want[i])
				}
			}
		})
	}
}

// decodeStreaming feeds ids one by one and checks each chunk is valid UTF-8.
func decodeStreaming(t *testing.T, tok *Tokenizer, ids []int) string {
	t.Helper()
	d := tok.NewDecoder()
	var b strings.Builder
	for _, id := range ids {
		chunk := d.Add(id)
		if !utf8.ValidString(chunk) {
			t.Errorf("Add(%d) returned invalid UTF-8 %q", id, chunk)
		}
		b.WriteString(chunk)
	}
	b.WriteString(d.Flush())
	return b.String()
}

// TestDecoderMatchesDecode checks that streaming decoding of every
// recorded id sequence reproduces spm_decode's text.
func TestDecoderMatchesDecode(t *testing.T) {
	for _, model := range conformanceModels {
		t.Run(model, func(t *testing.T) {
			tok, err := LoadFile(modelPath(t, model))
			if err != nil {
				t.Fatal(err)
			}
			for _, input := range []string{"corpus", "edge", "random"} {
				ids := readLines(t, filepath.Join(spmData, model+"."+input+".ids"))
				want := readLines(t, filepath.Join(spmData, model+"."+input+".decoded"))
				for i := range ids {
					if got := decodeStreaming(t, tok, parseIDs(t, ids[i])); got != want[i] {
						t.Fatalf("%s line %d: streaming %q, spm_decode %q", input, i+1, got, want[i])
					}
				}
			}
		})
	}
	tok, err := LoadFile(modelPath(t, "tok512"))
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, filepath.Join(spmData, "decode_ids.txt"))
	want := readLines(t, filepath.Join(spmData, "tok512.decode_ids.decoded"))
	for i, line := range lines {
		if got := decodeStreaming(t, tok, parseIDs(t, line)); got != want[i] {
			t.Errorf("ids %q: streaming %q, spm_decode %q", line, got, want[i])
		}
	}
}

// TestDecoderHoldsPartialCharacters checks what each Add returns for byte
// pieces of tok512 (byte b has id 3+b).
func TestDecoderHoldsPartialCharacters(t *testing.T) {
	tok, err := LoadFile(modelPath(t, "tok512"))
	if err != nil {
		t.Fatal(err)
	}
	b := func(x byte) int { return 3 + int(x) }
	tests := []struct {
		name   string
		ids    []int
		chunks []string // one per Add, then Flush
	}{
		{"three-byte character", []int{b(0xE3), b(0x81), b(0x82)}, []string{"", "", "あ", ""}},
		{"four-byte character", []int{b(0xF0), b(0x9F), b(0x98), b(0x80)}, []string{"", "", "", "😀", ""}},
		{"truncated at flush", []int{b(0xE3), b(0x81)}, []string{"", "", "\ufffd\ufffd"}},
		{"truncated by a piece", []int{b(0xE3), 261}, []string{"", "\ufffd a", ""}},
		{"invalid lead is released at once", []int{b(0xFF), b(0x41)}, []string{"\ufffd", "A", ""}},
		{"bad continuation", []int{b(0xE3), b(0x41)}, []string{"", "\ufffdA", ""}},
		{"control pieces are silent", []int{1, 261, 2}, []string{"", "a", "", ""}},
		{"out of range ids are silent", []int{-1, 512, 261}, []string{"", "", "a", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tok.NewDecoder()
			var got []string
			for _, id := range tc.ids {
				got = append(got, d.Add(id))
			}
			got = append(got, d.Flush())
			if strings.Join(got, "|") != strings.Join(tc.chunks, "|") {
				t.Errorf("chunks %q, want %q", got, tc.chunks)
			}
		})
	}
}
