package pipeline

// ControlTokens maps the text of each control token of the model's
// vocabulary (such as "<s>", or a chat template's "<|im_end|>") to its id.
// Encode never produces these from text; package chat splits rendered
// templates at them. Nil without a tokenizer.
func (m *Model) ControlTokens() map[string]int {
	if c, ok := m.tok.(interface{ controlTokens() map[string]int }); ok {
		return c.controlTokens()
	}
	return nil
}

func (s spm) controlTokens() map[string]int {
	out := map[string]int{}
	for id := range s.VocabSize() {
		if s.IsControl(id) {
			if p := s.Piece(id); p != "" {
				out[p] = id
			}
		}
	}
	return out
}

// A tokenizer.json's special added tokens are its control tokens (Encode
// also recognizes them in text).
func (b byteBPE) controlTokens() map[string]int { return b.SpecialTokens() }
