package serve

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

// ReasoningFormat is how replies give the model's thinking (the
// <think>...</think> block of Qwen 3 and DeepSeek R1 style templates,
// gpt-oss's analysis channel), as llama-server's --reasoning-format.
type ReasoningFormat string

// Reasoning formats.
const (
	// ReasoningAuto is ReasoningDeepSeek (the default).
	ReasoningAuto ReasoningFormat = "auto"
	// ReasoningNone leaves the thinking in the content, markers and all.
	ReasoningNone ReasoningFormat = "none"
	// ReasoningDeepSeek gives the thinking as reasoning_content (in the
	// message and in the streamed deltas), apart from the content.
	ReasoningDeepSeek ReasoningFormat = "deepseek"
	// ReasoningDeepSeekLegacy gives the thinking as reasoning_content and
	// also leaves it, with its markers, in the content.
	ReasoningDeepSeekLegacy ReasoningFormat = "deepseek-legacy"
)

// ErrReasoningFormat: a reasoning format this server does not know.
var ErrReasoningFormat = errors.New("serve: unknown reasoning format")

// ParseReasoningFormat reads a reasoning format's name ("" is auto).
func ParseReasoningFormat(s string) (ReasoningFormat, error) {
	switch f := ReasoningFormat(s); f {
	case "":
		return ReasoningAuto, nil
	case ReasoningAuto, ReasoningNone, ReasoningDeepSeek, ReasoningDeepSeekLegacy:
		return f, nil
	}
	return "", fmt.Errorf("%w %q: want auto, none, deepseek or deepseek-legacy", ErrReasoningFormat, s)
}

// thinking is a chat request's handling of the model's thinking.
type thinking struct {
	syntax chat.ThinkSyntax // NoThinking: nothing to split
	format ReasoningFormat
	open   bool // the prompt leaves the thinking open
	budget int  // tokens of thinking before the server closes it; -1: no limit
}

// reply is a finished generation.
type reply struct {
	reasoning, content string
	// metrics: the prompt's tokens and the cached ones of the first
	// generation, GeneratedTokens of the whole reply (the end marker a
	// spent budget wrote included), the last generation's StopReason.
	metrics pipeline.Metrics
	// generated are the reply's token ids.
	generated []int
}

// errEmbeddingModel: a generation asked of an embedding model.
var errEmbeddingModel = errors.New("serve: an embedding model does not generate text: ask /v1/embeddings or /api/embed")

// errGone: the client went away while its reply streamed.
var errGone = errors.New("serve: the client is gone")

// run generates a reply on a new session of model and passes each new bit
// of thinking and answer to emit (an error from emit ends the generation
// with errGone). trimLead drops the reply's leading spaces (the plain chat
// format's "Assistant: "). When the thinking takes th.budget tokens, the
// generation is stopped, the thinking's end marker (chat.ThinkSyntax.End)
// is appended to the session as if the model wrote it, and the model goes
// on with its answer; a budget of 0 closes a thinking the prompt opens
// before the model runs.
func (s *Server) run(ctx context.Context, model *pipeline.Model, prompt pipeline.Prompt, gen pipeline.GenerateOptions, th thinking, trimLead bool, emit func(reasoning, content string) error) (reply, error) {
	if model.Pooling() != "" {
		return reply{}, errEmbeddingModel
	}
	sess := model.NewSession()
	// The splitter follows the thinking also where the reply keeps it in
	// the content (ReasoningNone), for the budget.
	var split *chat.Splitter
	if th.syntax != chat.NoThinking {
		split = chat.NewSplitter(th.syntax, th.open)
	}
	var out reply
	var rb, cb strings.Builder
	send := func(r, c string) error {
		rb.WriteString(r)
		cb.WriteString(c)
		if r == "" && c == "" {
			return nil
		}
		return emit(r, c)
	}
	feed := func(text string) error {
		if split == nil {
			return send("", text)
		}
		r, c := split.Add(text)
		switch th.format {
		case ReasoningNone:
			r, c = "", text
		case ReasoningDeepSeekLegacy:
			c = text
		}
		return send(r, c)
	}
	budget := th.budget
	if split == nil {
		budget = -1
	}
	// A constrained reply (a schema, a forced tool call) has no thinking:
	// one the prompt opens is closed first, and none is counted.
	constrained := gen.Grammar != nil
	var endIDs []int
	if split != nil {
		ids, err := chat.EncodeText(model, th.syntax.End())
		if err != nil {
			return out, err
		}
		endIDs = ids
	}
	if split != nil && split.Thinking() && (budget == 0 || constrained) {
		// Closed before the model runs: the end marker joins the prompt.
		if err := feed(th.syntax.End()); err != nil {
			return out, errGone
		}
		prompt.IDs = append(append([]int(nil), prompt.IDs...), endIDs...)
	}
	if constrained {
		budget = -1
	}
	started, thought, injected, first := !trimLead, 0, 0, true
	for {
		spent := false
		var genErr error
		for tok, err := range sess.Generate(ctx, prompt, gen) {
			if err != nil {
				genErr = err
				break
			}
			if tok.ID >= 0 {
				out.generated = append(out.generated, tok.ID)
			}
			piece := tok.Piece
			if !started {
				piece = strings.TrimLeft(piece, " ")
				started = piece != ""
			}
			if piece != "" {
				if feed(piece) != nil {
					return out, errGone
				}
			}
			if budget >= 0 && tok.ID >= 0 && split.Thinking() {
				if thought++; thought >= budget {
					spent = true
					break
				}
			}
		}
		m := sess.Metrics()
		if first {
			out.metrics, first = m, false
		} else {
			out.metrics.GeneratedTokens += m.GeneratedTokens
			out.metrics.StopReason = m.StopReason
		}
		if genErr != nil {
			return out, genErr
		}
		if !spent {
			break
		}
		if gen.MaxTokens > 0 {
			// The end marker counts among the reply's tokens: without room
			// for it and one more, the reply ends here, out of tokens.
			if gen.MaxTokens -= m.GeneratedTokens + len(endIDs); gen.MaxTokens <= 0 {
				out.metrics.StopReason = pipeline.StopMaxTokens
				break
			}
		}
		// The model reads the end marker as if it had written it.
		budget = -1
		out.generated = append(out.generated, endIDs...)
		if feed(th.syntax.End()) != nil {
			return out, errGone
		}
		injected += len(endIDs)
		prompt = pipeline.Prompt{IDs: endIDs}
	}
	if split != nil {
		r, c := split.Flush()
		switch th.format {
		case ReasoningNone:
			r, c = "", ""
		case ReasoningDeepSeekLegacy:
			c = ""
		}
		if send(r, c) != nil {
			return out, errGone
		}
	}
	out.metrics.GeneratedTokens += injected
	out.reasoning, out.content = rb.String(), cb.String()
	return out, nil
}

// thinkingFor is the thinking of a chat request rendered into prompt with
// tpl: the format and budget the request asks for (format "" and budget
// nil: the server's), the template's syntax.
func (s *Server) thinkingFor(tpl *chat.Template, promptText string, format ReasoningFormat, budget *int) thinking {
	th := thinking{syntax: tpl.ThinkSyntax(), format: s.cfg.ReasoningFormat, budget: -1}
	if format != "" {
		th.format = format
	}
	if th.format == "" {
		th.format = ReasoningAuto
	}
	switch {
	case budget != nil:
		th.budget = max(*budget, -1)
	case s.cfg.NoThinking:
		th.budget = 0
	case s.cfg.ReasoningBudget > 0:
		th.budget = s.cfg.ReasoningBudget
	}
	th.open = th.syntax.Opens(promptText)
	return th
}
