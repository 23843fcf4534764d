package pipeline

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/audio"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/vision"
)

// MediaMarker marks where each image of a prompt goes in its text
// (llama.cpp's mtmd marker): Prompt.Images in order replace the markers.
const MediaMarker = "<__media__>"

// MediaID in a Prompt's IDs marks where its next image goes (a chat
// template's rendered tokens, MediaMarker split out of the text).
const MediaID = -1

// ErrNoVision: a prompt with images for a model without a vision
// projector (Options.MMProj), or a projector that does not fit the model.
var ErrNoVision = errors.New("pipeline: images need a vision projector that fits the model (--mmproj)")

// Image markers of Gemma 3's vocabulary, around an image's embeddings
// (llama.cpp's mtmd, tools/mtmd/mtmd.cpp).
const (
	imageStart = "<start_of_image>"
	imageEnd   = "<end_of_image>"
)

// LFM2-VL's markers: mtmd puts <|image_start|> <|img_thumbnail|> before
// a single-tile image (the overview's start marker) and <|image_end|>
// after it. A tiled image is <|image_start|>, each tile after its
// lfm2TileMarker, then <|img_thumbnail|> and the thumbnail, <|image_end|>.
var lfm2ImageMarkers = [...]string{"<|image_start|>", "<|img_thumbnail|>", "<|image_end|>"}

// lfm2TileMarker is the text before the tile at row r, column c (from 0)
// of a tiled LFM2-VL image (mtmd's sli_img_start_tmpl, 1-based).
func lfm2TileMarker(r, c int) string { return fmt.Sprintf("<|img_row_%d_col_%d|>", r+1, c+1) }

// runBits: a media id's key holds the image's key and, in its low
// runBits bits, the index of the run (an lfm2 tile or the thumbnail).
const runBits = 4

// maxImageTokens bounds one image's positions (their ids carry the
// position in the image in 12 bits).
const maxImageTokens = 1 << 12

// visionModel is a model's vision projector: the encoder, its marker ids
// and the embeddings of the images seen lately by the hash of their bytes
// (an image prompt again is not encoded again).
type visionModel struct {
	enc           mediaEncoder
	audio         bool  // an audio projector: prompts carry WAV files (Prompt.Audio), not images
	before, after []int // the marker ids around each image
	thumb         int   // lfm2: the marker id before the thumbnail of a tiled image (-1 otherwise)
	nonCausal     bool  // its positions attend to each other (gemma3)
	mu            sync.Mutex
	cache         map[int64]*ImageRuns
	order         []int64
}

// imageCacheSize is how many images' embeddings a model keeps.
const imageCacheSize = 16

// attachVision opens the projector at path and checks it against the
// model: gemma3, the model's width, its image marker tokens.
func (m *Model) attachVision(path string) error {
	if f, err := gguf.Open(path); err == nil && f.IsAudioClip() {
		if hv, ok := f.Get("clip.has_vision_encoder"); !ok || !boolValue(hv) {
			return m.attachAudio(f, path)
		}
	}
	clip, err := gguf.OpenClip(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoVision, err)
	}
	return m.attachClip(clip, path)
}

// AttachVision gives the model a vision projector already read (as
// Options.MMProj does from a file; the browser page reads it from a Blob),
// checked against the model as Load checks it (ErrNoVision). Call it
// before the model's first session, once.
func (m *Model) AttachVision(clip *gguf.Clip) error {
	if m.vision != nil {
		return fmt.Errorf("%w: the model has a vision projector already", ErrNoVision)
	}
	return m.attachClip(clip, "the projector")
}

// attachClip attaches clip, named path in errors.
func (m *Model) attachClip(clip *gguf.Clip, path string) error {
	if clip.ProjectionDim != m.cfg.Dim {
		return fmt.Errorf("%w: %s projects to width %d, the model's is %d", ErrNoVision, path, clip.ProjectionDim, m.cfg.Dim)
	}
	ct := m.ControlTokens()
	v := &visionModel{cache: map[int64]*ImageRuns{}, thumb: -1}
	switch clip.Projector {
	case gguf.ProjectorLFM2:
		var ids [len(lfm2ImageMarkers)]int
		for i, s := range lfm2ImageMarkers {
			id, ok := ct[s]
			if !ok {
				return fmt.Errorf("%w: the model's vocabulary has no %s token (not an LFM2-VL model)", ErrNoVision, s)
			}
			ids[i] = id
		}
		v.before, v.after, v.thumb = ids[:2], ids[2:], ids[1]
	default:
		if clip.ImageTokens() >= maxImageTokens {
			return fmt.Errorf("%w: %s gives %d positions per image (at most %d)", ErrNoVision, path, clip.ImageTokens(), maxImageTokens-1)
		}
		start, ok1 := ct[imageStart]
		end, ok2 := ct[imageEnd]
		if !ok1 || !ok2 {
			return fmt.Errorf("%w: the model's vocabulary has no %s/%s tokens (not a Gemma 3 vision model)", ErrNoVision, imageStart, imageEnd)
		}
		v.before, v.after, v.nonCausal = []int{start}, []int{end}, true
	}
	enc, err := NewVisionEncoder(m.backend, clip)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoVision, err)
	}
	if err := m.fitMediaSteps(enc, ErrNoVision); err != nil {
		return err
	}
	v.enc = enc
	m.vision = v
	return nil
}

