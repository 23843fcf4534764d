package pipeline

import "strings"

// textCodec is what a session needs from a tokenizer.
type textCodec interface {
	Encode(text string) []int
	Decode(ids []int) string
	newDecoder() pieceDecoder
}

// pieceDecoder turns a stream of ids into text as it becomes complete.
type pieceDecoder interface {
	Add(id int) string
	Flush() string
}

// stopText streams generated text while watching for stop strings: text
// that might be the start of a stop string is held back until it is known
// not to be.
type stopText struct {
	stops []string
	held  string
}

// add appends text and returns what may be released now, and whether a stop
// string completed (then only the text before it is returned). With final,
// nothing is held back.
func (s *stopText) add(text string, final bool) (string, bool) {
	buf := s.held + text
	s.held = ""
	cut := -1
	for _, stop := range s.stops {
		if stop == "" {
			continue
		}
		if i := strings.Index(buf, stop); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		return buf[:cut], true
	}
	if final {
		return buf, false
	}
	keep := 0
	for _, stop := range s.stops {
		for n := min(len(stop)-1, len(buf)); n > keep; n-- {
			if strings.HasSuffix(buf, stop[:n]) {
				keep = n
				break
			}
		}
	}
	s.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], false
}
