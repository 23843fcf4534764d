package chat

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzTemplate: any template text parses or fails with an error, and a
// parsed one renders a conversation or fails with an error; the engine's
// panics never escape.
func FuzzTemplate(f *testing.F) {
	files, _ := filepath.Glob("testdata/templates/*.jinja")
	more, _ := filepath.Glob("testdata/jinja2/*.jinja")
	files = append(files, more...)
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(src))
	}
	f.Add("{% for m in messages %}{{ m.content | upper }}{% endfor %}")
	f.Add("{{ messages[5]['content'] }}{% if %}")
	f.Add("{{ 0x_1f + 1_0.5e-3 }}{{ '\\x4' }}{% raw %}{{ {% endraw -%} {#- x +#}{{ {'a': {'b': 1}} }}")
	msgs := []Message{{Role: System, Content: "s"}, {Role: User, Content: "u"}, {Role: Assistant, Content: "a"}, {Role: User, Content: "{{ x }}"}}
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := Parse(src, "<s>", "</s>")
		if err != nil {
			return
		}
		tpl.RenderWith(msgs, RenderOptions{AddGenerationPrompt: true, Vars: map[string]any{"enable_thinking": false}})
		tpl.EndOfTurn()
	})
}
