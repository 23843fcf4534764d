package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/chat"
)

func newChat() *cobra.Command {
	var (
		mf         modelFlags
		gf         genFlags
		sf         specFlags
		tf         templateFlags
		system     string
		metrics    bool
		imagePaths []string
		audioPaths []string
	)
	cmd := &cobra.Command{
		Use:   "chat [MODEL] [--system TEXT] [--chat-template FILE|plain]",
		Short: "Chat with a model in the terminal, turn by turn, with its chat template",
		Long: `Chat reads your messages line by line and streams the model's replies.

The conversation is rendered with the model's chat template (the Jinja
template of a GGUF file's tokenizer.chat_template or a Hugging Face
directory's tokenizer_config.json; --chat-template FILE gives one), and a
reply ends at the template's end-of-turn token. A model without a template
uses the plain format:

    SYSTEM MESSAGE

    User: ...
    Assistant: ...

where a reply ends at the next "User:" line. Only the new part of the
conversation is run through the model each turn; when the KV cache fills,
the oldest turns are dropped (the system message is kept).

Commands: /reset starts over, /exit (or Ctrl-D) leaves, /image PATH adds an
image to your next message (with --mmproj; --image FILE adds one to the
first), /audio PATH a WAV file (with an audio --mmproj; --audio FILE). Ctrl-C stops the current reply and returns to the prompt.`,
		Args: nArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mf.takeModelArg(cmd, args); err != nil {
				return err
			}
			if err := sf.check(); err != nil {
				return err
			}
			if gf.maxTokens == 0 {
				return fmt.Errorf("--max-tokens 0: a reply needs at least 1 token (or -1 for no limit but the cache)")
			}
			var pending [][]byte
			for _, path := range imagePaths {
				data, err := os.ReadFile(path)
				if err != nil {
					return fmt.Errorf("--image: %w", err)
				}
				pending = append(pending, data)
			}
			for _, path := range audioPaths {
				data, err := os.ReadFile(path)
				if err != nil {
					return fmt.Errorf("--audio: %w", err)
				}
				pending = append(pending, data)
			}
			gen, err := gf.resolve()
			if err != nil {
				return err
			}
			source, vars, err := tf.load()
			if err != nil {
				return err
			}
			m, err := mf.open(cmd)
			if err != nil {
				return err
			}
			defer closeModel(m.Close)
			if !m.HasTokenizer() {
				return noTokenizer(m)
			}
			spec, closeDraft, err := sf.open(cmd, &mf, m, 1)
			if err != nil {
				return err
			}
			defer closeModel(func() error { closeDraft(); return nil })
			gen.Speculation = spec
			tpl, parsed, err := tf.parse(m, source, vars)
			if err != nil {
				return err
			}
			kind := "plain (the model has no chat template)"
			switch {
			case parsed && tf.file != "":
				kind = tf.file
			case parsed:
				kind = "the model's chat template"
			case tf.file == "plain":
				kind = "plain"
			}
			conv, err := chat.New(m.Pipeline(), tpl, chat.Options{System: system})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "chat format: %s. /reset starts over, /exit or Ctrl-D leaves, Ctrl-C stops a reply.\n", kind)
			return chatLoop(cmd.Context(), conv, gen, pending, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), metrics)
		},
	}
	mf.register(cmd)
	mf.registerPrefixCache(cmd)
	gf.register(cmd, "maximum tokens per reply; -1 for no limit but the cache")
	sf.register(cmd)
	f := cmd.Flags()
	f.StringVar(&system, "system", "", "system message, kept for the whole conversation")
	f.StringArrayVar(&imagePaths, "image", nil, "image file (PNG, JPEG, GIF, WebP) for the first message, before its text (repeatable; needs --mmproj)")
	f.StringArrayVar(&audioPaths, "audio", nil, "WAV file (8/16/24/32-bit PCM or float, mono or stereo, resampled to 16 kHz) for the first message, before its text (repeatable; needs an audio --mmproj)")
	tf.register(cmd)
	f.BoolVar(&metrics, "metrics", false, "print each reply's metrics (time to first token, prefill and decode tokens/s) on stderr, as run prints them")
	return cmd
}

const templateVarUsage = `KEY=VALUE: a further chat template variable, such as enable_thinking=false (Qwen 3) or reasoning_effort=low (gpt-oss); VALUE is JSON, or else text; repeatable`

// templateFlags are --chat-template and --chat-template-var, which chat
// and serve share.
type templateFlags struct {
	file string   // a Jinja template file, "plain", or "" for the model's
	vars []string // KEY=VALUE
}

func (tf *templateFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&tf.file, "chat-template", "", `a Jinja chat template file to use instead of the model's, or "plain" for the plain format`)
	f.StringArrayVar(&tf.vars, "chat-template-var", nil, templateVarUsage)
}

// load reads the flags before the model loads, so that a bad variable or
// an unreadable file fails first: the template file's source ("" without
// one) and the variables.
func (tf *templateFlags) load() (source string, vars map[string]any, err error) {
	if vars, err = templateVars(tf.vars); err != nil {
		return "", nil, err
	}
	if tf.file != "" && tf.file != "plain" {
		data, err := os.ReadFile(tf.file)
		if err != nil {
			return "", nil, fmt.Errorf("--chat-template: %w", err)
		}
		source = string(data)
	}
	return source, vars, nil
}

