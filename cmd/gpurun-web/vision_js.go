//go:build js

package main

import (
	"errors"
	"fmt"
	"syscall/js"

	"github.com/gpurun/gpurun/pipeline"
)

// visionAPI adds the page's image calls to the gpurun object:
// loadMMProj(blob) and mediaMarker (the text that marks where each image
// of a prompt or message goes).
func visionAPI(s *state, api js.Value) {
	api.Set("loadMMProj", promiseFunc(s.loadMMProj))
	api.Set("mediaMarker", pipeline.MediaMarker)
}

// loadMMProj(blob): the vision projector (an mmproj GGUF) of the loaded
// model, which then takes images: generate's opts.images and chat
// messages' images, each a Uint8Array or ArrayBuffer of an image file
// (PNG, JPEG, GIF, WebP) for the next mediaMarker of the text. It resolves
// with {projector, imageTokens} (imageTokens 0 where it depends on the
// image). A later load forgets it.
func (s *state) loadMMProj(args []js.Value) (any, error) {
	if len(args) < 1 || args[0].Type() != js.TypeObject {
		return nil, errors.New("loadMMProj: want a File or Blob")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.model == nil {
		return nil, errors.New("loadMMProj: load a model first")
	}
	data, err := readBlob(args[0], js.Undefined())
	if err != nil {
		return nil, fmt.Errorf("loadMMProj: %w", err)
	}
	clip, err := attachMMProj(s.model, data)
	if err != nil {
		return nil, fmt.Errorf("loadMMProj: %w", err)
	}
	tokens := 0
	if clip.Projector != "lfm2" {
		tokens = clip.ImageTokens()
	}
	return map[string]any{"projector": clip.Projector, "imageTokens": tokens}, nil
}

// jsImages reads a list of image files (Uint8Array or ArrayBuffer each)
// into Go byte slices; undefined or null is none.
func jsImages(v js.Value) ([][]byte, error) {
	if v.Type() != js.TypeObject {
		return nil, nil
	}
	u8 := js.Global().Get("Uint8Array")
	var out [][]byte
	for i := range v.Length() {
		x := v.Index(i)
		if x.InstanceOf(js.Global().Get("ArrayBuffer")) {
			x = u8.New(x)
		}
		if !x.InstanceOf(u8) {
			return nil, fmt.Errorf("image %d: want a Uint8Array or ArrayBuffer of the image file", i)
		}
		b := make([]byte, x.Get("length").Int())
		js.CopyBytesToGo(b, x)
		out = append(out, b)
	}
	return out, nil
}
