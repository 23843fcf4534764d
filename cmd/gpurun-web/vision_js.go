//go:build js

package main

import (
	"errors"
	"fmt"
	"syscall/js"

	"github.com/gpurun/gpurun/pipeline"
)

// visionAPI adds the page's image and audio calls to the gpurun object:
// loadMMProj(blob), mediaMarker (the text that marks where each image or
// audio file of a prompt or message goes) and maxAudioBytes (the largest
// WAV file it takes).
func visionAPI(s *state, api js.Value) {
	api.Set("loadMMProj", promiseFunc(s.loadMMProj))
	api.Set("mediaMarker", pipeline.MediaMarker)
	api.Set("maxAudioBytes", maxAudioBytes)
}

// loadMMProj(blob): the projector (an mmproj GGUF) of the loaded model.
// A vision projector takes images: generate's opts.images and chat
// messages' images, each a Uint8Array or ArrayBuffer of an image file
// (PNG, JPEG, GIF, WebP) for the next mediaMarker of the text. An audio
// projector (qwen2a) takes WAV files the same way, as opts.audio and
// messages' audio. It resolves with {projector, imageTokens, audio}
// (imageTokens 0 where it depends on the image, and for audio; audio
// true for an audio projector). A later load forgets it.
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
	p, err := attachMMProj(s.model, data)
	if err != nil {
		return nil, fmt.Errorf("loadMMProj: %w", err)
	}
	return map[string]any{"projector": p.Projector, "imageTokens": p.ImageTokens, "audio": p.Audio}, nil
}

// jsImages reads a list of image files (Uint8Array or ArrayBuffer each)
// into Go byte slices; undefined or null is none.
func jsImages(v js.Value) ([][]byte, error) { return jsFiles(v, "image") }

// jsAudio reads a list of WAV files as jsImages reads images.
func jsAudio(v js.Value) ([][]byte, error) { return jsFiles(v, "audio") }

// jsFiles reads a list of media files of a kind (named in errors).
func jsFiles(v js.Value, kind string) ([][]byte, error) {
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
			return nil, fmt.Errorf("%s %d: want a Uint8Array or ArrayBuffer of the %s file", kind, i, kind)
		}
		if err := checkMediaSize(kind, i, x.Get("length").Int()); err != nil {
			return nil, err
		}
		b := make([]byte, x.Get("length").Int())
		js.CopyBytesToGo(b, x)
		out = append(out, b)
	}
	return out, nil
}

// jsMessageMedia reads a chat message's images and audio: its media files
// and whether they are audio (a message or a conversation has one kind).
func jsMessageMedia(m js.Value) ([][]byte, bool, error) {
	images, err := jsImages(m.Get("images"))
	if err != nil {
		return nil, false, err
	}
	wavs, err := jsAudio(m.Get("audio"))
	if err != nil {
		return nil, false, err
	}
	if len(images) > 0 && len(wavs) > 0 {
		return nil, false, errors.New("images and audio in one message (a model's projector takes one kind)")
	}
	if len(wavs) > 0 {
		return wavs, true, nil
	}
	return images, false, nil
}
