package pipeline_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/model"
)

// storiesWithTok512 is stories260K with tok512.model as its tokenizer.
func storiesWithTok512(t testing.TB) *model.Checkpoint {
	t.Helper()
	proto, err := os.ReadFile(testmodels.Path(t, "tok512.model"))
	if err != nil {
		t.Fatal(err)
	}
	ck := storiesCheckpoint(t)
	ck.Tokenizer = proto
	return ck
}

// TestGoldenText: with tok512.model, each golden prompt's text tokenizes
// (BOS prepended) to the golden prompt ids, generation yields the golden
// ids, and the streamed pieces concatenate to llama.cpp's generated text.
func TestGoldenText(t *testing.T) {
	m := load(t, storiesWithTok512(t), pipeline.Options{MaxCache: 128})
	for _, tc := range testmodels.StoriesCases(t) {
		t.Run(tc.Name, func(t *testing.T) {
			s := m.NewSession()
			var ids []int
			var text strings.Builder
			for tok, err := range s.Generate(context.Background(), pipeline.Prompt{Text: tc.Prompt}, pipeline.GenerateOptions{MaxTokens: len(tc.GeneratedIDs)}) {
				if err != nil {
					t.Fatal(err)
				}
				if tok.ID >= 0 {
					ids = append(ids, tok.ID)
				}
				text.WriteString(tok.Piece)
			}
			if h := s.History(); !slices.Equal(h[:len(tc.PromptIDs)], tc.PromptIDs) {
				t.Errorf("prompt ids %v, want %v", h[:len(tc.PromptIDs)], tc.PromptIDs)
			}
			if !slices.Equal(ids, tc.GeneratedIDs) {
				t.Errorf("ids\n got %v\nwant %v", ids, tc.GeneratedIDs)
			}
			if text.String() != tc.GeneratedText {
				t.Errorf("text\n got %q\nwant %q", text.String(), tc.GeneratedText)
			}
		})
	}
}

// TestStopStrings: generation ends where the golden text first contains
// the stop string, and the text before it is streamed exactly.
func TestStopStrings(t *testing.T) {
	m := load(t, storiesWithTok512(t), pipeline.Options{MaxCache: 128})
	tc := testmodels.StoriesCases(t)[0]
	for _, stop := range []string{"Lily", ". ", "girl named", "zzz-never"} {
		t.Run(stop, func(t *testing.T) {
			s := m.NewSession()
			var text strings.Builder
			for tok, err := range s.Generate(context.Background(), pipeline.Prompt{Text: tc.Prompt}, pipeline.GenerateOptions{MaxTokens: 64, StopStrings: []string{stop}}) {
				if err != nil {
					t.Fatal(err)
				}
				text.WriteString(tok.Piece)
			}
			want, reason := tc.GeneratedText, pipeline.StopMaxTokens
			if i := strings.Index(tc.GeneratedText, stop); i >= 0 {
				want, reason = tc.GeneratedText[:i], pipeline.StopString
			}
			if text.String() != want {
				t.Errorf("text\n got %q\nwant %q", text.String(), want)
			}
			if r := s.Metrics().StopReason; r != reason {
				t.Errorf("stop reason %q, want %q", r, reason)
			}
		})
	}
}