// parse returns the template for m: source (from load) or, without
// --chat-template, m's own, with the variables; the plain format where
// there is none or --chat-template is "plain". parsed reports whether a
// Jinja template was parsed.
func (tf *templateFlags) parse(m *gpurun.Model, source string, vars map[string]any) (tpl *chat.Template, parsed bool, err error) {
	if tf.file == "" {
		source = m.ChatTemplate()
	}
	if source == "" {
		return chat.Plain(), false, nil
	}
	bos, eos := controlText(m, m.Config().BOS), controlText(m, m.Config().EOS)
	if tpl, err = chat.Parse(source, bos, eos); err != nil {
		return nil, false, err
	}
	return tpl.WithVars(vars), true, nil
}

// templateVars reads --chat-template-var flags.
func templateVars(list []string) (map[string]any, error) {
	vars := map[string]any{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !validName(k) {
			return nil, fmt.Errorf("--chat-template-var %q: want KEY=VALUE with KEY a template variable name", kv)
		}
		d := json.NewDecoder(strings.NewReader(v))
		d.UseNumber()
		var val any
		if err := d.Decode(&val); err != nil || d.More() {
			val = v
		}
		vars[k] = val
	}
	return vars, nil
}

// validName reports whether s is a Jinja variable name.
func validName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// controlText is the text of a control token such as BOS ("" when unknown).
func controlText(m *gpurun.Model, id int) string {
	for s, i := range m.ControlTokens() {
		if i == id {
			return s
		}
	}
	return ""
}

// chatLoop runs the conversation: a prompt, a line, a streamed reply. An
// interrupt cancels the reply in progress only.
func chatLoop(ctx context.Context, conv *chat.Conversation, gen pipeline.GenerateOptions, pending [][]byte, in io.Reader, stdout, errOut io.Writer, metrics bool) error {
	// Interrupts stop a reply, not the chat: the command's context (which
	// main cancels on an interrupt) is replaced by one only this loop
	// cancels.
	ctx = context.WithoutCancel(ctx)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	var mu sync.Mutex
	var cancelReply context.CancelFunc
	go func() {
		for range sig {
			mu.Lock()
			if cancelReply != nil {
				cancelReply()
			} else {
				fmt.Fprint(errOut, "\n(/exit or Ctrl-D leaves the chat)\n> ")
			}
			mu.Unlock()
		}
	}()
	out := &checkedWriter{w: stdout}
	lines := bufio.NewScanner(in)
	lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	delay := testDelay("GPURUN_TEST_STEP_DELAY")
	for {
		io.WriteString(out, "> ")
		if !lines.Scan() {
			io.WriteString(out, "\n")
			break
		}
		line := strings.TrimSpace(lines.Text())
		switch {
		case line == "":
			continue
		case line == "/exit" || line == "/quit" || line == "/bye":
			return out.err
		case line == "/reset":
			conv.Reset()
			fmt.Fprintln(errOut, "(conversation reset)")
			continue
		case strings.HasPrefix(line, "/image "), strings.HasPrefix(line, "/audio "):
			kind, rest, _ := strings.Cut(line[1:], " ")
			path := strings.TrimSpace(rest)
			data, err := os.ReadFile(path)
			if err != nil {
				fmt.Fprintf(errOut, "(%s: %v)\n", kind, err)
				continue
			}
			pending = append(pending, data)
			fmt.Fprintf(errOut, "(%s goes with your next message)\n", path)
			continue
		case strings.HasPrefix(line, "/"):
			fmt.Fprintln(errOut, "(commands: /reset, /exit, /image PATH, /audio PATH)")
			continue
		}
		images := pending
		pending = nil
		if n := len(images) - strings.Count(line, pipeline.MediaMarker); n > 0 {
			// The images without a marker go before the text.
			line = strings.Repeat(pipeline.MediaMarker, n) + line
		}
		replyCtx, cancel := context.WithCancel(ctx)
		mu.Lock()
		cancelReply = cancel
		mu.Unlock()
		dropped := conv.Dropped()
		var replyErr error
		started := false
		for tok, err := range conv.SendImages(replyCtx, line, images, gen) {
			if err != nil {
				replyErr = err
				break
			}
			piece := tok.Piece
			if !started {
				// Replies in the plain format start with the space after
				// "Assistant:".
				piece = strings.TrimLeft(piece, " ")
				started = piece != ""
			}
			io.WriteString(out, piece)
			if delay > 0 {
				waitOrDone(replyCtx, delay)
			}
		}
		mu.Lock()
		cancelReply = nil
		mu.Unlock()
		cancel()
		io.WriteString(out, "\n")
		if out.err != nil {
			return fmt.Errorf("writing the output: %w", out.err)
		}
		switch {
		case replyErr != nil && errors.Is(replyErr, context.Canceled):
			fmt.Fprintln(errOut, "(stopped)")
		case errors.Is(replyErr, chat.ErrTooLong):
			fmt.Fprintf(errOut, "(%v)\n", replyErr)
		case replyErr != nil:
			return fmt.Errorf("reply: %w", replyErr)
		}
		if d := conv.Dropped() - dropped; d > 0 {
			fmt.Fprintf(errOut, "(the KV cache was full: dropped the %d oldest messages)\n", d)
		}
		if metrics {
			printMetrics(errOut, "chat", conv.Metrics())
		}
		// Speculative decoding's counts follow every reply, as after run:
		// asking for --draft or --lookup is asking how well it drafts.
		printSpeculation(errOut, conv.Metrics())
	}
	if err := lines.Err(); err != nil {
		return fmt.Errorf("reading the input: %w", err)
	}
	return out.err
}