// HasVision reports whether the model takes images (Options.MMProj).
func (m *Model) HasVision() bool { return m.vision != nil && !m.vision.audio }

// HasAudio reports whether the model takes audio (an audio projector,
// Options.MMProj).
func (m *Model) HasAudio() bool { return m.vision != nil && m.vision.audio }

// mediaID is the id standing for position j of the image run keyed key
// (the image's key << runBits | the run's index) in a context: negative,
// so no token has it, and equal only for the same image bytes, run and
// place, so the prefix cache reuses an image's positions exactly when the
// image is the same.
func mediaID(key int64, j int) int { return -int(key<<12|int64(j)) - 1 }

// mediaPos splits a media id (< 0) into its image key and position.
func mediaPos(id int) (key int64, j int) {
	v := int64(-(id + 1))
	return v >> 12, int(v & (maxImageTokens - 1))
}

func hasMedia(ids []int) bool {
	for _, id := range ids {
		if id < 0 {
			return true
		}
	}
	return false
}

// imageKey hashes an image file's bytes to the 50-runBits bits a media
// id holds beside the run index.
func imageKey(data []byte) int64 {
	h := fnv.New64a()
	h.Write(data)
	return int64(h.Sum64() >> (14 + runBits))
}

// encodeImage returns the prompt ids of an image (encoding it unless the
// model holds its embeddings already): its markers and, for each run, a
// media id per position.
func (m *Model) encodeImage(ctx context.Context, data []byte) ([]int, error) {
	key, err := m.encodeImageKey(ctx, data)
	if err != nil {
		return nil, err
	}
	v := m.vision
	v.mu.Lock()
	im, ok := v.cache[key]
	v.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: the embeddings of an image were dropped while the prompt was laid out; send fewer images", ErrPrompt)
	}
	ids := slices.Clone(v.before)
	tiled := im.Cols > 0
	if tiled {
		if v.thumb < 0 || len(im.Runs) != im.Cols*im.Rows+1 {
			return nil, fmt.Errorf("pipeline: an image of %d runs for a %dx%d grid", len(im.Runs), im.Cols, im.Rows)
		}
		ids = ids[:len(ids)-1] // <|image_start|> alone; the thumbnail's marker comes last
	}
	for r, run := range im.Runs {
		if tiled {
			if r < len(im.Runs)-1 {
				mk, err := m.markerIDs(lfm2TileMarker(r/im.Cols, r%im.Cols))
				if err != nil {
					return nil, err
				}
				ids = append(ids, mk...)
			} else {
				ids = append(ids, v.thumb)
			}
		}
		for j := range len(run) / v.enc.Width() {
			ids = append(ids, mediaID(key<<runBits|int64(r), j))
		}
	}
	return append(ids, v.after...), nil
}

// markerIDs is the ids of a marker's text as mtmd tokenizes it (special
// tokens parsed): the control token of that text, or else the text's
// tokens.
func (m *Model) markerIDs(s string) ([]int, error) {
	if id, ok := m.ControlTokens()[s]; ok {
		return []int{id}, nil
	}
	if m.tok == nil {
		return nil, fmt.Errorf("%w: the image marker %s needs one", ErrNoTokenizer, s)
	}
	return m.tok.Encode(s), nil
}

