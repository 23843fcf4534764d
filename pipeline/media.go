package pipeline

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
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

// maxImageTokens bounds one image's positions (their ids carry the
// position in the image in 12 bits).
const maxImageTokens = 1 << 12

// visionModel is a model's vision projector: the encoder, its marker ids
// and the embeddings of the images seen lately by the hash of their bytes
// (an image prompt again is not encoded again).
type visionModel struct {
	enc        *VisionEncoder
	start, end int
	mu         sync.Mutex
	cache      map[int64][]float32
	order      []int64
}

// imageCacheSize is how many images' embeddings a model keeps.
const imageCacheSize = 16

// attachVision opens the projector at path and checks it against the
// model: gemma3, the model's width, its image marker tokens.
func (m *Model) attachVision(path string) error {
	clip, err := gguf.OpenClip(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoVision, err)
	}
	if clip.ProjectionDim != m.cfg.Dim {
		return fmt.Errorf("%w: %s projects to width %d, the model's is %d", ErrNoVision, path, clip.ProjectionDim, m.cfg.Dim)
	}
	if clip.ImageTokens() >= maxImageTokens {
		return fmt.Errorf("%w: %s gives %d positions per image (at most %d)", ErrNoVision, path, clip.ImageTokens(), maxImageTokens-1)
	}
	ct := m.ControlTokens()
	start, ok1 := ct[imageStart]
	end, ok2 := ct[imageEnd]
	if !ok1 || !ok2 {
		return fmt.Errorf("%w: the model's vocabulary has no %s/%s tokens (not a Gemma 3 vision model)", ErrNoVision, imageStart, imageEnd)
	}
	enc, err := NewVisionEncoder(m.backend, clip)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoVision, err)
	}
	m.vision = &visionModel{enc: enc, start: start, end: end, cache: map[int64][]float32{}}
	return nil
}

// HasVision reports whether the model takes images (Options.MMProj).
func (m *Model) HasVision() bool { return m.vision != nil }

// mediaID is the id standing for position j of the image keyed k in a
// context: negative, so no token has it, and equal only for the same
// image bytes at the same place, so the prefix cache reuses an image's
// positions exactly when the image is the same.
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

// imageKey hashes an image file's bytes to the 50 bits a media id holds.
func imageKey(data []byte) int64 {
	h := fnv.New64a()
	h.Write(data)
	return int64(h.Sum64() >> 14)
}

// encodeImage returns the key of the image's embeddings, encoding it
// unless the model holds them already.
func (m *Model) encodeImage(ctx context.Context, data []byte) (int64, error) {
	v := m.vision
	key := imageKey(data)
	v.mu.Lock()
	_, ok := v.cache[key]
	v.mu.Unlock()
	if ok {
		return key, nil
	}
	m.lockDevice()
	embd, err := v.enc.EncodeFile(ctx, data, 0)
	m.unlockDevice()
	if errors.Is(err, vision.ErrImage) {
		return 0, fmt.Errorf("%w: image: %w", ErrPrompt, err)
	}
	if err != nil {
		return 0, fmt.Errorf("pipeline: image encoder on %s: %w", m.backend.Info().Backend, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.cache[key]; !ok {
		v.cache[key] = embd
		v.order = append(v.order, key)
		if len(v.order) > imageCacheSize {
			delete(v.cache, v.order[0])
			v.order = v.order[1:]
		}
	}
	return key, nil
}

// imageRows returns the embeddings of the image keyed key.
func (m *Model) imageRows(key int64) ([]float32, error) {
	v := m.vision
	if v == nil {
		return nil, fmt.Errorf("%w: an image position without a projector", ErrNoVision)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	rows, ok := v.cache[key]
	if !ok {
		return nil, fmt.Errorf("%w: the embeddings of an image of the context are no longer held; send the image again", ErrPrompt)
	}
	return rows, nil
}

// mediaPromptIDs tokenizes a text prompt with images: the text around
// each MediaMarker separately (BOS first at the start of a conversation),
// each image as its start marker, its positions and its end marker.
func (s *Session) mediaPromptIDs(ctx context.Context, p Prompt, bos bool) ([]int, error) {
	m := s.m
	if m.vision == nil {
		return nil, fmt.Errorf("%w: %d images for a text-only model", ErrNoVision, len(p.Images))
	}
	if p.IDs != nil {
		return s.mediaIDs(ctx, p)
	}
	if m.tok == nil {
		return nil, fmt.Errorf("%w: a prompt with images needs one", ErrNoTokenizer)
	}
	parts := strings.Split(p.Text, MediaMarker)
	if len(parts)-1 != len(p.Images) {
		return nil, fmt.Errorf("%w: %d %s markers for %d images", ErrPrompt, len(parts)-1, MediaMarker, len(p.Images))
	}
	var ids []int
	if bos {
		ids = append(ids, m.cfg.BOS)
	}
	n := m.vision.enc.Tokens()
	for i, text := range parts {
		if text != "" {
			ids = append(ids, m.tok.Encode(text)...)
		}
		if i == len(p.Images) {
			break
		}
		key, err := m.encodeImage(ctx, p.Images[i])
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		ids = append(ids, m.vision.start)
		for j := range n {
			ids = append(ids, mediaID(key, j))
		}
		ids = append(ids, m.vision.end)
	}
	return ids, nil
}

// mediaIDs replaces each MediaID of p.IDs by the next image.
func (s *Session) mediaIDs(ctx context.Context, p Prompt) ([]int, error) {
	m := s.m
	n, k := m.vision.enc.Tokens(), 0
	var ids []int
	for _, id := range p.IDs {
		if id != MediaID {
			ids = append(ids, id)
			continue
		}
		if k == len(p.Images) {
			break
		}
		key, err := m.encodeImage(ctx, p.Images[k])
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", k, err)
		}
		k++
		ids = append(ids, m.vision.start)
		for j := range n {
			ids = append(ids, mediaID(key, j))
		}
		ids = append(ids, m.vision.end)
	}
	if countMedia(p.IDs) != len(p.Images) {
		return nil, fmt.Errorf("%w: %d image places (MediaID) for %d images", ErrPrompt, countMedia(p.IDs), len(p.Images))
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

// imageRun is the image starting at rest[0] (a media id of position 0):
// its rows and its length in rest.
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
	if n != m.vision.enc.Tokens() {
		return nil, 0, fmt.Errorf("%w: an image of %d positions (the projector gives %d)", ErrPrompt, n, m.vision.enc.Tokens())
	}
	return rows, n, nil
}

// imageProgram is sl's program for one image's positions: the
// embeddings as the step's rows, attending to each other non-causally,
// compiled on first use.
func (m *Model) imageProgram(sl *slot) (gpu.Program, error) {
	if sl.image != nil {
		return sl.image, nil
	}
	p, err := m.compileWith(sl, arch.BuildOptions{Tokens: m.vision.enc.Tokens(), Embeddings: true, NonCausal: true})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoVision, err)
	}
	sl.image = p
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
