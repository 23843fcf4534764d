package chat

import (
	"slices"
	"testing"
)

// TestEndOfTurnGemma4: a template in Gemma 4's format (turns closed by
// <turn|>, tool results opened by <|tool_response>) ends a reply at both,
// the tokens llama.cpp 81ff7abe5 ends Gemma 4's generation at by name.
func TestEndOfTurnGemma4(t *testing.T) {
	const src = "{{ bos_token }}{% for m in messages %}{% if m.role == 'tool' %}<|tool_response>{{ m.content }}<tool_response|>" +
		"{% else %}<|turn>{{ m.role }}\n{{ m.content }}<turn|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|turn>model\n{% endif %}"
	tpl, err := Parse(src, "<bos>", "<eos>")
	if err != nil {
		t.Fatal(err)
	}
	got := tpl.EndOfTurn()
	slices.Sort(got)
	if want := []string{"<turn|>", "<|tool_response>"}; !slices.Equal(got, want) {
		t.Errorf("end of turn %q, want %q", got, want)
	}
}