func (m *Model) encodeImageKey(ctx context.Context, data []byte) (int64, error) {
	v := m.vision
	key := imageKey(data)
	v.mu.Lock()
	_, ok := v.cache[key]
	v.mu.Unlock()
	if ok {
		return key, nil
	}
	m.lockDevice()
	im, err := v.enc.encodeRuns(ctx, data)
	m.unlockDevice()
	if errors.Is(err, vision.ErrImage) {
		return 0, fmt.Errorf("%w: image: %w", ErrPrompt, err)
	}
	if errors.Is(err, audio.ErrAudio) {
		return 0, fmt.Errorf("%w: %w", ErrPrompt, err)
	}
	if err != nil {
		return 0, fmt.Errorf("pipeline: %s encoder on %s: %w", v.kind(), m.backend.Info().Backend, err)
	}
	if len(im.Runs) > 1<<runBits {
		return 0, fmt.Errorf("%w: image: %d runs (at most %d)", ErrPrompt, len(im.Runs), 1<<runBits)
	}
	for _, run := range im.Runs {
		if n := len(run) / v.enc.Width(); n >= maxImageTokens || n > v.enc.MaxTokens() {
			return 0, fmt.Errorf("%w: image: %d positions (the projector gives at most %d)", ErrPrompt, n, min(v.enc.MaxTokens(), maxImageTokens-1))
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.cache[key]; !ok {
		v.cache[key] = im
		v.order = append(v.order, key)
		if len(v.order) > imageCacheSize {
			delete(v.cache, v.order[0])
			v.order = v.order[1:]
		}
	}
	return key, nil
}

// imageRows returns the embeddings of the image run keyed key (the
// image's key and the run's index).
func (m *Model) imageRows(key int64) ([]float32, error) {
	v := m.vision
	if v == nil {
		return nil, fmt.Errorf("%w: an image position without a projector", ErrNoVision)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	im, ok := v.cache[key>>runBits]
	if !ok {
		return nil, fmt.Errorf("%w: the embeddings of an image of the context are no longer held; send the image again", ErrPrompt)
	}
	r := int(key & (1<<runBits - 1))
	if r >= len(im.Runs) {
		return nil, fmt.Errorf("%w: run %d of an image of %d runs", ErrPrompt, r, len(im.Runs))
	}
	return im.Runs[r], nil
}

// mediaPromptIDs tokenizes a text prompt with images: the text around
// each MediaMarker separately (BOS first at the start of a conversation),
// each image as its start marker, its positions and its end marker.
func (s *Session) mediaPromptIDs(ctx context.Context, p Prompt, bos bool) ([]int, error) {
	m := s.m
	files, err := m.promptMedia(p)
	if err != nil {
		return nil, err
	}
	if p.IDs != nil {
		return s.mediaIDs(ctx, p, files)
	}
	if m.tok == nil {
		return nil, fmt.Errorf("%w: a prompt with images needs one", ErrNoTokenizer)
	}
	parts := strings.Split(p.Text, MediaMarker)
	if len(parts)-1 != len(files) {
		return nil, fmt.Errorf("%w: %d %s markers for %d %s", ErrPrompt, len(parts)-1, MediaMarker, len(files), m.vision.plural())
	}
	var ids []int
	if bos {
		ids = append(ids, m.cfg.BOS)
	}
	for i, text := range parts {
		if text != "" {
			ids = append(ids, m.tok.Encode(text)...)
		}
		if i == len(files) {
			break
		}
		img, err := m.encodeImage(ctx, files[i])
		if err != nil {
			return nil, fmt.Errorf("%s %d: %w", m.vision.kind(), i, err)
		}
		ids = append(ids, img...)
	}
	return ids, nil
}

// mediaIDs replaces each MediaID of p.IDs by the next image.
func (s *Session) mediaIDs(ctx context.Context, p Prompt, files [][]byte) ([]int, error) {
	m := s.m
	k := 0
	var ids []int
	for _, id := range p.IDs {
		if id != MediaID {
			ids = append(ids, id)
			continue
		}
		if k == len(files) {
			break
		}
		img, err := m.encodeImage(ctx, files[k])
		if err != nil {
			return nil, fmt.Errorf("%s %d: %w", m.vision.kind(), k, err)
		}
		k++
		ids = append(ids, img...)
	}
	if countMedia(p.IDs) != len(files) {
		return nil, fmt.Errorf("%w: %d media places (MediaID) for %d %s", ErrPrompt, countMedia(p.IDs), len(files), m.vision.plural())
	}
	return ids, nil
}

func countMedia(ids []int) int {
	n := 0
	for _, id := range ids {
		if id == MediaID {
			n++
		}
	}
	return n
}

// imageRun is the image run (a whole image, an lfm2 tile or thumbnail)
// starting at rest[0] (a media id of position 0): its rows and its length
// in rest.
func (m *Model) imageRun(rest []int) ([]float32, int, error) {
	key, j := mediaPos(rest[0])
	if j != 0 {
		return nil, 0, fmt.Errorf("%w: a context resumes inside an image", ErrPrompt)
	}
	n := 1
	for n < len(rest) && rest[n] < 0 {
		if k, jj := mediaPos(rest[n]); k != key || jj != n {
			break
		}
		n++
	}
	rows, err := m.imageRows(key)
	if err != nil {
		return nil, 0, err
	}
	if n*m.vision.enc.Width() != len(rows) {
		return nil, 0, fmt.Errorf("%w: an image of %d positions (its embeddings are %d)", ErrPrompt, n, len(rows)/m.vision.enc.Width())
	}
	return rows, n, nil
}

// imageProgram is sl's program for an image of n positions: the
// embeddings as the step's rows, attending to each other non-causally
// where the projector says so (gemma3), compiled on first use and again
// when an image of another size comes (lfm2's follow the image's size).
func (m *Model) imageProgram(sl *slot, n int) (gpu.Program, error) {
	if sl.image != nil && sl.imageTokens == n {
		return sl.image, nil
	}
	p, err := m.compileWith(sl, arch.BuildOptions{Tokens: n, Embeddings: true, NonCausal: m.vision.nonCausal})
	if err != nil {
		if m.vision.audio {
			return nil, fmt.Errorf("%w: %w", ErrNoAudio, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrNoVision, err)
	}
	if sl.image != nil {
		sl.image.Release()
	}
	sl.image, sl.imageTokens = p, n
	return p, nil
}

// textRun is the length of rest's leading run of token ids (before the
// first media id).
func textRun(rest []int) int {
	for i, id := range rest {
		if id < 0 {
			return i
		}
	}
	return len(rest)
}
